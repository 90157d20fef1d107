// The weight cache where Node can check it: asking for a cache where there is none reads the network as before; the
// Cache API path against a small in-memory `caches` (the real OPFS and Cache API are checked in Chromium, in
// test/browser/); a file that changes during its download; and checkpoints from picked files (Node's File).
import { readdirSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { CheckpointError } from '../../src/core/errors.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { downloadByRanges } from '../../src/formats/range-download.js';
import { clearWeightCache, weightCacheUsage, type CachedFileEvent } from '../../src/formats/weight-cache.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';

const CONFIG: Qwen3Config = {
  modelType: 'qwen3',
  vocabSize: 64,
  hiddenSize: 32,
  intermediateSize: 64,
  numHiddenLayers: 1,
  numAttentionHeads: 2,
  numKeyValueHeads: 1,
  headDim: 16,
  rmsNormEps: 1e-6,
  ropeTheta: 10_000,
  maxPositionEmbeddings: 128,
  tieWordEmbeddings: true,
  attentionBias: false,
  bosTokenId: 1,
  eosTokenIds: [2],
};

/** Cache API's shape over a Map, enough for the store: responses kept as bodies plus headers. */
function memoryCaches(options: { failPut?: boolean } = {}) {
  const caches = new Map<string, Map<string, { body: Blob; headers: Headers }>>();
  const cacheOf = (name: string) => caches.get(name) ?? caches.set(name, new Map()).get(name)!;
  return {
    caches,
    async open(name: string) {
      const entries = cacheOf(name);
      return {
        match: async (key: string) => {
          const e = entries.get(key);
          return e && new Response(e.body, { headers: e.headers });
        },
        put: async (key: string, res: Response) => {
          if (options.failPut) throw Object.assign(new Error('quota exceeded'), { name: 'QuotaExceededError' });
          entries.set(key, { body: await res.blob(), headers: res.headers });
        },
        delete: async (key: string) => entries.delete(key),
        keys: async () => [...entries.keys()].map((url) => ({ url })),
      };
    },
    delete: async (name: string) => caches.delete(name),
  };
}

async function allValues(ck: Checkpoint): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = {};
  for (const name of ck.names.sort()) {
    const t = await ck.load(name, { device: 'cpu' });
    out[name] = [...(await t.toArray())];
    t.dispose();
  }
  return out;
}

describe('the weight cache', () => {
  let dir: string;
  let server: StaticServer;
  let onDisk: Record<string, number[]>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-weight-cache-'));
    await writeRandomQwen3Checkpoint(join(dir, 'sharded'), CONFIG, { seed: 5, dtype: 'float32', shardBytes: 8_000 });
    await writeRandomQwen3Checkpoint(join(dir, 'single'), CONFIG, { seed: 5, dtype: 'float32' });
    server = await serveStatic({ '/': dir });
    const ck = await Checkpoint.open(join(dir, 'sharded'));
    onDisk = await allValues(ck);
    await ck.close();
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads the network as without a cache where the runtime has no store (Node), with no error', async () => {
    expect((globalThis as { caches?: unknown }).caches).toBeUndefined();
    const events: CachedFileEvent[] = [];
    for (let i = 0; i < 2; i++) {
      const before = server.log.length;
      const ck = await Checkpoint.fromUrl(`${server.url}/single`, { cache: { onFile: (e) => events.push(e) } });
      expect(await allValues(ck)).toEqual(onDisk);
      expect(server.log.slice(before).filter((l) => /single\/model\.safetensors bytes=/.test(l)).length).toBeGreaterThan(1);
    }
    expect(events).toEqual([]);
    expect(await weightCacheUsage()).toEqual({ files: 0, bytes: 0, entries: [] });
    await expect(clearWeightCache()).resolves.toBeUndefined();
  });

  it('keeps a folder in the Cache API: the second open makes no request at all, with the same tensors; clearing refetches', async () => {
    vi.stubGlobal('caches', memoryCaches());
    const events: CachedFileEvent[] = [];
    const open = () => Checkpoint.fromUrl(`${server.url}/sharded`, { cache: { onFile: (e) => events.push(e) } });
    const first = server.log.length;
    expect(await allValues(await open())).toEqual(onDisk);
    const shards = readdirSync(join(dir, 'sharded')).filter((f) => f.endsWith('.safetensors'));
    expect(shards.length).toBeGreaterThan(1);
    expect(events.map((e) => e.from)).toEqual(shards.map(() => 'downloaded'));
    expect(
      server.log
        .slice(first)
        .filter((l) => l.includes('.safetensors '))
        .every((l) => / bytes=\d+-\d+$/.test(l)),
    ).toBe(true);

    const second = server.log.length;
    expect(await allValues(await open())).toEqual(onDisk);
    expect(server.log.slice(second)).toEqual([]);
    expect(events.slice(shards.length).map((e) => [e.from, e.store])).toEqual(shards.map(() => ['cache', 'cache-api']));

    const usage = await weightCacheUsage();
    const weightBytes = shards.reduce((n, f) => n + readFileSync(join(dir, 'sharded', f)).length, 0);
    expect(usage.entries.filter((e) => e.url.endsWith('.safetensors')).reduce((n, e) => n + e.bytes, 0)).toBe(weightBytes);
    await clearWeightCache(`${server.url}/sharded/`);
    expect((await weightCacheUsage()).files).toBe(0);
    const third = server.log.length;
    expect(await allValues(await open())).toEqual(onDisk);
    expect(server.log.slice(third).filter((l) => l.includes('.safetensors bytes=')).length).toBeGreaterThan(shards.length);
  });

  it('reads the network when the store refuses to keep a file (a quota), reporting it', async () => {
    vi.stubGlobal('caches', memoryCaches({ failPut: true }));
    const events: CachedFileEvent[] = [];
    const ck = await Checkpoint.fromUrl(`${server.url}/single`, { cache: { store: 'cache-api', onFile: (e) => events.push(e) } });
    expect(await allValues(ck)).toEqual(onDisk);
    expect(events.map((e) => e.from)).toEqual(['network']);
  });

  it('refuses a file whose ETag changes during its download, naming the file', async () => {
    let calls = 0;
    const fakeFetch = (async (_url: string, init: RequestInit) => {
      const [, start, end] = /bytes=(\d+)-(\d+)/.exec((init.headers as Record<string, string>).Range)!.map(Number);
      return new Response(new Uint8Array(end - start + 1), {
        status: 206,
        headers: { 'content-range': `bytes ${start}-${end}/10`, etag: `"v${calls++ < 1 ? 1 : 2}"` },
      });
    }) as typeof fetch;
    const written: number[] = [];
    const download = downloadByRanges('https://x/model.safetensors', 10, async (part) => void written.push(part instanceof Blob ? part.size : part.length), {
      fetch: fakeFetch,
      chunkBytes: 4,
    });
    await expect(download).rejects.toThrow(/^https:\/\/x\/model\.safetensors, byte 4: the file changed during the download \(ETag "v1", then "v2"\)/);
    expect(written).toEqual([4]);
  });

  it('opens a checkpoint from picked files (a folder pick or several files), as from disk', async () => {
    const folder = join(dir, 'sharded');
    const asPicked = (name: string, relative?: string) => {
      const f = new File([readFileSync(join(folder, name))], name);
      return relative === undefined ? f : Object.defineProperty(f, 'webkitRelativePath', { value: relative });
    };
    const names = readdirSync(folder);
    const ck = await Checkpoint.fromFileList([...names.map((n) => asPicked(n, `sharded/${n}`)), asPicked('config.json', 'sharded/original/config.json')]);
    expect(ck.dir).toBe('sharded');
    expect(await allValues(ck)).toEqual(onDisk);
    const shard = names.find((n) => n.endsWith('.safetensors'))!;
    await expect(Checkpoint.fromFileList(names.filter((n) => n !== shard).map((n) => asPicked(n)))).rejects.toThrow(
      new RegExp(`${shard}: not among the picked files`),
    );
    await expect(Checkpoint.fromFileList([asPicked('config.json')])).rejects.toBeInstanceOf(CheckpointError);
  });
});
