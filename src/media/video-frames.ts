// Video files as vae-encode input: ffmpeg (when it is on PATH) decodes every frame to a PNG sequence in a temp
// directory, which the PNG path then reads, so one reader serves both (no video decoder of our own).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { hasFfmpeg } from './video-preview.js';

/** Extensions read as video through ffmpeg. */
export const VIDEO_EXTENSIONS = ['.mp4', '.webm', '.mov', '.mkv', '.avi', '.gif'];

export function isVideoFile(path: string): boolean {
  return VIDEO_EXTENSIONS.includes(extname(path).toLowerCase());
}

/** The frames of a video as a PNG sequence; call cleanup() when they have been read. */
export function extractVideoFrames(path: string, ffmpeg = 'ffmpeg'): { pattern: string; cleanup: () => void } {
  if (!hasFfmpeg(ffmpeg)) throw new Error(`${path}: reading video needs ffmpeg on PATH (not found); or pass the frames as PNGs (frames-%04d.png)`);
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-video-frames-'));
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const pattern = join(dir, 'frame-%04d.png');
  // RGB PNGs from index 0, every decoded frame kept (-vsync passthrough: no duplicated or dropped frames).
  const r = spawnSync(ffmpeg, ['-v', 'error', '-i', path, '-vsync', 'passthrough', '-pix_fmt', 'rgb24', '-start_number', '0', pattern], { encoding: 'utf8' });
  if (r.status !== 0) {
    cleanup();
    throw new Error(`${path}: ffmpeg could not decode it: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}`);
  }
  return { pattern, cleanup };
}
