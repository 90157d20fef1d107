// tensorgpu side by side with its peers in one Node process on the same adapter: TensorFlow.js's WebGPU backend
// (@tensorflow/tfjs-core + @tensorflow/tfjs-backend-webgpu) and ONNX Runtime Web's WebGPU EP (onnxruntime-web), each
// on its own device of that adapter. The cases and the library adapters are web/bench-peers.ts's, which the browser
// page (web/bench.ts) uses too; this file gives them Dawn: navigator.gpu (before TF.js is imported: it registers its
// backend at import time only if WebGPU is there), and one shim: Dawn's Node binding rejects writeBuffer from a view
// of a SharedArrayBuffer (ONNX Runtime's wasm memory), so such views are copied first.
// Each case: warm-ups, then rounds with the libraries in rotated order; medians, the peers' time over tensorgpu's
// (above 1: tensorgpu is faster), dispatches per run counted alike for all three, and each peer's output checked
// against tensorgpu's. A peer that cannot start says why in one line; the rest still run.
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BenchCase as PeerCase, CaseResult, Library } from '../web/bench-peers.js';
import { matchesFilter, type BenchCase, type BenchContext, type RowInput } from './harness.js';

type PeersModule = typeof import('../web/bench-peers.js');

/**
 * The cases, in order: each builds one case for a run (quick: smaller where a full run takes seconds per library, so
 * `npm run bench -- --filter peers --quick` takes about a minute on a 2-core software adapter).
 * Append to it to add a row, e.g. a `compile()`d chain: `PEER_CASES.push(({ peerCase }) => ({ ...peerCase.chain(1 << 20),
 * name: 'compiled chain ...', tensorgpu: compiledChain }))` from a module imported before bench/main.ts builds its list.
 */
export const PEER_CASES: ((peers: PeersModule, quick: boolean) => PeerCase)[] = [
  ({ peerCase }) => peerCase.softmax(128256, 1),
  ({ peerCase }, quick) => peerCase.softmax(128256, quick ? 8 : 32),
  ({ peerCase }) => peerCase.add(1 << 20),
  ({ peerCase }, quick) => peerCase.chain(quick ? 1 << 18 : 1 << 20),
  ({ compiledChainCase }, quick) => compiledChainCase(quick ? 1 << 18 : 1 << 20),
  ({ peerCase }, quick) => (quick ? peerCase.gemv(1024, 1024) : peerCase.gemv(4096, 4096)),
  ({ peerCase }, quick) => (quick ? peerCase.matmul(256) : peerCase.matmul(512)),
];

/** Names of the cases without loading the peers (bench/main.ts filters on them before anything starts). */
const CASE_NAMES = (quick: boolean) => [
  'softmax [1,128256]',
  quick ? 'softmax [8,128256]' : 'softmax [32,128256]',
  `add [${1 << 20}] f32`,
  `elementwise chain: 16 ops on [${quick ? 1 << 18 : 1 << 20}]`,
  `elementwise chain through compile(): 16 ops on [${quick ? 1 << 18 : 1 << 20}]`,
  quick ? 'GEMV [1,1024]x[1024,1024]' : 'GEMV [1,4096]x[4096,4096]',
  quick ? 'matmul 256x256x256' : 'matmul 512x512x512',
];

const PREFIX = 'peers';

/** The harness's cases; `filter` is the run's --filter, so the libraries are released after the last one that runs. */
export function peersCases(quick: boolean, filter?: string): BenchCase[] {
  const names = CASE_NAMES(quick);
  const count = Math.max(names.length, PEER_CASES.length);
  const cases: BenchCase[] = Array.from({ length: count }, (_, i) => ({
    benchmark: `${PREFIX} ${names[i] ?? `case ${i}`}`,
    shape: 'tensorgpu / TF.js / ORT Web',
    run: (ctx: BenchContext) => session.runCase(ctx, i),
  }));
  const session = new PeerSession(quick, cases.filter((c) => matchesFilter(c, filter)).length);
  return cases;
}

interface Started {
  peers: PeersModule;
  libraries: Library[];
  /** Why a library did not start, one line each. */
  unavailable: string[];
  dispatches: () => number;
}

/** The libraries, started on the first case that runs and released after the last one. */
class PeerSession {
  private started?: Promise<Started>;
  private remaining: number;

  constructor(
    private readonly quick: boolean,
    count: number,
  ) {
    this.remaining = count;
  }

  async runCase(ctx: BenchContext, index: number): Promise<RowInput[]> {
    const fallbackName = `${PREFIX} ${CASE_NAMES(this.quick)[index] ?? `case ${index}`}`;
    if (!ctx.gpu) return [{ benchmark: fallbackName, shape: '-', backend: 'cpu', note: 'WebGPU only' }];
    this.started ??= startLibraries(ctx);
    try {
      const s = await this.started;
      const build = PEER_CASES[index];
      if (!build) return [{ benchmark: fallbackName, shape: '-', backend: 'webgpu', note: 'no such case' }];
      const c = build(s.peers, this.quick);
      ctx.log(`  ${c.name}: ${s.libraries.map((l) => l.name).join(', ')}`);
      // A case that takes a second a run on a software adapter gets one warm-up; quick runs 3 rounds.
      const r = await s.peers.runCase(c, s.libraries, { warmup: 1, runs: this.quick ? 3 : 5, dispatches: s.dispatches });
      return rows(`${PREFIX} ${c.name}`, r, s.unavailable);
    } finally {
      if (--this.remaining === 0 && this.started) {
        const s = await this.started.catch(() => undefined);
        for (const l of s?.libraries ?? []) await l.release().catch(() => undefined);
      }
    }
  }
}

/** One row per library: median, min, runs and dispatches per run, and in the note the ratio and the check. */
function rows(name: string, r: CaseResult, unavailable: string[]): RowInput[] {
  const own = r.results[0];
  const out: RowInput[] = r.results.map((x, i) => {
    if (x.ms === null) return { benchmark: name, shape: x.library, backend: 'webgpu', note: `failed: ${x.error ?? 'unknown'}` };
    const ratio = i > 0 && own.ms !== null ? `${x.library} / tensorgpu = ${(x.ms / own.ms).toFixed(2)}x` : undefined;
    const peers = i === 0 ? r.results.slice(1).filter((p) => p.ms !== null && own.ms !== null) : [];
    const note =
      i === 0
        ? peers.map((p) => `${p.library} ${((p.ms as number) / (own.ms as number)).toFixed(2)}x`).join(', ') + ' (peer time / tensorgpu time)'
        : `${ratio}; max diff vs tensorgpu ${x.maxDiff?.toExponential(1) ?? '-'}`;
    return {
      benchmark: name,
      shape: x.library,
      backend: 'webgpu',
      timing: { medianMs: x.ms, minMs: x.minMs ?? x.ms, runs: x.runs ?? 0, dispatchesPerRun: x.dispatches ?? 0 },
      note,
    };
  });
  for (const u of unavailable) out.push({ benchmark: name, shape: u.split(':')[0], backend: 'webgpu', note: `not run: ${u}` });
  return out;
}

/** navigator.gpu from Dawn, the writeBuffer shim, the dispatch counter, then the peers module and its libraries. */
async function startLibraries(ctx: BenchContext): Promise<Started> {
  const g = globalThis as unknown as { navigator?: { gpu?: GPU }; GPUQueue?: { prototype: GPUQueue } };
  if (!g.navigator?.gpu) {
    const dawn = await import('webgpu');
    for (const [k, v] of Object.entries(dawn.globals)) if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
    const gpu = dawn.create((process.env.TENSORGPU_DAWN_OPTIONS ?? '').split(';').filter(Boolean));
    if (g.navigator) Object.defineProperty(g.navigator, 'gpu', { value: gpu, configurable: true });
    else g.navigator = { gpu };
  }
  shimSharedWriteBuffer(g.GPUQueue?.prototype);
  const peers = await import('../web/bench-peers.js');
  const dispatches = peers.dispatchCounter();
  const libraries: Library[] = [];
  const unavailable: string[] = [];
  const wasmDir = dirname(createRequire(import.meta.url).resolve('onnxruntime-web/ort-wasm-simd-threaded.asyncify.wasm'));
  for (const [name, start] of [
    ['tensorgpu', () => peers.tensorgpuLibrary({ shareDevice: true })],
    ['TF.js WebGPU', () => peers.tfjsLibrary()],
    ['ONNX Runtime Web', () => peers.ortLibrary(`${pathToFileURL(wasmDir).href}/`)],
  ] as const) {
    try {
      libraries.push(await start());
    } catch (e) {
      const line = `${name}: ${String((e as Error).message ?? e).split('\n')[0]}`;
      unavailable.push(line);
      ctx.log(`  not run: ${line}`);
    }
  }
  if (libraries[0]?.name !== 'tensorgpu') throw new Error(`tensorgpu did not start: ${unavailable[0]}`);
  return { peers, libraries, unavailable, dispatches };
}

/** Dawn's writeBuffer rejects views of a SharedArrayBuffer (ORT's wasm memory): hand it a copy instead. */
function shimSharedWriteBuffer(queue: GPUQueue | undefined): void {
  const q = queue as (GPUQueue & { __sharedShim?: boolean }) | undefined;
  if (!q || q.__sharedShim || typeof SharedArrayBuffer === 'undefined') return;
  const original = q.writeBuffer;
  q.writeBuffer = function (
    this: GPUQueue,
    buffer: GPUBuffer,
    offset: number,
    data: ArrayBufferView | ArrayBuffer | SharedArrayBuffer,
    dataOffset?: number,
    size?: number,
  ) {
    let src = data;
    if (src instanceof SharedArrayBuffer) src = new Uint8Array(src).slice().buffer;
    else if (ArrayBuffer.isView(src) && src.buffer instanceof SharedArrayBuffer) {
      const bytes = new Uint8Array(src.byteLength);
      bytes.set(new Uint8Array(src.buffer, src.byteOffset, src.byteLength));
      const Ctor = src.constructor as new (b: ArrayBuffer) => ArrayBufferView;
      // dataOffset and size count elements of the view's type, so keep the type.
      src = src instanceof DataView ? new DataView(bytes.buffer) : new Ctor(bytes.buffer);
    }
    return original.call(this, buffer, offset, src as ArrayBufferView<ArrayBuffer>, dataOffset, size);
  } as GPUQueue['writeBuffer'];
  q.__sharedShim = true;
}
