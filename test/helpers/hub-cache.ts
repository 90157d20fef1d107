// A Hugging Face cache built by hand in huggingface_hub's exact layout: models--org--name/blobs/<hash> holding the
// bytes, snapshots/<commit>/<file> relative symlinks into blobs (../../blobs/<hash>, one more ../ per subfolder),
// refs/<name> holding the 40-hex commit with no newline.
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const commitOf = (seed: string): string => createHash('sha1').update(seed).digest('hex');

/** Adds one snapshot of `repo`: files by relative path -> contents; `ref` (e.g. main) points at it when given. */
export async function addSnapshot(cache: string, repo: string, commit: string, files: Record<string, string | Buffer>, ref?: string): Promise<void> {
  const root = join(cache, `models--${repo.replace('/', '--')}`);
  await mkdir(join(root, 'blobs'), { recursive: true });
  for (const [path, contents] of Object.entries(files)) {
    const hash = createHash('sha256').update(contents).digest('hex');
    await writeFile(join(root, 'blobs', hash), contents);
    const link = join(root, 'snapshots', commit, path);
    await mkdir(dirname(link), { recursive: true });
    const up = '../'.repeat(path.split('/').length + 1);
    await symlink(`${up}blobs/${hash}`, link);
  }
  if (ref) {
    const refFile = join(root, 'refs', ref);
    await mkdir(dirname(refFile), { recursive: true });
    await writeFile(refFile, commit);
  }
}

export const QWEN_CONFIG = JSON.stringify({ model_type: 'qwen3', hidden_size: 8 });
export const QWEN_CONFIG_OLD = JSON.stringify({ model_type: 'qwen3', hidden_size: 4 });
/** 3000 bytes of weights, shared by both Qwen snapshots. */
export const SHARED_WEIGHTS = Buffer.alloc(3000, 7);

/**
 * Two repos: tiny/qwen3 with main (config, weights, tokenizer) and an older bare commit (its own config, the same
 * weights blob); meta/llama (model_type llama). Plus a dataset folder, which the listing skips.
 */
export async function makeHubCache(): Promise<{ cache: string; main: string; old: string; llama: string }> {
  const cache = await mkdtemp(join(tmpdir(), 'tensorgpu-hub-cache-'));
  const main = commitOf('main');
  const old = commitOf('old');
  const llama = commitOf('llama');
  await addSnapshot(cache, 'tiny/qwen3', main, { 'config.json': QWEN_CONFIG, 'model.safetensors': SHARED_WEIGHTS, 'tokenizer.json': '{}' }, 'main');
  await addSnapshot(cache, 'tiny/qwen3', old, { 'config.json': QWEN_CONFIG_OLD, 'model.safetensors': SHARED_WEIGHTS });
  await addSnapshot(cache, 'meta/llama', llama, { 'config.json': JSON.stringify({ model_type: 'llama' }), 'model.safetensors': Buffer.alloc(500) }, 'main');
  await mkdir(join(cache, 'datasets--some--data', 'snapshots'), { recursive: true });
  await mkdir(join(cache, '.locks', 'models--tiny--qwen3'), { recursive: true });
  return { cache, main, old, llama };
}
