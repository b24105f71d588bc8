/**
 * What `npm start` needs from the machine, checked before anything starts: Java 17+ (DynamoDB
 * Local), ffmpeg and ffprobe (video and audio probing, keyframes, loudness: without them a valid MP4
 * is refused as undecodable). Everything else comes from node_modules.
 */
import { spawnSync } from 'node:child_process';
import { checkJava, javaCommand, JavaMissingError } from './dynamodb';

export const INSTALL_LINE = 'sudo apt-get install -y openjdk-17-jre-headless ffmpeg';

export class PrerequisitesMissingError extends Error {
  override name = 'PrerequisitesMissingError';
  constructor(readonly missing: string[]) {
    super(`Missing prerequisites: ${missing.join(', ')}. Install them with: ${INSTALL_LINE}`);
  }
}

function runs(bin: string, env: NodeJS.ProcessEnv): boolean {
  const r = spawnSync(bin, ['-version'], { stdio: 'ignore', timeout: 15_000, env });
  return !r.error && r.status === 0;
}

/** Names what is missing; an empty list when everything is there. */
export function missingPrerequisites(env: NodeJS.ProcessEnv = process.env): string[] {
  const missing: string[] = [];
  try {
    checkJava(javaCommand(env));
  } catch (err) {
    if (!(err instanceof JavaMissingError)) throw err;
    const found = /\(found ([^)]+)\)/.exec(err.message)?.[1];
    missing.push(found ? `Java 17+ (found ${found})` : 'Java 17+');
  }
  if (!runs(env.FFMPEG_PATH || 'ffmpeg', env)) missing.push('ffmpeg');
  if (!runs(env.FFPROBE_PATH || 'ffprobe', env)) missing.push('ffprobe');
  return missing;
}

/** Throws PrerequisitesMissingError (one line naming each missing part) unless all are there. */
export function checkPrerequisites(env: NodeJS.ProcessEnv = process.env): void {
  const missing = missingPrerequisites(env);
  if (missing.length) throw new PrerequisitesMissingError(missing);
}
