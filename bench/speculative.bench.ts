// Speculative decoding against plain decoding on the same model in the same run (a generated Qwen3-MoE at the serve
// bench's width, greedy, generate()): the target drafting for itself (every draft kept, whatever the random
// weights: the verification overhead on its own) and n-gram prompt lookup on a prompt that repeats itself (its
// acceptance depends on the random weights). Reported: decode ms per token (the ratio column: plain's / this one's),
// acceptance rate, tokens per target forward, and a verification of k + 1 positions in plain decode steps. Every
// speculative run must give plain greedy's tokens. A second case runs a generated Qwen3.6-shaped model (Gated DeltaNet
// and gated attention, MoE) with its multi-token-prediction layer (`mtp.*`) as the drafter: with random weights its
// acceptance is near zero, so the row measures the MTP drafter's cost per round, not a speed-up.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { qwen3TokenizerFiles } from '../src/tokenizer/tokenizer.js';
import type { Qwen3Config } from '../src/models/qwen3/config.js';
import { loadModel, type LoadedModel } from '../src/models/load.js';
import { writeRandomQwen3Checkpoint } from '../src/models/qwen3/random-checkpoint.js';
import { generate, type GenerateOptions, type GenerationStats } from '../src/generate/generate.js';
import type { BackendName, BenchCase, BenchContext, RowInput } from './harness.js';
import { median } from './harness.js';
import { benchConfig } from './moe-decode.bench.js';
import type { CausalLM } from '../src/models/causal-lm.js';
import type { Qwen35Config } from '../src/models/qwen3_5/config.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../src/models/qwen3_5/presets.js';

const K = 4;

function config(quick: boolean): Qwen3Config {
  const c = benchConfig(quick);
  return { ...c, numHiddenLayers: 2, bosTokenId: 1, eosTokenIds: [2], moe: { ...c.moe!, numExperts: quick ? 16 : 32 } };
}

/** Qwen3.6-35B-A3B's layer kinds and routing at the Qwen3-MoE case's width, with an MTP layer. */
function mtpConfig(quick: boolean): Qwen35Config {
  const c = config(quick);
  const preset = QWEN3_5_PRESETS['qwen3.6-moe-tiny'];
  return {
    ...preset,
    vocabSize: c.vocabSize,
    hiddenSize: c.hiddenSize,
    numHiddenLayers: 2,
    layerTypes: ['linear_attention', 'full_attention'],
    bosTokenId: 1,
    eosTokenIds: [2],
    mtpLayers: 1,
    moe: { ...preset.moe!, numExperts: c.moe!.numExperts, numExpertsPerTok: c.moe!.numExpertsPerTok },
  };
}

type Variant = { name: string; options: (model: CausalLM) => GenerateOptions };

export function speculativeCases(quick: boolean): BenchCase[] {
  const c = config(quick);
  const tokens = quick ? 17 : 41;
  const shape = `${c.numHiddenLayers}L h${c.hiddenSize} ${c.moe!.numExperts}e top${c.moe!.numExpertsPerTok}, k=${K}, ${tokens} tokens`;
  const variants: Variant[] = [
    { name: 'serve speculative plain', options: () => ({}) },
    { name: 'serve speculative draft=self', options: (model) => ({ speculative: { kind: 'draft', model }, numSpeculativeTokens: K }) },
    { name: 'serve speculative ngram', options: () => ({ speculative: { kind: 'ngram' }, numSpeculativeTokens: K }) },
  ];
  const write = async (dir: string) => void (await writeRandomQwen3Checkpoint(dir, c, { seed: 9, extraFiles: await qwen3TokenizerFiles() }));
  const m = mtpConfig(quick);
  const mtpShape = `qwen3.6 ${m.numHiddenLayers}L (DeltaNet + attention) h${m.hiddenSize} ${m.moe!.numExperts}e top${m.moe!.numExpertsPerTok} + 1 MTP layer, k=${K}, ${tokens} tokens`;
  const mtpVariants: Variant[] = [
    { name: 'serve speculative qwen3.6 plain', options: () => ({}) },
    { name: 'serve speculative mtp', options: () => ({ speculative: { kind: 'mtp' }, numSpeculativeTokens: K }) },
  ];
  const writeMtp = async (dir: string) => void (await writeRandomQwen35Checkpoint(dir, m, { seed: 9, mtp: true, extraFiles: await qwen3TokenizerFiles() }));
  return [
    { benchmark: 'serve speculative', shape, run: (ctx) => measure(ctx, write, c.vocabSize, variants, shape, tokens) },
    { benchmark: 'serve speculative mtp', shape: mtpShape, run: (ctx) => measure(ctx, writeMtp, m.vocabSize, mtpVariants, mtpShape, tokens) },
  ];
}

interface Measured {
  ids: number[];
  stats: GenerationStats;
}

async function once(loaded: LoadedModel, prompt: readonly number[], options: GenerateOptions): Promise<Measured> {
  const ids: number[] = [];
  const stream = generate(loaded.model, loaded.tokenizer!, prompt, { temperature: 0, stopTokenIds: [], ...options });
  let r = await stream.next();
  while (!r.done) {
    ids.push(r.value.id);
    r = await stream.next();
  }
  return { ids, stats: r.value };
}

async function measure(
  ctx: BenchContext,
  write: (dir: string) => Promise<void>,
  vocabSize: number,
  variantsOf: readonly Variant[],
  shape: string,
  tokens: number,
): Promise<RowInput[]> {
  const backend: BackendName = ctx.gpu ? 'webgpu' : 'cpu';
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-speculative-'));
  let loaded: LoadedModel | undefined;
  const rows: RowInput[] = [];
  try {
    await write(dir);
    loaded = await loadModel(dir, { device: backend === 'webgpu' ? 'webgpu' : 'cpu', maxSequence: 128 });
    const model = loaded.model;
    const phrase = Array.from({ length: 8 }, (_, j) => (31 * j + 5) % vocabSize);
    const prompt = [...phrase, ...phrase, ...phrase];
    const variants = variantsOf.map((v) => ({ name: v.name, options: v.options(model) }));
    const runs = ctx.quick ? 2 : 4;
    const results = new Map<string, Measured[]>();
    for (const v of variants) {
      const got: Measured[] = [];
      // One untimed run first: pipelines, the captured step, the buffer pool.
      await once(loaded, prompt, { ...v.options, maxNewTokens: tokens });
      for (let i = 0; i < runs; i++) got.push(await once(loaded, prompt, { ...v.options, maxNewTokens: tokens }));
      results.set(v.name, got);
    }
    const plain = results.get(variants[0]!.name)!;
    const plainStepMs = median(plain.map((m) => m.stats.decodeMs / (m.stats.generatedTokens - 1)));
    for (const v of variants) {
      const got = results.get(v.name)!;
      for (const m of got)
        if (m.ids.join() !== plain[0]!.ids.join()) throw new Error(`${v.name}: greedy tokens differ from plain decoding's (${m.ids} vs ${plain[0]!.ids})`);
      const perToken = got.map((m) => m.stats.decodeMs / (m.stats.generatedTokens - 1));
      const spec = got[got.length - 1]!.stats.speculative;
      let note = `decode ${median(perToken).toFixed(2)} ms/token`;
      if (spec) {
        const verifyPerForward = median(got.map((m) => m.stats.speculative!.verifyMs / m.stats.speculative!.targetForwards));
        const draftPerForward = median(got.map((m) => m.stats.speculative!.draftMs / m.stats.speculative!.targetForwards));
        note +=
          `; ${(spec.acceptanceRate * 100).toFixed(0)}% of drafts accepted, ${spec.tokensPerTargetForward.toFixed(2)} tokens per target forward; ` +
          `a verification of up to ${K + 1} positions ${verifyPerForward.toFixed(2)} ms = ${(verifyPerForward / plainStepMs).toFixed(2)} plain steps ` +
          `(${(verifyPerForward / spec.tokensPerTargetForward).toFixed(2)} ms per emitted token vs ${plainStepMs.toFixed(2)} plain), drafting ${draftPerForward.toFixed(2)} ms per round`;
      } else if (ctx.gpu) note += ' (captured decode steps)';
      ctx.log(`  ${v.name}: ${note}`);
      rows.push({
        benchmark: v.name,
        shape,
        backend,
        timing: { medianMs: median(perToken), minMs: Math.min(...perToken), runs: got.length, dispatchesPerRun: 0 },
        note,
        baselineBenchmark: v.name === variants[0]!.name ? undefined : variants[0]!.name,
      });
    }
  } finally {
    loaded?.model.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
