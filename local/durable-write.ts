/**
 * Writes a small state file so that a crash or power loss leaves either the old or the new
 * content, never a cut-off one: a temporary file, flushed to disk, renamed over the old one, and
 * the directory entry flushed too.
 */
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

export function writeFileDurably(file: string, data: string, mode?: number): void {
  const tmp = `${file}.tmp`;
  const fd = openSync(tmp, 'w', mode);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  const dir = openSync(dirname(file), 'r');
  try {
    fsyncSync(dir);
  } catch {
    // Some file systems refuse fsync on a directory; the rename is still atomic.
  } finally {
    closeSync(dir);
  }
}
