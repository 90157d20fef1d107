// `tensorgpu generate`: stream text from a Qwen3 / Qwen3-MoE checkpoint (or the built-in default model).
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { generate } from '../generate/generate.js';
import { withGenerationConfig, type SamplingFallback } from '../generate/generation-defaults.js';
import { openModel } from './model-source.js';
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
  dtype?: 'fp8' | 'float32' | 'float16' | 'bfloat16';
  /** Send the prompt as is, without the chat template. */
  raw?: boolean;
  think?: boolean;
  /** A LoRA adapter directory (PEFT layout) merged into the weights after loading. */
  adapter?: string;
  /** Run the prefill through compile() (traced for this prompt length; pays when the model prefills a length again). */
  compile?: boolean;
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
  try {
    const { loaded, device, dir, loadMs } = await openModel({ ...o, log, maxSequence: undefined });
    const { model, tokenizer } = loaded;
    try {
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
      });
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
          `decode ${decodeSteps > 0 ? ((decodeSteps / s.decodeMs) * 1000).toFixed(1) : '-'} tok/s, ${s.dispatchesPerToken.toFixed(0)} dispatches/token`,
      );
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
      return 0;
    } finally {
      model.dispose();
    }
  } finally {
    releaseDevice();
  }
}
