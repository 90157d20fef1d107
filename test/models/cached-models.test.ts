// The Hugging Face cache listing and removal on a cache built by hand in huggingface_hub's layout.
import { existsSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { judgeSnapshot, listCachedModels, removeCachedModel } from '../../src/models/cached-models.js';
import { HubError } from '../../src/hub/hub-errors.js';
import { addSnapshot, commitOf, makeHubCache, QWEN_CONFIG, QWEN_CONFIG_OLD, SHARED_WEIGHTS } from '../helpers/hub-cache.js';

const QWEN_BYTES = QWEN_CONFIG.length + QWEN_CONFIG_OLD.length + SHARED_WEIGHTS.length + 2;

describe('Hugging Face cache listing', () => {
  let c: Awaited<ReturnType<typeof makeHubCache>>;
  beforeEach(async () => {
    c = await makeHubCache();
  });
  afterEach(async () => {
    await rm(c.cache, { recursive: true, force: true });
  });

  it('lists each model once with its revisions, blobs counted once, and whether it runs', async () => {
    const listing = await listCachedModels(c.cache);
    expect(listing.warnings).toEqual([]);
    expect(listing.models.map((m) => m.repo)).toEqual(['meta/llama', 'tiny/qwen3']);
    const [llama, qwen] = listing.models;
    // The shared weights blob is counted once for the repo, and in full for each snapshot linking to it.
    expect(qwen.size).toBe(QWEN_BYTES);
    expect(qwen.revisions.map((r) => [r.commit, r.refs])).toEqual([
      [c.main, ['main']],
      [c.old, []],
    ]);
    expect(qwen.revisions[0].size).toBe(QWEN_CONFIG.length + SHARED_WEIGHTS.length + 2);
    expect(qwen.revisions[1].size).toBe(QWEN_CONFIG_OLD.length + SHARED_WEIGHTS.length);
    expect(qwen.revisions[0].files).toEqual(['config.json', 'model.safetensors', 'tokenizer.json']);
    expect(qwen.runnable).toEqual({ ok: true, detail: 'qwen3' });
    expect(llama.size).toBe(JSON.stringify({ model_type: 'llama' }).length + 500);
    expect(llama.runnable).toEqual({ ok: false, detail: 'model_type llama not supported' });
    expect(listing.size).toBe(QWEN_BYTES + llama.size);
  });

  it('a missing cache dir is an empty listing', async () => {
    const listing = await listCachedModels(join(c.cache, 'nope'));
    expect(listing.models).toEqual([]);
    expect(listing.size).toBe(0);
  });

  it('sees a diffusers VAE in vae/ and nested refs, and says why other folders do not run', async () => {
    const vae = commitOf('vae');
    await addSnapshot(
      c.cache,
      'Wan-AI/Wan2.1-T2V',
      vae,
      {
        'model_index.json': '{}',
        'vae/config.json': JSON.stringify({ _class_name: 'AutoencoderKLWan' }),
        'vae/diffusion_pytorch_model.safetensors': Buffer.alloc(100),
      },
      'pr/1',
    );
    await addSnapshot(c.cache, 'x/no-config', commitOf('nc'), { 'README.md': 'hi' }, 'main');
    await addSnapshot(c.cache, 'x/no-weights', commitOf('nw'), { 'config.json': QWEN_CONFIG }, 'main');
    const listing = await listCachedModels(c.cache);
    const by = new Map(listing.models.map((m) => [m.repo, m]));
    const wan = by.get('Wan-AI/Wan2.1-T2V');
    expect(wan?.runnable).toEqual({ ok: true, detail: 'AutoencoderKLWan VAE in vae/' });
    expect(wan?.revisions[0].refs).toEqual(['pr/1']);
    // Files inside the snapshot's subfolder are counted (scanCacheDir would skip vae/).
    expect(wan?.size).toBe(2 + JSON.stringify({ _class_name: 'AutoencoderKLWan' }).length + 100);
    expect(by.get('x/no-config')?.runnable).toEqual({ ok: false, detail: 'no config.json' });
    expect(by.get('x/no-weights')?.runnable).toEqual({ ok: false, detail: 'qwen3, but no .safetensors weights' });
    const snap = wan?.revisions[0];
    expect(await judgeSnapshot(snap?.path ?? '', ['model_index.json'])).toEqual({
      ok: false,
      detail: 'diffusers pipeline without an AutoencoderKLWan / AutoencoderKLQwenImage vae/',
    });
  });

  it('rm of a revision removes its snapshot and ref and keeps the blob another snapshot links to', async () => {
    const repoDir = join(c.cache, 'models--tiny--qwen3');
    const removed = await removeCachedModel(c.cache, 'tiny/qwen3', { revision: 'main' });
    expect(removed).toEqual({ repo: 'tiny/qwen3', commits: [c.main], refs: ['main'], freedBytes: QWEN_CONFIG.length + 2, wholeRepo: false });
    expect(existsSync(join(repoDir, 'snapshots', c.main))).toBe(false);
    expect(existsSync(join(repoDir, 'refs', 'main'))).toBe(false);
    expect((await readdir(join(repoDir, 'blobs'))).length).toBe(2);
    const after = await listCachedModels(c.cache);
    const qwen = after.models.find((m) => m.repo === 'tiny/qwen3');
    expect(qwen?.revisions.map((r) => r.commit)).toEqual([c.old]);
    expect(qwen?.size).toBe(QWEN_CONFIG_OLD.length + SHARED_WEIGHTS.length);
    // The shared weights still resolve from the remaining snapshot.
    expect(existsSync(join(repoDir, 'snapshots', c.old, 'model.safetensors'))).toBe(true);
  });

  it('rm by commit prefix, then of the last revision, removes the repo folder and its lock folder', async () => {
    await removeCachedModel(c.cache, 'tiny/qwen3', { revision: c.old.slice(0, 8) });
    const last = await removeCachedModel(c.cache, 'tiny/qwen3', { revision: c.main });
    expect(last.wholeRepo).toBe(true);
    expect(last.freedBytes).toBe(QWEN_CONFIG.length + SHARED_WEIGHTS.length + 2);
    expect(existsSync(join(c.cache, 'models--tiny--qwen3'))).toBe(false);
    expect(existsSync(join(c.cache, '.locks', 'models--tiny--qwen3'))).toBe(false);
  });

  it('rm of a repo removes its folder and says what it freed; others stay', async () => {
    const removed = await removeCachedModel(c.cache, 'tiny/qwen3');
    expect(removed.wholeRepo).toBe(true);
    expect(removed.freedBytes).toBe(QWEN_BYTES);
    expect([...removed.commits].sort()).toEqual([c.main, c.old].sort());
    expect(existsSync(join(c.cache, 'models--tiny--qwen3'))).toBe(false);
    expect((await listCachedModels(c.cache)).models.map((m) => m.repo)).toEqual(['meta/llama']);
  });

  it('an unknown repo or revision is a HubError naming the cache path', async () => {
    const missing = removeCachedModel(c.cache, 'no/such');
    await expect(missing).rejects.toBeInstanceOf(HubError);
    await expect(removeCachedModel(c.cache, 'no/such')).rejects.toThrow(`no/such is not in the Hugging Face cache ${c.cache}`);
    await expect(removeCachedModel(c.cache, 'tiny/qwen3', { revision: 'v9' })).rejects.toThrow(
      `tiny/qwen3 in ${c.cache}: no revision 'v9' (revisions: main/${c.main.slice(0, 7)}, ${c.old.slice(0, 7)})`,
    );
    expect(existsSync(join(c.cache, 'models--tiny--qwen3', 'snapshots', c.main))).toBe(true);
  });
});
