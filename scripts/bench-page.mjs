// Runs the benchmarks page (web/bench.ts) in headless Chromium and prints its table as Markdown, for
// docs/benchmarks.md: `node scripts/bench-page.mjs [--quick] [--runs N] [--only TEXT] [--screenshot file.png]`. Needs `npm run build`
// (dist/web and the static server) and a Chromium with WebGPU (default /usr/bin/chromium, or TENSORGPU_CHROMIUM).
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { peerAssets, webDir } from '../dist/cli/web.js';
import { serveStatic } from '../dist/serve/static-server.js';

const { values } = parseArgs({ options: { quick: { type: 'boolean' }, runs: { type: 'string' }, only: { type: 'string' }, screenshot: { type: 'string' } } });
const server = await serveStatic({ '/': webDir(), ...peerAssets() });
const browser = await chromium.launch({
  executablePath: process.env.TENSORGPU_CHROMIUM ?? '/usr/bin/chromium',
  args: ['--enable-unsafe-webgpu', ...(process.getuid?.() === 0 ? ['--no-sandbox'] : [])],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  const query = new URLSearchParams({
    ...(values.quick ? { quick: '1' } : {}),
    ...(values.runs ? { runs: values.runs } : {}),
    ...(values.only ? { only: values.only } : {}),
  });
  await page.goto(`${server.url}/bench.html?${query}`);
  const started = Date.now();
  await page.waitForSelector('body[data-state]', { timeout: 0 });
  const status = await page.textContent('#status');
  if ((await page.getAttribute('body', 'data-state')) !== 'done') throw new Error(status ?? 'the page failed');
  const report = await page.evaluate(() => globalThis.benchReport);
  if (values.screenshot) await page.screenshot({ path: values.screenshot, fullPage: true });
  const libs = report.cases[0].results.map((r) => r.library);
  console.log(`${report.adapter}; ${report.userAgent}; median of ${report.runs} runs; ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
  console.log(`| case | ${libs.map((l) => `${l} ms`).join(' | ')} | dispatches (${libs.map((l) => l.split(' ')[0]).join(' / ')}) | max diff vs tensorgpu |`);
  console.log(`| --- | ${libs.map(() => '---:').join(' | ')} | ---: | ---: |`);
  for (const c of report.cases) {
    const own = c.results[0].ms;
    const cells = c.results.map((r, i) =>
      r.ms === null ? `failed: ${r.error}` : `${r.ms.toFixed(r.ms < 10 ? 2 : 1)}${i > 0 && own ? ` (${(r.ms / own).toFixed(2)}x)` : ''}`,
    );
    const worst = Math.max(...c.results.slice(1).map((r) => r.maxDiff ?? 0));
    console.log(`| ${c.name} | ${cells.join(' | ')} | ${c.results.map((r) => r.dispatches ?? '-').join(' / ')} | ${worst.toExponential(1)} |`);
  }
} finally {
  await browser.close();
  await server.close();
}
