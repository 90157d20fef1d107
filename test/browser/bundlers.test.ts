// A page that imports 'tensorgpu' by name, bundled as an application would bundle it: esbuild with its defaults,
// webpack 5 and Vite in production mode, none given externals or polyfills. The package resolves through
// node_modules/tensorgpu (a link to this repository) and package.json's `browser` export to dist/browser.js (so
// `npm run build` first). Each bundle must hold no Node built-in specifier and no Dawn, and must add two tensors on
// WebGPU in headless Chromium (SwiftShader). With TENSORGPU_REQUIRE_GPU=1 (CI) a missing browser fails.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build as esbuild } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { build as viteBuild, type Logger } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import webpack from 'webpack';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';

const ROOT = realpathSync(resolve(dirname(fileURLToPath(import.meta.url)), '../..'));
const CHROMIUM = process.env.TENSORGPU_CHROMIUM ?? '/usr/bin/chromium';
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';
const hasBrowser = existsSync(CHROMIUM);
if (!hasBrowser && required) throw new Error(`TENSORGPU_REQUIRE_GPU=1 but there is no browser at ${CHROMIUM} (apt-get install chromium)`);

const PAGE = `import { add, initDevice, tensor } from 'tensorgpu';

globalThis.bundleResult = (async () => {
  await initDevice('webgpu');
  const a = tensor([1, 2, 3, 4], { device: 'webgpu' });
  const b = tensor([10, 20, 30, 40], { device: 'webgpu' });
  const c = add(a, b);
  return { device: c.device, values: [...(await c.toArray())] };
})().catch((e) => ({ error: String((e && e.stack) || e) }));
`;
// The data: icon keeps Chromium from asking for /favicon.ico (a 404, reported as a console error).
const HTML = (script: string) => `<!doctype html>\n<html><head><link rel="icon" href="data:,"></head><body><script ${script}></script></body></html>\n`;

/** A `node:` module name as a string literal (what an import or require of a built-in leaves in a bundle). */
const NODE_SPECIFIER = /["'`]node:[\w/]+["'`]/;
/** Dawn (the `webgpu` package) imported or required by name. */
const DAWN_IMPORT = /(?:import|require)\s*\(\s*["'`]webgpu["'`]\s*\)|from\s*["'`]webgpu["'`]/;

/** The .js files under `dir`, concatenated. */
function scripts(dir: string): string {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.js'))
    .map((f) => readFileSync(join(dir, f), 'utf8'))
    .join('\n');
}

/** 'tensorgpu' resolved through package.json's `browser` export to dist/browser.js, never to the Node entry. */
function expectBrowserEntry(files: Iterable<string>): void {
  const read = new Set(files);
  expect(read.has(join(ROOT, 'dist/browser.js'))).toBe(true);
  expect(read.has(join(ROOT, 'dist/index.js'))).toBe(false);
  expect([...read].filter((f) => f.includes('/node_modules/webgpu/'))).toEqual([]);
}

function expectBrowserSafe(code: string): void {
  expect(code.length).toBeGreaterThan(10_000);
  expect(code).not.toMatch(NODE_SPECIFIER);
  expect(code).not.toMatch(/require\(\s*["'`](?:node:)?(?:fs|path|os|child_process|module|url)["'`]/);
  expect(code).not.toMatch(DAWN_IMPORT);
  // A string only the Node host's adapter probe has (runtime/webgpu/node.ts).
  expect(code).not.toContain('TENSORGPU_PROBE_MODULE');
}

describe('bundling a page that imports tensorgpu (esbuild, webpack 5, Vite; no externals, no polyfills)', () => {
  let dir: string;
  let server: StaticServer | undefined;
  let browser: Browser | undefined;

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/browser.js'))) throw new Error('dist/browser.js is missing: run `npm run build` first');
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bundlers-'));
    mkdirSync(join(dir, 'node_modules'));
    mkdirSync(join(dir, 'out'));
    symlinkSync(ROOT, join(dir, 'node_modules/tensorgpu'), 'dir');
    writeFileSync(join(dir, 'main.js'), PAGE);
    writeFileSync(join(dir, 'index.html'), HTML('type="module" src="./main.js"'));
    if (hasBrowser) {
      server = await serveStatic({ '/': join(dir, 'out') });
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--enable-unsafe-webgpu', ...(process.getuid?.() === 0 ? ['--no-sandbox'] : [])] });
    }
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Opens out/<name>/index.html and returns what the page computed, or fails with its errors. */
  async function runInChromium(name: string): Promise<void> {
    if (!browser || !server) return;
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    try {
      await page.goto(`${server.url}/${name}/index.html`);
      await page.waitForFunction(() => (globalThis as { bundleResult?: unknown }).bundleResult !== undefined, undefined, { timeout: 30_000 });
      const result = await page.evaluate(() => (globalThis as { bundleResult?: unknown }).bundleResult);
      expect(result).toEqual({ device: 'webgpu', values: [11, 22, 33, 44] });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  }

  it('esbuild (defaults: platform browser, bundle, minify)', async () => {
    const out = join(dir, 'out/esbuild');
    const result = await esbuild({
      entryPoints: [join(dir, 'main.js')],
      bundle: true,
      minify: true,
      outdir: out,
      absWorkingDir: dir,
      metafile: true,
      logLevel: 'silent',
    });
    expect(result.warnings).toEqual([]);
    expectBrowserEntry(Object.keys(result.metafile.inputs).map((f) => resolve(dir, f)));
    writeFileSync(join(out, 'index.html'), HTML('src="./main.js"'));
    expectBrowserSafe(scripts(out));
    await runInChromium('esbuild');
  }, 60_000);

  it('webpack 5 (production mode)', async () => {
    const out = join(dir, 'out/webpack');
    const stats = await new Promise<webpack.Stats>((done, fail) =>
      webpack({ mode: 'production', context: dir, entry: './main.js', output: { path: out, filename: 'main.js' }, performance: { hints: false } }, (e, s) =>
        e || !s ? fail(e ?? new Error('webpack gave no stats')) : done(s),
      ),
    );
    const info = stats.toJson({ all: false, errors: true, warnings: true });
    expect(info.errors ?? []).toEqual([]);
    expect(info.warnings ?? []).toEqual([]);
    expectBrowserEntry(stats.compilation.fileDependencies);
    writeFileSync(join(out, 'index.html'), HTML('src="./main.js"'));
    expectBrowserSafe(scripts(out));
    await runInChromium('webpack');
  }, 120_000);

  it('Vite (production build)', async () => {
    const out = join(dir, 'out/vite');
    const warnings: string[] = [];
    const logger: Logger = {
      hasWarned: false,
      info: () => {},
      warn: (msg) => void warnings.push(msg),
      warnOnce: (msg) => void warnings.push(msg),
      error: (msg) => void warnings.push(msg),
      clearScreen: () => {},
      hasErrorLogged: () => false,
    };
    // base './': the page is served from /vite/, not the server's root.
    const result = await viteBuild({
      root: dir,
      base: './',
      configFile: false,
      logLevel: 'warn',
      customLogger: logger,
      // One chunk holds the library and its embedded WGSL, past Vite's 500 kB advice; that advice is not what this checks.
      build: { outDir: out, emptyOutDir: true, chunkSizeWarningLimit: 4096 },
    });
    // Vite replaces a Node built-in with an empty stub and only warns ("externalized for browser compatibility").
    expect(warnings).toEqual([]);
    const outputs = (Array.isArray(result) ? result : [result]) as Extract<typeof result, { output: unknown }>[];
    expectBrowserEntry(outputs.flatMap((o) => o.output.flatMap((c) => (c.type === 'chunk' ? c.moduleIds : []))));
    expectBrowserSafe(scripts(out));
    await runInChromium('vite');
  }, 60_000);
});
