// The benchmarks page in Chromium (WebGPU on SwiftShader): tensorgpu, TF.js's WebGPU backend and ONNX Runtime Web's
// WebGPU EP on the same cases in one page, at ?quick=1 sizes. Times are not checked (a software adapter on a busy
// machine); that every library ran every case, counted its dispatches and agreed with tensorgpu's output is.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without types
import { buildWeb } from '../../scripts/build-web.mjs';
import { peerAssets } from '../../src/cli/web.js';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';
import type { BenchReport } from '../../web/bench.js';

const CHROMIUM = process.env.TENSORGPU_CHROMIUM ?? '/usr/bin/chromium';
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';
const available = existsSync(CHROMIUM);
if (!available && required) throw new Error(`TENSORGPU_REQUIRE_GPU=1 but there is no browser at ${CHROMIUM} (apt-get install chromium)`);

describe.skipIf(!available)('the benchmarks page in Chromium', () => {
  let dir: string;
  let server: StaticServer;
  let browser: Browser;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-page-'));
    await buildWeb(dir);
    server = await serveStatic({ '/': dir, ...peerAssets() });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--enable-unsafe-webgpu', ...(process.getuid?.() === 0 ? ['--no-sandbox'] : [])] });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs every case on tensorgpu, TF.js and ONNX Runtime Web, counts their dispatches and checks their outputs agree', async () => {
    expect(Object.keys(peerAssets())).toEqual(['/peers/ort/']);
    const page = await browser.newPage({ viewport: { width: 1200, height: 600 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    try {
      await page.goto(`${server.url}/bench.html?quick=1&runs=2`);
      await page.waitForSelector('body[data-state]', { timeout: 240_000 });
      const status = (await page.textContent('#status')) ?? '';
      expect(await page.getAttribute('body', 'data-state'), status).toBe('done');
      const report = (await page.evaluate(() => (globalThis as { benchReport?: unknown }).benchReport)) as BenchReport;
      expect(report.unavailable).toEqual({});
      expect(report.adapter).toMatch(/\//);
      expect(report.cases.map((c) => c.name)).toEqual([
        'matmul 64x64x64',
        'matmul 96x96x96',
        'GEMV [1,256]x[256,256]',
        'softmax [1,4099]',
        'elementwise chain: 16 ops on [4096]',
        'elementwise chain through compile(): 16 ops on [4096]',
      ]);
      for (const c of report.cases) {
        expect(
          c.results.map((r) => r.library),
          c.name,
        ).toEqual(['tensorgpu', 'TF.js WebGPU', 'ONNX Runtime Web']);
        for (const r of c.results) {
          expect(r.error, `${c.name} on ${r.library}`).toBeUndefined();
          expect(r.ms, `${c.name} on ${r.library}`).toBeGreaterThan(0);
          expect(r.dispatches, `${c.name} on ${r.library}`).toBeGreaterThan(0);
          expect(r.maxDiff, `${c.name} on ${r.library}`).toBeLessThanOrEqual(1e-4);
        }
      }
      // The chain is 16 dependent ops: tensorgpu runs each as one dispatch, no fill or copy besides; through
      // compile() it is one fused kernel (the median run is a replay), the peers still 16.
      const [chain, compiled] = report.cases.slice(-2);
      expect(chain.results[0].dispatches).toBe(16);
      expect(compiled.results.map((r) => r.dispatches)).toEqual([1, 16, 16]);
      // The requests the page made: ONNX Runtime's binary came from the package, nothing 404'd.
      expect(server.log.some((l) => l.includes('/peers/ort/ort-wasm-simd-threaded.asyncify.wasm'))).toBe(true);
      expect(await page.locator('#rows tr').count()).toBe(6);
      expect(await page.locator('#rows td.fail').count()).toBe(0);
      await page.screenshot({ path: join(process.env.TENSORGPU_ARTIFACTS ?? tmpdir(), 'tensorgpu-bench-page.png'), fullPage: true });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 300_000);
});
