// The three libraries the benchmarks page runs on the same work, behind one small interface: tensorgpu, TensorFlow.js's
// WebGPU backend and ONNX Runtime Web's WebGPU execution provider. Each keeps its inputs and outputs on its own GPU
// device (one adapter, three devices) and says when its queued work is done, so a run is timed from the first
// enqueue to the GPU finishing, with no read-back inside the timing.
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

export async function tensorgpuLibrary(): Promise<Library> {
  await tg.initDevice('webgpu');
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
    release: async () => tg.releaseDevice(),
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

/** The cases: full sizes for people, ?quick=1 sizes for the tests (a software adapter runs them in seconds). */
export function benchCases(quick: boolean): BenchCase[] {
  const matmul = (n: number): BenchCase => ({
    name: `matmul ${n}x${n}x${n}`,
    inputs: { a: [n, n], b: [n, n] },
    output: [n, n],
    tensorgpu: ({ a, b }) => tg.matmul(a, b),
    tfjs: ({ a, b }) => tf.matMul(a, b),
    onnx: { inputs: { a: [n, n], b: [n, n] }, outputs: { y: [n, n] }, nodes: [{ op: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }] },
  });
  const gemv = (k: number, n: number): BenchCase => ({
    name: `GEMV [1,${k}]x[${k},${n}]`,
    inputs: { x: [1, k], w: [k, n] },
    output: [1, n],
    tensorgpu: ({ x, w }) => tg.matmul(x, w),
    tfjs: ({ x, w }) => tf.matMul(x, w),
    onnx: { inputs: { x: [1, k], w: [k, n] }, outputs: { y: [1, n] }, nodes: [{ op: 'MatMul', inputs: ['x', 'w'], outputs: ['y'] }] },
  });
  const softmax = (v: number): BenchCase => ({
    name: `softmax [1,${v}]`,
    inputs: { x: [1, v] },
    output: [1, v],
    tensorgpu: ({ x }) => tg.softmax(x, -1),
    tfjs: ({ x }) => tf.softmax(x, -1),
    onnx: { inputs: { x: [1, v] }, outputs: { y: [1, v] }, nodes: [{ op: 'Softmax', inputs: ['x'], outputs: ['y'], ints: { axis: 1 } }] },
  });
  // (x + y) * z, eight times over: 16 dependent elementwise ops, so per-op host cost and launch gaps show.
  const chain = (n: number, pairs = 8): BenchCase => {
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
  };
  return quick
    ? [matmul(64), matmul(96), gemv(256, 256), softmax(4099), chain(4096)]
    : [matmul(512), matmul(1024), gemv(4096, 4096), softmax(128256), chain(1 << 20)];
}
