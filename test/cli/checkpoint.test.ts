// `tensorgpu checkpoint generate|inspect|load` through their run functions with a line callback: one real preset
// generated once (FP8, sharded: it has the real 151936-token vocabulary, so it takes seconds), inspected and loaded;
// the load figures (tensor count, linear weights, GB/s, tensor memory) checked on small custom checkpoints in every
// load mode, on the CPU and, where it runs, on WebGPU.
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runGenerateCheckpoint, runInspectCheckpoint, runLoadCheckpoint, type LoadOptions } from '../../src/cli/checkpoint.js';
import { formatBytes } from '../../src/cli/progress.js';
import { CheckpointError, isAvailable } from '../../src/index.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import { writeCheckpoint } from '../../src/formats/checkpoint-writer.js';
import { parseQwen3Config, type Qwen3Config } from '../../src/models/qwen3/config.js';
import { qwen3WeightSpecs } from '../../src/models/qwen3/layout.js';
import { qwen35CheckpointSpecs } from '../../src/models/qwen3_5/layout.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { QWEN3_5_REFERENCE_CASES } from '../../tools/qwen3_5-reference/presets.js';
import { QWEN3_PRESETS, randomCheckpointConfig, writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';

const gpuUsable = await isAvailable();
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';

/** A small MoE model: layer 1 dense (mlp_only_layers), widths off the 128 grid, untied lm_head. */
const SMALL: Qwen3Config = {
  modelType: 'qwen3_moe',
  vocabSize: 300,
  hiddenSize: 160,
  intermediateSize: 136,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 40,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 512,
  tieWordEmbeddings: false,
  attentionBias: false,
  torchDtype: 'bfloat16',
  bosTokenId: 1,
  eosTokenIds: [2],
  moe: { numExperts: 3, numExpertsPerTok: 2, moeIntermediateSize: 72, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [1] },
};

let root = '';
let preset = '';
let presetLines: string[] = [];
let small = '';
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tensorgpu-cli-checkpoint-'));
  small = join(root, 'small-bf16');
  await writeRandomQwen3Checkpoint(small, SMALL, { dtype: 'bfloat16', seed: 4, shardBytes: 50_000 });
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

async function run(fn: (out: (line: string) => void) => Promise<number>): Promise<string[]> {
  const lines: string[] = [];
  expect(await fn((l) => lines.push(l))).toBe(0);
  return lines;
}

const load = (o: LoadOptions) => run((out) => runLoadCheckpoint(o, out));

/** The figures of the `loaded ...` line. */
function loadedLine(lines: string[], device: string): { tensors: number; linears: number; quantized: boolean; bytes: string; seconds: number; gbps: number } {
  const re = new RegExp(
    `^loaded (\\d+) tensors \\((\\d+) linear weights(, quantized to FP8)?\\) onto ${device}: (.+) read in ([\\d.]+) s \\(([\\d.]+) GB/s\\)$`,
  );
  const hits = lines.map((l) => re.exec(l)).filter((m) => m !== null);
  expect(hits.length, lines.join('\n')).toBe(1);
  const m = hits[0]!;
  return { tensors: Number(m[1]), linears: Number(m[2]), quantized: m[3] !== undefined, bytes: m[4], seconds: Number(m[5]), gbps: Number(m[6]) };
}

/** Bytes the checkpoint's tensors take when held as loaded, by role: what the `tensor memory` line reports. */
function heldBytes(config: Qwen3Config, mode: 'as-stored-bf16' | 'fp8' | 'float32'): { tensors: number; bytes: number } {
  let tensors = 0;
  let bytes = 0;
  for (const s of qwen3WeightSpecs(config)) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    tensors++;
    if (mode === 'fp8' && s.role === 'linear') {
      tensors++;
      bytes += n + 4 * Math.ceil(s.shape[0] / 128) * Math.ceil(s.shape[1] / 128);
    } else bytes += n * (mode === 'float32' ? 4 : 2);
  }
  return { tensors, bytes };
}

const linearCount = (config: Qwen3Config) => qwen3WeightSpecs(config).filter((s) => s.role === 'linear' || s.role === 'lm_head').length;

describe('tensorgpu checkpoint generate / inspect / load (preset)', () => {
  it('generate writes a preset (fp8, sharded) in the Hugging Face layout', async () => {
    preset = join(root, 'qwen3-tiny-fp8');
    presetLines = await run((out) => runGenerateCheckpoint({ preset: 'qwen3-tiny', out: preset, dtype: 'fp8', seed: 1, shardMb: 16 }, out));
    expect(presetLines).toHaveLength(1);
    expect(presetLines[0]).toMatch(
      new RegExp(
        `^wrote qwen3-tiny \\(fp8, seed 1\\) to ${preset}: model-00001-of-00002\\.safetensors, model-00002-of-00002\\.safetensors, tokenizer\\.json, tokenizer_config\\.json in [\\d.]+ s$`,
      ),
    );
    expect((await readdir(preset)).sort()).toEqual([
      'config.json',
      'model-00001-of-00002.safetensors',
      'model-00002-of-00002.safetensors',
      'model.safetensors.index.json',
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
    const config = parseQwen3Config(JSON.parse(await readFile(join(preset, 'config.json'), 'utf8')));
    expect(config).toEqual(randomCheckpointConfig(QWEN3_PRESETS['qwen3-tiny'], 'fp8'));
  });

  it('generate rejects an unknown preset, naming the presets', async () => {
    await expect(runGenerateCheckpoint({ preset: 'qwen3-huge', out: join(root, 'never'), dtype: 'fp8', seed: 0 }, () => {})).rejects.toThrow(
      "unknown preset 'qwen3-huge' (presets: qwen3-moe-tiny, qwen3-tiny, lfm2-moe-tiny, lfm2-tiny, qwen3.6-moe-tiny, qwen3.5-tiny)",
    );
  });

  it('inspect lists the config and every tensor with its format, shape, size and place', async () => {
    expect(preset, 'needs the generate test').not.toBe('');
    const lines = await run((out) => runInspectCheckpoint(preset, out));
    const config = QWEN3_PRESETS['qwen3-tiny'];
    const specs = qwen3WeightSpecs(config);
    const linears = specs.filter((s) => s.role === 'linear');
    const total = specs.length + linears.length;
    await using ck = await Checkpoint.open(preset);
    expect(lines[0]).toBe('config: qwen3, 4 layers, hidden 128, vocab 151936, float8_e4m3fn weights');
    expect(lines[1]).toBe(`${total} tensors, ${formatBytes(ck.totalBytes)}`);
    expect(lines).toHaveLength(2 + total);
    const listed = new Map(lines.slice(2).map((l) => [l.trim().split(/\s+/)[0], l]));
    expect([...listed.keys()].sort()).toEqual([...specs.map((s) => s.name), ...linears.map((s) => `${s.name}_scale_inv`)].sort());
    for (const name of ck.names) {
      const e = ck.entry(name);
      const file = e.file.split('/').pop();
      expect(listed.get(name)).toBe(`  ${name}  ${e.format} [${e.shape.join(', ')}]  ${formatBytes(e.end - e.begin)}  ${file}@${e.begin}`);
    }
    expect(listed.get('model.embed_tokens.weight')).toMatch(/ BF16 \[151936, 128\] {2}37\.1 MiB {2}model-00001-of-00002\.safetensors@\d+$/);
    expect(listed.get('model.layers.3.mlp.down_proj.weight')).toMatch(/ F8_E4M3 \[128, 384\] {2}48\.0 KiB {2}model-00002-of-00002\.safetensors@/);
    expect(listed.get('model.layers.3.mlp.down_proj.weight_scale_inv')).toMatch(/ F32 \[1, 3\] {2}12 B /);
    expect(listed.get('model.layers.0.input_layernorm.weight')).toMatch(/ BF16 \[128\] /);
  });

  it('load (cpu) streams the FP8 preset: every tensor, scales attached, GB/s', async () => {
    expect(preset, 'needs the generate test').not.toBe('');
    const lines = await load({ model: preset, device: 'cpu' });
    const config = QWEN3_PRESETS['qwen3-tiny'];
    const specs = qwen3WeightSpecs(config);
    const linears = specs.filter((s) => s.role === 'linear').length;
    const got = loadedLine(lines, 'cpu');
    expect(got).toMatchObject({ tensors: specs.length + linears, linears, quantized: false });
    await using ck = await Checkpoint.open(preset);
    expect(got.bytes).toBe(formatBytes(ck.totalBytes));
    expect(got.gbps).toBeGreaterThan(0);
    // The rate is the bytes over the printed time (both rounded for print).
    expect(Math.abs(got.gbps - ck.totalBytes / Math.max(got.seconds, 0.005) / 1e9)).toBeLessThan(Math.max(0.01, got.gbps * 0.7));
    expect(lines).toContain(`tensor memory: ${formatBytes(ck.totalBytes)}`);
    expect(lines.some((l) => /^host memory: peak RSS [\d.]+ \w+ \(\+[\d.-]+ \w+ during the load\)$/.test(l))).toBe(true);
  });
});

describe('tensorgpu checkpoint load (small checkpoints)', () => {
  it('as stored: one tensor per spec, linears and lm_head counted', async () => {
    const lines = await load({ model: small, device: 'cpu' });
    const want = heldBytes(SMALL, 'as-stored-bf16');
    expect(loadedLine(lines, 'cpu')).toMatchObject({ tensors: want.tensors, linears: linearCount(SMALL), quantized: false });
    expect(lines).toContain(`tensor memory: ${formatBytes(want.bytes)}`);
  });

  it('--dtype fp8 on a bf16 checkpoint quantizes the linears (not lm_head) and says so', async () => {
    const lines = await load({ model: small, device: 'cpu', dtype: 'fp8' });
    const want = heldBytes(SMALL, 'fp8');
    const got = loadedLine(lines, 'cpu');
    expect(got).toMatchObject({ tensors: want.tensors, linears: linearCount(SMALL), quantized: true });
    expect(lines).toContain(`tensor memory: ${formatBytes(want.bytes)}`);
    // Read as much from disk as the plain load, holding about half of it.
    await using ck = await Checkpoint.open(small);
    expect(got.bytes).toBe(formatBytes(ck.totalBytes));
    expect(want.bytes).toBeLessThan(ck.totalBytes * 0.7);
  });

  it('--dtype float32 converts every tensor', async () => {
    const lines = await load({ model: small, device: 'cpu', dtype: 'float32' });
    const want = heldBytes(SMALL, 'float32');
    expect(loadedLine(lines, 'cpu')).toMatchObject({ tensors: want.tensors, quantized: false });
    expect(lines).toContain(`tensor memory: ${formatBytes(want.bytes)}`);
  });

  it('a Qwen3.6-shaped FP8 checkpoint with its experts one by one loads by that layout (and by the fused one in bf16)', async () => {
    const config = {
      ...QWEN3_5_REFERENCE_CASES['qwen3.6-moe-ref'].config,
      hiddenSize: 128,
      moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 128, sharedExpertIntermediateSize: 128 },
    };
    const experts = config.numHiddenLayers * config.moe.numExperts * 3;
    for (const [dtype, oneByOne] of [
      ['fp8', true],
      ['bfloat16', false],
    ] as const) {
      const dir = join(root, `qwen3_6-${dtype}`);
      await writeRandomQwen35Checkpoint(dir, config, { dtype, seed: 1 });
      const specs = qwen35CheckpointSpecs(config, oneByOne);
      const linears = specs.filter((spec) => spec.role === 'linear' || spec.role === 'lm_head').length;
      expect(specs.filter((spec) => spec.name.includes('.experts.')).length).toBe(oneByOne ? experts : 2 * config.numHiddenLayers);
      expect(loadedLine(await load({ model: dir, device: 'cpu' }), 'cpu'), dtype).toMatchObject({
        tensors: specs.length + (oneByOne ? linears - 1 : 0),
        linears,
      });
    }
  });

  it('a .safetensors file or a checkpoint of another model loads tensor by tensor; inspect says what it is', async () => {
    const other = join(root, 'vae');
    const tensors = [
      ['decoder.conv_in.weight', { dtype: 'float32', shape: [4, 3, 3, 3], bytes: () => new Uint8Array(4 * 108) }],
      ['decoder.conv_in.bias', { dtype: 'bfloat16', shape: [4], bytes: () => new Uint8Array(8) }],
    ] as const;
    await writeCheckpoint(other, tensors, { config: { _class_name: 'AutoencoderKLWan', z_dim: 16 } });
    const file = join(other, 'model.safetensors');
    expect(loadedLine(await load({ model: file, device: 'cpu' }), 'cpu')).toMatchObject({ tensors: 2, linears: 0 });
    expect(loadedLine(await load({ model: other, device: 'cpu' }), 'cpu')).toMatchObject({ tensors: 2, linears: 0 });
    const inspected = await run((out) => runInspectCheckpoint(other, out));
    expect(inspected[0]).toMatch(
      /^config: not a supported model \(.*model_type must be a string \(one of qwen3, qwen3_moe, lfm2, lfm2_moe, qwen3_5, qwen3_5_moe\), got nothing\)$/,
    );
    expect(inspected[1]).toBe(`2 tensors, ${formatBytes(4 * 108 + 8)}`);
    const single = await run((out) => runInspectCheckpoint(file, out));
    expect(single[0]).toBe(`2 tensors, ${formatBytes(4 * 108 + 8)}`); // a bare file has no config line
    expect(single.slice(1)).toEqual([
      expect.stringMatching(/^ {2}decoder\.conv_in\.weight {2}F32 \[4, 3, 3, 3\] {2}432 B {2}model\.safetensors@\d+$/),
      expect.stringMatching(/^ {2}decoder\.conv_in\.bias {2}BF16 \[4\] {2}8 B {2}model\.safetensors@\d+$/),
    ]);
    // Another transformers model (model_type llama) also loads tensor by tensor...
    await writeFile(join(other, 'config.json'), JSON.stringify({ model_type: 'llama', hidden_size: 4 }));
    expect(loadedLine(await load({ model: other, device: 'cpu', dtype: 'fp8' }), 'cpu')).toMatchObject({ tensors: 2, linears: 0 });
    // ...but a Qwen3 config is held to the Qwen3 rules.
    await writeFile(join(other, 'config.json'), JSON.stringify({ ...JSON.parse(await readFile(join(small, 'config.json'), 'utf8')), hidden_act: 'gelu' }));
    await expect(load({ model: other, device: 'cpu' })).rejects.toThrow(/hidden_act must be 'silu'/);
  });

  it('errors are CheckpointErrors: a missing directory, a Qwen3 config whose tensors are missing', async () => {
    const missing = join(root, 'missing');
    await expect(load({ model: missing, device: 'cpu' })).rejects.toBeInstanceOf(CheckpointError);
    await expect(run((out) => runInspectCheckpoint(missing, out))).rejects.toBeInstanceOf(CheckpointError);
    // A valid config, but the weights of a smaller model.
    const partial = join(root, 'partial');
    await mkdir(partial);
    await writeRandomQwen3Checkpoint(partial, { ...SMALL, numHiddenLayers: 1, moe: { ...SMALL.moe!, mlpOnlyLayers: [] } }, { seed: 1 });
    const config = JSON.parse(await readFile(join(partial, 'config.json'), 'utf8')) as Record<string, unknown>;
    await writeFile(join(partial, 'config.json'), JSON.stringify({ ...config, num_hidden_layers: 2 }));
    const e = await load({ model: partial, device: 'cpu' }).then(
      () => expect.fail('expected a rejection'),
      (err: unknown) => err as CheckpointError,
    );
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e.tensor).toMatch(/^model\.layers\.1\./);
  });

  it.skipIf(!gpuUsable && !required)('on WebGPU: the loaded line and the GPU memory line', async () => {
    const lines = await load({ model: small, device: 'webgpu', dtype: 'fp8' });
    const want = heldBytes(SMALL, 'fp8');
    expect(loadedLine(lines, 'webgpu')).toMatchObject({ tensors: want.tensors, linears: linearCount(SMALL), quantized: true });
    const gpuLine = lines.find((l) => l.startsWith('GPU memory: '));
    expect(gpuLine, lines.join('\n')).toMatch(/^GPU memory: [\d.]+ \w+ live, [\d.]+ \w+ peak$/);
    expect(lines.some((l) => l.startsWith('tensor memory: '))).toBe(false);
  });
});
