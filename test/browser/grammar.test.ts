// Constrained decoding in a browser: a page importing 'tensorgpu' (the browser entry, dist/browser.js: `npm run build`
// first) and @mlc-ai/web-xgrammar by name, bundled by esbuild, runs generate() under a JSON schema on WebGPU (a
// random-weight Qwen3-MoE in memory, the Qwen3 tokenizer fetched beside the page) in headless Chromium. esbuild runs
// the engine's UMD file as a script (its package is `"type": "module"`), which sets globalThis.xgrammar, where the
// library finds it. Its Emscripten glue names Node's `module` and `url` in branches a browser never runs, so the
// bundle leaves them out (`external`); the WASM is inline, so nothing else is fetched.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { build } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';
import { qwen3TokenizerDir } from '../../src/tokenizer/tokenizer.js';

const ROOT = realpathSync(resolve(dirname(fileURLToPath(import.meta.url)), '../..'));
const CHROMIUM = process.env.TENSORGPU_CHROMIUM ?? '/usr/bin/chromium';
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';
const hasBrowser = existsSync(CHROMIUM);
if (!hasBrowser && required) throw new Error(`TENSORGPU_REQUIRE_GPU=1 but there is no browser at ${CHROMIUM} (apt-get install chromium)`);

const SCHEMA = {
  type: 'object',
  properties: { color: { enum: ['red', 'green', 'blue'] }, count: { type: 'integer', minimum: 0, maximum: 9 } },
  required: ['color', 'count'],
  additionalProperties: false,
};

const PAGE = `import '@mlc-ai/web-xgrammar';
import * as tg from 'tensorgpu';

globalThis.grammarResult = (async () => {
  await tg.initDevice('webgpu');
  const before = await tg.grammarEngine().then((e) => (e === globalThis.xgrammar ? 'global' : 'other'), (e) => String(e.message));
  const json = async (name) => (await fetch('./tokenizer/' + name)).json();
  const tokenizer = new tg.TextTokenizer(await json('tokenizer.json'), await json('tokenizer_config.json'));
  const config = {
    modelType: 'qwen3_moe', vocabSize: 4096, hiddenSize: 32, intermediateSize: 64, numHiddenLayers: 2, numAttentionHeads: 2,
    numKeyValueHeads: 1, headDim: 16, rmsNormEps: 1e-6, ropeTheta: 1000000, maxPositionEmbeddings: 256, tieWordEmbeddings: true,
    attentionBias: false, eosTokenIds: [0],
    moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 16, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
  };
  const ck = await tg.randomQwen3Checkpoint(config, { seed: 45, dtype: 'float32' });
  const { model } = await tg.loadModel(ck, { device: 'webgpu', maxSequence: 64 });
  const prompt = tokenizer.encode('Q: Name a color.\\nA:');
  const responseFormat = { type: 'json_schema', json_schema: { name: 'c', schema: ${JSON.stringify(SCHEMA)}, strict: true } };
  let text = '';
  const stream = tg.generate(model, tokenizer, prompt, { temperature: 3, seed: 4, maxNewTokens: 30, stopTokenIds: [0], responseFormat });
  let r = await stream.next();
  while (!r.done) {
    text += r.value.text;
    r = await stream.next();
  }
  model.dispose();
  return { before, text, stopReason: r.value.stopReason, decode: r.value.decode };
})().catch((e) => ({ error: String((e && e.stack) || e) }));
`;

// The same decode with the engine in a module Worker (webGrammarWorker; the worker script imports the engine and
// runs runGrammarWorker): a schema nested 80 deep traps that worker's engine, the page gets a GrammarError, the worker
// is replaced, and generate() under the schema works after it.
const WORKER = `import '@mlc-ai/web-xgrammar';
import { runGrammarWorker } from 'tensorgpu';

runGrammarWorker();
`;

const WORKER_PAGE = PAGE.replace('globalThis.grammarResult', 'globalThis.workerResult')
  .replace(
    "  let text = '';",
    `  const gw = tg.webGrammarWorker(tokenizer, config.vocabSize, new URL('./worker.js', import.meta.url));
  let deep = { type: 'integer' };
  for (let i = 0; i < 80; i++) deep = { type: 'array', items: deep };
  const trapped = await gw.compile({ type: 'json_schema', json_schema: { schema: deep } }).then(() => 'compiled', (e) => e.name + ': ' + e.message);
  const restarts = gw.restarts;
  let text = '';`,
  )
  .replace('stopTokenIds: [0], responseFormat }', 'stopTokenIds: [0], responseFormat, grammars: gw.grammars }')
  .replace('  model.dispose();\n', '  model.dispose();\n  await gw.close();\n')
  .replace('return { before,', 'return { trapped, restarts,');

describe.skipIf(!hasBrowser)('constrained decoding in Chromium (esbuild bundle, @mlc-ai/web-xgrammar by name)', () => {
  let dir: string;
  let server: StaticServer | undefined;
  let browser: Browser | undefined;

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/browser.js'))) throw new Error('dist/browser.js is missing: run `npm run build` first');
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-grammar-page-'));
    mkdirSync(join(dir, 'node_modules'));
    mkdirSync(join(dir, 'out/tokenizer'), { recursive: true });
    symlinkSync(ROOT, join(dir, 'node_modules/tensorgpu'), 'dir');
    writeFileSync(join(dir, 'main.js'), PAGE);
    writeFileSync(
      join(dir, 'out/index.html'),
      '<!doctype html>\n<html><head><link rel="icon" href="data:,"></head><body><script type="module" src="./main.js"></script></body></html>\n',
    );
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(qwen3TokenizerDir(), f), join(dir, 'out/tokenizer', f));
    server = await serveStatic({ '/': join(dir, 'out') });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--enable-unsafe-webgpu', ...(process.getuid?.() === 0 ? ['--no-sandbox'] : [])] });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Bundles `name`.js of the temporary folder into out/ as the tests' pages do. */
  const bundle = (name: string) =>
    build({
      entryPoints: [join(dir, `${name}.js`)],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      outfile: join(dir, `out/${name}.js`),
      nodePaths: [join(ROOT, 'node_modules')],
      external: ['module', 'url'],
      logLevel: 'error',
    });

  /** Opens `html` and waits for the page's `global` result. */
  async function pageResult<T>(html: string, global: 'grammarResult' | 'workerResult'): Promise<{ result: T; errors: string[] }> {
    const page = await browser!.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${server!.url}/${html}`);
    await page.waitForFunction((g) => (globalThis as Record<string, unknown>)[g] !== undefined, global, { timeout: 60_000 });
    const result = (await page.evaluate((g) => (globalThis as Record<string, unknown>)[g], global)) as T;
    await page.close();
    return { result, errors };
  }

  it('the engine the page imported constrains generate() on WebGPU: the output validates and ends on its own', async () => {
    await bundle('main');
    const { result, errors } = await pageResult<{ before?: string; text?: string; stopReason?: string; decode?: { mode: string }; error?: string }>(
      'index.html',
      'grammarResult',
    );
    expect(errors).toEqual([]);
    expect(result.error).toBeUndefined();
    expect(result.before).toBe('global');
    expect(result.stopReason, result.text).toBe('eos');
    expect(new Ajv().validate(SCHEMA, JSON.parse(result.text!)), result.text).toBe(true);
    expect(result.decode?.mode).toBe('replay');
  }, 180_000);

  it('in a module Worker: a trapping schema costs a new worker, and generate() under a schema works after it', async () => {
    writeFileSync(join(dir, 'worker.js'), WORKER);
    writeFileSync(join(dir, 'worker-main.js'), WORKER_PAGE);
    writeFileSync(
      join(dir, 'out/worker.html'),
      '<!doctype html>\n<html><head><link rel="icon" href="data:,"></head><body><script type="module" src="./worker-main.js"></script></body></html>\n',
    );
    await bundle('worker');
    await bundle('worker-main');
    const { result, errors } = await pageResult<{ trapped?: string; restarts?: number; text?: string; stopReason?: string; error?: string }>(
      'worker.html',
      'workerResult',
    );
    expect(errors).toEqual([]);
    expect(result.error).toBeUndefined();
    expect(result.trapped).toMatch(/^GrammarError: .*out of bounds/);
    expect(result.restarts).toBe(1);
    expect(result.stopReason, result.text).toBe('eos');
    expect(new Ajv().validate(SCHEMA, JSON.parse(result.text!)), result.text).toBe(true);
  }, 180_000);
});
