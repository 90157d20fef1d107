// The ops page: the browser's op parity suite (parity.ts) as a table, pass or fail per op, on this page's adapter.
import * as tg from '../src/browser.js';
import { parity, type ParityResult } from './parity.js';

// The DOM pieces used here, declared loosely (the project compiles without lib.dom; see chat.ts).
declare const document: { getElementById(id: string): any; createElement(tag: string): any; body: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

const status = (text: string) => (document.getElementById('status').textContent = text);

function row(r: ParityResult): void {
  const tr = document.createElement('tr');
  const pass = r.maxDiff <= r.tolerance;
  for (const [text, cls] of [
    [r.op],
    [String(r.size)],
    [r.maxDiff.toExponential(2)],
    [r.tolerance === 0 ? 'exact' : r.tolerance.toExponential(0)],
    [pass ? 'pass' : 'FAIL', pass ? 'pass' : 'fail'],
  ]) {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    tr.append(td);
  }
  document.getElementById('rows').append(tr);
}

async function main(): Promise<void> {
  const d = await tg.diagnose();
  if (!d.available) {
    status(`WebGPU unavailable: ${d.reason}`);
    document.body.dataset.state = 'error';
    return;
  }
  const { adapter, results } = await parity(Date.now() % 100_000, row);
  const failed = results.filter((r) => r.maxDiff > r.tolerance).length;
  status(`${adapter}: ${results.length - failed} of ${results.length} ops match the CPU backend${failed ? `, ${failed} do not` : ''}`);
  tg.releaseDevice();
  document.body.dataset.state = failed ? 'failed' : 'passed';
}

main().catch((e) => {
  status(`error: ${(e as Error).message}`);
  document.body.dataset.state = 'error';
});
