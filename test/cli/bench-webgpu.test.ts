// `tensorgpu bench` on WebGPU: captured vs eager decode of the same weights (dispatches per token and per layer,
// host µs per token, the raw-Dawn floor beside replay) and --profile's GPU time per kernel family.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBench } from '../../src/cli/bench.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
let dir = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-gpu-'));
  await writeRandomQwen3Checkpoint(
    dir,
    {
      modelType: 'qwen3_moe',
      vocabSize: 256,
      hiddenSize: 64,
      intermediateSize: 96,
      numHiddenLayers: 2,
      numAttentionHeads: 4,
      numKeyValueHeads: 2,
      headDim: 16,
      rmsNormEps: 1e-6,
      ropeTheta: 1e6,
      maxPositionEmbeddings: 256,
      tieWordEmbeddings: false,
      attentionBias: false,
      eosTokenIds: [1],
      moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
    },
    { seed: 4 },
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!gpu.available)(`tensorgpu bench on WebGPU ${gpu.skipReason}`, () => {
  it('compares captured and eager decode, with at most 9 dispatches per MoE layer, and profiles kernels', async () => {
    const lines: string[] = [];
    const code = await runBench(
      { model: dir, device: 'webgpu', promptTokens: 3, decodeTokens: 3, moe: 'both', profile: true },
      (l) => lines.push(l),
      () => {},
    );
    expect(code).toBe(0);
    const row = (name: string) => lines.find((l) => l.startsWith(name + ' '))!;
    for (const name of ['captured', 'eager', 'per-expert']) expect(row(name)).toMatch(/dispatches\/token \([\d.]+\/layer\), 1 reads\/token|per-expert/);
    const perLayer = Number(/\(([\d.]+)\/layer\)/.exec(row('captured'))![1]);
    expect(perLayer).toBeLessThanOrEqual(9);
    expect(row('captured')).toMatch(/1 reads\/token, host \d+ µs\/token/);
    expect(lines.some((l) => /^host per token: captured \d+ µs vs eager \d+ µs/.test(l))).toBe(true);
    expect(lines.some((l) => /^host per dispatch \(.*\): replay [\d.]+ µs, eager [\d.]+ µs; raw Dawn floor [\d.]+ µs/.test(l))).toBe(true);
    const table = lines.findIndex((l) => l.startsWith('GPU time per kernel family'));
    expect(table).toBeGreaterThan(0);
    const rows = new Map(
      lines
        .slice(table + 3)
        .filter((l) => /^\S+\s+[\d.]+\s+[\d.]+\s+[\d.]+%/.test(l))
        .map((l) => [l.split(/\s+/)[0], l.trim().split(/\s+/)] as const),
    );
    for (const k of ['gemv', 'expert-linear', 'attention-inputs', 'attention', 'moe-route', 'total']) expect([...rows.keys()]).toContain(k);
    // The weight-reading kernels count their bytes: MB per token and GB/s are numbers; attention's are not counted.
    for (const k of ['gemv', 'expert-linear', 'rms-norm', 'attention-inputs'])
      expect(
        rows
          .get(k)!
          .slice(4, 6)
          .every((c) => Number(c) > 0),
        k,
      ).toBe(true);
    expect(rows.get('attention')!.slice(4, 6)).toEqual(['-', '-']);
  }, 300_000);
});
