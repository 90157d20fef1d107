// A model by name, end to end: a tiny Qwen3-MoE checkpoint (real Qwen3 tokenizer, random weights) served by the
// mock Hub is loaded with loadModel('org/name', { hub }) and gives the same logits as the same folder loaded from
// disk; `tensorgpu generate --model org/name` (HF_ENDPOINT and HF_HUB_CACHE from the environment, as a user sets
// them) downloads it once, and a second run reads only the revision from the Hub and no file.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runGenerate } from '../../src/cli/generate.js';
import { loadModel, tensor } from '../../src/index.js';
import { COMMIT_MAIN, MockHub, type MockFile } from '../helpers/mock-hub.js';
import { writeTinyChatModel } from '../helpers/qwen3.js';

const REPO = 'tiny-org/tiny-chat';

describe('a model by Hugging Face repo id, through the mock Hub', () => {
  let dir = '';
  let cache = '';
  let hub: MockHub;

  beforeAll(async () => {
    dir = await writeTinyChatModel(5);
    cache = mkdtempSync(join(tmpdir(), 'tensorgpu-hub-load-'));
    hub = new MockHub(REPO);
    const files = new Map<string, MockFile>();
    for (const name of readdirSync(dir)) files.set(name, { bytes: readFileSync(join(dir, name)), lfs: name.endsWith('.safetensors') });
    hub.commits.set(COMMIT_MAIN, files);
    await hub.start();
  });

  afterAll(async () => {
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(cache, { recursive: true, force: true });
  });

  it('loadModel(repo id) downloads into the cache and equals the folder loaded from disk', async () => {
    const byName = await loadModel(REPO, { device: 'cpu', hub: { cacheDir: join(cache, 'api'), endpoint: hub.url } });
    const fromDisk = await loadModel(dir, { device: 'cpu' });
    try {
      const ids = tensor(new Int32Array([1, 2, 3, 4]));
      const a = await (await byName.model.forward(ids, byName.model.newCache())).toArray();
      const b = await (await fromDisk.model.forward(ids, fromDisk.model.newCache())).toArray();
      expect(Array.from(a)).toEqual(Array.from(b));
      expect(byName.tokenizer?.encode('hello')).toEqual(fromDisk.tokenizer?.encode('hello'));
    } finally {
      byName.model.dispose();
      fromDisk.model.dispose();
    }
  }, 120_000);

  it('tensorgpu generate --model org/name: downloads once, then reads only the revision', async () => {
    const saved = { endpoint: process.env.HF_ENDPOINT, cache: process.env.HF_HUB_CACHE };
    process.env.HF_ENDPOINT = hub.url;
    process.env.HF_HUB_CACHE = join(cache, 'cli');
    try {
      const run = async () => {
        let text = '';
        const code = await runGenerate(
          { model: REPO, prompt: 'Hi', maxTokens: 3, seed: 1, device: 'cpu' },
          (t) => (text += t),
          () => {},
        );
        return { code, text };
      };
      hub.requests.length = 0;
      const first = await run();
      expect(first.code).toBe(0);
      expect(hub.requests.some((r) => r.path.includes('/resolve/'))).toBe(true);
      hub.requests.length = 0;
      const second = await run();
      expect(second.code).toBe(0);
      expect(second.text).toBe(first.text);
      expect(hub.requests.filter((r) => r.path.includes('/resolve/') || r.path.includes('/cdn/'))).toEqual([]);
      expect(readdirSync(join(cache, 'cli'))).toContain('models--tiny-org--tiny-chat');
    } finally {
      for (const [key, value] of [
        ['HF_ENDPOINT', saved.endpoint],
        ['HF_HUB_CACHE', saved.cache],
      ] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  }, 120_000);
});
