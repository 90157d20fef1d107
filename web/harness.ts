// The page side of the browser tests (test/browser/): the library's browser entry, driven from Playwright through
// window.tensorgpuHarness. Each function returns plain JSON so the Node side can compare it with its own results.
import * as tg from '../src/browser.js';
import { openCacheStore } from '../src/formats/weight-cache-store.js';
import { parity } from './parity.js';

/** The Qwen3 tokenizer the tests serve at `url`. */
async function tokenizerAt(url: string): Promise<tg.TextTokenizer> {
  const [json, cfg] = await Promise.all(
    ['tokenizer.json', 'tokenizer_config.json'].map(async (f) => (await (await fetch(`${url}/${f}`)).json()) as Record<string, unknown>),
  );
  return new tg.TextTokenizer(json, cfg);
}

/** Greedy token ids after prompt ids, the run's stats and GPU memory before the model is disposed. */
async function greedyIds(model: tg.CausalLM, tokenizer: tg.TextTokenizer, prompt: number[], maxNewTokens: number) {
  try {
    const ids: number[] = [];
    const run = tg.generate(model, tokenizer, prompt, { maxNewTokens, temperature: 0, stopTokenIds: [] });
    let step = await run.next();
    while (!step.done) {
      ids.push(step.value.id);
      step = await run.next();
    }
    return { ids, stats: step.value, memory: tg.memoryStats() };
  } finally {
    model.dispose();
  }
}

/** Greedy generation from a random-weight Qwen3 built in the page (no download), token ids from prompt ids. */
async function generateIds(config: tg.Qwen3Config, seed: number, prompt: number[], maxNewTokens: number, tokenizerUrl: string) {
  await tg.initDevice('webgpu');
  const tokenizer = await tokenizerAt(tokenizerUrl);
  const ck = await tg.randomQwen3Checkpoint(config, { seed, dtype: 'float32' });
  const { model } = await tg.loadModel(ck, { device: 'webgpu', maxSequence: 64 });
  return greedyIds(model, tokenizer, prompt, maxNewTokens);
}

/** Greedy generation from a checkpoint folder by URL, whatever its model_type (loadModel), token ids from prompt ids. */
async function generateFromUrl(url: string, prompt: number[], maxNewTokens: number, tokenizerUrl: string) {
  await tg.initDevice('webgpu');
  const tokenizer = await tokenizerAt(tokenizerUrl);
  const ck = await tg.Checkpoint.fromUrl(url);
  try {
    const { model } = await tg.loadModel(ck, { device: 'webgpu', maxSequence: 64 });
    const modelType = model.config.modelType;
    return { modelType, ids: (await greedyIds(model, tokenizer, prompt, maxNewTokens)).ids };
  } finally {
    await ck.close();
  }
}

/** Opens a safetensors file by URL (Range requests) and reads every tensor; a bad file gives the error it raised. */
async function loadSafetensors(url: string, cache: tg.CachedUrlOptions['cache'] = false) {
  try {
    await tg.initDevice('webgpu');
    const file = await tg.SafetensorsFile.fromUrl(url, { cache });
    const tensors: Record<string, number[]> = {};
    for (const name of file.names) {
      const t = await file.load(name, { device: 'webgpu' });
      tensors[name] = [...(await t.toArray())];
      t.dispose();
    }
    return { ok: true as const, tensors };
  } catch (e) {
    return { ok: false as const, name: (e as Error).name, message: (e as Error).message };
  }
}

/** Opens a checkpoint folder by URL through the weight cache and reads every tensor (on the CPU backend: the bytes are the point). */
async function loadCachedCheckpoint(url: string, store: tg.WeightCacheStoreKind) {
  const events: tg.CachedFileEvent[] = [];
  const ck = await tg.Checkpoint.fromUrl(url, { cache: { store, onFile: (e) => events.push(e) } });
  try {
    const tensors: Record<string, number[]> = {};
    for (const name of ck.names.sort()) {
      const t = await ck.load(name, { device: 'cpu' });
      tensors[name] = [...(await t.toArray())];
      t.dispose();
    }
    const files = events.map(({ url, from, store }) => ({ file: url.slice(url.lastIndexOf('/') + 1), from, store }));
    return { tensors, events: files.sort((a, b) => (a.file < b.file ? -1 : 1)) };
  } finally {
    await ck.close();
  }
}

/** Stores `bytes` as the cached copy of url, as if they had been downloaded from it. */
async function plantCachedFile(url: string, store: tg.WeightCacheStoreKind, bytes: number[]) {
  const s = await openCacheStore(store);
  if (!s) throw new Error(`no ${store} store in this page`);
  await s.put(url, async (write) => (await write(new Uint8Array(bytes)), { size: bytes.length }));
}

/** What initDevice('auto') takes in this page (the library's rule: hardware adapter, CPU, then a software one). */
async function autoDevice(allowSoftwareAdapter: boolean) {
  const notices: string[] = [];
  try {
    const device = await tg.initDevice('auto', { allowSoftwareAdapter, onNotice: (line) => notices.push(line) });
    return { device, notices, adapter: (await tg.diagnose()).adapter ?? null };
  } finally {
    tg.releaseDevice();
  }
}

(globalThis as Record<string, unknown>).tensorgpuHarness = {
  parity,
  autoDevice,
  generateIds,
  generateFromUrl,
  loadSafetensors,
  loadCachedCheckpoint,
  plantCachedFile,
  clearWeightCache: (prefix?: string) => tg.clearWeightCache(prefix),
  weightCacheUsage: () => tg.weightCacheUsage(),
  release: () => tg.releaseDevice(),
};
