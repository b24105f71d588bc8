/**
 * D64: `npm start` checks what it needs from the machine (Java 17+, ffmpeg, ffprobe) and names
 * everything missing in one line with the command that installs it, before anything starts.
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { checkPrerequisites, missingPrerequisites, PrerequisitesMissingError } from '../../local/prerequisites';

it('on a complete machine nothing is missing', () => {
  expect(missingPrerequisites()).toEqual([]);
});

it('each missing part is named, all in one line with the apt-get command', () => {
  const env = { ...process.env, JAVA: '/nonexistent/java', FFMPEG_PATH: '/nonexistent/ffmpeg', FFPROBE_PATH: '/nonexistent/ffprobe' };
  let error: unknown;
  try {
    checkPrerequisites(env);
  } catch (err) {
    error = err;
  }
  expect(error).toBeInstanceOf(PrerequisitesMissingError);
  const message = (error as Error).message;
  expect(message.split('\n')).toHaveLength(1);
  expect(message).toBe('Missing prerequisites: Java 17+, ffmpeg, ffprobe. Install them with: sudo apt-get install -y openjdk-17-jre-headless ffmpeg');
});

it('only what is missing is named', () => {
  expect(missingPrerequisites({ ...process.env, FFPROBE_PATH: '/nonexistent/ffprobe' })).toEqual(['ffprobe']);
});

it('npm start exits non-zero with that one line before starting anything', () => {
  const root = resolve(__dirname, '../..');
  const r = spawnSync(process.execPath, [resolve(root, 'node_modules/tsx/dist/cli.mjs'), 'local/start.ts'], {
    cwd: root,
    env: { ...process.env, FFMPEG_PATH: '/nonexistent/ffmpeg', PORT: '0', DATA_DIR: '/nonexistent/never-created' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(r.status).not.toBe(0);
  expect(r.stderr.trim().split('\n').filter((l) => l.includes('Missing prerequisites'))).toEqual([
    'Missing prerequisites: ffmpeg. Install them with: sudo apt-get install -y openjdk-17-jre-headless ffmpeg',
  ]);
});
