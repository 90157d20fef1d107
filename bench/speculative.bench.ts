// Speculative decoding against plain decoding on the same model in the same run (a generated Qwen3-MoE at the serve
// bench's width, greedy, generate()): the target drafting for itself (every draft kept, whatever the random
// weights: the verification overhead on its own) and n-gram prompt lookup on a prompt that repeats itself (its
// acceptance depends on the random weights). Reported: decode ms per token (the ratio column: plain's / this one's),
// acceptance rate, tokens per target forward, and a verification of k + 1 positions in plain decode steps. Every
// speculative run must give plain greedy's tokens.
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

const K = 4;

function config(quick: boolean): Qwen3Config {
  const c = benchConfig(quick);
  return { ...c, numHiddenLayers: 2, bosTokenId: 1, eosTokenIds: [2], moe: { ...c.moe!, numExperts: quick ? 16 : 32 } };
}

export function speculativeCases(quick: boolean): BenchCase[] {
  const c = config(quick);
  const tokens = quick ? 17 : 41;
  const shape = `${c.numHiddenLayers}L h${c.hiddenSize} ${c.moe!.numExperts}e top${c.moe!.numExpertsPerTok}, k=${K}, ${tokens} tokens`;
  return [{ benchmark: 'serve speculative', shape, run: (ctx) => measure(ctx, c, shape, tokens) }];
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

async function measure(ctx: BenchContext, c: Qwen3Config, shape: string, tokens: number): Promise<RowInput[]> {
  const backend: BackendName = ctx.gpu ? 'webgpu' : 'cpu';
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-speculative-'));
  let loaded: LoadedModel | undefined;
  const rows: RowInput[] = [];
  try {
    await writeRandomQwen3Checkpoint(dir, c, { seed: 9, extraFiles: await qwen3TokenizerFiles() });
    loaded = await loadModel(dir, { device: backend === 'webgpu' ? 'webgpu' : 'cpu', maxSequence: 128 });
    const model = loaded.model;
    const phrase = Array.from({ length: 8 }, (_, j) => (31 * j + 5) % c.vocabSize);
    const prompt = [...phrase, ...phrase, ...phrase];
    const variants: { name: string; options: GenerateOptions }[] = [
      { name: 'serve speculative plain', options: {} },
      { name: 'serve speculative draft=self', options: { speculative: { kind: 'draft', model }, numSpeculativeTokens: K } },
      { name: 'serve speculative ngram', options: { speculative: { kind: 'ngram' }, numSpeculativeTokens: K } },
    ];
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
