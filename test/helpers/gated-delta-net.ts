// Inputs and runners shared by the gatedDeltaNet tests (recurrent and chunked): one stacked projection [S, qkv | z |
// b | a] with its four column views, the layer's weights, initial states (zeros, or random: a state must continue
// from anything), and a runner that feeds a sequence through one state in calls of given sizes.
import * as tg from '../../src/index.js';
import type { Tensor } from '../../src/index.js';
import { randomTensor, randomValues } from './compare.js';

export interface Geometry {
  keyHeads: number;
  valueHeads: number;
  keyDim: number;
  valueDim: number;
  convKernel: number;
}

export const EPS = 1e-6;

export interface Inputs {
  proj: Tensor; // [S, qkv | z | b | a], as one stacked in_proj
  conv: Tensor;
  aLog: Tensor;
  dtBias: Tensor;
  norm: Tensor;
  /** Initial states, flat (zeros unless randomStates). */
  convState: Float32Array;
  recurrent: Float32Array;
}

export const convDim = (g: Geometry) => 2 * g.keyHeads * g.keyDim + g.valueHeads * g.valueDim;
const convStateSize = (g: Geometry) => g.valueHeads * (g.convKernel - 1) * (2 * g.keyDim + g.valueDim);

/** Fresh random inputs; `decay` < 1 scales A down (more of the state kept across a chunk). */
export function makeInputs(g: Geometry, s: number, options: { decay?: number; randomStates?: boolean } = {}): Inputs {
  const c = convDim(g);
  const decay = options.decay ?? 1;
  return {
    proj: randomTensor([s, c + g.valueHeads * g.valueDim + 2 * g.valueHeads]),
    conv: randomTensor([c, 1, g.convKernel], 'bfloat16', 'normal', 0.5),
    // A = 1..16 as in the released model's init.
    aLog: tg.tensor(Array.from({ length: g.valueHeads }, (_, i) => Math.log(decay * (1 + ((i * 7) % 16))))),
    dtBias: randomTensor([g.valueHeads], 'float32', 'normal', 0.5),
    norm: randomTensor([g.valueDim], 'float32', 'normal', 0.1).add(1),
    convState: options.randomStates ? Float32Array.from(randomValues(convStateSize(g), 'float32')) : new Float32Array(convStateSize(g)),
    recurrent: options.randomStates
      ? Float32Array.from(randomValues(g.valueHeads * g.keyDim * g.valueDim, 'float32', 'normal', undefined, 0.3))
      : new Float32Array(g.valueHeads * g.keyDim * g.valueDim),
  };
}

/** The projection's four column views. */
export function split(proj: Tensor, g: Geometry) {
  const c = convDim(g);
  const vd = g.valueHeads * g.valueDim;
  return {
    qkv: tg.narrow(proj, 1, 0, c),
    z: tg.narrow(proj, 1, c, vd),
    b: tg.narrow(proj, 1, c + vd, g.valueHeads),
    a: tg.narrow(proj, 1, c + vd + g.valueHeads, g.valueHeads),
  };
}

/** A_log, dt_bias and the norm weight as views of one buffer, as the model keeps them (the kernel binds it once). */
export function packedHead(head: Tensor, g: { valueHeads: number; valueDim: number }) {
  return {
    aLog: tg.narrow(head, 0, 0, g.valueHeads),
    dtBias: tg.narrow(head, 0, g.valueHeads, g.valueHeads),
    norm: tg.narrow(head, 0, 2 * g.valueHeads, g.valueDim),
  };
}

export interface Result {
  out: Float32Array;
  state: Float32Array;
  conv: Float32Array;
}

/** The sequence through one state in calls of the given sizes: the outputs in order and the final states. */
export async function run(x: Inputs, g: Geometry, sizes: number[], device: 'cpu' | 'webgpu'): Promise<Result> {
  const moved = {
    proj: await x.proj.to(device),
    conv: await x.conv.to(device),
    aLog: await x.aLog.to(device),
    dtBias: await x.dtBias.to(device),
    norm: await x.norm.to(device),
  };
  const state = {
    conv: tg.tensor(x.convState, { shape: [g.valueHeads, g.convKernel - 1, 2 * g.keyDim + g.valueDim], device }),
    recurrent: tg.tensor(x.recurrent, { shape: [g.valueHeads, g.keyDim, g.valueDim], device }),
  };
  const parts: Float32Array[] = [];
  let at = 0;
  for (const n of sizes) {
    const y = tg.gatedDeltaNet(split(tg.narrow(moved.proj, 0, at, n), g), moved, state, { ...g, eps: EPS });
    parts.push((await y.toArray()) as Float32Array);
    y.dispose();
    at += n;
  }
  const out = new Float32Array(parts.reduce((m, p) => m + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  const result = { out, state: (await state.recurrent.toArray()) as Float32Array, conv: (await state.conv.toArray()) as Float32Array };
  for (const t of [...Object.values(moved), state.conv, state.recurrent]) t.dispose();
  return result;
}
