// Training Qwen3.5 / Qwen3.6: the chunked gated delta rule (composed from differentiable ops) equals the recurrent
// one, forward and backward, at any chunk and with repeated keys; the training forward's logits equal the inference
// forward's on CPU and WebGPU for tiny Qwen3.6-MoE (shared expert stacked as expert E, and kept beside) and dense
// Qwen3.5 checkpoints, one chunk and several; the sites carry the release's module paths; LoRA gradients match
// finite differences; a few LoRA (and full) steps lower the loss; PEFT files round-trip and merge back to the
// adapted logits, q_proj's adapter in the checkpoint's per-head [query | gate] row order (checked against the
// checkpoint's own q_proj with the delta added); the fully trained weights export to a checkpoint that loads back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyInto, crossEntropy, Generator, memoryStats, noGrad, randn, setDefaultDevice, synchronize, tensor, tidy, type Tensor } from '../../src/index.js';
import { gpuCounters } from '../../src/runtime/stats.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { Qwen35Model } from '../../src/models/qwen3_5/model.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { tensorSource } from '../../src/formats/safetensors-writer.js';
import { writeCheckpoint } from '../../src/formats/checkpoint-writer.js';
import { QWEN3_5_REFERENCE_CASES } from '../../tools/qwen3_5-reference/presets.js';
import { trainingLogits, trainingView, type TrainingView } from '../../src/train/decoder-training.js';
import { siteParts, sitePlacements, type ProjectionSite } from '../../src/models/layers/projection-site.js';
import { dequantizeWeight } from '../../src/ops/matmul.js';
import { chunkedGatedDeltaRule, recurrentGatedDeltaRule } from '../../src/models/qwen3_5/gated-delta-rule.js';
import { deltaNetForward } from '../../src/models/qwen3_5/training.js';
import { FineTune } from '../../src/train/fine-tune.js';
import { defaultLoraTargets, LoraAdapter } from '../../src/train/lora.js';
import { loadAdapter, saveAdapter } from '../../src/train/peft.js';
import { saveWeights } from '../../src/train/export.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

const CASES = {
  moe: QWEN3_5_REFERENCE_CASES['qwen3.6-moe-ref'].config,
  wide: QWEN3_5_REFERENCE_CASES['qwen3.6-moe-wide-shared-ref'].config,
  dense: QWEN3_5_REFERENCE_CASES['qwen3.5-ref'].config,
};
const IDS = [3, 17, 42, 5, 88, 1, 60, 200, 9, 31, 4];
const LONG = Array.from({ length: 70 }, (_, i) => (i * 37 + 3) % 256);
const EVERY_PROJECTION = [
  'q_proj',
  'k_proj',
  'v_proj',
  'o_proj',
  'in_proj_qkv',
  'in_proj_z',
  'in_proj_b',
  'in_proj_a',
  'out_proj',
  'gate_proj',
  'up_proj',
  'down_proj',
];

const dirs: Record<string, string> = {};
const loaded: LoadedModel[] = [];

async function open(name: string, device: 'cpu' | 'webgpu', maxSequence = 16, dtype?: 'fp8'): Promise<Qwen35Model> {
  const m = await loadModel(dirs[name], { device, maxSequence, dtype });
  loaded.push(m);
  expect(m.model).toBeInstanceOf(Qwen35Model);
  return m.model as Qwen35Model;
}

async function inferenceLogits(model: Qwen35Model, ids: readonly number[]): Promise<Float32Array> {
  const cache = model.newCache();
  const logits = await model.forward(tensor([...ids], { dtype: 'int32', device: model.device }), cache, { lastOnly: false });
  cache.dispose();
  const out = (await logits.toArray()) as Float32Array;
  logits.dispose();
  return out;
}

async function trainLogits(view: TrainingView, device: 'cpu' | 'webgpu', ids: readonly number[], adapter?: LoraAdapter, options = {}): Promise<Float32Array> {
  const tokens = tensor([...ids], { dtype: 'int32', device });
  const logits = await trainingLogits(view, tokens, adapter?.delta, options);
  const out = (await logits.toArray()) as Float32Array;
  logits.dispose();
  tokens.dispose();
  return out;
}

/** An adapter whose B is random too (B = 0 would make it a no-op and A's gradient zero). */
function randomAdapter(view: TrainingView, targetModules: readonly string[], device: 'cpu' | 'webgpu', seed: number, scale = 0.2): LoraAdapter {
  const adapter = LoraAdapter.create(view.sites, { rank: 2, alpha: 4, targetModules }, { device, generator: new Generator(seed) });
  for (const { b } of adapter.modules.values()) tidy(() => copyInto(b, randn(b.shape, { device, generator: new Generator(seed + 1) }).mul(scale)));
  return adapter;
}

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => Array.from(a).reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
const maxAbs = (a: ArrayLike<number>) => Array.from(a).reduce((m, v) => Math.max(m, Math.abs(v)), 0);

beforeAll(async () => {
  for (const [name, config] of Object.entries(CASES)) {
    dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-train-qwen3_5-${name}-`));
    await writeRandomQwen35Checkpoint(dirs[name], config, { dtype: 'float32', seed: 5 });
  }
  // Experts 2 x 64 rows wide, so FP8 at load quantizes their gate|up in 128-row blocks.
  dirs.fp8 = mkdtempSync(join(tmpdir(), 'tensorgpu-train-qwen3_5-fp8-'));
  await writeRandomQwen35Checkpoint(
    dirs.fp8,
    { ...CASES.moe, moe: { ...CASES.moe.moe!, moeIntermediateSize: 64, sharedExpertIntermediateSize: 64 } },
    { dtype: 'float32', seed: 5 },
  );
});

afterAll(() => {
  for (const m of loaded) m.model.dispose();
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

describe('the chunked gated delta rule', () => {
  /** Random rule inputs [S, H, d] on the CPU: q and k l2-normalised, log decays in (-2, 0), beta in (0, 1). */
  function inputs(s: number, h: number, dk: number, dv: number, seed: number, sameKey = false) {
    const gen = new Generator(seed);
    const unit = (t: Tensor) => t.div(t.mul(t).sum(-1, { keepdim: true }).sqrt());
    return tidy(() => {
      const k = sameKey
        ? unit(randn([1, h, dk], { generator: gen }))
            .expand([s, h, dk])
            .contiguous()
        : unit(randn([s, h, dk], { generator: gen }));
      return {
        q: unit(randn([s, h, dk], { generator: gen })).mul(1 / Math.sqrt(dk)),
        k,
        v: randn([s, h, dv], { generator: gen }),
        g: sameKey ? randn([s, h], { generator: gen }).mul(0) : randn([s, h], { generator: gen }).sigmoid().mul(-2),
        beta: sameKey ? randn([s, h], { generator: gen }).mul(0).add(0.999) : randn([s, h], { generator: gen }).sigmoid(),
      };
    });
  }

  it('equals the recurrent rule, forward and backward, at any chunk; one key repeated (no decay, beta ~ 1) stays exact', async () => {
    for (const [s, h, dk, dv, chunk, same] of [
      [37, 3, 8, 6, 64, false],
      [37, 3, 8, 6, 4, false],
      [70, 2, 16, 16, 64, false],
      [5, 3, 4, 4, 2, false],
      [1, 2, 4, 4, 64, false],
      [64, 2, 8, 4, 64, true],
    ] as const) {
      const x = inputs(s, h, dk, dv, s + chunk, same);
      const all = Object.values(x);
      for (const t of all) t.requiresGrad_();
      const weight = randn([s, h, dv], { generator: new Generator(9) });
      const run = async (rule: () => Tensor) => {
        const out = rule();
        const loss = out.mul(weight).sum();
        loss.backward();
        const grads = await Promise.all(all.map(async (t) => Array.from(await t.grad!.toArray())));
        for (const t of all) t.zeroGrad();
        return { out: Array.from(await out.toArray()), grads };
      };
      const want = await run(() => recurrentGatedDeltaRule(x.q, x.k, x.v, x.g, x.beta));
      const got = await run(() => chunkedGatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, chunk));
      const what = `S=${s} H=${h} dk=${dk} dv=${dv} chunk ${chunk}${same ? ', one key' : ''}`;
      expectClose(got.out, want.out, { atol: 2e-5, rtol: 1e-4 }, what);
      ['q', 'k', 'v', 'g', 'beta'].forEach((n, i) => expectClose(got.grads[i], want.grads[i], { atol: 1e-4, rtol: 1e-3 }, `${what}: d${n}`));
    }
  });
});

describe(`training forward of Qwen3.5 / Qwen3.6 ${gpu.skipReason}`, () => {
  for (const name of ['moe', 'wide', 'dense'] as const) {
    it(`${name}: the training logits equal the inference forward's on every device (one chunk, chunks of 4, the recurrent rule)`, async () => {
      for (const device of devices) {
        const model = await open(name, device);
        const view = trainingView(model);
        const want = await inferenceLogits(model, IDS);
        expect(want.length).toBe(IDS.length * CASES[name].vocabSize);
        expectClose(await trainLogits(view, device, IDS), want, { atol: 1e-4, rtol: 1e-4 }, `${name} on ${device}`);
        if (device === 'cpu') {
          expectClose(await trainLogits(view, device, IDS, undefined, { deltaRuleChunk: 4 }), want, { atol: 1e-4, rtol: 1e-4 }, `${name}, chunks of 4`);
          expectClose(await trainLogits(view, device, IDS, undefined, { deltaRuleRecurrent: true }), want, { atol: 1e-4, rtol: 1e-4 }, `${name}, recurrent`);
        }
      }
    });
  }

  it('moe: 70 tokens (two chunks of 64; the inference prefill takes its chunked kernel on WebGPU)', async () => {
    for (const device of devices) {
      const model = await open('moe', device, 80);
      const want = await inferenceLogits(model, LONG);
      const got = await trainLogits(trainingView(model), device, LONG);
      // Seventy tokens through five layers: relative to the largest logit, as the reference fixtures compare.
      expect(maxDiff(got, want) / Math.max(1, maxAbs(want)), `70 tokens on ${device}`).toBeLessThan(2e-5);
    }
  });

  it('sites: the release module paths, q_proj interleaved per head, the shared expert stacked or beside; default targets', async () => {
    const view = trainingView(await open('moe', 'cpu'));
    const c = CASES.moe;
    const names = view.sites.map((s) => s.name);
    expect(names.slice(0, 5)).toEqual(
      ['in_proj_qkv', 'in_proj_z', 'in_proj_b', 'in_proj_a', 'out_proj'].map((m) => `model.language_model.layers.0.linear_attn.${m}`),
    );
    expect(names).toContain('model.language_model.layers.2.self_attn.q_proj');
    expect(names).toContain('model.language_model.layers.4.mlp.experts.7.down_proj');
    expect(names).toContain('model.language_model.layers.4.mlp.shared_expert.up_proj');
    const perLayer = (l: number) => names.filter((n) => n.startsWith(`model.language_model.layers.${l}.`)).length;
    expect(perLayer(0)).toBe(5 + 3 * (c.moe!.numExperts + 1));
    expect(perLayer(2)).toBe(4 + 3 * (c.moe!.numExperts + 1));
    const q = view.sites.find((s) => s.name.endsWith('layers.2.self_attn.q_proj'))!;
    expect([q.outFeatures, q.inFeatures]).toEqual([2 * c.numAttentionHeads * c.headDim, c.hiddenSize]);
    expect(q.interleaved?.parts.map((p) => p.rowOffset)).toEqual([0, (c.numAttentionHeads + 2 * c.numKeyValueHeads) * c.headDim]);
    const shared = view.sites.find((s) => s.name.endsWith('layers.0.mlp.shared_expert.gate_proj'))!;
    expect(shared.expert).toBe(c.moe!.numExperts);
    const wide = trainingView(await open('wide', 'cpu')).sites.find((s) => s.name.endsWith('layers.0.mlp.shared_expert.gate_proj'))!;
    expect([wide.expert, wide.outFeatures]).toEqual([undefined, CASES.wide.moe!.sharedExpertIntermediateSize]);
    expect(defaultLoraTargets(view)).not.toContain('gate_proj');
    expect(LoraAdapter.create(view.sites, { rank: 2, alpha: 4, targetModules: defaultLoraTargets(view) }).modules.size).toBe(
      3 * 3 + 2 * 4 + 3 * 5, // in_proj_qkv, in_proj_z, out_proj per DeltaNet; q, k, v, o per attention; the shared expert's three
    );
  });
});

describe(`LoRA and full training of Qwen3.5 / Qwen3.6 ${gpu.skipReason}`, () => {
  // Dense: every projection. MoE: the last layer's experts, shared expert and the attention output before its
  // router, the adapters that leave every routing choice alone (an upstream one flips a near-tie top-k within a
  // step of 1e-3, and a finite difference across the flip measures the jump).
  const FD = {
    dense: { targets: () => EVERY_PROJECTION, eps: 5e-4 },
    moe: { targets: (v: TrainingView) => v.sites.map((s) => s.name).filter((n) => /layers\.4\.(mlp\.|self_attn\.o_proj)/.test(n)), eps: 1e-3 },
    wide: { targets: (v: TrainingView) => v.sites.map((s) => s.name).filter((n) => /layers\.3\.(mlp\.|self_attn\.o_proj)/.test(n)), eps: 1e-3 },
  };
  for (const name of ['dense', 'moe', 'wide'] as const) {
    it(`${name}: LoRA gradients match finite differences along a random direction (CPU)`, async () => {
      const model = await open(name, 'cpu');
      const view = trainingView(model);
      const adapter = randomAdapter(view, FD[name].targets(view), 'cpu', 21, 0.1);
      const params = adapter.parameters();
      const ids = IDS.slice(0, 9);
      const loss = async () => {
        const [inputs, targets] = [tensor(ids.slice(0, 8), { dtype: 'int32' }), tensor(ids.slice(1), { dtype: 'int32' })];
        const logits = await trainingLogits(view, inputs, adapter.delta);
        const l = crossEntropy(logits, targets);
        for (const t of [inputs, targets, logits]) t.dispose();
        return l;
      };
      const l = await loss();
      l.backward();
      l.dispose();
      const direction = params.map((p, i) => randn(p.shape, { generator: new Generator(100 + i) }));
      let analytic = 0;
      for (let i = 0; i < params.length; i++) {
        const [g, d] = [await params[i].grad!.toArray(), await direction[i].toArray()];
        for (let j = 0; j < g.length; j++) analytic += g[j] * d[j];
      }
      for (const p of params) p.zeroGrad();
      const shifted = async (by: number) => {
        noGrad(() => params.forEach((p, i) => tidy(() => copyInto(p, p.add(direction[i].mul(by))))));
        const l = await loss();
        const value = await l.item();
        l.dispose();
        noGrad(() => params.forEach((p, i) => tidy(() => copyInto(p, p.sub(direction[i].mul(by))))));
        return value;
      };
      const eps = FD[name].eps;
      const numeric = ((await shifted(eps)) - (await shifted(-eps))) / (2 * eps);
      expect(Math.abs(analytic)).toBeGreaterThan(1e-2);
      expect(Math.abs(numeric - analytic), `directional derivative ${analytic} vs finite differences ${numeric}`).toBeLessThan(
        1e-2 * Math.abs(analytic) + 2e-4,
      );
      for (const d of direction) d.dispose();
      adapter.dispose();
    });
  }

  it('moe: a few LoRA steps lower the loss on WebGPU (CPU without it), memory flat from step to step, the base weights bit-identical', async () => {
    const device = devices.at(-1)!;
    const model = await open('moe', device);
    const view = trainingView(model);
    const before = await Promise.all(model.weightTensors().map(async (t) => Array.from(await t.toArray())));
    const adapter = LoraAdapter.create(view.sites, { rank: 4, alpha: 8, targetModules: defaultLoraTargets(view) }, { device, generator: new Generator(1) });
    const run = new FineTune(model, { kind: 'lora', adapter }, { steps: 8, lr: 3e-2, warmupSteps: 1, schedule: 'constant' });
    const losses: number[] = [];
    let live = -1;
    for (let i = 0; i < 8; i++) {
      losses.push((await run.step(IDS)).loss);
      await synchronize();
      // Nothing of a step outlives it once the optimizer state exists (step 1 creates it).
      if (i === 1) live = memoryStats().liveBytes;
      if (i > 1) expect(memoryStats().liveBytes, `live bytes after step ${i}`).toBe(live);
    }
    expect(losses.at(-1)!, losses.join(', ')).toBeLessThan(losses[0] * 0.8);
    expect(await Promise.all(model.weightTensors().map(async (t) => Array.from(await t.toArray())))).toEqual(before);
    run.dispose();
    adapter.dispose();
  }, 120_000);

  for (const name of ['moe', 'wide'] as const) {
    it(`${name}: PEFT files round-trip; merged into the weights (stacked rows, regrouped q_proj, experts, shared expert) they give the adapted logits`, async () => {
      const device = devices.at(-1)!;
      const model = await open(name, device);
      const view = trainingView(model);
      const adapter = randomAdapter(view, [...EVERY_PROJECTION, 'shared_expert.gate_proj'], device, 31, 0.1);
      expect([...adapter.modules.keys()]).toContain('model.language_model.layers.0.mlp.shared_expert.down_proj');
      const dir = join(mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-adapter-')), 'adapter');
      dirs[`${name}-adapter`] = dir;
      await saveAdapter(dir, adapter, { baseModel: 'test/qwen3.6' });
      const back = await loadAdapter(dir, view.sites, { device });
      expect([...back.modules.keys()]).toEqual([...adapter.modules.keys()]);
      const base = await trainLogits(view, device, IDS);
      const want = await trainLogits(view, device, IDS, back);
      expect(maxDiff(want, base)).toBeGreaterThan(1e-2);
      back.merge(view.sites);
      expectClose(await inferenceLogits(model, IDS), want, { atol: 2e-4, rtol: 2e-4 }, `${name} merged on ${device}`);
      adapter.dispose();
      back.dispose();
    });
  }

  it("dense: q_proj's adapter is in the checkpoint's per-head [query | gate] row order (the checkpoint's q_proj plus the delta loads to the adapted logits)", async () => {
    const model = await open('dense', 'cpu');
    const view = trainingView(model);
    const adapter = randomAdapter(view, ['q_proj'], 'cpu', 41, 0.3);
    const want = await trainLogits(view, 'cpu', IDS, adapter);
    // The checkpoint as stored, each q_proj plus scaling * B A: what PEFT's merge_and_unload would save.
    const file = await SafetensorsFile.open(join(dirs.dense, 'model.safetensors'));
    const tensors: [string, Tensor][] = [];
    for (const name of file.names) {
      const t = await file.load(name, { device: 'cpu' });
      const m = adapter.modules.get(name.replace(/\.weight$/, ''));
      tensors.push([name, m ? tidy(() => t.add(m.b.matmul(m.a).mul(adapter.scaling))) : t]);
    }
    await file[Symbol.asyncDispose]();
    expect(tensors.filter(([n]) => n.endsWith('q_proj.weight')).length).toBe(1);
    const out = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-qmerged-'));
    dirs.qmerged = out;
    for (const f of readdirSync(dirs.dense)) if (!f.endsWith('.safetensors')) copyFileSync(join(dirs.dense, f), join(out, f));
    await writeCheckpoint(
      out,
      tensors.map(([n, t]) => [n, tensorSource(t)] as const),
    );
    for (const [, t] of tensors) t.dispose();
    const merged = await open('qmerged', 'cpu');
    expectClose(await inferenceLogits(merged, IDS), want, { atol: 1e-4, rtol: 1e-4 }, 'q_proj + delta in the checkpoint');
    adapter.dispose();
  });

  it('FP8 at load: LoRA gradients reach the adapters through the FP8 stacks and experts; the merge writes base + delta, re-quantized', async () => {
    const model = await open('fp8', 'cpu', 16, 'fp8');
    const view = trainingView(model);
    const checked = [
      'layers.0.linear_attn.in_proj_z',
      'layers.2.self_attn.q_proj',
      'layers.0.mlp.experts.1.up_proj',
      'layers.0.mlp.shared_expert.gate_proj',
    ].map((n) => view.sites.find((s) => s.name.endsWith(n))!);
    for (const s of checked) expect(s.weight.data.dtype, s.name).toBe('float8_e4m3fn');
    const adapter = randomAdapter(view, [...EVERY_PROJECTION, 'shared_expert.gate_proj'], 'cpu', 51, 0.4);
    const [inputs, targets] = [tensor(IDS.slice(0, 10), { dtype: 'int32' }), tensor(IDS.slice(1), { dtype: 'int32' })];
    const loss = crossEntropy(await trainingLogits(view, inputs, adapter.delta), targets);
    loss.backward();
    loss.dispose();
    // Every adapter but those of experts no token chose has a gradient (the experts' live in their stacks).
    expect(adapter.stacks.length).toBeGreaterThan(0);
    let experts = 0;
    for (const name of adapter.modules.keys()) {
      const grads = adapter.gradients(name);
      const nonzero = await Promise.all([grads.a, grads.b].map(async (g) => g !== undefined && Array.from(await g.toArray()).some((v) => v !== 0)));
      if (name.includes('.experts.') && !nonzero[0] && !nonzero[1]) continue;
      experts += name.includes('.experts.') ? 1 : 0;
      expect(nonzero, name).toEqual([true, true]);
    }
    expect(experts).toBeGreaterThan(0);
    // Each part's rows after the merge are its rows before plus its rows of scaling * B A (in the checkpoint's
    // order, split as the site maps them), to FP8's rounding (e4m3: 2^-4 relative at most).
    const dequantized = (s: ProjectionSite) =>
      sitePlacements(s).map(({ weight, rowOffset, rows }) => {
        const pick = (t: Tensor) => (s.expert === undefined ? t : t.select(0, s.expert));
        return dequantizeWeight(pick(weight.data), pick(weight.scale!), 'block').narrow(0, rowOffset, rows);
      });
    const before = checked.map(dequantized);
    const deltas = checked.map((s) => {
      const m = adapter.modules.get(s.name)!;
      return siteParts(s, m.b, 0).map((b) => b.matmul(m.a).mul(adapter.scaling));
    });
    adapter.merge(view.sites);
    for (const [i, s] of checked.entries()) {
      for (const [j, after] of dequantized(s).entries()) {
        const [err, delta] = [await after.sub(before[i][j]).sub(deltas[i][j]).toArray(), await deltas[i][j].toArray()];
        const rms = (a: ArrayLike<number>) => Math.sqrt(Array.from(a, (v) => v * v).reduce((x, y) => x + y, 0) / a.length);
        expect(rms(err) / rms(delta), `${s.name} part ${j}`).toBeLessThan(0.08);
      }
    }
    adapter.dispose();
  });

  it('dense: full fine-tuning lowers the loss; the trained weights export in the release layout and load back to the same logits', async () => {
    const model = await open('dense', 'cpu');
    const run = new FineTune(model, { kind: 'full' }, { steps: 6, lr: 1e-2, warmupSteps: 1, schedule: 'constant' });
    const losses: number[] = [];
    for (let i = 0; i < 6; i++) losses.push((await run.step(IDS)).loss);
    expect(losses.at(-1)!, losses.join(', ')).toBeLessThan(losses[0] * 0.8);
    run.dispose();
    const out = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen3_5-export-'));
    dirs.exported = out;
    await saveWeights(out, trainingView(model), dirs.dense);
    const again = await open('exported', 'cpu');
    expectClose(await trainLogits(trainingView(again), 'cpu', IDS), await trainLogits(trainingView(model), 'cpu', IDS), { atol: 1e-5, rtol: 1e-5 }, 'exported');
  });

  it('moe: the export of an untrained model (fused experts, the shared expert and its gate out of the stacks) loads back to the same logits', async () => {
    for (const name of ['moe', 'wide'] as const) {
      const model = await open(name, 'cpu');
      const out = mkdtempSync(join(tmpdir(), `tensorgpu-qwen3_5-export-${name}-`));
      dirs[`${name}-exported`] = out;
      await saveWeights(out, trainingView(model), dirs[name]);
      const again = await open(`${name}-exported`, 'cpu');
      expect(Array.from(await inferenceLogits(again, IDS))).toEqual(Array.from(await inferenceLogits(model, IDS)));
    }
  });

  it.skipIf(!gpu.available)('a DeltaNet layer forward takes a fixed number of dispatches plus 9 per further chunk of 64 tokens (WebGPU)', async () => {
    const model = await open('dense', 'webgpu', 16);
    const layer = trainingView(model).layers[0];
    expect(layer.mixer.kind).toBe('deltaNet');
    const count = (s: number) => {
      const x = randn([s, CASES.dense.hiddenSize], { device: 'webgpu', generator: new Generator(s) });
      const d0 = gpuCounters().dispatches;
      tidy(() => deltaNetForward(x, x, layer.mixer as never, undefined, {}));
      const d = gpuCounters().dispatches - d0;
      x.dispose();
      return d;
    };
    const [one, two, four, six] = [count(64), count(128), count(256), count(384)];
    console.log(`DeltaNet layer forward dispatches: 64 tokens ${one}, 128 ${two}, 256 ${four}, 384 ${six}`);
    // Per further chunk: 8 ops carrying the state (4 matmuls) and the copy of its output into the result.
    expect(six - four).toBe(2 * 9);
    expect(one).toBeLessThan(90);
    expect(two - one).toBeLessThan(20); // a second chunk: its 9, and (once) W, q exp(gc), k exp(gc_last - gc)
  });
});
