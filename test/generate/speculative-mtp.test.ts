// Speculative decoding with Qwen3.6's own multi-token-prediction layer (`mtp.*`): a tiny random Qwen3.6-shaped
// checkpoint written with the MTP tensors loads them (and one without still loads), greedy output with the MTP
// drafter equals plain greedy on the CPU and on WebGPU, the drafter's first draft of each round equals the MTP run
// from scratch over the whole history (its cache bookkeeping across rounds that keep 0..k drafts), sampling runs
// seeded, and the errors name what is missing.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel, setDefaultDevice } from '../../src/index.js';
import { tensor } from '../../src/ops/creation.js';
import { generate, type GenerateOptions, type GenerationStats } from '../../src/generate/generate.js';
import { SpeculativeError, type Drafter } from '../../src/generate/drafters.js';
import { mtpDrafter, type MtpDrafter } from '../../src/generate/mtp-drafter.js';
import type { CausalLM } from '../../src/models/causal-lm.js';
import { QWEN3_PRESETS } from '../../src/models/qwen3/presets.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import type { Qwen35Model } from '../../src/models/qwen3_5/model.js';
import { Qwen35Mtp } from '../../src/models/qwen3_5/mtp.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { parseQwen35Config, qwen35ToHfConfig } from '../../src/models/qwen3_5/config.js';
import { qwen35CheckpointSpecs } from '../../src/models/qwen3_5/layout.js';
import { savedConfig, writeRandomCheckpoint } from '../../src/models/random-weights.js';
import { TextTokenizer, qwen3TokenizerDir } from '../../src/tokenizer/tokenizer.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const tokenizer = TextTokenizer.fromDirectory(qwen3TokenizerDir());
const f32 = { dtype: 'float32' as const, seed: 4 };
// Qwen3.6-35B-A3B's shape, small: a DeltaNet layer then a gated attention layer, 8 experts, a 512-token vocabulary.
const CONFIG = {
  ...QWEN3_5_PRESETS['qwen3.6-moe-tiny'],
  vocabSize: 512,
  bosTokenId: 0,
  eosTokenIds: [1],
  numHiddenLayers: 2,
  layerTypes: ['linear_attention', 'full_attention'] as const,
  moe: { ...QWEN3_5_PRESETS['qwen3.6-moe-tiny'].moe!, numExperts: 8 },
};

const dirs: Record<string, string> = {};
beforeAll(async () => {
  const write: Record<string, (dir: string) => Promise<unknown>> = {
    mtp: (dir) => writeRandomQwen35Checkpoint(dir, { ...CONFIG, layerTypes: [...CONFIG.layerTypes] }, { ...f32, mtp: true }),
    plain: (dir) => writeRandomQwen35Checkpoint(dir, { ...CONFIG, layerTypes: [...CONFIG.layerTypes] }, f32),
    qwen3: (dir) =>
      writeRandomQwen3Checkpoint(dir, { ...QWEN3_PRESETS['qwen3-tiny'], vocabSize: 512, bosTokenId: 0, eosTokenIds: [1], numHiddenLayers: 1 }, f32),
  };
  for (const [name, w] of Object.entries(write)) {
    dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-mtp-${name}-`));
    await w(dirs[name]);
  }
}, 60_000);
afterAll(() => {
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

const PROMPT = [5, 17, 300, 42, 7, 99, 5, 17, 300, 42];

async function run(model: CausalLM, options: GenerateOptions) {
  const ids: number[] = [];
  const stream = generate(model, tokenizer, PROMPT, { temperature: 0, maxNewTokens: 12, stopTokenIds: [], ...options });
  let r = await stream.next();
  while (!r.done) {
    ids.push(r.value.id);
    r = await stream.next();
  }
  return { ids, stats: r.value as GenerationStats };
}

const load = async (name: string, device: 'cpu' | 'webgpu') => (await loadModel(dirs[name], { device, maxSequence: 32 })).model;

/** Greedy with the MTP drafter equals plain greedy. */
async function checkGreedy(device: 'cpu' | 'webgpu', ks: readonly number[]) {
  const model = await load('mtp', device);
  try {
    const plain = await run(model, {});
    for (const k of ks) {
      const got = await run(model, { speculative: { kind: 'mtp' }, numSpeculativeTokens: k });
      expect(got.ids, `k=${k} on ${device}`).toEqual(plain.ids);
      const s = got.stats.speculative!;
      expect(s.fallback).toBeUndefined();
      expect(s.kind).toBe('mtp');
      expect(s.draftedTokens).toBeGreaterThan(0);
      expect(s.acceptedTokens).toBeLessThanOrEqual(s.draftedTokens);
      expect(s.tokensPerTargetForward).toBeGreaterThanOrEqual(1);
    }
  } finally {
    model.dispose();
  }
}

describe('MTP weights', () => {
  it('load when the checkpoint has them, and a checkpoint without them still loads', async () => {
    const config = parseQwen35Config(JSON.parse(readFileSync(join(dirs.mtp, 'config.json'), 'utf8')));
    expect(config.mtpLayers).toBe(1);
    const withMtp = (await load('mtp', 'cpu')) as Qwen35Model;
    const without = (await load('plain', 'cpu')) as Qwen35Model;
    try {
      expect(withMtp.weights.mtp?.layers).toHaveLength(1);
      expect(withMtp.weights.mtp!.fc.data.shape).toEqual([CONFIG.hiddenSize, 2 * CONFIG.hiddenSize]);
      expect(withMtp.multiTokenPredictor()).toBeInstanceOf(Qwen35Mtp);
      expect(without.weights.mtp).toBeUndefined();
      // The text model's weights (and so its figures) leave the MTP layer out.
      expect(withMtp.weightTensors()).toHaveLength(without.weightTensors().length);
    } finally {
      withMtp.dispose();
      without.dispose();
    }
  });
});

describe('speculative mtp: greedy equals plain greedy', () => {
  it('on the CPU, k = 1 and 3', () => checkGreedy('cpu', [1, 3]), 30_000);
  // Seconds on an idle machine; SwiftShader on two busy cores has taken two minutes.
  it.runIf(gpu.available)(`on WebGPU, k = 3 ${gpu.skipReason}`, () => checkGreedy('webgpu', [3]), 300_000);
});

describe('speculative mtp: the drafter', () => {
  it('drafts what the MTP layer run from scratch over the history drafts, whatever each round kept', async () => {
    const model = (await load('mtp', 'cpu')) as Qwen35Model;
    const mtp = model.multiTokenPredictor() as Qwen35Mtp;
    const inner: MtpDrafter = mtpDrafter(model, { temperature: 0 }, Math.random);
    const plain = await run(model, {});
    const truth = [...PROMPT, ...plain.ids];
    const firstDrafts: { history: number[]; d1: number }[] = [];
    let round = 0;
    // The MTP drafter feeds and drafts; the proposal sent on is the plain run's tokens with one wrong at a varying
    // index, so the rounds keep 0..k drafts and the MTP cache is set back each way.
    const drafter: Drafter = {
      name: 'mtp-scripted',
      forwardTarget: (t, c, o) => inner.forwardTarget(t, c, o),
      async propose(history, k) {
        const d = await inner.propose(history, k);
        if (d.tokens.length) firstDrafts.push({ history: [...history], d1: d.tokens[0]! });
        const tokens = truth.slice(history.length, history.length + k);
        const wrong = round++ % (k + 1);
        if (wrong < tokens.length) tokens[wrong] = (tokens[wrong]! + 1) % 512;
        return { tokens };
      },
      accepted: (a) => inner.accepted(a),
      dispose: () => inner.dispose(),
    };
    try {
      const got = await run(model, { speculative: { kind: 'custom', drafter }, numSpeculativeTokens: 3 });
      expect(got.ids).toEqual(plain.ids);
      expect(firstDrafts.length).toBeGreaterThan(3);
      for (const { history, d1 } of firstDrafts) {
        // From scratch: the target over history[0..L-2], the MTP over its hidden states paired with history[1..L-1].
        const cache = model.newCache();
        const mtpCache = mtp.newCache();
        const ids = tensor(history.slice(0, -1), { dtype: 'int32', device: 'cpu' });
        const next = tensor(history.slice(1), { dtype: 'int32', device: 'cpu' });
        const { logits, hidden } = model.forwardWithHidden(ids, cache);
        const step = mtp.forward(next, hidden, mtpCache);
        const row = (await step.logits.toArray()) as Float32Array;
        expect(d1, `history of ${history.length}`).toBe(row.indexOf(Math.max(...row)));
        for (const t of [logits, hidden, ids, next, step.logits, step.hidden]) t.dispose();
        cache.dispose();
        mtpCache.dispose();
      }
    } finally {
      drafter.dispose();
      model.dispose();
    }
  }, 30_000);

  it('samples (seeded: the same tokens twice)', async () => {
    const model = await load('mtp', 'cpu');
    try {
      const sampled = { temperature: 0.8, topK: 50, seed: 11, speculative: { kind: 'mtp' as const }, numSpeculativeTokens: 2 };
      const a = await run(model, sampled);
      expect(a.ids).toHaveLength(12);
      expect(a.ids).toEqual((await run(model, sampled)).ids);
      expect(a.stats.speculative!.draftedTokens).toBeGreaterThan(0);
    } finally {
      model.dispose();
    }
  });
});

describe('speculative mtp: errors', () => {
  it('names the missing tensor on a checkpoint without the MTP layer, and refuses another family', async () => {
    const plain = await load('plain', 'cpu');
    const qwen3 = await load('qwen3', 'cpu');
    try {
      const err = await run(plain, { speculative: { kind: 'mtp' } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SpeculativeError);
      expect((err as Error).message).toMatch(/mtp\.fc\.weight/);
      await expect(run(qwen3, { speculative: { kind: 'mtp' } })).rejects.toThrow(/multi-token-prediction/);
    } finally {
      plain.dispose();
      qwen3.dispose();
    }
  });

  it('a checkpoint whose MTP layer is incomplete fails to load, naming the tensor', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-mtp-partial-'));
    try {
      const config = { ...CONFIG, layerTypes: [...CONFIG.layerTypes], mtpLayers: 1 };
      const specs = qwen35CheckpointSpecs(config, false, { mtp: true }).filter((s) => s.name !== 'mtp.norm.weight');
      await writeRandomCheckpoint(dir, specs, qwen35ToHfConfig(savedConfig(config, 'float32')), f32);
      await expect(loadModel(dir, { device: 'cpu', maxSequence: 8 })).rejects.toThrow(/mtp\.norm\.weight/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
