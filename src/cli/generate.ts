// `tensorgpu generate`: stream text from a Qwen3 / Qwen3-MoE checkpoint (or the built-in default model).
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { generate } from '../generate/generate.js';
import { withGenerationConfig, type SamplingFallback } from '../generate/generation-defaults.js';
import { modelFolder, openModel, type KvDTypeName, type WeightDTypeName } from './model-source.js';
import { checkModelSource, loadModel } from '../models/load.js';
import { checkDir } from './validate.js';
import type { DeviceName } from '../runtime/backend.js';
import type { CausalLM } from '../models/causal-lm.js';
import type { SpeculativeConfig, SpeculativeStats } from '../generate/speculative.js';
import { trainingView } from '../train/decoder-training.js';
import { loadAdapter } from '../train/peft.js';

export interface GenerateCliOptions {
  model?: string;
  prompt: string;
  /** Unset fields come from the model's generation_config.json, else CLI_SAMPLING_DEFAULTS. */
  maxTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repetitionPenalty?: number;
  seed?: number;
  device: DeviceRequest;
  dtype?: WeightDTypeName;
  /** int4 group size along K (32, 64 or 128; default 128). */
  groupSize?: number;
  /** The KV cache's dtype (default f32; fp8: scaled e4m3 rows). */
  kvDtype?: KvDTypeName;
  /** Send the prompt as is, without the chat template. */
  raw?: boolean;
  think?: boolean;
  /** A LoRA adapter directory (PEFT layout) merged into the weights after loading. */
  adapter?: string;
  /** Run the prefill through compile() (traced for this prompt length; pays when the model prefills a length again). */
  compile?: boolean;
  /** Speculative decoding: n-gram prompt lookup, a draft model (--draft-model), or Qwen3.6's MTP layer (not yet). */
  speculative?: SpeculativeKind;
  /** The draft model (a folder, a repo id or builtin:<preset>) sharing the target's tokenizer; implies --speculative draft. */
  draftModel?: string;
  /** Tokens drafted per verification (default 4). */
  numSpeculativeTokens?: number;
}

export const SPECULATIVE_KINDS = ['ngram', 'draft', 'mtp'] as const;
export type SpeculativeKind = (typeof SPECULATIVE_KINDS)[number];

/** Throws when --speculative and --draft-model disagree: before anything loads. */
export function checkSpeculativeFlags(o: { speculative?: SpeculativeKind; draftModel?: string }): void {
  const kind = o.speculative ?? (o.draftModel ? 'draft' : undefined);
  if (kind !== 'draft' && o.draftModel) throw new Error(`--draft-model goes with --speculative draft, not ${kind}`);
  if (kind === 'draft' && !o.draftModel) throw new Error('--speculative draft needs --draft-model <dir|repo|builtin:preset>');
}

/** The draft model of `--draft-model`, loaded on the target's device; undefined without speculation by a draft. */
export async function openDraftModel(
  o: { speculative?: SpeculativeKind; draftModel?: string; dtype?: GenerateCliOptions['dtype'] },
  device: DeviceName,
  log: (line: string) => void,
): Promise<CausalLM | undefined> {
  checkSpeculativeFlags(o);
  if (!o.draftModel) return undefined;
  const dir = await modelFolder(o.draftModel, log);
  const t0 = performance.now();
  const { model } = await loadModel(dir, { device, dtype: o.dtype });
  log(`draft model ${dir} on ${device} (loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  return model;
}

/** generate()'s `speculative` option for the CLI's flags. */
export function speculativeConfig(kind: SpeculativeKind | undefined, draft: CausalLM | undefined): SpeculativeConfig | undefined {
  if (draft) return { kind: 'draft', model: draft };
  if (kind === 'ngram' || kind === 'mtp') return { kind };
  return undefined;
}

/** The stats line of a speculative run. */
export function describeSpeculation(s: SpeculativeStats): string {
  if (s.fallback) return `speculative ${s.kind}: not used (${s.fallback})`;
  return (
    `speculative ${s.kind} (k=${s.numSpeculativeTokens}): ${(s.acceptanceRate * 100).toFixed(1)}% of ${s.draftedTokens} drafted tokens accepted, ` +
    `${s.tokensPerTargetForward.toFixed(2)} tokens per target forward (${s.targetForwards} target forwards after the prefill)`
  );
}

/** `tensorgpu generate`'s defaults where neither a flag nor generation_config.json says otherwise. */
export const CLI_SAMPLING_DEFAULTS = { maxNewTokens: 32, temperature: 0.7, topK: 20, topP: 0.8 } as const satisfies SamplingFallback;

function describeSampling(s: SamplingFallback): string {
  const parts = [s.temperature === 0 ? 'greedy' : `temperature ${s.temperature}, top-k ${s.topK}, top-p ${s.topP}`];
  if (s.temperature !== 0 && s.minP !== undefined) parts.push(`min-p ${s.minP}`);
  if (s.repetitionPenalty !== undefined) parts.push(`repetition penalty ${s.repetitionPenalty}`);
  return `${parts.join(', ')}, at most ${s.maxNewTokens} tokens`;
}

export async function runGenerate(
  o: GenerateCliOptions,
  write: (text: string) => void = (t) => process.stdout.write(t),
  log: (line: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<number> {
  // Flags that name files or go together are checked before anything loads.
  checkSpeculativeFlags(o);
  checkModelSource(o.model);
  checkModelSource(o.draftModel);
  if (o.adapter) checkDir('--adapter', o.adapter, 'adapter_config.json');
  // Ctrl-C stops the generation and prints the statistics so far; a second one quits at once.
  const abort = new AbortController();
  let generating = false;
  const onSigint = () => {
    if (!generating || abort.signal.aborted) process.exit(130);
    abort.abort();
  };
  process.on('SIGINT', onSigint);
  try {
    const { loaded, device, dir, loadMs } = await openModel({ ...o, log, maxSequence: undefined, needsTokenizer: 'generate' });
    const { model, tokenizer } = loaded;
    let draft: CausalLM | undefined;
    try {
      draft = await openDraftModel(o, device, log);
      if (!tokenizer) throw new Error(`${dir} has no tokenizer.json`);
      log(`model ${dir} on ${device} (loaded in ${(loadMs / 1000).toFixed(1)} s)`);
      if (o.adapter) {
        const sites = trainingView(model).sites;
        const adapter = await loadAdapter(o.adapter, sites, { device });
        adapter.merge(sites);
        log(`merged the LoRA adapter ${o.adapter} (r=${adapter.config.rank}, ${adapter.modules.size} projections) into the weights`);
        adapter.dispose();
      }
      const prompt = o.raw || !tokenizer.hasChatTemplate ? o.prompt : [{ role: 'user' as const, content: o.prompt }];
      const flags = { maxNewTokens: o.maxTokens, temperature: o.temperature, topK: o.topK, topP: o.topP, minP: o.minP, repetitionPenalty: o.repetitionPenalty };
      const generationConfig = loaded.generationConfig;
      const sampling = withGenerationConfig(flags, generationConfig, CLI_SAMPLING_DEFAULTS);
      if (generationConfig) log(`sampling ${describeSampling(sampling)} (flags, then ${generationConfig.file}, then tensorgpu's defaults)`);
      const stream = generate(model, tokenizer, prompt, {
        ...sampling,
        generationConfig,
        seed: o.seed,
        enableThinking: o.think,
        compile: o.compile,
        speculative: speculativeConfig(o.speculative, draft),
        numSpeculativeTokens: o.numSpeculativeTokens,
        signal: abort.signal,
      });
      generating = true;
      let r = await stream.next();
      while (!r.done) {
        write(r.value.text);
        r = await stream.next();
      }
      write('\n');
      const s = r.value;
      const decodeSteps = s.generatedTokens - 1;
      log(
        `${s.promptTokens} prompt tokens, ${s.generatedTokens} generated (${s.stopReason}); prefill ${((s.promptTokens / s.prefillMs) * 1000).toFixed(1)} tok/s, ` +
          `decode ${decodeSteps > 0 ? ((decodeSteps / s.decodeMs) * 1000).toFixed(1) : '-'} tok/s` +
          // The CPU backend dispatches nothing: the count is a GPU figure.
          (device === 'webgpu' ? `, ${s.dispatchesPerToken.toFixed(0)} dispatches/token` : ''),
      );
      if (s.speculative) log(describeSpeculation(s.speculative));
      // The signature's line: traced on a first prompt of this length (the eager run), recorded or replayed after.
      if (o.compile)
        log(
          `prefill through compile(): ${
            model
              .explainCompiled?.()
              ?.split('\n')[1]
              ?.replace(/^- \(.*\): /, '') ?? 'not run'
          }`,
        );
      return s.stopReason === 'aborted' ? 130 : 0;
    } finally {
      draft?.dispose();
      model.dispose();
    }
  } finally {
    process.off('SIGINT', onSigint);
    releaseDevice();
  }
}
