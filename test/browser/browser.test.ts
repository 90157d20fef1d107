// The library in a real browser: Debian's Chromium, headless, on the same SwiftShader Vulkan driver as Node's Dawn,
// driven by playwright-core against pages served on 127.0.0.1 (web/harness.ts bundled by scripts/build-web.mjs).
// With TENSORGPU_REQUIRE_GPU=1 (CI) a missing browser or adapter fails instead of skipping.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without types
import { buildWeb } from '../../scripts/build-web.mjs';
import { qwen3TokenizerDir } from '../../src/generate/tokenizer.js';
import { generate } from '../../src/generate/generate.js';
import { TextTokenizer } from '../../src/generate/tokenizer.js';
import type { Qwen3Config } from '../../src/io/hf-config.js';
import { writeSafetensors } from '../../src/io/safetensors-writer.js';
import { qwen3FromCheckpoint } from '../../src/models/qwen3/from-checkpoint.js';
import { randomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';

const CHROMIUM = process.env.TENSORGPU_CHROMIUM ?? '/usr/bin/chromium';
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';
const available = existsSync(CHROMIUM);
if (!available && required) throw new Error(`TENSORGPU_REQUIRE_GPU=1 but there is no browser at ${CHROMIUM} (apt-get install chromium)`);

// A Qwen3-MoE small enough for a software adapter: 2 layers, 8 experts (top 2), a 512-token slice of the vocabulary.
const CONFIG: Qwen3Config = {
  modelType: 'qwen3_moe', vocabSize: 512, hiddenSize: 64, intermediateSize: 128, numHiddenLayers: 2, numAttentionHeads: 4, numKeyValueHeads: 2,
  headDim: 16, rmsNormEps: 1e-6, ropeTheta: 1_000_000, maxPositionEmbeddings: 256, tieWordEmbeddings: false, attentionBias: false,
  bosTokenId: 1, eosTokenIds: [2],
  moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
};
const SEED = 7;
const PROMPT = [11, 257, 42, 300, 5];

interface Harness {
  parity(seed: number): Promise<{ adapter: string; results: { op: string; maxDiff: number; tolerance: number; size: number }[] }>;
  generateIds(config: Qwen3Config, seed: number, prompt: number[], maxNewTokens: number, tokenizerUrl: string): Promise<{ ids: number[]; stats: { dispatchesPerToken?: number } }>;
  loadSafetensors(url: string): Promise<{ ok: true; tensors: Record<string, number[]> } | { ok: false; name: string; message: string }>;
  release(): void;
}

describe.skipIf(!available)('the browser build in Chromium (WebGPU on SwiftShader)', () => {
  let dir: string;
  let server: StaticServer;
  let browser: Browser;
  let page: Page;
  let staticNodeImports: string[];
  const pageErrors: string[] = [];
  const call = <K extends keyof Harness>(name: K, ...args: Parameters<Harness[K]>) =>
    page.evaluate(([n, a]) => (globalThis as unknown as { tensorgpuHarness: Record<string, (...x: unknown[]) => unknown> }).tensorgpuHarness[n as string]!(...(a as unknown[])), [name, args] as const) as Promise<Awaited<ReturnType<Harness[K]>>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-browser-'));
    ({ staticNodeImports } = await buildWeb(join(dir, 'web')));
    const files = join(dir, 'files');
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

  it('bundles the browser entry with no static import of a Node built-in', () => {
    expect(staticNodeImports).toEqual([]);
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

  it('generates greedily from a model built in the page with the token ids of Node\'s CPU backend', async () => {
    const inPage = await call('generateIds', CONFIG, SEED, PROMPT, 8, `${server.url}/tokenizer`);
    const ck = await randomQwen3Checkpoint(CONFIG, { seed: SEED, dtype: 'float32' });
    const model = await qwen3FromCheckpoint(ck, { device: 'cpu', maxSequence: 64 });
    const ids: number[] = [];
    try {
      for await (const t of generate(model, TextTokenizer.fromDirectory(qwen3TokenizerDir()), PROMPT, { maxNewTokens: 8, temperature: 0, stopTokenIds: [] })) ids.push(t.id);
    } finally {
      model.dispose();
    }
    expect(ids).toHaveLength(8);
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
});
