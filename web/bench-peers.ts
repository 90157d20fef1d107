// The three libraries the benchmarks page (web/bench.ts) and the Node side-by-side bench (bench/peers.bench.ts) run
// on the same work, behind one small interface: tensorgpu, TensorFlow.js's WebGPU backend and ONNX Runtime Web's
// WebGPU execution provider. Each keeps its inputs and outputs on its own GPU device (one adapter, three devices) and
// says when its queued work is done, so a run is timed from the first enqueue to the GPU finishing, with no
// read-back inside the timing. Also here, shared by both: the cases, the inputs, the dispatch counter and the timed
// rounds (runCase). Nothing in this file needs a DOM or Node; whoever imports it must have navigator.gpu set first
// (TF.js registers its WebGPU backend at import time only if it is).
import * as tf from '@tensorflow/tfjs-core';
import type { WebGPUBackend } from '@tensorflow/tfjs-backend-webgpu';
import '@tensorflow/tfjs-backend-webgpu';
import * as ort from 'onnxruntime-web/webgpu';
import * as tg from '../src/browser.js';
import { onnxModel, type OnnxGraph } from './onnx-graph.js';

/** One benchmark case, written once per library. Inputs are float32 with the shapes given, filled by the page. */
export interface BenchCase {
  name: string;
  inputs: Record<string, number[]>;
  /** Value ranges of inputs that are not uniform in [-1, 1) (a chain's multiplier stays near 1). */
  ranges?: Record<string, [number, number]>;
  output: number[];
  tensorgpu(x: Record<string, tg.Tensor>): tg.Tensor;
  tfjs(x: Record<string, tf.Tensor>): tf.Tensor;
  onnx: OnnxGraph;
}

/** A case made ready on one library: inputs uploaded, pipelines or sessions built. */
export interface Prepared {
  /** Queues one run (resolves when the library has handed its work to the GPU queue). */
  run(): Promise<void>;
  /** Resolves when the GPU has finished everything queued so far. */
  done(): Promise<void>;
  /** The last run's output, read back. */
  read(): Promise<Float32Array>;
  dispose(): Promise<void>;
}

export interface Library {
  name: string;
  prepare(c: BenchCase, data: Record<string, Float32Array>): Promise<Prepared>;
  release(): Promise<void>;
}

/** tensorgpu; `shareDevice`: the caller started the device and releases it (the Node bench runs inside bench/main.ts). */
export async function tensorgpuLibrary(options: { shareDevice?: boolean } = {}): Promise<Library> {
  if (!options.shareDevice) await tg.initDevice('webgpu');
  return {
    name: 'tensorgpu',
    async prepare(c, data) {
      const x = Object.fromEntries(Object.entries(c.inputs).map(([k, shape]) => [k, tg.tensor(data[k], { shape, device: 'webgpu' })]));
      let out: tg.Tensor | undefined;
      return {
        run: async () => {
          out?.dispose();
          out = tg.tidy(() => c.tensorgpu(x));
        },
        done: () => tg.synchronize(),
        read: async () => Float32Array.from(await out!.toArray()),
        dispose: async () => {
          out?.dispose();
          for (const t of Object.values(x)) t.dispose();
        },
      };
    },
    release: async () => {
      if (!options.shareDevice) tg.releaseDevice();
    },
  };
}

export async function tfjsLibrary(): Promise<Library> {
  if (!(await tf.setBackend('webgpu'))) throw new Error('TF.js could not start its WebGPU backend');
  await tf.ready();
  const backend = tf.backend() as WebGPUBackend;
  return {
    name: 'TF.js WebGPU',
    async prepare(c, data) {
      const x = Object.fromEntries(Object.entries(c.inputs).map(([k, shape]) => [k, tf.tensor(data[k], shape, 'float32')]));
      let out: tf.Tensor | undefined;
      return {
        run: async () => {
          out?.dispose();
          out = tf.tidy(() => c.tfjs(x));
        },
        // TF.js batches its commands in an open pass until a read or its batch size: end the pass, submit, then wait.
        done: async () => {
          backend.endComputePassEncoder();
          backend.submitQueue();
          await backend.device.queue.onSubmittedWorkDone();
        },
        read: async () => Float32Array.from((await out!.data()) as Float32Array),
        dispose: async () => {
          out?.dispose();
          for (const t of Object.values(x)) t.dispose();
        },
      };
    },
    release: async () => {
      tf.disposeVariables();
      tf.engine().reset();
    },
  };
}

/** ONNX Runtime Web; its WebAssembly binary is fetched from `wasmBase` (the page serves it from the package). */
export async function ortLibrary(wasmBase: string): Promise<Library> {
  ort.env.wasm.numThreads = 1; // threads need a cross-origin-isolated page; the GPU does the work anyway
  ort.env.wasm.wasmPaths = wasmBase;
  ort.env.logLevel = 'error';
  const sessions: ort.InferenceSession[] = [];
  return {
    name: 'ONNX Runtime Web',
    async prepare(c, data) {
      const session = await ort.InferenceSession.create(onnxModel(c.onnx), {
        executionProviders: ['webgpu'],
        preferredOutputLocation: 'gpu-buffer',
        graphOptimizationLevel: 'all',
      });
      sessions.push(session);
      const device = await ort.env.webgpu.device;
      const buffers: GPUBuffer[] = [];
      const feeds: Record<string, ort.Tensor> = {};
      for (const [k, dims] of Object.entries(c.inputs)) {
        const buffer = device.createBuffer({ size: data[k].byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
        device.queue.writeBuffer(buffer, 0, data[k]);
        buffers.push(buffer);
        feeds[k] = ort.Tensor.fromGpuBuffer(buffer, { dataType: 'float32', dims });
      }
      const outName = Object.keys(c.onnx.outputs)[0];
      let out: ort.Tensor | undefined;
      return {
        run: async () => {
          out?.dispose();
          out = (await session.run(feeds))[outName];
        },
        done: () => device.queue.onSubmittedWorkDone(),
        read: async () => Float32Array.from((await out!.getData()) as Float32Array),
        dispose: async () => {
          out?.dispose();
          for (const f of Object.values(feeds)) f.dispose();
          for (const b of buffers) b.destroy();
          await session.release();
          sessions.splice(sessions.indexOf(session), 1);
        },
      };
    },
    release: async () => {
      for (const s of sessions.splice(0)) await s.release();
    },
  };
}

/** Builders of the cases, for the page's list below and the Node bench's (bench/peers.bench.ts), which others extend. */
export const peerCase = {
  matmul: (n: number): BenchCase => ({
    name: `matmul ${n}x${n}x${n}`,
    inputs: { a: [n, n], b: [n, n] },
    output: [n, n],
    tensorgpu: ({ a, b }) => tg.matmul(a, b),
    tfjs: ({ a, b }) => tf.matMul(a, b),
    onnx: { inputs: { a: [n, n], b: [n, n] }, outputs: { y: [n, n] }, nodes: [{ op: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }] },
  }),
  gemv: (k: number, n: number): BenchCase => ({
    name: `GEMV [1,${k}]x[${k},${n}]`,
    inputs: { x: [1, k], w: [k, n] },
    output: [1, n],
    tensorgpu: ({ x, w }) => tg.matmul(x, w),
    tfjs: ({ x, w }) => tf.matMul(x, w),
    onnx: { inputs: { x: [1, k], w: [k, n] }, outputs: { y: [1, n] }, nodes: [{ op: 'MatMul', inputs: ['x', 'w'], outputs: ['y'] }] },
  }),
  /** Softmax over the last dim of [rows, v]. */
  softmax: (v: number, rows = 1): BenchCase => ({
    name: `softmax [${rows},${v}]`,
    inputs: { x: [rows, v] },
    output: [rows, v],
    tensorgpu: ({ x }) => tg.softmax(x, -1),
    tfjs: ({ x }) => tf.softmax(x, -1),
    onnx: { inputs: { x: [rows, v] }, outputs: { y: [rows, v] }, nodes: [{ op: 'Softmax', inputs: ['x'], outputs: ['y'], ints: { axis: 1 } }] },
  }),
  add: (n: number): BenchCase => ({
    name: `add [${n}] f32`,
    inputs: { x: [n], y: [n] },
    output: [n],
    tensorgpu: ({ x, y }) => tg.add(x, y),
    tfjs: ({ x, y }) => tf.add(x, y),
    onnx: { inputs: { x: [n], y: [n] }, outputs: { out: [n] }, nodes: [{ op: 'Add', inputs: ['x', 'y'], outputs: ['out'] }] },
  }),
  // (x + y) * z, eight times over: 16 dependent elementwise ops, so per-op host cost and launch gaps show.
  chain: (n: number, pairs = 8): BenchCase => {
    const nodes: OnnxGraph['nodes'] = [];
    let cur = 'x';
    for (let i = 0; i < pairs; i++) {
      nodes.push({ op: 'Add', inputs: [cur, 'y'], outputs: [`s${i}`] });
      cur = i === pairs - 1 ? 'out' : `p${i}`;
      nodes.push({ op: 'Mul', inputs: [`s${i}`, 'z'], outputs: [cur] });
    }
    return {
      name: `elementwise chain: ${2 * pairs} ops on [${n}]`,
      inputs: { x: [n], y: [n], z: [n] },
      ranges: { z: [0.75, 1.25] },
      output: [n],
      tensorgpu: ({ x, y, z }) => {
        let t = x;
        for (let i = 0; i < pairs; i++) t = t.add(y).mul(z);
        return t;
      },
      tfjs: ({ x, y, z }) => {
        let t = x;
        for (let i = 0; i < pairs; i++) t = tf.mul(tf.add(t, y), z);
        return t;
      },
      onnx: { inputs: { x: [n], y: [n], z: [n] }, outputs: { out: [n] }, nodes },
    };
  },
};

/**
 * The same chain with tensorgpu's side run through compile(): one fused kernel from the second call on (the peers
 * run it as before, one dispatch per op; neither fuses it).
 */
export function compiledChainCase(n: number, pairs = 8): BenchCase {
  const c = peerCase.chain(n, pairs);
  const compiled = tg.compile((x: tg.Tensor, y: tg.Tensor, z: tg.Tensor) => c.tensorgpu({ x, y, z }), { label: 'chain' });
  return { ...c, name: `elementwise chain through compile(): ${2 * pairs} ops on [${n}]`, tensorgpu: ({ x, y, z }) => compiled(x, y, z) };
}

/** The page's cases: full sizes for people, ?quick=1 sizes for the tests (a software adapter runs them in seconds). */
export function benchCases(quick: boolean): BenchCase[] {
  const { matmul, gemv, softmax, chain } = peerCase;
  return quick
    ? [matmul(64), matmul(96), gemv(256, 256), softmax(4099), chain(4096), compiledChainCase(4096)]
    : [matmul(512), matmul(1024), gemv(4096, 4096), softmax(128256), chain(1 << 20), compiledChainCase(1 << 20)];
}

// ---- Timing, shared by the page and the Node bench ----

export interface LibraryResult {
  library: string;
  /** Median ms per run, or null when the library could not run the case. */
  ms: number | null;
  /** Fastest run and the number of timed runs (absent when the library could not run the case). */
  minMs?: number;
  runs?: number;
  dispatches: number | null;
  /** Largest |peer - tensorgpu| over the largest |tensorgpu| value. */
  maxDiff: number | null;
  error?: string;
}

export interface CaseResult {
  name: string;
  results: LibraryResult[];
}

/**
 * Counts compute dispatches of every library alike by wrapping the prototype they all go through
 * (GPUComputePassEncoder), once per realm; returns the running count.
 */
export function dispatchCounter(): () => number {
  const g = globalThis as unknown as { GPUComputePassEncoder?: { prototype: Record<string, (...a: unknown[]) => unknown> }; __peerDispatches?: { n: number } };
  if (!g.__peerDispatches) {
    const counter = { n: 0 };
    g.__peerDispatches = counter;
    const pass = g.GPUComputePassEncoder?.prototype;
    if (pass) {
      for (const method of ['dispatchWorkgroups', 'dispatchWorkgroupsIndirect']) {
        const original = pass[method];
        pass[method] = function (this: unknown, ...a: unknown[]) {
          counter.n++;
          return original.apply(this, a);
        };
      }
    }
  }
  const counter = g.__peerDispatches;
  return () => counter.n;
}

/** Inputs every library receives, the same values (a fixed-seed xorshift, uniform in each input's range). */
export function inputData(c: BenchCase): Record<string, Float32Array> {
  let s = 0x9e3779b9;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  return Object.fromEntries(
    Object.entries(c.inputs).map(([k, shape]) => {
      const [lo, hi] = c.ranges?.[k] ?? [-1, 1];
      return [k, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => lo + (hi - lo) * next())];
    }),
  );
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export function maxRelDiff(got: Float32Array, ref: Float32Array): number {
  if (got.length !== ref.length) return Infinity;
  let scale = 0;
  let diff = 0;
  for (let i = 0; i < ref.length; i++) {
    scale = Math.max(scale, Math.abs(ref[i]));
    const d = Math.abs(got[i] - ref[i]);
    diff = Number.isNaN(d) ? Infinity : Math.max(diff, d);
  }
  return diff / Math.max(scale, 1e-30);
}

export interface RoundOptions {
  warmup: number;
  runs: number;
  /** The running dispatch count (dispatchCounter()). */
  dispatches: () => number;
}

async function timeRun(p: Prepared, dispatches: () => number): Promise<{ ms: number; dispatches: number }> {
  const d0 = dispatches();
  const t0 = performance.now();
  await p.run();
  await p.done();
  return { ms: performance.now() - t0, dispatches: dispatches() - d0 };
}

/**
 * One case on every library: warm-ups, then timed rounds with the libraries in rotated order (so drift in the
 * machine's load falls on all alike), then each output checked against the first library's (tensorgpu's).
 */
export async function runCase(c: BenchCase, libraries: Library[], o: RoundOptions): Promise<CaseResult> {
  const data = inputData(c);
  const prepared = new Map<Library, Prepared>();
  const results = new Map<Library, LibraryResult>();
  for (const lib of libraries) {
    try {
      const p = await lib.prepare(c, data);
      prepared.set(lib, p);
      for (let i = 0; i < o.warmup; i++) await timeRun(p, o.dispatches);
    } catch (e) {
      results.set(lib, { library: lib.name, ms: null, dispatches: null, maxDiff: null, error: (e as Error).message });
    }
  }
  const times = new Map<Library, { ms: number[]; dispatches: number[] }>([...prepared.keys()].map((l) => [l, { ms: [], dispatches: [] }]));
  const order = [...prepared.keys()];
  for (let r = 0; r < o.runs; r++) {
    for (let i = 0; i < order.length; i++) {
      const lib = order[(i + r) % order.length];
      const t = await timeRun(prepared.get(lib)!, o.dispatches);
      times.get(lib)!.ms.push(t.ms);
      times.get(lib)!.dispatches.push(t.dispatches);
    }
  }
  const reference = libraries[0].name === 'tensorgpu' && prepared.has(libraries[0]) ? await prepared.get(libraries[0])!.read() : undefined;
  for (const [lib, p] of prepared) {
    const t = times.get(lib)!;
    results.set(lib, {
      library: lib.name,
      ms: median(t.ms),
      minMs: Math.min(...t.ms),
      runs: t.ms.length,
      dispatches: median(t.dispatches),
      maxDiff: reference ? maxRelDiff(await p.read(), reference) : null,
    });
    await p.dispose();
  }
  return { name: c.name, results: libraries.map((l) => results.get(l)!) };
}
