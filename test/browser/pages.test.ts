// The built pages as a visitor meets them, in headless Chromium (issue 40): the folder's URL is index.html, which
// links every page web/ has, each link opening it; and a browser whose WebGPU never answers gets the browser's own
// wording on the chat page, not the Node probe's ("the WebGPU probe exited ... use the CPU device").
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without types
import { buildWeb } from '../../scripts/build-web.mjs';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';
import { isSoftwareAdapter, type AdapterSummary } from '../../src/runtime/webgpu/diagnose.js';

const CHROMIUM = process.env.TENSORGPU_CHROMIUM ?? '/usr/bin/chromium';
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';
const available = existsSync(CHROMIUM);
if (!available && required) throw new Error(`TENSORGPU_REQUIRE_GPU=1 but there is no browser at ${CHROMIUM} (apt-get install chromium)`);

describe.skipIf(!available)('the web pages in Chromium: the index and what a page says without WebGPU', () => {
  let dir = '';
  let server: StaticServer;
  let browser: Browser;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-pages-'));
    await buildWeb(join(dir, 'web'));
    server = await serveStatic({ '/': join(dir, 'web') });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--enable-unsafe-webgpu', ...(process.getuid?.() === 0 ? ['--no-sandbox'] : [])] });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the folder URL is index.html: it links every page in web/ with a line each, and each link opens its page', async () => {
    const pages = readdirSync('web')
      .filter((f) => f.endsWith('.html') && f !== 'index.html')
      .sort();
    const page = await browser.newPage();
    try {
      expect((await page.goto(`${server.url}/`))?.status()).toBe(200);
      expect(await page.title()).toBe('tensorgpu pages');
      const entries = await page.$$eval('#pages dt', (dts) =>
        dts.map((dt) => ({ href: dt.querySelector('a')?.getAttribute('href') ?? '', line: dt.nextElementSibling?.textContent ?? '' })),
      );
      expect(entries.map((e) => e.href).sort()).toEqual(pages);
      for (const e of entries) expect(e.line.length, e.href).toBeGreaterThan(20);
      for (const { href } of entries) {
        await page.goto(`${server.url}/`);
        const [response] = await Promise.all([page.waitForNavigation({ waitUntil: 'domcontentloaded' }), page.click(`#pages dt a[href="${href}"]`)]);
        expect(response?.status(), href).toBe(200);
        expect(new URL(page.url()).pathname).toBe(`/${href}`);
        expect(await page.title(), href).toMatch(/^tensorgpu /);
      }
    } finally {
      await page.close();
    }
  }, 120_000);

  it("initDevice('auto') in the page follows the Node rule: a software adapter only with allowSoftwareAdapter, saying why", async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${server.url}/harness.html`);
      await page.waitForFunction(() => (globalThis as { harnessReady?: boolean }).harnessReady === true, undefined, { timeout: 30_000 });
      const auto = (allow: boolean) =>
        page.evaluate(
          (a) =>
            (
              globalThis as unknown as {
                tensorgpuHarness: { autoDevice: (a: boolean) => Promise<{ device: string; notices: string[]; adapter: AdapterSummary | null }> };
              }
            ).tensorgpuHarness.autoDevice(a),
          allow,
        );
      const plain = await auto(false);
      expect(plain.adapter, 'headless Chromium with --enable-unsafe-webgpu has an adapter').not.toBeNull();
      const software = isSoftwareAdapter(plain.adapter!);
      // CI's headless Chromium renders WebGPU with SwiftShader: there the software branch is the one taken.
      if (required) expect(software, JSON.stringify(plain.adapter)).toBe(true);
      expect(plain.device).toBe(software ? 'cpu' : 'webgpu');
      expect(plain.notices).toHaveLength(1);
      expect(plain.notices[0]).toMatch(software ? /^device: cpu \(the only WebGPU adapter, .* is a software renderer/ : /^device: webgpu \(hardware adapter /);
      const allowed = await auto(true);
      expect(allowed.device).toBe('webgpu');
      expect(allowed.notices[0]).toMatch(software ? /^device: webgpu \(software adapter .*allowSoftwareAdapter/ : /^device: webgpu \(hardware adapter /);
    } finally {
      await page.close();
    }
  }, 60_000);

  it("the chat page, when navigator.gpu never answers, says so in the browser's words", async () => {
    const page = await browser.newPage();
    try {
      // The adapter request hangs, as in a browser whose GPU process is stuck: the in-page probe times out (15 s).
      await page.addInitScript(() => {
        const gpu = (globalThis as { navigator?: { gpu?: object } }).navigator?.gpu;
        if (gpu) Object.getPrototypeOf(gpu).requestAdapter = () => new Promise(() => {});
      });
      await page.goto(`${server.url}/chat.html`);
      await page.waitForSelector('#status:text-matches("^WebGPU unavailable")', { timeout: 40_000 });
      const text = (await page.textContent('#status')) ?? '';
      expect(text).toMatch(/^WebGPU unavailable: the browser's WebGPU did not answer within 15 s \(stuck requesting a GPU adapter\) \(.*reload the page/);
      expect(text).not.toMatch(/probe|exited|CPU device|npx|vulkaninfo/);
    } finally {
      await page.close();
    }
  }, 60_000);
});
