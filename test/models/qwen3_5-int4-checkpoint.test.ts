// A tiny Qwen3.6-MoE (qwen3_5_moe) 4-bit checkpoint written on disk in the layout GPTQ tools publish for this family:
// every decoder linear quantized module by module, the routed experts one by one (`mlp.experts.<e>.*_proj.qweight`,
// ...), while the router `mlp.gate`, `mlp.shared_expert_gate` and the DeltaNet's `linear_attn.in_proj_a` /
// `in_proj_b` (one row per value head) stay bf16 like the embeddings, norms, lm_head, conv1d, A_log and dt_bias. Those
// exclusions are named the three ways checkpoints name them (GPTQModel's `dynamic` negative rules,
// `modules_to_not_convert`, compressed-tensors `ignore`). loadModel reads it without conversion: its logits equal those
// of the same weights dequantized into a float32 checkpoint on the CPU (1e-5 relative), and WebGPU matches the CPU
// (1e-4), at prefill and at decode steps.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CheckpointError, setDefaultDevice } from '../../src/index.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import { writeSafetensors, type TensorSource } from '../../src/formats/safetensors-writer.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import type { Qwen35Config } from '../../src/models/qwen3_5/config.js';
import { Qwen35Model } from '../../src/models/qwen3_5/model.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { int4LayerTensors, int4QuantizationConfig, type Int4FixtureCase, divideScalesBy16 } from '../../tools/int4-reference/cases.js';
import { randomCodes } from '../../tools/int4-reference/int4_reference.js';
import { QWEN3_5_REFERENCE_CASES } from '../../tools/qwen3_5-reference/presets.js';
import { expectInt4MatchesFloat } from '../helpers/int4-pair.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

// The reference case's Qwen3.6-MoE at widths 4-bit groups of 32 divide (every K is 64 or 32): one DeltaNet layer,
// one gated attention layer, 4 experts top 2 and a shared expert of the experts' width.
const MOE: Qwen35Config = {
  ...QWEN3_5_REFERENCE_CASES['qwen3.6-moe-ref'].config,
  hiddenSize: 64,
  numHiddenLayers: 2,
  layerTypes: ['linear_attention', 'full_attention'],
  linear: { numKeyHeads: 2, numValueHeads: 4, keyHeadDim: 16, valueHeadDim: 16, convKernel: 4 },
  moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 32, sharedExpertIntermediateSize: 32 },
};

/** The linears of the decoder layers that these checkpoints keep in bf16 (routers; the DeltaNet's a and b). */
const KEPT = /\.(mlp\.gate|shared_expert_gate|linear_attn\.in_proj_a|linear_attn\.in_proj_b)\.weight$/;
const LINEAR = /^model\.language_model\.layers\.\d+\..*_proj\.weight$/;

type Format = Omit<Int4FixtureCase, 'name' | 'seed' | 'n' | 'k'>;

interface PairOptions {
  /** The config's statement of what stays unquantized (besides what it leaves out). */
  exclusions: 'dynamic' | 'modules_to_not_convert' | 'ignore';
  /** Act-order: experts of one layer share one column order ('shared') or each has its own ('own'). */
  expertOrder?: 'shared' | 'own';
  /** Per-module group sizes: GPTQModel `dynamic` positive overrides. */
  groupOf?: (name: string) => number;
  /** Extra quantization_config fields (override the written ones). */
  extra?: Record<string, unknown>;
  /** Quantize only the decoder linears these match (the rest stay bf16). */
  only?: RegExp;
  /** Quantize these kept modules anyway (a checkpoint that contradicts its own exclusions). */
  alsoQuantize?: RegExp;
}

const bf16 = (f: Float32Array): Uint8Array => {
  const u = new Uint32Array(f.buffer, f.byteOffset, f.length);
  return new Uint8Array(Uint16Array.from(u, (b) => b >>> 16).buffer);
};

/**
 * Writes the random float32 checkpoint (experts one by one) with its decoder linears as random 4-bit codes in
 * `format`, the kept linears in bf16, and beside it the float32 checkpoint of the same weights dequantized by the port
 * (kept ones the same bf16). Returns [int4 dir, float dir].
 */
async function writeInt4Pair(config: Qwen35Config, format: Format, o: PairOptions): Promise<[string, string]> {
  const src = mkdtempSync(join(tmpdir(), 'tensorgpu-q35-int4-src-'));
  await writeRandomQwen35Checkpoint(src, config, { dtype: 'float32', seed: 6, expertsOneByOne: true });
  const ck = await Checkpoint.open(src);
  const q: [string, TensorSource][] = [];
  const f: [string, TensorSource][] = [];
  let seed = 1;
  for (const name of ck.names) {
    const e = ck.entry(name);
    const values = (await (await ck.load(name)).toArray()) as Float32Array;
    const quantize = (LINEAR.test(name) && !KEPT.test(name) && (o.only?.test(name) ?? true)) || !!o.alsoQuantize?.test(name);
    if (!quantize) {
      const kept = KEPT.test(name) || LINEAR.test(name);
      const raw = kept ? bf16(values) : new Uint8Array(values.buffer.slice(0));
      const plain: TensorSource = { dtype: kept ? 'bfloat16' : 'float32', shape: e.shape, bytes: () => raw };
      q.push([name, plain]);
      f.push([name, plain]);
      continue;
    }
    const [n, k] = e.shape;
    const groupSize = o.groupOf?.(name) ?? format.groupSize;
    const codes = randomCodes(n, k, groupSize, { seed: seed++, symmetric: format.symmetric, actOrder: format.actOrder });
    if (format.actOrder) {
      // GPTQ orders a module's columns by its input's Hessian: modules of one input share the order (q, k, v; the
      // DeltaNet's qkv and z; gate and up), and with expertOrder 'shared' every expert of a layer too.
      const named = o.expertOrder === 'shared' ? name.replace(/\.experts\.\d+\./, '.experts.') : name;
      const input = named
        .replace(/\.(q|k|v)_proj\./, '.qkv.')
        .replace(/\.in_proj_(qkv|z)\./, '.in_proj.')
        .replace(/\.(gate|up)_proj\./, '.gate_up.');
      const key = [...input].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
      codes.gIdx = randomCodes(1, k, groupSize, { seed: key, symmetric: true, actOrder: true }).gIdx;
    }
    const layer = int4LayerTensors({ ...format, groupSize, n, k }, codes, name.slice(0, -'.weight'.length));
    q.push(...layer.tensors);
    const w = Float32Array.from(layer.weight, (v) => v / 16); // scales ~ 2^-6..2^-3: keep activations moderate
    f.push([name, { dtype: 'float32', shape: [n, k], bytes: () => new Uint8Array(w.buffer) }]);
  }
  await ck.close();
  // The float copy's weights are the port's divided by 16: the 4-bit copy's scales are divided by 16 too (exact).
  await divideScalesBy16(q);
  const quant = { ...int4QuantizationConfig(format), ...exclusionsOf(o), ...o.extra };
  const config0 = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8')) as Record<string, unknown>;
  const qdir = mkdtempSync(join(tmpdir(), 'tensorgpu-q35-int4-q-'));
  const fdir = mkdtempSync(join(tmpdir(), 'tensorgpu-q35-int4-f-'));
  await writeSafetensors(join(qdir, 'model.safetensors'), q);
  await writeSafetensors(join(fdir, 'model.safetensors'), f);
  writeFileSync(join(qdir, 'config.json'), JSON.stringify({ ...config0, quantization_config: quant }));
  writeFileSync(join(fdir, 'config.json'), JSON.stringify(config0));
  return [qdir, fdir];
}

/** How each tool names the modules it left in bf16. */
function exclusionsOf(o: PairOptions): Record<string, unknown> {
  if (o.exclusions === 'dynamic') {
    // GPTQModel: '-:' rules skip a module (re.match on its full name); other rules override the base scheme.
    const dynamic: Record<string, Record<string, unknown>> = {
      '-:.*\\.mlp\\.gate$': {},
      '-:.*\\.mlp\\.shared_expert_gate$': {},
      '-:.*\\.linear_attn\\.in_proj_[ab]$': {},
    };
    if (o.groupOf) dynamic['+:.*\\.down_proj$'] = { group_size: 32 };
    return { dynamic };
  }
  if (o.exclusions === 'modules_to_not_convert')
    return { modules_to_not_convert: ['lm_head', 'mlp.gate', 'mlp.shared_expert_gate', 'linear_attn.in_proj_a', 'linear_attn.in_proj_b'] };
  return { ignore: ['lm_head', 're:.*mlp\\.gate$', 're:.*mlp\\.shared_expert_gate$', 're:.*linear_attn\\.in_proj_[ab]$'] };
}

/** A prefill, then two decode steps. */
const STEPS = [[3, 17, 200, 9, 41, 7], [88], [5]];

describe(`Qwen3.6-MoE int4 checkpoints end to end ${gpu.skipReason}`, () => {
  for (const [label, format, options] of [
    ['GPTQ v1 g32 sym, exclusions as GPTQModel dynamic rules', { method: 'gptq', groupSize: 32, symmetric: true, v1: true }, { exclusions: 'dynamic' }],
    [
      'GPTQ v2 g64 asym with a dynamic group_size 32 override for down_proj',
      { method: 'gptq', groupSize: 64, symmetric: false },
      { exclusions: 'dynamic', groupOf: (name: string) => (name.includes('down_proj') ? 32 : 64) },
    ],
    [
      'GPTQ v1 g32 asym desc_act (one g_idx per layer for all experts), modules_to_not_convert',
      { method: 'gptq', groupSize: 32, symmetric: false, v1: true, actOrder: true },
      { exclusions: 'modules_to_not_convert', expertOrder: 'shared' },
    ],
    [
      'GPTQ v2 g32 sym, routed experts only (attention, DeltaNet and shared expert bf16, skipped by dynamic rules)',
      { method: 'gptq', groupSize: 32, symmetric: true },
      {
        exclusions: 'dynamic',
        only: /\.mlp\.experts\./,
        extra: { dynamic: { '-:.*\\.(self_attn|linear_attn|mlp\\.shared_expert|mlp\\.shared_expert_gate|mlp\\.gate)(\\.|$)': {} } },
      },
    ],
    [
      'compressed-tensors pack-quantized g32 asym, ignore list',
      { method: 'compressed-tensors', groupSize: 32, symmetric: false, scaleDtype: 'bfloat16' },
      { exclusions: 'ignore' },
    ],
  ] as const satisfies readonly (readonly [string, Format, PairOptions])[]) {
    it(`${label}: CPU = dequantized float32 (1e-5), WebGPU = CPU (1e-4)`, async () => {
      const [qdir, fdir] = await writeInt4Pair(MOE, format, options);
      const load = async (dir: string, device: 'cpu' | 'webgpu') => {
        const m = await loadModel(dir, { device, maxSequence: 32 });
        expect(m.model).toBeInstanceOf(Qwen35Model);
        return m;
      };
      await expectInt4MatchesFloat(load, qdir, fdir, STEPS, gpu.available);
    });
  }

  const GPTQ: Format = { method: 'gptq', groupSize: 32, symmetric: true, v1: true };
  for (const [label, format, options, message] of [
    [
      'desc_act with a g_idx per expert: an error naming g_idx (the fused expert kernels read one permutation)',
      { ...GPTQ, symmetric: false, actOrder: true },
      { exclusions: 'dynamic', expertOrder: 'own' },
      /g_idx/,
    ],
    [
      'a dynamic override to 8 bits: an error naming the tensor and bits',
      GPTQ,
      { exclusions: 'dynamic', extra: { dynamic: { '+:.*\\.self_attn\\.o_proj$': { bits: 8 } } } },
      /layers\.1\.self_attn\.o_proj.*bits|bits.*layers\.1\.self_attn\.o_proj/,
    ],
    [
      'a module stored in 4 bits that modules_to_not_convert excludes: an error naming it',
      GPTQ,
      { exclusions: 'modules_to_not_convert', alsoQuantize: /\.mlp\.gate\.weight$/ },
      /mlp\.gate.*modules_to_not_convert/,
    ],
  ] as const satisfies readonly (readonly [string, Format, PairOptions, RegExp])[]) {
    it(label, async () => {
      const [qdir] = await writeInt4Pair(MOE, format, options);
      const err = await loadModel(qdir, { device: 'cpu', maxSequence: 32 }).catch((e: unknown) => e);
      if (!(err instanceof CheckpointError)) {
        (err as Partial<LoadedModel>).model?.dispose(); // a loaded model: too large an object for the failure's diff
        expect.fail(`expected a CheckpointError, got ${err instanceof Error ? err.message : 'a loaded model'}`);
      }
      expect(String(err)).toMatch(message);
    });
  }
});
