// Speculative decoding: greedy output equals plain greedy on every decoder family (KV caches roll back by length,
// LFM2's conv states and Qwen3.5's DeltaNet states by a restored copy), with n-gram lookup and with draft models
// (the target itself: every draft kept; another model) and with a scripted drafter whose verifications keep 0..k
// of k drafts, on the CPU and on WebGPU; a draft model's own rollback; and the sampled accept / resample rule keeps
// the target's distribution (chi-square).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel, setDefaultDevice } from '../../src/index.js';
import { generate, type GenerateOptions, type GenerationStats } from '../../src/generate/generate.js';
import type { CausalLM } from '../../src/models/causal-lm.js';
import { LFM2_PRESETS } from '../../src/models/lfm2/presets.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { QWEN3_PRESETS } from '../../src/models/qwen3/presets.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { TextTokenizer, qwen3TokenizerDir } from '../../src/tokenizer/tokenizer.js';
import { Generator } from '../../src/core/random.js';
import { sampleReference } from '../../src/kernels/sample/cpu.js';
import { acceptOrResample, drawFrom, samplingProbs } from '../../src/generate/speculative-sampling.js';
import { ModelDrafter, ngramLookup, SpeculativeError, type Drafter } from '../../src/generate/drafters.js';
import { FifoScheduler } from '../../src/serve/scheduler.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const tokenizer = TextTokenizer.fromDirectory(qwen3TokenizerDir());
const small = { vocabSize: 512, bosTokenId: 0, eosTokenIds: [1] };
const f32 = { dtype: 'float32' as const, seed: 3 };

// Each family's tiny preset with its layer kinds, fewer layers and a 512-token vocabulary.
const writers: Record<string, (dir: string) => Promise<unknown>> = {
  'qwen3-tiny': (dir) => writeRandomQwen3Checkpoint(dir, { ...QWEN3_PRESETS['qwen3-tiny'], ...small, numHiddenLayers: 2 }, f32),
  'qwen3-moe-tiny': (dir) =>
    writeRandomQwen3Checkpoint(
      dir,
      { ...QWEN3_PRESETS['qwen3-moe-tiny'], ...small, numHiddenLayers: 2, moe: { ...QWEN3_PRESETS['qwen3-moe-tiny'].moe!, numExperts: 8 } },
      f32,
    ),
  'lfm2-tiny': (dir) =>
    writeRandomLfm2Checkpoint(dir, { ...LFM2_PRESETS['lfm2-tiny'], ...small, numHiddenLayers: 3, layerTypes: ['conv', 'full_attention', 'conv'] }, f32),
  'lfm2-moe-tiny': (dir) =>
    writeRandomLfm2Checkpoint(
      dir,
      {
        ...LFM2_PRESETS['lfm2-moe-tiny'],
        ...small,
        numHiddenLayers: 3,
        layerTypes: ['conv', 'full_attention', 'conv'],
        moe: { ...LFM2_PRESETS['lfm2-moe-tiny'].moe!, numExperts: 8, numDenseLayers: 1 },
      },
      f32,
    ),
  'qwen3.5-tiny': (dir) =>
    writeRandomQwen35Checkpoint(
      dir,
      { ...QWEN3_5_PRESETS['qwen3.5-tiny'], ...small, numHiddenLayers: 2, layerTypes: ['linear_attention', 'full_attention'] },
      f32,
    ),
  'qwen3.6-moe-tiny': (dir) =>
    writeRandomQwen35Checkpoint(
      dir,
      {
        ...QWEN3_5_PRESETS['qwen3.6-moe-tiny'],
        ...small,
        numHiddenLayers: 2,
        layerTypes: ['linear_attention', 'full_attention'],
        moe: { ...QWEN3_5_PRESETS['qwen3.6-moe-tiny'].moe!, numExperts: 8 },
      },
      f32,
    ),
  // Another model of the same vocabulary: a draft that rarely agrees.
  other: (dir) => writeRandomQwen3Checkpoint(dir, { ...QWEN3_PRESETS['qwen3-tiny'], ...small, numHiddenLayers: 1 }, { dtype: 'float32', seed: 9 }),
};

const dirs: Record<string, string> = {};
beforeAll(async () => {
  for (const [name, write] of Object.entries(writers)) {
    dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-speculative-${name}-`));
    await write(dirs[name]);
  }
}, 60_000);
afterAll(() => {
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

// A prompt that repeats itself, so n-gram lookup finds something from the start.
const PROMPT = [5, 17, 300, 42, 7, 99, 5, 17, 300, 42, 7, 99, 5, 17];

async function run(model: CausalLM, options: GenerateOptions) {
  const ids: number[] = [];
  const stream = generate(model, tokenizer, PROMPT, { temperature: 0, maxNewTokens: 14, stopTokenIds: [], ...options });
  let r = await stream.next();
  while (!r.done) {
    ids.push(r.value.id);
    r = await stream.next();
  }
  return { ids, stats: r.value as GenerationStats };
}

async function load(name: string, device: 'cpu' | 'webgpu') {
  return (await loadModel(dirs[name], { device, maxSequence: 40 })).model;
}

/**
 * Proposes the plain run's next tokens with one of them wrong, at index round % (k + 1) (none when that is k): every
 * verification keeps a different number of drafts, 0 to k, so each rollback path runs.
 */
function scriptedDrafter(truth: readonly number[]): Drafter {
  let round = 0;
  return {
    name: 'scripted',
    async propose(history, k) {
      const tokens = truth.slice(history.length, history.length + k);
      const wrong = round++ % (k + 1);
      if (wrong < tokens.length) tokens[wrong] = (tokens[wrong]! + 1) % 512;
      return { tokens };
    },
    accepted() {},
    dispose() {},
  };
}

/** Greedy with each kind of speculation equals plain greedy; returns the speculative stats by case. */
async function checkFamily(name: string, device: 'cpu' | 'webgpu', cases: readonly string[]) {
  const target = await load(name, device);
  const drafts: CausalLM[] = [];
  try {
    const plain = await run(target, {});
    expect(plain.ids).toHaveLength(14);
    const out: Record<string, GenerationStats['speculative']> = {};
    for (const c of cases) {
      let draft: CausalLM | undefined;
      if (c === 'self') draft = target;
      else if (c === 'other') drafts.push((draft = await load('other', device)));
      const speculative = draft
        ? { kind: 'draft' as const, model: draft }
        : c === 'scripted'
          ? { kind: 'custom' as const, drafter: scriptedDrafter([...PROMPT, ...plain.ids]) }
          : { kind: 'ngram' as const };
      const got = await run(target, { speculative, numSpeculativeTokens: 3 });
      expect(got.ids, `${name} on ${device}, ${c}`).toEqual(plain.ids);
      expect(got.stats.generatedTokens).toBe(14);
      out[c] = got.stats.speculative;
    }
    return out;
  } finally {
    for (const d of drafts) d.dispose();
    target.dispose();
  }
}

describe('speculative greedy on the CPU equals plain greedy', () => {
  it.each(['qwen3-tiny', 'qwen3-moe-tiny', 'lfm2-tiny', 'lfm2-moe-tiny', 'qwen3.5-tiny', 'qwen3.6-moe-tiny'])(
    '%s: n-gram, the target as its own draft, another model, and drafts kept 0..k of k',
    async (name) => {
      const s = await checkFamily(name, 'cpu', ['ngram', 'self', 'other', 'scripted']);
      // The target drafting for itself: every draft kept, k + 1 tokens per verification (13 after the prefill: 4+4+4+1).
      expect(s.self!.acceptanceRate).toBe(1);
      expect(s.self!.targetForwards).toBe(4);
      expect(s.self!.tokensPerTargetForward).toBeCloseTo(13 / 4);
      // Rounds keep 0, 1, 2, 3 of 3 drafts (the last round drafts at most what is left): 1+2+3+4+1+2 = 13 tokens.
      expect(s.scripted!.targetForwards).toBe(6);
      expect(s.scripted!.acceptedTokens).toBe(7);
      for (const c of ['ngram', 'other']) {
        expect(s[c]!.fallback).toBeUndefined();
        expect(s[c]!.acceptedTokens).toBeLessThanOrEqual(s[c]!.draftedTokens);
      }
    },
    30_000,
  );
});

describe(`speculative greedy on WebGPU equals plain greedy ${gpu.skipReason}`, () => {
  it.runIf(gpu.available).each(['qwen3.5-tiny'])(
    '%s: n-gram, and drafts kept 0..k of k (a hybrid: DeltaNet states restored)',
    async (name) => {
      await checkFamily(name, 'webgpu', ['ngram', 'scripted']);
    },
    // Seconds on an idle machine; SwiftShader on two busy cores has taken minutes.
    300_000,
  );
});

describe('speculative decoding: options and stats', () => {
  it('samples with a draft (seeded: the same tokens twice), falls back with penalties, and refuses mtp and another vocabulary', async () => {
    const target = await load('qwen3-tiny', 'cpu');
    try {
      const sampled = { temperature: 0.8, topK: 50, topP: 0.95, seed: 7, speculative: { kind: 'draft' as const, model: target }, numSpeculativeTokens: 3 };
      const a = await run(target, sampled);
      expect(a.ids).toEqual((await run(target, sampled)).ids);
      expect(a.stats.speculative!.draftedTokens).toBeGreaterThan(0);
      const plain = await run(target, { repetitionPenalty: 1.2, speculative: { kind: 'ngram' } });
      expect(plain.stats.speculative!.fallback).toMatch(/penalties/);
      await expect(run(target, { speculative: { kind: 'mtp' } })).rejects.toThrow(SpeculativeError);
      const wide = (await loadModel(dirs['qwen3-tiny'], { device: 'cpu', maxSequence: 40 })).model;
      try {
        Object.defineProperty(wide, 'config', { value: { ...wide.config, vocabSize: 1024 } });
        await expect(run(target, { speculative: { kind: 'draft', model: wide } })).rejects.toThrow(/vocabulary/);
      } finally {
        wide.dispose();
      }
    } finally {
      target.dispose();
    }
  });

  it.each(['qwen3.5-tiny', 'lfm2-tiny', 'qwen3-tiny'])(
    '%s as a draft model: after any number of its drafts kept, it drafts what a fresh draft would',
    async (name) => {
      const model = await load(name, 'cpu');
      const u = () => 0.5;
      const drafter = new ModelDrafter(model, { temperature: 0 }, u);
      try {
        let history = [...PROMPT];
        for (let round = 0; round < 5; round++) {
          const draft = await drafter.propose(history, 3);
          const fresh = new ModelDrafter(model, { temperature: 0 }, u);
          expect(draft.tokens, `round ${round}`).toEqual((await fresh.propose(history, 3)).tokens);
          fresh.dispose();
          const kept = round % 4;
          drafter.accepted(kept);
          history = [...history, ...draft.tokens.slice(0, kept), 400 + round];
        }
      } finally {
        drafter.dispose();
        model.dispose();
      }
    },
  );

  it("serve's one-at-a-time scheduler speculates for every request (serve --speculative): plain greedy's tokens", async () => {
    const target = await load('lfm2-tiny', 'cpu');
    try {
      const plain = await run(target, {});
      const scheduler = new FifoScheduler(target, tokenizer, {
        maxQueue: 2,
        generate: { speculative: { kind: 'draft', model: target }, numSpeculativeTokens: 3 },
      });
      const seq = scheduler.submit({ promptIds: PROMPT, options: { temperature: 0, maxNewTokens: 14, stopTokenIds: [] } });
      const ids: number[] = [];
      for await (const t of seq.tokens) ids.push(t.id);
      expect(ids).toEqual(plain.ids);
      expect((await seq.result).speculative!.acceptanceRate).toBe(1);
    } finally {
      target.dispose();
    }
  });

  it('n-gram lookup proposes what followed the latest earlier match of the longest suffix', () => {
    expect(ngramLookup([1, 2, 3, 9, 1, 2, 3, 8, 1, 2, 3], 2, 3)).toEqual([8, 1]);
    expect(ngramLookup([4, 5, 6, 7, 5], 3, 3)).toEqual([6, 7, 5]);
    expect(ngramLookup([1, 2, 3], 2, 3)).toEqual([]);
  });
});

/** Pearson's chi-square of counts against probabilities (cells with p = 0 must have no counts). */
function chiSquare(counts: readonly number[], p: ArrayLike<number>, n: number): number {
  let chi = 0;
  for (let i = 0; i < counts.length; i++) {
    if (p[i] === 0) {
      expect(counts[i], `token ${i} has probability 0`).toBe(0);
      continue;
    }
    chi += (counts[i]! - n * p[i]!) ** 2 / (n * p[i]!);
  }
  return chi;
}

describe('the sampled accept / resample rule', () => {
  const rows = [
    [0.1, 0.4, 0.2, 0.25, 0.05, 0],
    [0.3, 0.05, 0.05, 0.2, 0.1, 0.3],
    [0.2, 0.2, 0.2, 0.2, 0.2, 0],
  ].map((r) => Float64Array.from(r));
  const q = [
    [0.5, 0.1, 0.1, 0.1, 0.1, 0.1],
    [0.05, 0.6, 0.05, 0.1, 0.1, 0.1],
  ].map((r) => Float64Array.from(r));
  // Chi-square critical value at p = 0.001 for 5 degrees of freedom (6 cells): a false failure once in 1000 seeds.
  const CRITICAL = 20.52;

  it('each emitted token follows the target distribution p (draft model q; n-gram point mass)', () => {
    const g = new Generator(12345);
    const u = () => g.uniform();
    const n = 20_000;
    const first = new Array<number>(6).fill(0);
    const second = new Array<number>(6).fill(0);
    let reachedSecond = 0;
    const pointFirst = new Array<number>(6).fill(0);
    for (let t = 0; t < n; t++) {
      const drafted = q.map((row) => drawFrom(row, u()));
      const v = acceptOrResample(rows, q, drafted, u);
      const emitted = [...drafted.slice(0, v.accepted), v.next];
      first[emitted[0]!]++;
      if (emitted.length > 1) {
        second[emitted[1]!]++;
        reachedSecond++;
      }
      // A deterministic draft (n-gram): always proposes token 1 then 0.
      const w = acceptOrResample(rows, [undefined, undefined], [1, 0], u);
      pointFirst[(w.accepted > 0 ? 1 : w.next)!]++;
    }
    expect(chiSquare(first, rows[0]!, n)).toBeLessThan(CRITICAL);
    expect(chiSquare(second, rows[1]!, reachedSecond)).toBeLessThan(CRITICAL);
    expect(chiSquare(pointFirst, rows[0]!, n)).toBeLessThan(CRITICAL);
    // Acceptance of the first draft is sum_x min(p, q) = 0.1 + 0.1 + 0.1 + 0.1 + 0.05 = 0.45.
    expect(Math.abs(reachedSecond / n - 0.45)).toBeLessThan(0.015);
  });

  it('samplingProbs is the distribution the sampler draws from (temperature, top-k, top-p, min-p)', () => {
    const logits = Float64Array.from([1.5, -0.25, 3, 0.5, 3, -2, 0.75, 2.25]);
    for (const s of [{ temperature: 1 }, { temperature: 0.7, topK: 3 }, { temperature: 1.3, topP: 0.8 }, { temperature: 1, topK: 5, topP: 0.9, minP: 0.1 }]) {
      const p = samplingProbs(logits, s);
      const counts = new Array<number>(logits.length).fill(0);
      const grid = 4000;
      const params = {
        invTemperature: Math.fround(1 / s.temperature),
        topK: s.topK ?? 0,
        topP: Math.fround(s.topP ?? 1),
        minP: Math.fround(s.minP ?? 0),
        repetition: 1,
        invRepetition: 1,
        presence: 0,
        frequency: 0,
      };
      for (let i = 0; i < grid; i++) counts[sampleReference(logits, [], { ...params, u: (i + 0.5) / grid })]++;
      counts.forEach((c, i) => expect(Math.abs(c / grid - p[i]!), `${JSON.stringify(s)} token ${i}`).toBeLessThanOrEqual(1.5 / grid));
    }
  });
});
