// A generated directory (a built-in default model) that appears whole or not at all: written to a fresh staging
// directory and renamed into place, so an interrupted run never leaves half a model, and concurrent runs agree.
import { existsSync } from 'node:fs';
import { mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

/** dir, after write(staging) produced it once (dir counts as present when it has config.json). */
export async function ensureGeneratedDir(dir: string, write: (staging: string) => Promise<unknown>, onStart?: () => void): Promise<string> {
  if (existsSync(join(dir, 'config.json'))) return dir;
  onStart?.();
  const staging = await mkdtemp(join(tmpdir(), `${basename(dir)}-staging-`));
  try {
    await write(staging);
    try {
      await rename(staging, dir);
    } catch (e) {
      if (!existsSync(join(dir, 'config.json'))) throw e; // another process won the race: use its copy
      await rm(staging, { recursive: true, force: true });
    }
  } catch (e) {
    await rm(staging, { recursive: true, force: true });
    throw e;
  }
  return dir;
}
