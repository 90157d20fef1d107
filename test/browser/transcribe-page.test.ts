// The transcription page (web/transcribe.html) in headless Chromium on WebGPU (SwiftShader): a generated WAV picked
// through the file input is decoded by WebAudio at 16 kHz, transcribed by the built-in random whisper-tiny preset
// built in the page (shortened: 2 s windows, one layer each side, as the CLI test's checkpoint, because a 30 s window's
// 1500 x 1500 encoder attention takes minutes on a software adapter), and its segments are listed as they come, with
// SRT / VTT / text downloads. The text is gibberish (random weights); the test checks the page's workings.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without types
import { buildWeb } from '../../scripts/build-web.mjs';
import { encodeWav, syntheticSignal } from '../../src/index.js';
import { serveStatic, type StaticServer } from '../../src/serve/static-server.js';

const CHROMIUM = process.env.TENSORGPU_CHROMIUM ?? '/usr/bin/chromium';
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';
const available = existsSync(CHROMIUM);
if (!available && required) throw new Error(`TENSORGPU_REQUIRE_GPU=1 but there is no browser at ${CHROMIUM} (apt-get install chromium)`);

describe.skipIf(!available)('transcribe.html in Chromium (WebGPU on SwiftShader)', () => {
  let dir = '';
  let server: StaticServer;
  let browser: Browser;
  let nodeImports: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-transcribe-page-'));
    ({ nodeImports } = await buildWeb(join(dir, 'web')));
    // 1.5 s at 44.1 kHz in stereo: the page resamples and mixes it down.
    const left = syntheticSignal(1.5, 44100) as Float32Array;
    writeFileSync(join(dir, 'speech.wav'), encodeWav([left, left.map((v) => -0.5 * v)], 44100, { bitDepth: '16' }));
    server = await serveStatic({ '/': join(dir, 'web') });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--enable-unsafe-webgpu', ...(process.getuid?.() === 0 ? ['--no-sandbox'] : [])] });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('bundles with no Node built-in', () => {
    expect(nodeImports).toEqual([]);
  });

  it('transcribes a WAV picked in the file input: segments listed as they come, downloads, the realtime factor', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    try {
      await page.goto(`${server.url}/transcribe.html?positions=100&layers=1&tokens=6`);
      await page.waitForSelector('body[data-state=ready], body[data-state=error]', { timeout: 60_000 });
      expect(await page.textContent('#status')).toMatch(/^adapter /);
      await page.selectOption('#language', 'en');
      // Counted in the page as each window's segments arrive, before the transcript is done.
      await page.evaluate(() => {
        const w = globalThis as unknown as { segmentCounts: number[]; document: { getElementById(id: string): { childElementCount: number } } };
        w.segmentCounts = [];
        const list = w.document.getElementById('segments');
        new (globalThis as unknown as { MutationObserver: new (cb: () => void) => { observe(n: unknown, o: unknown): void } }).MutationObserver(() =>
          w.segmentCounts.push(list.childElementCount),
        ).observe(list, { childList: true });
      });
      const t0 = performance.now();
      await page.setInputFiles('#file', join(dir, 'speech.wav'));
      await page.waitForSelector('body[data-state=done], body[data-state=error]', { timeout: 240_000 });
      const seconds = (performance.now() - t0) / 1000;
      const status = (await page.textContent('#status')) ?? '';
      expect(status).toMatch(/^done: 1\.50 s of audio in \d+\.\d+ s, realtime factor \d+\.\d+/);
      const segments = await page.$$eval('#segments li', (items) => items.map((li) => (li as unknown as { textContent: string }).textContent));
      expect(segments.length).toBeGreaterThan(0);
      for (const s of segments) expect(s).toMatch(/^\[\d\d:\d\d\.\d\d\d --> \d\d:\d\d\.\d\d\d\]/);
      const counts = await page.evaluate(() => (globalThis as unknown as { segmentCounts: number[] }).segmentCounts);
      expect(counts.at(-1)).toBe(segments.length);
      expect(await page.textContent('#stats')).toMatch(
        /language en; \d+ segment\(s\) from \d+ window\(s\); \d+ decoder steps \(captured step of \d+ dispatches, replayed\)/,
      );
      const links = await page.$$eval('#downloads a', (as) => as.map((a) => (a as unknown as { download: string }).download));
      expect(links).toEqual(['speech.srt', 'speech.vtt', 'speech.txt']);
      expect(errors).toEqual([]);
      console.log(`transcribe.html: 1.5 s of audio in ${seconds.toFixed(1)} s (${segments.length} segments; ${status})`);
    } finally {
      await page.evaluate(() => (globalThis as { tensorgpuRelease?: () => void }).tensorgpuRelease?.()).catch(() => {});
      await page.close();
    }
  }, 300_000);
});
