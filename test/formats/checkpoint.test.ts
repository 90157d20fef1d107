// Hugging Face checkpoint directories: random Qwen3 / Qwen3-MoE checkpoints (small configs whose sizes are not
// multiples of 128, so FP8 block scales have edge blocks) written sharded and unsharded must hold the same bytes per
// tensor, named exactly as qwen3WeightSpecs says, with sane values and a config.json that parses back to the config;
// FP8 weights come with their block, per-channel or per-tensor scales and dequantize to the bf16 checkpoint's values;
// load-time FP8 quantization equals quantize() on the CPU and on WebGPU. Then hostile indexes and directories, each
// a CheckpointError naming the file and tensor, and the config validation field by field.
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointError, memoryStats, quantize, setDefaultDevice, type DeviceName } from '../../src/index.js';
import { f32ToFp8Bits } from '../../src/core/codecs.js';
import { toBytes } from '../../src/ops/convert.js';
import { castWeight, Checkpoint, type Weight } from '../../src/formats/checkpoint.js';
import { writeCheckpoint } from '../../src/formats/checkpoint-writer.js';
import { isMoeLayer, parseQwen3Config, toHfConfig, type Qwen3Config } from '../../src/models/qwen3/config.js';
import { writeSafetensors, type TensorSource } from '../../src/formats/safetensors-writer.js';
import { qwen3WeightSpecs } from '../../src/models/qwen3/layout.js';
import { QWEN3_PRESETS, randomCheckpointConfig, writeRandomQwen3Checkpoint, type RandomWeightDType } from '../../src/models/qwen3/random-checkpoint.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const TOKENS = { vocabSize: 300, bosTokenId: 297, eosTokenIds: [299, 298] };
const COMMON = { rmsNormEps: 1e-6, ropeTheta: 1_000_000, maxPositionEmbeddings: 512, torchDtype: 'bfloat16' as const, ...TOKENS };

/** hidden 160 and q width 192 (4 heads of 48): every linear has a partial 128-block in at least one dimension. */
const DENSE: Qwen3Config = {
  ...COMMON,
  modelType: 'qwen3',
  hiddenSize: 160,
  intermediateSize: 200,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 48,
  tieWordEmbeddings: false,
  attentionBias: false,
};

/** Layer 1 keeps a dense MLP (mlp_only_layers), the others have 4 experts of width 72; biases on, embeddings tied. */
const MOE: Qwen3Config = {
  ...COMMON,
  modelType: 'qwen3_moe',
  hiddenSize: 160,
  intermediateSize: 136,
  numHiddenLayers: 3,
  numAttentionHeads: 4,
  numKeyValueHeads: 1,
  headDim: 40,
  tieWordEmbeddings: true,
  attentionBias: true,
  moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 72, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [1] },
};

let root = '';
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tensorgpu-checkpoint-'));
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

let dirCounter = 0;
function freshDir(label: string): string {
  return join(root, `${label}-${dirCounter++}`);
}

/** Generated checkpoints, written once per (config, dtype, seed, shardBytes) and shared by the tests. */
const generated = new Map<string, Promise<string>>();
function randomCheckpoint(config: Qwen3Config, dtype: RandomWeightDType, seed: number, shardBytes?: number): Promise<string> {
  const key = `${config.modelType}/${dtype}/${seed}/${shardBytes}`;
  let dir = generated.get(key);
  if (!dir) {
    const d = freshDir(`${config.modelType}-${dtype}-${seed}`);
    dir = writeRandomQwen3Checkpoint(d, config, { dtype, seed, shardBytes }).then(() => d);
    generated.set(key, dir);
  }
  return dir;
}

async function withCheckpoint<T>(path: string, fn: (ck: Checkpoint) => Promise<T>): Promise<T> {
  const ck = await Checkpoint.open(path);
  try {
    return await fn(ck);
  } finally {
    await ck.close();
  }
}

async function bytesOf(ck: Checkpoint, name: string): Promise<Uint8Array> {
  const t = await ck.load(name, { device: 'cpu' });
  try {
    return await toBytes(t);
  } finally {
    t.dispose();
  }
}

async function valuesOf(ck: Checkpoint, name: string): Promise<Float32Array> {
  const t = await ck.load(name, { device: 'cpu', dtype: 'float32' });
  try {
    return (await t.toArray()) as Float32Array;
  } finally {
    t.dispose();
  }
}

function disposeWeight(w: Weight): void {
  w.data.dispose();
  w.scale?.dispose();
}

/** Names a generated checkpoint of this dtype holds: the specs, plus a block scale per linear when FP8. */
function expectedNames(config: Qwen3Config, dtype: RandomWeightDType): string[] {
  const names: string[] = [];
  for (const s of qwen3WeightSpecs(config)) {
    names.push(s.name);
    if (dtype === 'fp8' && s.role === 'linear') names.push(`${s.name}_scale_inv`);
  }
  return names;
}

const sorted = (xs: readonly string[]) => [...xs].sort();

/** Byte equality without vitest's element-by-element diffing (slow on 100 KB arrays). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** Sources for hand-written checkpoints: float32 values, and FP8 e4m3fn codes of values (saturating). */
function f32Source(values: ArrayLike<number>, shape: readonly number[]): TensorSource {
  const a = Float32Array.from(values);
  return { dtype: 'float32', shape, bytes: () => new Uint8Array(a.buffer) };
}

function fp8Source(values: ArrayLike<number>, shape: readonly number[]): TensorSource {
  const codes = Uint8Array.from(Array.from(values, (v) => f32ToFp8Bits(v, 'e4m3fn', true)));
  return { dtype: 'float8_e4m3fn', shape, bytes: () => codes };
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.fail('expected a rejection'),
    (e: unknown) => e,
  );
}

/** Awaits p, which must fail with a CheckpointError at exactly this file and tensor (undefined: none named). */
async function expectCheckpointError(p: Promise<unknown>, where: { file: string; tensor?: string; message?: RegExp }): Promise<CheckpointError> {
  const e = await rejection(p);
  expect(e, String(e)).toBeInstanceOf(CheckpointError);
  const ce = e as CheckpointError;
  expect(ce.file, ce.message).toBe(where.file);
  expect(ce.tensor, ce.message).toBe(where.tensor);
  if (where.message) expect(ce.message).toMatch(where.message);
  return ce;
}

// ---- generated checkpoints -----------------------------------------------------------------------------------------

describe('writeRandomQwen3Checkpoint', () => {
  for (const [label, config] of [
    ['dense', DENSE],
    ['moe', MOE],
  ] as const) {
    for (const dtype of ['bfloat16', 'fp8'] as const) {
      it(`${label} ${dtype}: sharded and unsharded hold the same names and bytes; names are the layout's`, async () => {
        const single = await randomCheckpoint(config, dtype, 7);
        const shardBytes = 40_000;
        const sharded = await randomCheckpoint(config, dtype, 7, shardBytes);
        expect(await readdir(single)).toEqual(expect.arrayContaining(['config.json', 'model.safetensors']));
        expect((await readdir(single)).some((f) => f.endsWith('.index.json'))).toBe(false);

        const files = (await readdir(sharded)).filter((f) => f.endsWith('.safetensors')).sort();
        expect(files.length).toBeGreaterThan(2);
        expect(files).toEqual(files.map((_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(files.length).padStart(5, '0')}.safetensors`));
        const index = JSON.parse(await readFile(join(sharded, 'model.safetensors.index.json'), 'utf8')) as {
          metadata: { total_size: number };
          weight_map: Record<string, string>;
        };

        await withCheckpoint(single, (a) =>
          withCheckpoint(sharded, async (b) => {
            const want = expectedNames(config, dtype);
            expect(new Set(want).size).toBe(want.length);
            expect(sorted(a.names)).toEqual(sorted(want));
            expect(sorted(b.names)).toEqual(sorted(want));
            expect(sorted(Object.keys(index.weight_map))).toEqual(sorted(want));
            expect(index.metadata.total_size).toBe(a.totalBytes);
            expect(b.totalBytes).toBe(a.totalBytes);
            // A shard goes past the limit only when it holds a single tensor.
            const perShard = new Map<string, { bytes: number; count: number }>();
            for (const name of want) {
              const ea = a.entry(name);
              const eb = b.entry(name);
              expect(basename(ea.file)).toBe('model.safetensors');
              expect(basename(eb.file)).toBe(index.weight_map[name]);
              expect([eb.format, eb.shape]).toEqual([ea.format, ea.shape]);
              const s = perShard.get(eb.file) ?? { bytes: 0, count: 0 };
              perShard.set(eb.file, { bytes: s.bytes + eb.end - eb.begin, count: s.count + 1 });
              expect(sameBytes(await bytesOf(b, name), await bytesOf(a, name)), name).toBe(true);
            }
            for (const [file, s] of perShard) if (s.count > 1) expect(s.bytes, file).toBeLessThanOrEqual(shardBytes);
          }),
        );
      });
    }

    it(`${label}: config.json parses back to the config (bf16, fp8, float32)`, async () => {
      for (const dtype of ['bfloat16', 'fp8', 'float32'] as const) {
        const dir = await randomCheckpoint(config, dtype, 7);
        const json = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
        const parsed = parseQwen3Config(json, join(dir, 'config.json'));
        expect(parsed).toEqual(randomCheckpointConfig(config, dtype));
        expect(parsed.torchDtype).toBe(dtype === 'fp8' ? 'bfloat16' : dtype);
        await withCheckpoint(dir, async (ck) => expect(ck.config).toEqual(json));
        if (dtype === 'fp8') {
          expect(json.quantization_config).toEqual({ quant_method: 'fp8', fmt: 'e4m3', activation_scheme: 'dynamic', weight_block_size: [128, 128] });
          expect(parsed.quantization).toEqual({
            method: 'fp8',
            format: 'float8_e4m3fn',
            weightBlockSize: [128, 128],
            activationScheme: 'dynamic',
            modulesToNotConvert: [],
          });
        } else {
          expect(json.quantization_config).toBeUndefined();
        }
        expect(json.architectures).toEqual([config.moe ? 'Qwen3MoeForCausalLM' : 'Qwen3ForCausalLM']);
      }
    });

    it(`${label}: values depend on the seed; every tensor differs between seeds`, async () => {
      const a = await randomCheckpoint(config, 'bfloat16', 7);
      const b = await randomCheckpoint(config, 'bfloat16', 8);
      await withCheckpoint(a, (ca) =>
        withCheckpoint(b, async (cb) => {
          for (const name of ca.names) {
            const [x, y] = [await bytesOf(ca, name), await bytesOf(cb, name)];
            expect(x.length).toBe(y.length);
            let same = 0;
            for (let i = 0; i < x.length; i += 2) if (x[i] === y[i] && x[i + 1] === y[i + 1]) same++;
            expect(same, name).toBeLessThan(x.length / 2 / 4);
          }
        }),
      );
    });

    it(`${label}: values are sane (norms near 1, linear std ~ 1/sqrt(in), embedding std ~ 1)`, async () => {
      const dir = await randomCheckpoint(config, 'float32', 7);
      await withCheckpoint(dir, async (ck) => {
        for (const spec of qwen3WeightSpecs(config)) {
          const v = await valuesOf(ck, spec.name);
          expect(v.length).toBe(spec.shape.reduce((p, d) => p * d, 1));
          let sum = 0;
          let sq = 0;
          let zeros = 0;
          let finite = 0;
          for (const x of v) {
            if (Number.isFinite(x)) finite++;
            sum += x;
            sq += x * x;
            if (x === 0) zeros++;
          }
          expect(finite, spec.name).toBe(v.length);
          const mean = sum / v.length;
          const std = Math.sqrt(Math.max(0, sq / v.length - mean * mean));
          expect(zeros, spec.name).toBeLessThan(v.length / 100 + 1);
          if (spec.role === 'norm') {
            // Uniform around 1 with std 0.1: every value within 1 +- 0.1 * sqrt(3).
            expect(Math.abs(mean - 1), spec.name).toBeLessThan(0.1);
            expect(Math.max(...v.map((x) => Math.abs(x - 1))), spec.name).toBeLessThanOrEqual(0.1 * Math.sqrt(3) + 1e-6);
          } else if (spec.role === 'bias') {
            // Uniform around 0 with std 0.1 (too few values for the moments to be tight).
            expect(Math.max(...v.map(Math.abs)), spec.name).toBeLessThanOrEqual(0.1 * Math.sqrt(3) + 1e-6);
          } else {
            const want = spec.role === 'embedding' ? 1 : 1 / Math.sqrt(spec.shape[1]);
            expect(Math.abs(mean), spec.name).toBeLessThan(want * 0.1);
            expect(std / want, spec.name).toBeGreaterThan(0.9);
            expect(std / want, spec.name).toBeLessThan(1.1);
            let amax = 0;
            for (const x of v) amax = Math.max(amax, Math.abs(x));
            expect(amax, spec.name).toBeLessThanOrEqual(want * Math.sqrt(3) * (1 + 1e-6));
          }
        }
      });
    });

    it(`${label}: FP8 weights are [N, K] e4m3 with [ceil(N/128), ceil(K/128)] block scales, close to the bf16 checkpoint`, async () => {
      const fp8 = await randomCheckpoint(config, 'fp8', 7);
      const bf16 = await randomCheckpoint(config, 'bfloat16', 7);
      await withCheckpoint(fp8, (cf) =>
        withCheckpoint(bf16, async (cb) => {
          let errSum = 0;
          let refSum = 0;
          let worst = 0;
          for (const spec of qwen3WeightSpecs(config)) {
            const prefix = spec.name.replace(/\.weight$/, '');
            if (spec.role !== 'linear') {
              // Everything but the linears stays bf16, with the bf16 checkpoint's bytes (lm_head keeps its precision).
              expect(cf.entry(spec.name).format, spec.name).toBe('BF16');
              expect(sameBytes(await bytesOf(cf, spec.name), await bytesOf(cb, spec.name)), spec.name).toBe(true);
              continue;
            }
            const [n, k] = spec.shape;
            const w = await cf.loadWeight(prefix, { device: 'cpu' });
            try {
              expect(w.recipe).toBe('block');
              expect([w.data.dtype, w.data.shape]).toEqual(['float8_e4m3fn', [n, k]]);
              expect([w.scale!.dtype, w.scale!.shape]).toEqual(['float32', [Math.ceil(n / 128), Math.ceil(k / 128)]]);
              const codes = (await w.data.toArray()) as Float32Array;
              const scale = (await w.scale!.toArray()) as Float32Array;
              const ref = await valuesOf(cb, spec.name);
              const kb = Math.ceil(k / 128);
              for (let i = 0; i < n; i++) {
                for (let j = 0; j < k; j++) {
                  const s = scale[Math.floor(i / 128) * kb + Math.floor(j / 128)];
                  const got = codes[i * k + j] * s;
                  const want = ref[i * k + j];
                  const err = Math.abs(got - want);
                  // e4m3 rounds to 3 mantissa bits (2^-4 relative), subnormals to 2^-9 * scale; bf16 adds 2^-8.
                  const allowed = 0.0625 * 1.004 * Math.abs(want) + 2 ** -10 * s + 1e-12;
                  if (err > allowed) expect.fail(`${spec.name}[${i}, ${j}]: ${got} vs bf16 ${want} (block scale ${s})`);
                  worst = Math.max(worst, err / Math.max(Math.abs(want), 1e-30));
                  errSum += err;
                  refSum += Math.abs(want);
                }
              }
              // Each block's largest value maps to 448 (within the rounding of its float32 scale).
              for (let bi = 0; bi < Math.ceil(n / 128); bi++) {
                for (let bj = 0; bj < kb; bj++) {
                  let amax = 0;
                  for (let i = bi * 128; i < Math.min(n, bi * 128 + 128); i++)
                    for (let j = bj * 128; j < Math.min(k, bj * 128 + 128); j++) amax = Math.max(amax, Math.abs(codes[i * k + j]));
                  expect(amax, `${spec.name} block (${bi}, ${bj})`).toBe(448);
                }
              }
            } finally {
              disposeWeight(w);
            }
          }
          // Much better on average than the worst case.
          expect(errSum / refSum).toBeLessThan(0.03);
          expect(errSum / refSum).toBeGreaterThan(0.001);
          expect(worst).toBeGreaterThan(0.02);
        }),
      );
    });
  }

  it('float16 checkpoints store F16 everywhere', async () => {
    const dir = await randomCheckpoint(DENSE, 'float16', 3);
    await withCheckpoint(dir, async (ck) => {
      expect(sorted(ck.names)).toEqual(sorted(expectedNames(DENSE, 'float16')));
      for (const name of ck.names) expect(ck.entry(name).format).toBe('F16');
    });
  });

  it('qwen3WeightSpecs: MoE layers follow isMoeLayer, tied embeddings drop lm_head, biases follow their weight', () => {
    const names = qwen3WeightSpecs(MOE).map((s) => s.name);
    expect(names).not.toContain('lm_head.weight');
    expect(names).toContain('model.layers.0.mlp.gate.weight');
    expect(names).toContain('model.layers.0.mlp.experts.3.down_proj.weight');
    expect(names).not.toContain('model.layers.0.mlp.experts.4.down_proj.weight');
    expect(names).toContain('model.layers.1.mlp.gate_proj.weight');
    expect(names).not.toContain('model.layers.1.mlp.gate.weight');
    expect(names.indexOf('model.layers.2.self_attn.q_proj.bias')).toBe(names.indexOf('model.layers.2.self_attn.q_proj.weight') + 1);
    const specs = new Map(qwen3WeightSpecs(MOE).map((s) => [s.name, s]));
    expect(specs.get('model.layers.0.mlp.gate.weight')).toEqual({ name: 'model.layers.0.mlp.gate.weight', shape: [4, 160], role: 'router' });
    expect(specs.get('model.layers.2.mlp.experts.1.down_proj.weight')?.shape).toEqual([160, 72]);
    expect(specs.get('model.layers.1.mlp.down_proj.weight')?.shape).toEqual([160, 136]);
    expect(specs.get('model.layers.0.self_attn.k_proj.weight')?.shape).toEqual([40, 160]);
    const dense = new Map(qwen3WeightSpecs(DENSE).map((s) => [s.name, s]));
    expect(dense.get('lm_head.weight')).toEqual({ name: 'lm_head.weight', shape: [300, 160], role: 'lm_head' });
    expect(dense.get('model.layers.1.self_attn.o_proj.weight')?.shape).toEqual([160, 192]);
    expect(dense.get('model.layers.1.self_attn.q_norm.weight')?.shape).toEqual([48]);
  });
});

// ---- Checkpoint: opening, entries, FP8 scales ----------------------------------------------------------------------

describe('Checkpoint', () => {
  it('opens one .safetensors file (no config), a diffusers directory, and a directory of symlinked shards', async () => {
    const dir = freshDir('plain');
    await mkdir(dir);
    const file = join(dir, 'weights.safetensors');
    await writeSafetensors(file, [
      ['a', f32Source([1, 2, 3], [3])],
      ['b', f32Source([4, 5], [1, 2])],
    ]);
    await withCheckpoint(file, async (ck) => {
      expect(ck.config).toBeUndefined();
      expect(ck.dir).toBe(dir);
      expect(sorted(ck.names)).toEqual(['a', 'b']);
      expect(ck.has('a')).toBe(true);
      expect(ck.has('c')).toBe(false);
      expect(ck.totalBytes).toBe(20);
      expect(ck.entry('b')).toMatchObject({ format: 'F32', dtype: 'float32', shape: [1, 2], file });
      expect(Array.from(await valuesOf(ck, 'b'))).toEqual([4, 5]);
      await expectCheckpointError(ck.load('c'), { file: dir, tensor: 'c', message: /no tensor 'c'/ });
      expect(() => ck.entry('c')).toThrow(CheckpointError);
    });
    // A directory with config.json but no model.safetensors falls back to diffusers' name.
    const diff = freshDir('diffusers');
    await writeCheckpoint(diff, [['x', f32Source([7], [1])]], { config: { _class_name: 'AutoencoderKLWan' } });
    await rm(join(diff, 'model.safetensors'));
    await writeSafetensors(join(diff, 'diffusion_pytorch_model.safetensors'), [['x', f32Source([7], [1])]]);
    await withCheckpoint(diff, async (ck) => {
      expect(ck.config).toEqual({ _class_name: 'AutoencoderKLWan' });
      expect(ck.names).toEqual(['x']);
    });
    // The Hugging Face hub cache: snapshot entries are symlinks into ../../blobs.
    const blobs = freshDir('blobs');
    const snapshot = freshDir('snapshot');
    const src = await randomCheckpoint(DENSE, 'bfloat16', 7, 40_000);
    await mkdir(blobs);
    await mkdir(snapshot);
    for (const f of await readdir(src)) {
      await writeFile(join(blobs, `blob-${f}`), await readFile(join(src, f)));
      await symlink(join(blobs, `blob-${f}`), join(snapshot, f));
    }
    await withCheckpoint(snapshot, (a) =>
      withCheckpoint(src, async (b) => {
        expect(sorted(a.names)).toEqual(sorted(b.names));
        expect(sameBytes(await bytesOf(a, 'model.layers.1.mlp.up_proj.weight'), await bytesOf(b, 'model.layers.1.mlp.up_proj.weight'))).toBe(true);
      }),
    );
  });

  it('prefers the shard index over a stray model.safetensors', async () => {
    const dir = freshDir('both');
    await writeCheckpoint(
      dir,
      [
        ['a', f32Source([1], [1])],
        ['b', f32Source([2], [1])],
      ],
      { shardBytes: 4 },
    );
    await writeSafetensors(join(dir, 'model.safetensors'), [['stray', f32Source([3], [1])]]);
    await withCheckpoint(dir, async (ck) => expect(sorted(ck.names)).toEqual(['a', 'b']));
  });

  it('per-channel weight_scale [N, 1] and [N] load as recipe row, scalar and [1] as recipe tensor', async () => {
    const n = 3;
    const k = 5;
    const codes = Array.from({ length: n * k }, (_, i) => ((i % 9) - 4) * 0.5);
    const rows = [0.5, 0.25, 2];
    const dir = freshDir('scales');
    await writeCheckpoint(dir, [
      ['row2d.weight', fp8Source(codes, [n, k])],
      ['row2d.weight_scale', f32Source(rows, [n, 1])],
      ['row1d.weight', fp8Source(codes, [n, k])],
      ['row1d.weight_scale', f32Source(rows, [n])],
      ['scalar.weight', fp8Source(codes, [n, k])],
      ['scalar.weight_scale', f32Source([0.125], [])],
      ['one.weight', fp8Source(codes, [n, k])],
      ['one.weight_scale', f32Source([4], [1])],
      ['oneone.weight', fp8Source(codes, [n, k])],
      ['oneone.weight_scale', f32Source([3], [1, 1])],
      // An [N, K] weight with N = 1: a [1] scale is per-tensor and per-channel at once; per-tensor is the reading.
      ['single.weight', fp8Source(codes.slice(0, k), [1, k])],
      ['single.weight_scale', f32Source([6], [1])],
      // Both kinds of scale: the block scale wins.
      ['both.weight', fp8Source(codes, [n, k])],
      ['both.weight_scale_inv', f32Source([9], [1, 1])],
      ['both.weight_scale', f32Source(rows, [n])],
      ['plain.weight', f32Source(codes, [n, k])],
    ]);
    const cases: [string, string, number[], number[]][] = [
      ['row2d', 'row', [n], rows],
      ['row1d', 'row', [n], rows],
      ['scalar', 'tensor', [1], [0.125]],
      ['one', 'tensor', [1], [4]],
      ['oneone', 'tensor', [1], [3]],
      ['single', 'tensor', [1], [6]],
      ['both', 'block', [1, 1], [9]],
    ];
    await withCheckpoint(dir, async (ck) => {
      for (const [prefix, recipe, shape, values] of cases) {
        const w = await ck.loadWeight(prefix, { device: 'cpu', dtype: 'bfloat16' }); // dtype applies to unquantized weights only
        try {
          expect(w.recipe, prefix).toBe(recipe);
          expect(w.data.dtype, prefix).toBe('float8_e4m3fn');
          expect([w.scale!.dtype, w.scale!.shape], prefix).toEqual(['float32', shape]);
          expect(Array.from((await w.scale!.toArray()) as Float32Array), prefix).toEqual(values);
          expect(Array.from((await w.data.toArray()) as Float32Array), prefix).toEqual(prefix === 'single' ? codes.slice(0, k) : codes);
          expect(castWeight(w, 'float32')).toBe(w); // FP8 weights keep their data
        } finally {
          disposeWeight(w);
        }
      }
      const plain = await ck.loadWeight('plain', { device: 'cpu' });
      expect(plain.scale).toBeUndefined();
      expect(plain.recipe).toBeUndefined();
      expect(plain.data.dtype).toBe('float32');
      expect(castWeight(plain, 'float32')).toBe(plain);
      const half = castWeight(plain, 'bfloat16');
      expect(half.data.dtype).toBe('bfloat16');
      expect(Array.from((await half.data.toArray()) as Float32Array)).toEqual(codes);
      expect(plain.data.isDisposed).toBe(true); // castWeight disposed the original
      half.data.dispose();
      const converted = await ck.loadWeight('plain', { device: 'cpu', dtype: 'float16' });
      expect(converted.data.dtype).toBe('float16');
      converted.data.dispose();
    });
  });

  it('bad or missing FP8 scales are CheckpointErrors naming the scale (or the weight) at its offset', async () => {
    const dir = freshDir('badscales');
    const codes = new Array(200 * 130).fill(1);
    await writeCheckpoint(dir, [
      ['block.weight', fp8Source(codes, [200, 130])],
      ['block.weight_scale_inv', f32Source([1, 1], [1, 2])], // wants [2, 2]
      ['transposed.weight', fp8Source(codes, [200, 130])],
      ['transposed.weight_scale_inv', f32Source([1, 1, 1, 1, 1, 1], [2, 3])],
      ['flat.weight', fp8Source(codes, [200, 130])],
      ['flat.weight_scale_inv', f32Source([1, 1, 1, 1], [4])],
      ['vector.weight', fp8Source(codes.slice(0, 130), [130])],
      ['vector.weight_scale_inv', f32Source([1, 1], [2])],
      ['channel.weight', fp8Source(codes, [200, 130])],
      ['channel.weight_scale', f32Source(new Array(130).fill(1), [130])], // K scales, not N
      ['wide.weight', fp8Source(codes, [200, 130])],
      ['wide.weight_scale', f32Source(new Array(200).fill(1), [1, 200])],
      ['none.weight', fp8Source(codes, [200, 130])],
      ['float.weight', f32Source([1, 2, 3], [3])],
    ]);
    await withCheckpoint(dir, async (ck) => {
      const file = join(dir, 'model.safetensors');
      for (const [prefix, suffix] of [
        ['block', 'weight_scale_inv'],
        ['transposed', 'weight_scale_inv'],
        ['flat', 'weight_scale_inv'],
        ['vector', 'weight_scale_inv'],
        ['channel', 'weight_scale'],
        ['wide', 'weight_scale'],
      ]) {
        const name = `${prefix}.${suffix}`;
        const e = await expectCheckpointError(ck.loadWeight(prefix, { device: 'cpu' }), { file, tensor: name });
        expect(e.offset).toBe(ck.entry(name).begin);
        expect(e.message).toContain(`tensor '${name}'`);
      }
      const block = await expectCheckpointError(ck.loadWeight('block', { device: 'cpu' }), { file, tensor: 'block.weight_scale_inv' });
      expect(block.message).toContain('needs [2, 2]');
      const none = await expectCheckpointError(ck.loadWeight('none', { device: 'cpu' }), {
        file,
        tensor: 'none.weight',
        message: /neither none\.weight_scale_inv nor none\.weight_scale/,
      });
      expect(none.message).toContain('FP8 weight');
      await expectCheckpointError(ck.loadWeight('missing', { device: 'cpu' }), { file: dir, tensor: 'missing.weight' });
      await expectCheckpointError(ck.loadWeight('float', { device: 'cpu', quantize: 'float8_e4m3fn' }), {
        file,
        tensor: 'float.weight',
        message: /only 2-D weights can be quantized/,
      });
    });
  });

  it("loadWeight({quantize}) on a bf16 checkpoint equals quantize(weight, 'block128') on the CPU, byte for byte", async () => {
    const dir = await randomCheckpoint(MOE, 'bfloat16', 11);
    await withCheckpoint(dir, async (ck) => {
      for (const name of [
        'model.layers.0.self_attn.q_proj.weight',
        'model.layers.0.self_attn.k_proj.weight',
        'model.layers.0.mlp.experts.2.down_proj.weight',
        'model.layers.1.mlp.up_proj.weight',
        'model.embed_tokens.weight',
      ]) {
        const prefix = name.replace(/\.weight$/, '');
        const w = await ck.loadWeight(prefix, { device: 'cpu', quantize: 'float8_e4m3fn' });
        const raw = await ck.load(name, { device: 'cpu' });
        expect(raw.dtype).toBe('bfloat16');
        const q = quantize(raw, { dtype: 'float8_e4m3fn', granularity: 'block128' });
        try {
          const [n, k] = raw.shape;
          expect(w.recipe).toBe('block');
          expect([w.data.dtype, w.data.shape]).toEqual(['float8_e4m3fn', [n, k]]);
          expect([w.scale!.dtype, w.scale!.shape]).toEqual(['float32', [Math.ceil(n / 128), Math.ceil(k / 128)]]);
          expect(sameBytes(await toBytes(w.data), await toBytes(q.data)), name).toBe(true);
          expect(sameBytes(await toBytes(w.scale!), await toBytes(q.scale)), name).toBe(true);
        } finally {
          for (const t of [raw, q.data, q.scale]) t.dispose();
          disposeWeight(w);
        }
      }
    });
  });
});

describe.skipIf(!gpu.available)(`Checkpoint on WebGPU ${gpu.skipReason}`, () => {
  /** Every weight of the checkpoint through loadWeight on both devices, compared byte for byte. */
  async function compareDevices(dir: string, options: { quantize?: 'float8_e4m3fn'; dtype?: 'float32' }): Promise<void> {
    await withCheckpoint(dir, async (ck) => {
      const config = parseQwen3Config(ck.config);
      const mismatched: string[] = [];
      for (const spec of qwen3WeightSpecs(config)) {
        if (spec.role !== 'linear') continue;
        const prefix = spec.name.replace(/\.weight$/, '');
        const loaded: Record<DeviceName, Weight | undefined> = { cpu: undefined, webgpu: undefined };
        try {
          for (const device of ['cpu', 'webgpu'] as const) loaded[device] = await ck.loadWeight(prefix, { ...options, device });
          const [c, g] = [loaded.cpu!, loaded.webgpu!];
          expect(g.data.device).toBe('webgpu');
          expect([g.data.dtype, g.data.shape, g.recipe, g.scale?.shape]).toEqual([c.data.dtype, c.data.shape, c.recipe, c.scale?.shape]);
          if (!sameBytes(await toBytes(g.data), await toBytes(c.data))) mismatched.push(`${spec.name} data`);
          if (c.scale && !sameBytes(await toBytes(g.scale!), await toBytes(c.scale))) {
            mismatched.push(`${spec.name} scale`);
            expectClose(
              (await g.scale!.toArray()) as Float32Array,
              (await c.scale.toArray()) as Float32Array,
              { atol: 0, rtol: 2 ** -22 },
              `${spec.name} scale`,
            );
          }
        } finally {
          for (const w of Object.values(loaded)) if (w) disposeWeight(w);
        }
      }
      expect(mismatched, 'the fused quantize kernel must agree with the CPU backend bit for bit').toEqual([]);
    });
  }

  it('load-time FP8 quantization on WebGPU equals the CPU, data and scales bit for bit (edge blocks included)', async () => {
    await compareDevices(await randomCheckpoint(MOE, 'bfloat16', 11), { quantize: 'float8_e4m3fn' });
    await compareDevices(await randomCheckpoint(DENSE, 'float32', 5), { quantize: 'float8_e4m3fn' });
  });

  it('FP8 checkpoints and dtype conversion load identically on WebGPU', async () => {
    await compareDevices(await randomCheckpoint(DENSE, 'fp8', 7, 40_000), {});
    await compareDevices(await randomCheckpoint(DENSE, 'bfloat16', 7), { dtype: 'float32' });
  });

  it('a failed scale check frees the weight it already uploaded', async () => {
    const dir = freshDir('gpu-leak');
    await writeCheckpoint(dir, [
      ['w.weight', fp8Source(new Array(256 * 256).fill(2), [256, 256])],
      ['w.weight_scale_inv', f32Source([1], [1, 1])],
      ['v.weight', fp8Source(new Array(256 * 256).fill(2), [256, 256])],
    ]);
    await withCheckpoint(dir, async (ck) => {
      const before = memoryStats().liveBytes;
      await expectCheckpointError(ck.loadWeight('w', { device: 'webgpu' }), { file: join(dir, 'model.safetensors'), tensor: 'w.weight_scale_inv' });
      await expectCheckpointError(ck.loadWeight('v', { device: 'webgpu' }), { file: join(dir, 'model.safetensors'), tensor: 'v.weight' });
      expect(memoryStats().liveBytes).toBe(before);
    });
  });
});

// ---- hostile indexes and directories -------------------------------------------------------------------------------

describe('Checkpoint.open: hostile indexes and directories', () => {
  /** A directory with shards s1 (a, b) and s2 (c), plus whatever `index` says. */
  async function indexed(weightMap: unknown, extra: (dir: string) => Promise<void> = async () => {}): Promise<{ dir: string; index: string }> {
    const dir = freshDir('hostile');
    await mkdir(dir, { recursive: true });
    await writeSafetensors(join(dir, 's1.safetensors'), [
      ['a', f32Source([1], [1])],
      ['b', f32Source([2], [1])],
    ]);
    await writeSafetensors(join(dir, 's2.safetensors'), [['c', f32Source([3], [1])]]);
    await extra(dir);
    const index = join(dir, 'model.safetensors.index.json');
    await writeFile(index, typeof weightMap === 'string' ? weightMap : JSON.stringify({ metadata: {}, weight_map: weightMap }));
    return { dir, index };
  }

  it('a well-formed index opens (the baseline the cases below break)', async () => {
    const { dir } = await indexed({ a: 's1.safetensors', b: 's1.safetensors', c: 's2.safetensors' });
    await withCheckpoint(dir, async (ck) => {
      expect(sorted(ck.names)).toEqual(['a', 'b', 'c']);
      expect(Array.from(await valuesOf(ck, 'c'))).toEqual([3]);
    });
  });

  it('weight_map entries that are not plain .safetensors names in the directory', async () => {
    // Each target exists, so the refusal is the name check, not a missing file.
    const outside = join(root, 'outside.safetensors');
    await writeSafetensors(outside, [['a', f32Source([9], [1])]]);
    const cases: [string, unknown][] = [
      ['parent', '../outside.safetensors'],
      ['absolute', outside],
      ['subdir', 'sub/s1.safetensors'],
      ['subdir-dot', './s1.safetensors'],
      ['backslash', 'sub\\s1.safetensors'],
      ['not-safetensors', 's1.bin'],
      ['dotdot', '..'],
      ['number', 5],
      ['null', null],
      ['object', { file: 's1.safetensors' }],
    ];
    for (const [label, target] of cases) {
      const { dir, index } = await indexed({ a: 's1.safetensors', c: target }, async (d) => {
        await mkdir(join(d, 'sub'));
        await writeSafetensors(join(d, 'sub', 's1.safetensors'), [['c', f32Source([1], [1])]]);
        await writeFile(join(d, 's1.bin'), await readFile(join(d, 's1.safetensors')));
      });
      const e = await expectCheckpointError(Checkpoint.open(dir), { file: index, tensor: 'c' });
      expect(e.message, label).toMatch(/is not a \.safetensors file name in the checkpoint directory/);
    }
  });

  it('weight_map missing or not an object', async () => {
    for (const doc of [{ metadata: {} }, { weight_map: ['s1.safetensors'] }, { weight_map: 's1.safetensors' }, { weight_map: null }, [], null, 7]) {
      const { dir, index } = await indexed(JSON.stringify(doc));
      await expectCheckpointError(Checkpoint.open(dir), { file: index, message: /index has no weight_map object/ });
    }
  });

  it('an index naming a shard that does not exist', async () => {
    const { dir } = await indexed({ a: 's1.safetensors', c: 'gone.safetensors' });
    await expectCheckpointError(Checkpoint.open(dir), { file: join(dir, 'gone.safetensors'), message: /cannot open/ });
  });

  it('an index naming a directory as a shard', async () => {
    const { dir } = await indexed({ a: 's1.safetensors', c: 'd.safetensors' }, (d) => mkdir(join(d, 'd.safetensors')));
    await expectCheckpointError(Checkpoint.open(dir), { file: join(dir, 'd.safetensors') });
  });

  it('an index mapping a tensor to a shard that does not hold it', async () => {
    const { dir, index } = await indexed({ a: 's1.safetensors', c: 's1.safetensors' });
    await expectCheckpointError(Checkpoint.open(dir), { file: index, tensor: 'c', message: /maps this tensor to s1\.safetensors, which does not hold it/ });
  });

  it('the same tensor in two shards (even when the index lists it once)', async () => {
    const { dir } = await indexed({ a: 's1.safetensors', c: 's2.safetensors' }, (d) =>
      writeSafetensors(join(d, 's2.safetensors'), [
        ['c', f32Source([3], [1])],
        ['a', f32Source([4], [1])],
      ]),
    );
    await expectCheckpointError(Checkpoint.open(dir), {
      file: join(dir, 's2.safetensors'),
      tensor: 'a',
      message: /in two shards, s1\.safetensors and s2\.safetensors/,
    });
  });

  it('a shard that is not a valid safetensors file', async () => {
    const { dir } = await indexed({ a: 's1.safetensors', c: 's2.safetensors' }, (d) => writeFile(join(d, 's2.safetensors'), 'not a safetensors file at all'));
    await expectCheckpointError(Checkpoint.open(dir), { file: join(dir, 's2.safetensors') });
  });

  it('an index that is not valid JSON', async () => {
    const { dir, index } = await indexed('{"weight_map": {"a": "s1.safetensors",}');
    await expectCheckpointError(Checkpoint.open(dir), { file: index, message: /not valid JSON/ });
  });

  it('a diffusers index is used too, with the same checks', async () => {
    const dir = freshDir('diffusers-index');
    await mkdir(dir);
    await writeSafetensors(join(dir, 's1.safetensors'), [['a', f32Source([1], [1])]]);
    const index = join(dir, 'diffusion_pytorch_model.safetensors.index.json');
    await writeFile(index, JSON.stringify({ weight_map: { a: 's1.safetensors' } }));
    await withCheckpoint(dir, async (ck) => expect(ck.names).toEqual(['a']));
    await writeFile(index, JSON.stringify({ weight_map: { a: '../s1.safetensors' } }));
    await expectCheckpointError(Checkpoint.open(dir), { file: index, tensor: 'a' });
  });

  it('a directory without weights, an invalid config.json, a missing path', async () => {
    const empty = freshDir('empty');
    await mkdir(empty);
    await writeFile(join(empty, 'config.json'), '{}');
    await writeFile(join(empty, 'pytorch_model.bin'), 'pickles');
    await expectCheckpointError(Checkpoint.open(empty), {
      file: empty,
      message: /no model\.safetensors or diffusion_pytorch_model\.safetensors and no shard index/,
    });

    const badConfig = freshDir('badconfig');
    await writeCheckpoint(badConfig, [['a', f32Source([1], [1])]]);
    await writeFile(join(badConfig, 'config.json'), '{"model_type": "qwen3",');
    await expectCheckpointError(Checkpoint.open(badConfig), { file: join(badConfig, 'config.json'), message: /not valid JSON/ });

    const configDir = freshDir('configdir');
    await writeCheckpoint(configDir, [['a', f32Source([1], [1])]]);
    await mkdir(join(configDir, 'config.json'));
    await expectCheckpointError(Checkpoint.open(configDir), { file: join(configDir, 'config.json'), message: /cannot read/ });

    const missing = join(root, 'no-such-checkpoint');
    await expectCheckpointError(Checkpoint.open(missing), { file: missing, message: /not a checkpoint directory or file/ });
    await expectCheckpointError(Checkpoint.open(join(missing, 'model.safetensors')), { file: join(missing, 'model.safetensors') });
  });

  it.skipIf(process.platform !== 'linux')('failed opens leave no file handles open', async () => {
    const fds = () => readdirSync('/proc/self/fd').length;
    const cases = await Promise.all([
      indexed({ a: 's1.safetensors', c: 's1.safetensors' }), // shard opened, then the mapping fails
      indexed({ a: 's1.safetensors', c: 's2.safetensors' }, (d) =>
        writeSafetensors(join(d, 's2.safetensors'), [
          ['c', f32Source([3], [1])],
          ['a', f32Source([4], [1])],
        ]),
      ),
      indexed({ a: 's1.safetensors', c: 's2.safetensors' }, (d) => writeFile(join(d, 's2.safetensors'), 'garbage garbage garbage')),
      indexed({ a: 's1.safetensors', c: 'gone.safetensors' }),
    ]);
    const before = fds();
    for (let round = 0; round < 5; round++) for (const { dir } of cases) expect(await rejection(Checkpoint.open(dir))).toBeInstanceOf(CheckpointError);
    expect(fds()).toBeLessThanOrEqual(before);
    // And a successful open closes everything it opened.
    const dir = await randomCheckpoint(DENSE, 'bfloat16', 7, 40_000);
    const ck = await Checkpoint.open(dir);
    expect(fds()).toBeGreaterThan(before);
    await ck.close();
    expect(fds()).toBeLessThanOrEqual(before);
  });
});

// ---- config.json validation ----------------------------------------------------------------------------------------

describe('parseQwen3Config', () => {
  const base = (c: Qwen3Config = MOE) => JSON.parse(JSON.stringify(toHfConfig(c))) as Record<string, unknown>;
  const FILE = '/ckpt/config.json';

  function expectFieldError(json: unknown, field: string | RegExp): void {
    let err: unknown;
    try {
      parseQwen3Config(json, FILE);
    } catch (e) {
      err = e;
    }
    expect(err, `expected a CheckpointError for ${field}`).toBeInstanceOf(CheckpointError);
    const ce = err as CheckpointError;
    expect(ce.file).toBe(FILE);
    expect(ce.message.startsWith(`${FILE}: `)).toBe(true);
    if (typeof field === 'string') expect(ce.message).toContain(field);
    else expect(ce.message).toMatch(field);
  }

  it('round-trips through toHfConfig and JSON (presets, test configs, rope scaling, FP8)', () => {
    const yarn: Qwen3Config = {
      ...DENSE,
      ropeScaling: { type: 'yarn', factor: 4, params: { original_max_position_embeddings: 32768, beta_fast: 32, beta_slow: 1 } },
    };
    const fp8: Qwen3Config = { ...MOE, quantization: { method: 'fp8', format: 'float8_e5m2', activationScheme: 'static', modulesToNotConvert: ['lm_head'] } };
    for (const c of [...Object.values(QWEN3_PRESETS), DENSE, MOE, yarn, fp8, { ...DENSE, eosTokenIds: [5], bosTokenId: undefined, torchDtype: undefined }]) {
      expect(parseQwen3Config(base(c), FILE)).toEqual(c);
    }
  });

  it('rope_scaling: rope_type yarn with factor and numeric params; the older `type` key; defaults', () => {
    const json = base(DENSE);
    json.rope_scaling = {
      rope_type: 'yarn',
      factor: 4.0,
      original_max_position_embeddings: 32768,
      beta_fast: 32,
      beta_slow: 1,
      mscale: 0.707,
      truncate: true,
      name: 'x',
    };
    expect(parseQwen3Config(json, FILE).ropeScaling).toEqual({
      type: 'yarn',
      factor: 4,
      params: { original_max_position_embeddings: 32768, beta_fast: 32, beta_slow: 1, mscale: 0.707 },
    });
    json.rope_scaling = { type: 'linear', factor: 2 };
    expect(parseQwen3Config(json, FILE).ropeScaling).toEqual({ type: 'linear', factor: 2, params: {} });
    json.rope_scaling = { rope_type: 'dynamic', type: 'linear', factor: 2 }; // rope_type wins, as in transformers
    expect(parseQwen3Config(json, FILE).ropeScaling?.type).toBe('dynamic');
    json.rope_scaling = {};
    expect(parseQwen3Config(json, FILE).ropeScaling).toEqual({ type: 'default', factor: 1, params: {} });
    json.rope_scaling = null;
    expect(parseQwen3Config(json, FILE).ropeScaling).toBeUndefined();
    json.rope_scaling = { rope_type: 'yarn', factor: 0 };
    expectFieldError(json, 'rope_scaling.factor');
    json.rope_scaling = { rope_type: 7, factor: 2 };
    expectFieldError(json, 'rope_scaling.rope_type');
    json.rope_scaling = 'yarn';
    expectFieldError(json, 'rope_scaling must be an object');
  });

  it('defaults: head_dim from hidden/heads, kv heads = heads, eps, theta, step 1, no mlp-only layers', () => {
    const json: Record<string, unknown> = {
      model_type: 'qwen3_moe',
      vocab_size: 100,
      hidden_size: 64,
      intermediate_size: 96,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_experts: 8,
      num_experts_per_tok: 2,
      moe_intermediate_size: 40,
    };
    const c = parseQwen3Config(json, FILE);
    expect(c).toMatchObject({
      headDim: 16,
      numKeyValueHeads: 4,
      rmsNormEps: 1e-6,
      ropeTheta: 10000,
      maxPositionEmbeddings: 32768,
      tieWordEmbeddings: false,
      attentionBias: false,
      eosTokenIds: [],
    });
    expect(c.moe).toEqual({ numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 40, normTopkProb: false, decoderSparseStep: 1, mlpOnlyLayers: [] });
    expect(c.bosTokenId).toBeUndefined();
    expect(c.quantization).toBeUndefined();
    expect(parseQwen3Config({ ...json, torch_dtype: 'float64' }, FILE).torchDtype).toBeUndefined(); // informative only
    expect(parseQwen3Config({ ...json, eos_token_id: 7 }, FILE).eosTokenIds).toEqual([7]);
  });

  it('each bad field is a CheckpointError naming it', () => {
    const cases: [string, (j: Record<string, unknown>) => void, string | RegExp][] = [
      ['missing hidden_size', (j) => delete j.hidden_size, 'hidden_size must be an integer >= 1, got nothing'],
      ['fractional hidden_size', (j) => (j.hidden_size = 160.5), 'hidden_size'],
      ['string vocab_size', (j) => (j.vocab_size = '300'), 'vocab_size'],
      ['zero num_hidden_layers', (j) => (j.num_hidden_layers = 0), 'num_hidden_layers'],
      ['missing intermediate_size', (j) => delete j.intermediate_size, 'intermediate_size'],
      [
        'heads not a multiple of kv heads',
        (j) => Object.assign(j, { num_attention_heads: 6, num_key_value_heads: 4 }),
        'num_attention_heads (6) must be a multiple of num_key_value_heads (4)',
      ],
      ['odd head_dim', (j) => (j.head_dim = 41), /head_dim must be even/],
      ['no head_dim and hidden not divisible', (j) => Object.assign(j, { head_dim: undefined, num_attention_heads: 6, num_key_value_heads: 1 }), 'head_dim'],
      ['model_type llama', (j) => (j.model_type = 'llama'), "model_type 'llama' is not supported"],
      ['missing model_type', (j) => delete j.model_type, 'model_type'],
      ['hidden_act gelu', (j) => (j.hidden_act = 'gelu'), 'hidden_act'],
      ['experts per token > experts', (j) => (j.num_experts_per_tok = 5), /num_experts_per_tok must be at most num_experts \(4\)/],
      ['missing num_experts', (j) => delete j.num_experts, 'num_experts'],
      ['missing moe_intermediate_size', (j) => delete j.moe_intermediate_size, 'moe_intermediate_size'],
      ['zero decoder_sparse_step', (j) => (j.decoder_sparse_step = 0), 'decoder_sparse_step'],
      ['mlp_only_layers out of range', (j) => (j.mlp_only_layers = [0, 3]), /mlp_only_layers must be layer indices below num_hidden_layers \(3\)/],
      ['negative mlp_only_layers', (j) => (j.mlp_only_layers = [-1]), 'mlp_only_layers'],
      ['norm_topk_prob not a bool', (j) => (j.norm_topk_prob = 'yes'), 'norm_topk_prob'],
      ['eos id >= vocab', (j) => (j.eos_token_id = [299, 300]), /eos_token_id.*300.*vocab_size 300/],
      ['bos id >= vocab', (j) => (j.bos_token_id = 1000), /bos_token_id.*1000.*vocab_size 300/],
      ['negative eos id', (j) => (j.eos_token_id = -1), 'eos_token_id'],
      ['rms_norm_eps negative', (j) => (j.rms_norm_eps = -1e-6), 'rms_norm_eps'],
      ['rope_theta zero', (j) => (j.rope_theta = 0), 'rope_theta'],
      ['tie_word_embeddings a string', (j) => (j.tie_word_embeddings = 'true'), 'tie_word_embeddings must be true or false'],
      [
        'quant_method bitsandbytes',
        (j) => (j.quantization_config = { quant_method: 'bitsandbytes' }),
        "quantization_config.quant_method 'bitsandbytes' is not supported",
      ],
      ['gptq without bits', (j) => (j.quantization_config = { quant_method: 'gptq' }), 'quantization_config.bits must be an integer'],
      ['3-bit gptq', (j) => (j.quantization_config = { quant_method: 'gptq', bits: 3, group_size: 128 }), 'quantization_config.bits must be 4'],
      ['quant_method missing', (j) => (j.quantization_config = { fmt: 'e4m3' }), 'quantization_config.quant_method'],
      ['fmt e3m4', (j) => (j.quantization_config = { quant_method: 'fp8', fmt: 'e3m4' }), 'quantization_config.fmt'],
      [
        'weight_block_size of 3',
        (j) => (j.quantization_config = { quant_method: 'fp8', weight_block_size: [128, 128, 1] }),
        'quantization_config.weight_block_size must be two integers',
      ],
      [
        'weight_block_size of 0',
        (j) => (j.quantization_config = { quant_method: 'fp8', weight_block_size: [0, 128] }),
        'quantization_config.weight_block_size',
      ],
      [
        'modules_to_not_convert not strings',
        (j) => (j.quantization_config = { quant_method: 'fp8', modules_to_not_convert: [1] }),
        'quantization_config.modules_to_not_convert',
      ],
      ['quantization_config a list', (j) => (j.quantization_config = []), 'quantization_config must be an object'],
    ];
    for (const [label, mutate, field] of cases) {
      const json = base(MOE);
      mutate(json);
      try {
        expectFieldError(json, field);
      } catch (e) {
        throw new Error(`${label}: ${(e as Error).message}`);
      }
    }
    for (const bad of [null, [], 'qwen3', 3]) expectFieldError(bad, 'config is not a JSON object');
  });

  it('a qwen3 (dense) config ignores MoE fields; bos/eos may equal vocab_size - 1', () => {
    const json = base(DENSE);
    Object.assign(json, { num_experts: 0, num_experts_per_tok: 9, mlp_only_layers: [99], eos_token_id: 299, bos_token_id: 299 });
    const c = parseQwen3Config(json, FILE);
    expect(c.moe).toBeUndefined();
    expect([c.bosTokenId, c.eosTokenIds]).toEqual([299, [299]]);
  });

  it('isMoeLayer follows HF Qwen3MoeDecoderLayer: mlp_only_layers, then (i + 1) % decoder_sparse_step == 0', () => {
    const moe = (decoderSparseStep: number, mlpOnlyLayers: number[]): Qwen3Config => ({
      ...MOE,
      numHiddenLayers: 8,
      moe: { ...MOE.moe!, decoderSparseStep, mlpOnlyLayers },
    });
    const sparse = (c: Qwen3Config) => Array.from({ length: c.numHiddenLayers }, (_, i) => i).filter((i) => isMoeLayer(c, i));
    // The rule transformers applies, written out: (layer_idx not in mlp_only_layers) and num_experts > 0 and (layer_idx + 1) % step == 0.
    const hf = (step: number, only: number[]) => [0, 1, 2, 3, 4, 5, 6, 7].filter((i) => !only.includes(i) && (i + 1) % step === 0);
    for (const [step, only] of [
      [1, []],
      [1, [0, 7]],
      [2, []],
      [2, [3]],
      [3, [2, 4]],
      [9, []],
    ] as [number, number[]][]) {
      expect(sparse(moe(step, only)), `step ${step}, mlp_only ${only}`).toEqual(hf(step, only));
    }
    expect(sparse(moe(2, [3]))).toEqual([1, 5, 7]);
    expect(sparse(DENSE)).toEqual([]);
    // The layout follows the same rule: a router exactly in the sparse layers.
    const c = moe(2, [3]);
    const routers = qwen3WeightSpecs(c)
      .filter((s) => s.role === 'router')
      .map((s) => Number(s.name.split('.')[2]));
    expect(routers).toEqual([1, 5, 7]);
    // And the parsed config keeps the fields the rule reads.
    const parsed = parseQwen3Config({ ...base(MOE), num_hidden_layers: 8, decoder_sparse_step: 2, mlp_only_layers: [3] }, FILE);
    expect(sparse(parsed)).toEqual([1, 5, 7]);
  });
});
