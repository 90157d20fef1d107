// The benchmarks page: tensorgpu, TensorFlow.js (WebGPU backend) and ONNX Runtime Web (WebGPU EP) on the same work in
// the same page and adapter: matmul 512 and 1024, a decode GEMV, a vocabulary-sized softmax and an elementwise chain.
// Each cell is the median of timed runs (first enqueue to GPU done), with the dispatches each run issued, counted by
// wrapping GPUComputePassEncoder.dispatchWorkgroups for every library alike, and each peer's output checked against
// tensorgpu's. ?quick=1 runs small sizes (the tests), ?runs=N sets the timed runs (default 5, after 2 warm-ups),
// ?only=TEXT the cases whose name contains TEXT.
import * as tg from '../src/browser.js';
import { benchCases, dispatchCounter, ortLibrary, runCase, tensorgpuLibrary, tfjsLibrary, type CaseResult, type Library } from './bench-peers.js';

export type { CaseResult, LibraryResult } from './bench-peers.js';

// The DOM pieces used here, declared loosely (the project compiles without lib.dom; see chat.ts).
declare const document: { getElementById(id: string): any; createElement(tag: string): any; body: any }; // eslint-disable-line @typescript-eslint/no-explicit-any
declare const location: { search: string; href: string };
declare const navigator: { userAgent: string };

export interface BenchReport {
  adapter: string;
  userAgent: string;
  quick: boolean;
  runs: number;
  cases: CaseResult[];
  /** Libraries that failed to start, with why. */
  unavailable: Record<string, string>;
}

const params = new URLSearchParams(location.search);
const quick = params.get('quick') === '1';
const runs = Math.max(1, Number(params.get('runs') ?? (quick ? 3 : 5)));
const WARMUP = quick ? 1 : 2;
const only = params.get('only')?.toLowerCase();

// Every library's dispatches go through the same prototype, so counting there needs nothing from them.
const dispatches = dispatchCounter();

// ---- The table ----

const status = (text: string) => (document.getElementById('status').textContent = text);

function cell(text: string, className?: string): unknown {
  const td = document.createElement('td');
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function showCase(r: CaseResult): void {
  const tr = document.createElement('tr');
  tr.append(cell(r.name, 'case'));
  const own = r.results[0].ms;
  for (const x of r.results) {
    if (x.ms === null) {
      tr.append(cell(x.error ? `failed: ${x.error}` : '-', 'fail'), cell('-'));
      continue;
    }
    const ratio = own !== null && x !== r.results[0] ? ` (${(x.ms / own).toFixed(2)}x)` : '';
    tr.append(cell(`${x.ms.toFixed(x.ms < 10 ? 2 : 1)} ms${ratio}`, 'num'), cell(String(x.dispatches), 'num'));
  }
  const worst = Math.max(...r.results.slice(1).map((x) => x.maxDiff ?? 0));
  tr.append(cell(worst.toExponential(1), worst <= 1e-3 ? 'num pass' : 'num fail'));
  document.getElementById('rows').append(tr);
}

async function main(): Promise<BenchReport> {
  const d = await tg.diagnose();
  if (!d.available) throw new Error(`WebGPU unavailable: ${d.reason}`);
  const adapter = d.adapter ? `${d.adapter.vendor}/${d.adapter.architecture}${d.adapter.description ? ` (${d.adapter.description})` : ''}` : 'unknown adapter';
  const unavailable: Record<string, string> = {};
  const libraries: Library[] = [];
  const wasmBase = new URL('./peers/ort/', location.href).href;
  for (const [name, start] of [
    ['tensorgpu', tensorgpuLibrary],
    ['TF.js WebGPU', tfjsLibrary],
    ['ONNX Runtime Web', () => ortLibrary(wasmBase)],
  ] as const) {
    try {
      libraries.push(await start());
    } catch (e) {
      unavailable[name] = (e as Error).message;
    }
  }
  if (libraries[0]?.name !== 'tensorgpu') throw new Error(`tensorgpu did not start: ${unavailable.tensorgpu}`);
  const head = document.getElementById('head');
  head.append(cell('case'));
  for (const l of libraries) head.append(cell(l.name === 'tensorgpu' ? 'tensorgpu' : `${l.name} (its time / tensorgpu's)`), cell('dispatches'));
  head.append(cell('max diff vs tensorgpu'));
  const cases: CaseResult[] = [];
  for (const c of benchCases(quick).filter((x) => !only || x.name.toLowerCase().includes(only))) {
    status(`${adapter}: running ${c.name}…`);
    const r = await runCase(c, libraries, { warmup: WARMUP, runs, dispatches });
    cases.push(r);
    showCase(r);
  }
  for (const l of libraries) await l.release();
  const missing = Object.keys(unavailable);
  status(
    `${adapter}; ${navigator.userAgent.match(/(Chrome|Chromium|Firefox|Safari)\/[\d.]+/)?.[0] ?? 'browser'}; median of ${runs} runs after ${WARMUP} warm-up${WARMUP > 1 ? 's' : ''}${missing.length ? `; not run: ${missing.map((m) => `${m} (${unavailable[m]})`).join(', ')}` : ''}`,
  );
  return { adapter, userAgent: navigator.userAgent, quick, runs, cases, unavailable };
}

main().then(
  (report) => {
    (globalThis as Record<string, unknown>).benchReport = report;
    document.body.dataset.state = 'done';
  },
  (e) => {
    status(`error: ${(e as Error).message}`);
    document.body.dataset.state = 'error';
  },
);
