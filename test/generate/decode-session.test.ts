// Captured decode steps: a DecodeSession that records its first decode step and replays it gives the same logits,
// bit for bit, and the same tokens as the eager session over the same kernels (greedy and seeded sampling), the
// same greedy tokens as the CPU backend, no GPU memory growth across replays, and typed errors for work a
// captured step cannot hold. Also the op-level capture / replay / writeTensor API.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { Generator, setDefaultDevice } from '../../src/index.js';
import { DecodeSession, type SessionSampling } from '../../src/generate/decode-session.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { loadQwen3, type LoadedModel } from '../../src/models/qwen3/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const CONFIG: Qwen3Config = {
  modelType: 'qwen3_moe',
  vocabSize: 384,
  hiddenSize: 64,
  intermediateSize: 96,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 16,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 512,
  tieWordEmbeddings: false,
  attentionBias: false,
  eosTokenIds: [1],
  moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
};

const PROMPT = [5, 17, 99, 3, 250];
const STEPS = 10;
let dir = '';
const models: Partial<Record<'cpu' | 'webgpu', LoadedModel>> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tensorgpu-session-'));
  await writeRandomQwen3Checkpoint(dir, CONFIG, { seed: 21 });
});
afterAll(() => {
  for (const m of Object.values(models)) {
    m!.model.dispose();
  }
  rmSync(dir, { recursive: true, force: true });
});

async function model(device: 'cpu' | 'webgpu', maxSequence = 700): Promise<LoadedModel> {
  models[device] ??= await loadQwen3(dir, { device, maxSequence });
  return models[device]!;
}

/** Prefill + STEPS decode steps; the ids, each step's logits, and the session's stats. */
async function decode(device: 'cpu' | 'webgpu', sampling: SessionSampling, capture: boolean, seed = 3) {
  const { model: m } = await model(device);
  const session = new DecodeSession(m, { sampling, capture, keepLogits: true });
  const g = new Generator(seed);
  const ids = [await session.prefill(PROMPT, g.uniform())];
  const logits: Float32Array[] = [];
  try {
    for (let i = 0; i < STEPS; i++) {
      ids.push(await session.next(g.uniform()));
      logits.push((await session.logits!.toArray()) as Float32Array);
    }
    return { ids, logits, stats: { ...session.stats } };
  } finally {
    session.dispose();
  }
}

describe.skipIf(!gpu.available)(`captured decode steps ${gpu.skipReason}`, () => {
  it.each([
    ['greedy', { temperature: 0 }],
    ['seeded sampling', { temperature: 0.9, topK: 40, topP: 0.95 }],
  ] as const)("replay gives the eager session's logits bit for bit and its tokens (%s)", async (_, sampling) => {
    const eager = await decode('webgpu', sampling, false);
    const replayed = await decode('webgpu', sampling, true);
    expect(eager.stats.mode).toBe('eager');
    expect(replayed.stats).toMatchObject({ mode: 'replay', recordedSteps: 1, replayedSteps: STEPS - 1, eagerSteps: 0 });
    expect(replayed.ids).toEqual(eager.ids);
    for (let i = 0; i < STEPS; i++) expect(new Uint32Array(replayed.logits[i].buffer)).toEqual(new Uint32Array(eager.logits[i].buffer));
  });

  it("replayed greedy tokens equal the CPU backend's", async () => {
    const cpu = await decode('cpu', { temperature: 0 }, true);
    const gpuRun = await decode('webgpu', { temperature: 0 }, true);
    expect(cpu.stats.mode).toBe('eager');
    expect(gpuRun.ids).toEqual(cpu.ids);
  });

  it('a replay queues the recorded dispatches and nothing else; GPU memory does not grow across steps', async () => {
    const { model: m } = await model('webgpu');
    const before = tg.memoryStats().liveBytes;
    const session = new DecodeSession(m, { sampling: { temperature: 0 } });
    await session.prefill(PROMPT, 0);
    await session.next(0); // recorded
    const live: number[] = [];
    const counts: number[] = [];
    for (let i = 0; i < 4; i++) {
      const c0 = tg.gpuCounters();
      await session.next(0);
      const c1 = tg.gpuCounters();
      counts.push(c1.dispatches - c0.dispatches);
      expect(c1.replays - c0.replays).toBe(1);
      expect(c1.reads - c0.reads).toBe(1);
      live.push(tg.memoryStats().liveBytes);
    }
    expect(counts.every((n) => n === session.stats.capturedDispatches)).toBe(true);
    expect(new Set(live).size).toBe(1);
    session.dispose();
    await tg.synchronize();
    expect(tg.memoryStats().liveBytes).toBe(before);
  });

  it('penalties run eagerly and say why', async () => {
    const { model: m } = await model('webgpu');
    const session = new DecodeSession(m, { sampling: { temperature: 0, repetitionPenalty: 1.3 } });
    try {
      const history = [...PROMPT, await session.prefill(PROMPT, 0, PROMPT)];
      history.push(await session.next(0, history));
      expect(session.stats).toMatchObject({ mode: 'eager', eagerSteps: 1, reason: /penalties/ });
    } finally {
      session.dispose();
    }
  });
});

describe.skipIf(!gpu.available)(`capture / replay / writeTensor ${gpu.skipReason}`, () => {
  it('replays a recorded computation on new inputs written into the same tensors', async () => {
    const x = tg.tensor([1, 2, 3, 4], { device: 'webgpu' });
    const y = tg.zeros([4], { device: 'webgpu' });
    const { graph } = tg.capture('affine', () => tg.tidy(() => tg.copyInto(y, x.mul(2).add(1).sqrt())));
    expect(graph!.dispatches).toBe(4);
    expect(Array.from((await y.toArray()) as Float32Array)).toEqual([3, 5, 7, 9].map((v) => Math.fround(Math.sqrt(v))));
    tg.writeTensor(x, [0, 4, 12, 40]);
    graph!.replay();
    expect(Array.from((await y.toArray()) as Float32Array)).toEqual([1, 3, 5, 9]);
    graph!.dispose();
    expect(() => graph!.replay()).toThrow(tg.CaptureError);
    x.dispose();
    y.dispose();
  });

  it('refuses reads and host writes while recording, and frees what the failed step made', async () => {
    const live = tg.memoryStats().liveBytes;
    const x = tg.tensor([1, 2], { device: 'webgpu' });
    expect(() => tg.capture('upload', () => tg.tidy(() => x.add(tg.tensor([1, 1], { device: 'webgpu' }))))).toThrow(
      /a host upload while recording step 'upload'/,
    );
    expect(() => tg.capture('write', () => tg.writeTensor(x, [3, 4]))).toThrow(tg.CaptureError);
    // Not recording any more: ordinary work runs.
    const y = x.add(1);
    expect(Array.from((await y.toArray()) as Float32Array)).toEqual([2, 3]);
    x.dispose();
    y.dispose();
    await tg.synchronize();
    expect(tg.memoryStats().liveBytes).toBe(live);
  });
});
