// MoE decode on one adapter, for a generated Qwen3-MoE and a generated LFM2-MoE, four ways:
// - fused and captured (the default): router + top-k, every selected expert's gate|up + SwiGLU, down + weighted
//   combine + residual in 3 dispatches per MoE layer, the expert ids never leaving the device, the whole step
//   recorded once and replayed;
// - the same fused kernels run eagerly (the host cost the capture removes);
// - per-expert loop (the baseline, as eager frameworks run MoE): the routing read back every layer, then one
//   gate|up, SwiGLU, down, scale and add per selected expert;
// - fused with the weights quantized to FP8 (128x128 blocks) at load: half the expert bytes.
// Each row times one greedy decode step (forward + GPU sampling + the 4-byte token read). Dispatches and reads per
// token and the active weight bytes per token are machine-independent.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { layerDispatchesText, measureDecode, type DecodeMeasurement } from '../src/generate/measure.js';
import type { Qwen3Config } from '../src/models/qwen3/config.js';
import type { Lfm2Config } from '../src/models/lfm2/config.js';
import type { MoeMode } from '../src/models/causal-lm.js';
import { writeRandomLfm2Checkpoint } from '../src/models/lfm2/random-checkpoint.js';
import { loadModel } from '../src/models/load.js';
import { writeRandomQwen3Checkpoint } from '../src/models/qwen3/random-checkpoint.js';
import type { Qwen35Config } from '../src/models/qwen3_5/config.js';
import { writeRandomQwen35Checkpoint } from '../src/models/qwen3_5/presets.js';
import type { BenchCase, BenchContext, RowInput } from './harness.js';

/** The five rows of one model: `${prefix} bf16 fused captured`, ... */
function rowNames(prefix: string) {
  return {
    fused: `${prefix} bf16 fused captured`,
    eager: `${prefix} bf16 fused eager`,
    loop: `${prefix} bf16 per-expert loop`,
    fp8: `${prefix} fp8 fused captured`,
    int4: `${prefix} int4 fused captured`,
  };
}

/** Qwen3-30B-A3B's routing (128 experts, top 8) at a width a software adapter can run. */
export function benchConfig(quick: boolean): Qwen3Config {
  return {
    modelType: 'qwen3_moe',
    vocabSize: 4096,
    hiddenSize: 256,
    intermediateSize: 768,
    numHiddenLayers: quick ? 2 : 4,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 64,
    rmsNormEps: 1e-6,
    ropeTheta: 1_000_000,
    maxPositionEmbeddings: 4096,
    tieWordEmbeddings: false,
    attentionBias: false,
    eosTokenIds: [1],
    moe: { numExperts: quick ? 32 : 128, numExpertsPerTok: 8, moeIntermediateSize: 128, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
  };
}

/**
 * LFM2-8B-A1B's routing (32 experts, top 4, sigmoid + expert_bias) and layer mix (conv layers with attention every
 * few, the first two dense) at a width a software adapter can run.
 */
function lfm2BenchConfig(quick: boolean): Lfm2Config {
  const layers = quick ? 4 : 6;
  return {
    modelType: 'lfm2_moe',
    vocabSize: 4096,
    hiddenSize: 256,
    intermediateSize: 768,
    numHiddenLayers: layers,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 64,
    layerTypes: Array.from({ length: layers }, (_, i) => (i % 3 === 2 ? 'full_attention' : 'conv')),
    normEps: 1e-5,
    ropeTheta: 1_000_000,
    maxPositionEmbeddings: 4096,
    tieWordEmbeddings: true,
    convBias: false,
    convLCache: 3,
    eosTokenIds: [7],
    moe: { numExperts: 32, numExpertsPerTok: 4, moeIntermediateSize: 128, numDenseLayers: 2, normTopkProb: true, useExpertBias: true, routedScalingFactor: 1 },
  };
}

/**
 * Qwen3.6-35B-A3B's layer mix (3 Gated DeltaNet layers then one gated attention layer), head shapes (DeltaNet
 * dk = dv = 128 with 2 value heads per key head; attention head dim 256, a quarter rotated) and routing (256 experts
 * top 8 + a shared expert; 64 in the quick run) at a width a software adapter can run.
 */
function qwen36BenchConfig(quick: boolean): Qwen35Config {
  const layers = quick ? 4 : 8;
  const pattern = ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'] as const;
  return {
    modelType: 'qwen3_5_moe',
    vocabSize: 4096,
    hiddenSize: 256,
    intermediateSize: 1,
    numHiddenLayers: layers,
    layerTypes: Array.from({ length: layers }, (_, i) => pattern[i % 4]),
    numAttentionHeads: 4,
    numKeyValueHeads: 1,
    headDim: 256,
    rotaryDim: 64,
    ropeTheta: 10_000_000,
    rmsNormEps: 1e-6,
    maxPositionEmbeddings: 4096,
    tieWordEmbeddings: false,
    linear: { numKeyHeads: 1, numValueHeads: 2, keyHeadDim: 128, valueHeadDim: 128, convKernel: 4 },
    eosTokenIds: [1],
    mtpLayers: 0,
    hasVision: false,
    moe: { numExperts: quick ? 64 : 256, numExpertsPerTok: 8, moeIntermediateSize: 128, sharedExpertIntermediateSize: 128 },
  };
}

export function moeDecodeCases(quick: boolean): BenchCase[] {
  const c = benchConfig(quick);
  const shape = `${c.numHiddenLayers}L h${c.hiddenSize} ${c.moe!.numExperts}e top${c.moe!.numExpertsPerTok}`;
  const l = lfm2BenchConfig(quick);
  const lfm2Shape = `${l.numHiddenLayers}L h${l.hiddenSize} ${l.moe!.numExperts}e top${l.moe!.numExpertsPerTok}`;
  const q = qwen36BenchConfig(quick);
  const q36Shape = `${q.numHiddenLayers}L h${q.hiddenSize} ${q.moe!.numExperts}e top${q.moe!.numExpertsPerTok}+1`;
  return [
    { benchmark: 'moe decode', shape, run: (ctx) => measure(ctx, 'moe decode', (dir) => writeRandomQwen3Checkpoint(dir, c, { seed: 5 }), shape) },
    {
      benchmark: 'lfm2-moe decode',
      shape: lfm2Shape,
      run: (ctx) => measure(ctx, 'lfm2-moe decode', (dir) => writeRandomLfm2Checkpoint(dir, l, { seed: 5 }), lfm2Shape),
    },
    {
      benchmark: 'qwen3.6-moe decode',
      shape: q36Shape,
      run: (ctx) => measure(ctx, 'qwen3.6-moe decode', (dir) => writeRandomQwen35Checkpoint(dir, q, { seed: 5 }), q36Shape),
    },
  ];
}

/**
 * The host µs of a step: the least (every replayed step does the same host work; above it is preemption on a busy
 * machine) and the median.
 */
function hostText(r: DecodeMeasurement): string {
  return `${r.hostMicrosPerTokenMin.toFixed(0)} µs (median ${r.hostMicrosPerToken.toFixed(0)})`;
}

async function measure(ctx: BenchContext, prefix: string, write: (dir: string) => Promise<unknown>, shape: string): Promise<RowInput[]> {
  const { fused: FUSED, eager: EAGER, loop: LOOP, fp8: FP8, int4: INT4 } = rowNames(prefix);
  if (!ctx.gpu) return [FUSED, EAGER, LOOP, FP8, INT4].map((benchmark) => ({ benchmark, shape, backend: 'cpu', note: 'WebGPU only' }));
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-moe-'));
  const steps = ctx.quick ? 4 : 8;
  const rows: RowInput[] = [];
  try {
    await write(dir);
    // int4: quantized at load (affine, groups of 128 along K); the decode reads the chosen experts' 4-bit bytes.
    for (const dtype of ['bfloat16', 'fp8', 'int4'] as const) {
      const { model } = await loadModel(dir, { device: 'webgpu', dtype: dtype === 'bfloat16' ? undefined : dtype, maxSequence: 64 });
      try {
        const active = model.activeWeightBytes();
        const runs: [string, MoeMode, boolean][] =
          dtype === 'fp8'
            ? [[FP8, 'fused', true]]
            : dtype === 'int4'
              ? [[INT4, 'fused', true]]
              : [
                  [FUSED, 'fused', true],
                  [EAGER, 'fused', false],
                  [LOOP, 'per-expert', false],
                ];
        for (const [benchmark, mode, capture] of runs) {
          model.moeMode = mode;
          await measureDecode(model, { promptTokens: 2, decodeSteps: 1, capture }); // compiles every pipeline
          const r = await measureDecode(model, { promptTokens: 8, decodeSteps: steps, capture });
          const perToken = r.decodeMs / r.decodeSteps;
          const perLayer = layerDispatchesText(r);
          ctx.log(
            `  ${benchmark}: ${perToken.toFixed(1)} ms/token, ${r.dispatchesPerToken} dispatches (${perLayer}), ${r.readsPerToken} reads, host ${hostText(r)} per token`,
          );
          rows.push({
            benchmark,
            shape,
            backend: 'webgpu',
            timing: { medianMs: perToken, minMs: perToken, runs: r.decodeSteps, dispatchesPerRun: r.dispatchesPerToken },
            bytes: active,
            baselineBenchmark: LOOP,
            note: `${benchmark}: ${perLayer}, host ${hostText(r)}/token, ${r.readsPerToken} reads/token, active weights ${(active / 2 ** 20).toFixed(2)} MiB/token, peak GPU ${(r.peakGpuBytes / 2 ** 20).toFixed(1)} MiB`,
          });
        }
      } finally {
        model.dispose();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
