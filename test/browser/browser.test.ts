// The library in a real browser: Debian's Chromium, headless, on the same SwiftShader Vulkan driver as Node's Dawn,
// driven by playwright-core against pages served on 127.0.0.1 (web/harness.ts bundled by scripts/build-web.mjs).
// With TENSORGPU_REQUIRE_GPU=1 (CI) a missing browser or adapter fails instead of skipping.
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without types
import { buildWeb } from '../../scripts/build-web.mjs';
import { qwen3TokenizerDir } from '../../src/tokenizer/tokenizer.js';
import { generate } from '../../src/generate/generate.js';
import { TextTokenizer } from '../../src/tokenizer/tokenizer.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import type { Lfm2Config } from '../../src/models/lfm2/config.js';
import { writeSafetensors } from '../../src/formats/safetensors-writer.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import type { Qwen35Config } from '../../src/models/qwen3_5/config.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { loadModel } from '../../src/models/load.js';
import { qwen3FromCheckpoint } from '../../src/models/qwen3/from-checkpoint.js';
import { QWEN3_PRESETS, randomQwen3Checkpoint, writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';

const CHROMIUM = process.env.TENSORGPU_CHROMIUM ?? '/usr/bin/chromium';
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';
const available = existsSync(CHROMIUM);
if (!available && required) throw new Error(`TENSORGPU_REQUIRE_GPU=1 but there is no browser at ${CHROMIUM} (apt-get install chromium)`);

// A Qwen3-MoE small enough for a software adapter: 2 layers, 8 experts (top 2), a 512-token slice of the vocabulary.
const CONFIG: Qwen3Config = {
  modelType: 'qwen3_moe',
  vocabSize: 512,
  hiddenSize: 64,
  intermediateSize: 128,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 16,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 256,
  tieWordEmbeddings: false,
  attentionBias: false,
  bosTokenId: 1,
  eosTokenIds: [2],
  moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
};
// LFM2-MoE at the same scale: conv and attention layers, one dense layer then MoE (8 experts, top 2, expert bias).
const LFM2_MOE: Lfm2Config = {
  modelType: 'lfm2_moe',
  vocabSize: 512,
  hiddenSize: 64,
  intermediateSize: 96,
  numHiddenLayers: 3,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 16,
  normEps: 1e-5,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 256,
  tieWordEmbeddings: true,
  convBias: false,
  convLCache: 3,
  torchDtype: 'float32',
  bosTokenId: 1,
  padTokenId: 0,
  eosTokenIds: [7],
  layerTypes: ['conv', 'full_attention', 'conv'],
  moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, numDenseLayers: 1, normTopkProb: true, useExpertBias: true, routedScalingFactor: 1 },
};
// Qwen3.6's shape at the same scale: Gated DeltaNet layers then gated attention (a quarter rotated), MoE with a shared expert.
const QWEN3_6_MOE: Qwen35Config = {
  modelType: 'qwen3_5_moe',
  vocabSize: 512,
  hiddenSize: 64,
  intermediateSize: 1,
  numHiddenLayers: 4,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 32,
  rotaryDim: 8,
  ropeTheta: 10_000_000,
  rmsNormEps: 1e-6,
  maxPositionEmbeddings: 256,
  tieWordEmbeddings: false,
  layerTypes: ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'],
  linear: { numKeyHeads: 2, numValueHeads: 4, keyHeadDim: 16, valueHeadDim: 16, convKernel: 4 },
  torchDtype: 'float32',
  eosTokenIds: [7],
  mtpLayers: 0,
  hasVision: false,
  moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, sharedExpertIntermediateSize: 32 },
};
const SEED = 7;
const PROMPT = [11, 257, 42, 300, 5];
// Kept in the weight cache: any checkpoint will do, small and sharded (an index and several weight files).
const CACHED: Qwen3Config = {
  ...CONFIG,
  modelType: 'qwen3',
  vocabSize: 64,
  hiddenSize: 32,
  intermediateSize: 64,
  numHiddenLayers: 1,
  numAttentionHeads: 2,
  numKeyValueHeads: 1,
  tieWordEmbeddings: true,
  moe: undefined,
};
// Chatted with on the demo page from a picked folder and by URL, through the real Qwen3 tokenizer: one thin layer and
// the first 32768 rows of the vocabulary (all 151936 make each token take seconds on a software adapter). Its
// tokenizer_config.json loses the chat template, whose special tokens lie above that range, so the page sends the
// plain prompt, whose ids lie below it.
const CHAT_MODEL: Qwen3Config = {
  ...QWEN3_PRESETS['qwen3-tiny']!,
  vocabSize: 32768,
  bosTokenId: 1,
  eosTokenIds: [2],
  hiddenSize: 64,
  intermediateSize: 128,
  numHiddenLayers: 1,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 16,
};
type CacheEvent = { file: string; from: 'cache' | 'downloaded' | 'network'; store: 'opfs' | 'cache-api' };

interface Harness {
  parity(seed: number): Promise<{ adapter: string; results: { op: string; maxDiff: number; tolerance: number; size: number }[] }>;
  generateIds(
    config: Qwen3Config,
    seed: number,
    prompt: number[],
    maxNewTokens: number,
    tokenizerUrl: string,
  ): Promise<{ ids: number[]; stats: { dispatchesPerToken?: number } }>;
  generateFromUrl(url: string, prompt: number[], maxNewTokens: number, tokenizerUrl: string): Promise<{ modelType: string; ids: number[] }>;
  loadSafetensors(
    url: string,
    cache?: boolean | 'opfs' | 'cache-api',
  ): Promise<{ ok: true; tensors: Record<string, number[]> } | { ok: false; name: string; message: string }>;
  loadCachedCheckpoint(url: string, store: 'opfs' | 'cache-api'): Promise<{ tensors: Record<string, number[]>; events: CacheEvent[] }>;
  plantCachedFile(url: string, store: 'opfs' | 'cache-api', bytes: number[]): Promise<void>;
  clearWeightCache(prefix?: string): Promise<void>;
  weightCacheUsage(): Promise<{ files: number; bytes: number; entries: { url: string; bytes: number; store: string }[] }>;
  release(): void;
}

describe.skipIf(!available)('the browser build in Chromium (WebGPU on SwiftShader)', () => {
  let dir: string;
  let server: StaticServer;
  let browser: Browser;
  let page: Page;
  let nodeImports: string[];
  let files: string;
  let cachedShards: string[];
  let cachedOnDisk: Record<string, number[]>;
  const pageErrors: string[] = [];
  const call = <K extends keyof Harness>(name: K, ...args: Parameters<Harness[K]>) =>
    page.evaluate(
      ([n, a]) =>
        (globalThis as unknown as { tensorgpuHarness: Record<string, (...x: unknown[]) => unknown> }).tensorgpuHarness[n as string]!(...(a as unknown[])),
      [name, args] as const,
    ) as Promise<Awaited<ReturnType<Harness[K]>>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-browser-'));
    ({ nodeImports } = await buildWeb(join(dir, 'web')));
    files = join(dir, 'files');
    rmSync(files, { recursive: true, force: true });
    (await import('node:fs')).mkdirSync(files);
    await writeSafetensors(join(files, 'small.safetensors'), [
      ['a', { dtype: 'float32', shape: [2, 3], bytes: () => new Uint8Array(new Float32Array([1, -2, 3.5, 4, 5, 6]).buffer) }],
      ['b', { dtype: 'int32', shape: [3], bytes: () => new Uint8Array(new Int32Array([7, -8, 9]).buffer) }],
    ]);
    // Hostile: the header length says 1 MB, the file is 24 bytes.
    const hostile = new Uint8Array(24);
    new DataView(hostile.buffer).setBigUint64(0, 1_000_000n, true);
    writeFileSync(join(files, 'hostile.safetensors'), hostile);
    cachedShards = (await writeRandomQwen3Checkpoint(join(files, 'cached'), CACHED, { seed: 3, dtype: 'float32', shardBytes: 8_000 })).sort();
    const ck = await Checkpoint.open(join(files, 'cached'));
    cachedOnDisk = {};
    for (const name of ck.names.sort()) {
      const t = await ck.load(name, { device: 'cpu' });
      cachedOnDisk[name] = [...(await t.toArray())];
      t.dispose();
    }
    await ck.close();
    await writeRandomLfm2Checkpoint(join(files, 'lfm2-moe'), LFM2_MOE, { seed: 5, dtype: 'float32', shardBytes: 200_000 }); // sharded: an index, so no 404 probes
    await writeRandomQwen35Checkpoint(join(files, 'qwen3.6-moe'), QWEN3_6_MOE, { seed: 5, dtype: 'float32', shardBytes: 200_000 });
    await writeRandomQwen3Checkpoint(join(files, 'chat-model'), CHAT_MODEL, { seed: 1, dtype: 'bfloat16' });
    copyFileSync(join(qwen3TokenizerDir(), 'tokenizer.json'), join(files, 'chat-model', 'tokenizer.json'));
    const tc = JSON.parse(readFileSync(join(qwen3TokenizerDir(), 'tokenizer_config.json'), 'utf8'));
    delete tc.chat_template;
    writeFileSync(join(files, 'chat-model', 'tokenizer_config.json'), JSON.stringify(tc));
    server = await serveStatic({ '/': join(dir, 'web'), '/tokenizer/': qwen3TokenizerDir(), '/files/': files });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--enable-unsafe-webgpu', ...(process.getuid?.() === 0 ? ['--no-sandbox'] : [])] });
    page = await browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') pageErrors.push(m.text());
    });
    await page.goto(`${server.url}/harness.html`);
    await page.waitForFunction(() => (globalThis as { harnessReady?: boolean }).harnessReady === true, undefined, { timeout: 30_000 });
  }, 120_000);

  afterAll(async () => {
    if (page) await call('release').catch(() => {});
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('bundles the browser entry with no import of a Node built-in or Dawn, static or dynamic', () => {
    expect(nodeImports).toEqual([]);
  });

  it('runs the op parity suite in the page: WebGPU matches the CPU backend op by op', async () => {
    const { adapter, results } = await call('parity', 1234);
    expect(adapter).toMatch(/\//);
    expect(results).toHaveLength(10);
    for (const r of results) {
      expect(r.size, r.op).toBeGreaterThan(0);
      expect(r.maxDiff, r.op).toBeLessThanOrEqual(r.tolerance);
    }
    expect(pageErrors).toEqual([]);
  }, 120_000);

  it("generates greedily from a model built in the page with the token ids of Node's CPU backend", async () => {
    const inPage = await call('generateIds', CONFIG, SEED, PROMPT, 8, `${server.url}/tokenizer`);
    const ck = await randomQwen3Checkpoint(CONFIG, { seed: SEED, dtype: 'float32' });
    const model = await qwen3FromCheckpoint(ck, { device: 'cpu', maxSequence: 64 });
    const ids: number[] = [];
    try {
      for await (const t of generate(model, TextTokenizer.fromDirectory(qwen3TokenizerDir()), PROMPT, { maxNewTokens: 8, temperature: 0, stopTokenIds: [] }))
        ids.push(t.id);
    } finally {
      model.dispose();
    }
    expect(ids).toHaveLength(8);
    expect(inPage.ids).toEqual(ids);
    expect(pageErrors).toEqual([]);
  }, 180_000);

  it("runs an LFM2-MoE checkpoint read by URL (modelFromCheckpoint picks the family) with the token ids of Node's CPU backend", async () => {
    const inPage = await call('generateFromUrl', `${server.url}/files/lfm2-moe`, PROMPT, 6, `${server.url}/tokenizer`);
    const { model } = await loadModel(join(files, 'lfm2-moe'), { device: 'cpu', maxSequence: 64 });
    const ids: number[] = [];
    try {
      for await (const t of generate(model, TextTokenizer.fromDirectory(qwen3TokenizerDir()), PROMPT, { maxNewTokens: 6, temperature: 0, stopTokenIds: [] }))
        ids.push(t.id);
    } finally {
      model.dispose();
    }
    expect(inPage.modelType).toBe('lfm2_moe');
    expect(ids).toHaveLength(6);
    expect(inPage.ids).toEqual(ids);
    expect(pageErrors).toEqual([]);
  }, 180_000);

  it("runs a Qwen3.6-shaped checkpoint read by URL (Gated DeltaNet, gated attention, shared expert) with the token ids of Node's CPU backend", async () => {
    const inPage = await call('generateFromUrl', `${server.url}/files/qwen3.6-moe`, PROMPT, 6, `${server.url}/tokenizer`);
    const { model } = await loadModel(join(files, 'qwen3.6-moe'), { device: 'cpu', maxSequence: 64 });
    const ids: number[] = [];
    try {
      for await (const t of generate(model, TextTokenizer.fromDirectory(qwen3TokenizerDir()), PROMPT, { maxNewTokens: 6, temperature: 0, stopTokenIds: [] }))
        ids.push(t.id);
    } finally {
      model.dispose();
    }
    expect(inPage.modelType).toBe('qwen3_5_moe');
    expect(ids).toHaveLength(6);
    expect(inPage.ids).toEqual(ids);
    expect(pageErrors).toEqual([]);
  }, 180_000);

  it('loads safetensors over HTTP with Range requests, and names the file and what is wrong in a hostile one', async () => {
    const good = await call('loadSafetensors', `${server.url}/files/small.safetensors`);
    expect(good).toEqual({ ok: true, tensors: { a: [1, -2, 3.5, 4, 5, 6], b: [7, -8, 9] } });
    const reads = server.log.filter((l) => l.includes('small.safetensors'));
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.every((l) => / bytes=\d+-\d+$/.test(l))).toBe(true);
    const bad = await call('loadSafetensors', `${server.url}/files/hostile.safetensors`);
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      expect(bad.name).toBe('CheckpointError');
      expect(bad.message).toContain('hostile.safetensors');
      expect(bad.message).toMatch(/header/i);
    }
  }, 60_000);

  it('keeps a checkpoint read by URL in the browser (OPFS, then the Cache API): a second load makes no request, clearing refetches', async () => {
    const url = `${server.url}/files/cached`;
    const weightReads = (from: number) => server.log.slice(from).filter((l) => /\/files\/cached\/[^ ]+\.safetensors( |$)/.test(l));
    await call('clearWeightCache');
    for (const store of ['opfs', 'cache-api'] as const) {
      const first = server.log.length;
      const downloaded = await call('loadCachedCheckpoint', url, store);
      expect(downloaded.tensors).toEqual(cachedOnDisk);
      expect(downloaded.events).toEqual(cachedShards.map((file) => ({ file, from: 'downloaded', store })));
      expect(weightReads(first).length).toBeGreaterThan(cachedShards.length);
      expect(weightReads(first).every((l) => / bytes=\d+-\d+$/.test(l))).toBe(true);

      const second = server.log.length;
      const cached = await call('loadCachedCheckpoint', url, store);
      expect(cached.tensors).toEqual(cachedOnDisk);
      expect(cached.events).toEqual(cachedShards.map((file) => ({ file, from: 'cache', store })));
      expect(server.log.slice(second)).toEqual([]); // config, index, weights: nothing read from the network

      const usage = await call('weightCacheUsage');
      const kept = usage.entries.filter((e) => e.store === store && e.url.endsWith('.safetensors'));
      expect(kept.map((e) => e.bytes).reduce((a, b) => a + b, 0)).toBe(cachedShards.reduce((n, f) => n + readFileSync(join(files, 'cached', f)).length, 0));
      await call('clearWeightCache');
      expect((await call('weightCacheUsage')).files).toBe(0);
      const third = server.log.length;
      expect((await call('loadCachedCheckpoint', url, store)).events.map((e) => e.from)).toEqual(cachedShards.map(() => 'downloaded'));
      expect(weightReads(third).length).toBeGreaterThan(cachedShards.length);
      await call('clearWeightCache');
    }
    expect(pageErrors).toEqual([]);
  }, 60_000);

  it('validates cached bytes like downloaded ones: a hostile file is refused before it is kept, a hostile cached copy gives the same error', async () => {
    const hostileUrl = `${server.url}/files/hostile.safetensors`;
    const bad = await call('loadSafetensors', hostileUrl, true);
    expect(bad).toMatchObject({ ok: false, name: 'CheckpointError' });
    if (!bad.ok) expect(bad.message).toMatch(/hostile\.safetensors.*header/i);
    expect((await call('weightCacheUsage')).entries.filter((e) => e.url === hostileUrl)).toEqual([]);

    const smallUrl = `${server.url}/files/small.safetensors`;
    await call('plantCachedFile', smallUrl, 'opfs', [...readFileSync(join(files, 'hostile.safetensors'))]);
    const before = server.log.length;
    const planted = await call('loadSafetensors', smallUrl, 'opfs');
    expect(planted).toMatchObject({ ok: false, name: 'CheckpointError' });
    if (!planted.ok && !bad.ok) expect(planted.message).toBe(bad.message.replace(hostileUrl, smallUrl));
    expect(server.log.slice(before)).toEqual([]);
    await call('clearWeightCache');
    expect(await call('loadSafetensors', smallUrl, 'opfs')).toEqual({ ok: true, tensors: { a: [1, -2, 3.5, 4, 5, 6], b: [7, -8, 9] } });
    await call('clearWeightCache');
  }, 60_000);

  it('shows the parity suite on the ops page: every op passes against the CPU backend', async () => {
    const ops = await browser.newPage();
    try {
      await ops.goto(`${server.url}/ops.html`);
      await ops.waitForSelector('body[data-state]', { timeout: 90_000 });
      expect(await ops.getAttribute('body', 'data-state'), (await ops.textContent('#status')) ?? '').toBe('passed');
      expect(await ops.locator('#rows tr').count()).toBe(10);
      expect(await ops.locator('#rows td.pass').count()).toBe(10);
    } finally {
      await ops.close();
    }
  }, 120_000);

  it('chats on the demo page: the built-in model generated in the page, tokens streamed, stats shown; a screenshot is kept', async () => {
    const chat = await browser.newPage({ viewport: { width: 900, height: 700 } });
    const errors: string[] = [];
    chat.on('pageerror', (e) => errors.push(e.message));
    try {
      await chat.goto(`${server.url}/chat.html?autoload=1&layers=1&tokens=4`);
      await chat.waitForSelector('body[data-state=ready], body[data-state=error]', { timeout: 90_000 });
      expect(await chat.textContent('#status')).toMatch(/loaded in/);
      await chat.click('#send');
      await chat.waitForSelector('body[data-state=done]', { timeout: 90_000 });
      expect(await chat.textContent('#status')).toMatch(/^done \((max-tokens|eos)\)/);
      expect(await chat.textContent('.user')).toContain('Hello! Who are you?');
      expect(((await chat.textContent('.assistant')) ?? '').length).toBeGreaterThan('model: '.length);
      const stats = (await chat.textContent('#stats')) ?? '';
      expect(stats).toMatch(/tok\/s: \d/);
      expect(stats).toMatch(/dispatches\/token: \d+/);
      expect(stats).toMatch(/GPU memory: \d/);
      const shot = join(process.env.TENSORGPU_ARTIFACTS ?? tmpdir(), 'tensorgpu-chat.png');
      await chat.screenshot({ path: shot, fullPage: true });
      expect(existsSync(shot)).toBe(true);
      expect(errors).toEqual([]);
    } finally {
      await chat.evaluate(() => (globalThis as { tensorgpuRelease?: () => void }).tensorgpuRelease?.()).catch(() => {});
      await chat.close();
    }
  }, 240_000);

  it('chats on the demo page with the built-in Qwen3.6-shaped model (the release layout and tokenizer shape, built in the page)', async () => {
    const chat = await browser.newPage();
    const errors: string[] = [];
    chat.on('pageerror', (e) => errors.push(e.message));
    try {
      await chat.goto(`${server.url}/chat.html?autoload=1&model=qwen3.6-moe-tiny&layers=4&tokens=2`);
      await chat.waitForSelector('body[data-state=ready], body[data-state=error]', { timeout: 90_000 });
      expect(await chat.textContent('#status')).toMatch(/^built-in random Qwen3\.6-shaped MoE \(4 layers, 32 experts \+ 1 shared\): loaded in/);
      await chat.click('#send');
      await chat.waitForSelector('body[data-state=done]', { timeout: 90_000 });
      expect(await chat.textContent('#status')).toMatch(/^done \((max-tokens|eos)\)/);
      expect(((await chat.textContent('.assistant')) ?? '').length).toBeGreaterThan('model: '.length);
      expect((await chat.textContent('#stats')) ?? '').toMatch(/dispatches\/token: \d+/);
      expect(errors).toEqual([]);
    } finally {
      await chat.evaluate(() => (globalThis as { tensorgpuRelease?: () => void }).tensorgpuRelease?.()).catch(() => {});
      await chat.close();
    }
  }, 240_000);

  it('chats with a model folder picked on this computer, and keeps a model read by URL in the browser (the second load says so and reads nothing)', async () => {
    const chat = await browser.newPage();
    const errors: string[] = [];
    chat.on('pageerror', (e) => errors.push(e.message));
    try {
      await chat.goto(`${server.url}/chat.html?tokens=3`);
      await chat.waitForSelector('body[data-state=ready], body[data-state=error]', { timeout: 90_000 });
      const loadAndWait = async () => {
        await chat.click('#load');
        await chat.waitForSelector('body[data-state=loaded], body[data-state=error]', { timeout: 90_000 });
        return (await chat.textContent('#status')) ?? '';
      };
      await chat.click('#clear-cache');
      await chat.waitForSelector('#cache-usage:text("nothing kept")');
      await chat.fill('#url', `${server.url}/files/chat-model`);
      await chat.check('#keep');
      expect(await loadAndWait()).toMatch(/chat-model: loaded in .*\(weights downloaded and kept in this browser \(opfs\)\)/);
      const before = server.log.length;
      expect(await loadAndWait()).toMatch(/chat-model: loaded in .*\(weights from this browser's cache \(opfs\), nothing downloaded\)/);
      expect(server.log.slice(before)).toEqual([]);
      expect(await chat.textContent('#cache-usage')).toMatch(/kept in this browser: \d+ files/);
      await chat.click('#clear-cache');

      await chat.setInputFiles('#folder', join(files, 'chat-model'));
      expect(await chat.isChecked('input[name=model][value=folder]')).toBe(true);
      expect(await loadAndWait()).toMatch(/^chat-model \(on this computer\): loaded in/);
      await chat.click('#send');
      await chat.waitForSelector('body[data-state=done]', { timeout: 90_000 });
      expect(await chat.textContent('#status')).toMatch(/^done \((max-tokens|eos)\)/);
      expect(((await chat.textContent('.assistant')) ?? '').length).toBeGreaterThan('model: '.length);
      expect(errors).toEqual([]);
    } finally {
      await chat.evaluate(() => (globalThis as { tensorgpuRelease?: () => void }).tensorgpuRelease?.()).catch(() => {});
      await chat.close();
    }
  }, 240_000);
});
