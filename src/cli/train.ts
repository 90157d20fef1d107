// `tensorgpu train`: fine-tune a Qwen3 / LFM2 / Qwen3.5 checkpoint (or the built-in model) on a text or JSONL file, with LoRA
// adapters on a frozen base (the default; saved in PEFT's layout) or every weight (--full; saved as a checkpoint).
// A progress bar shows step, loss, tokens/s and ETA; the loss curve is written as loss.png; Ctrl-C stops after the
// current step and saves what has been trained so far.
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { Generator } from '../core/random.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import { writeLossPlot } from '../media/loss-plot.js';
import { saveOptimizerState } from '../optim/state-file.js';
import { saveWeights } from '../train/export.js';
import { FineTune, packSequences, type StepResult } from '../train/fine-tune.js';
import { defaultLoraTargets, LoraAdapter } from '../train/lora.js';
import { saveAdapter } from '../train/peft.js';
import { SAMPLE_TRAINING_TEXT } from '../train/sample-text.js';
import { trainingView } from '../train/decoder-training.js';
import { openModel, type WeightDTypeName } from './model-source.js';
import { checkFile } from './validate.js';

export interface TrainCliOptions {
  model?: string;
  data?: string;
  out: string;
  steps: number;
  lr: number;
  seqLen: number;
  loraRank: number;
  loraAlpha?: number;
  targets?: string;
  full?: boolean;
  /** --full with 16-bit weights: float32 master copies (default true; --no-master-weights). */
  masterWeights?: boolean;
  /** Run each step through compile(): replayed from the third step on (--compile). */
  compile?: boolean;
  warmup?: number;
  seed: number;
  device: DeviceRequest;
  dtype?: WeightDTypeName;
  /** int4 group size along K (32, 64 or 128; default 128). */
  groupSize?: number;
  /** Draw the progress bar even when stderr is not a terminal. */
  progress?: boolean;
  /** Stop as if Ctrl-C came after this many steps (for tests of the interrupted save). */
  stopAfter?: number;
}

/** The training text's token ids: a .jsonl file's records (text, prompt + completion, or chat messages) or plain text. */
export async function trainingTokens(tokenizer: TextTokenizer, path: string | undefined): Promise<number[]> {
  if (!path) return tokenizer.encode(SAMPLE_TRAINING_TEXT);
  const text = await readFile(path, 'utf8');
  if (!path.endsWith('.jsonl')) return tokenizer.encode(text);
  const eos = tokenizer.eosTokenIds.slice(0, 1);
  const ids: number[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line) as Record<string, unknown>;
    } catch (e) {
      throw new SyntaxError(`${path}:${i + 1}: not JSON (${(e as Error).message})`);
    }
    let doc: string;
    if (typeof record.text === 'string') doc = record.text;
    else if (typeof record.prompt === 'string' && typeof record.completion === 'string') doc = record.prompt + record.completion;
    else if (Array.isArray(record.messages) && tokenizer.hasChatTemplate) doc = tokenizer.applyChatTemplate(record.messages as never);
    else throw new SyntaxError(`${path}:${i + 1}: a record needs "text", "prompt" + "completion", or "messages" (with a chat template)`);
    ids.push(...tokenizer.encode(doc), ...eos);
  });
  return ids;
}

export async function runTrain(o: TrainCliOptions, log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<number> {
  if (o.data) checkFile('--data', o.data);
  let interrupted = false;
  const onSigint = () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log('\ninterrupted: saving after this step (Ctrl-C again to quit without saving)');
  };
  process.on('SIGINT', onSigint);
  try {
    const { loaded, device, dir } = await openModel({
      model: o.model,
      device: o.device,
      dtype: o.dtype,
      groupSize: o.groupSize,
      maxSequence: o.seqLen,
      needsTokenizer: 'train',
      log,
    });
    const { model, tokenizer } = loaded;
    try {
      if (!tokenizer) throw new Error(`${dir} has no tokenizer.json`);
      const sequences = packSequences(await trainingTokens(tokenizer, o.data), o.seqLen);
      const view = trainingView(model);
      const adapter = o.full
        ? undefined
        : LoraAdapter.create(
            view.sites,
            {
              rank: o.loraRank,
              alpha: o.loraAlpha ?? 2 * o.loraRank,
              targetModules: o.targets ? o.targets.split(',').map((t) => t.trim()) : defaultLoraTargets(view),
            },
            { device, generator: new Generator(o.seed) },
          );
      const run = new FineTune(model, adapter ? { kind: 'lora', adapter } : { kind: 'full' }, {
        steps: o.steps,
        lr: o.lr,
        warmupSteps: o.warmup,
        masterWeights: o.masterWeights,
        compile: o.compile,
      });
      log(
        `training ${o.full ? 'every weight' : `LoRA r=${o.loraRank} on ${adapter!.modules.size} projections`} of ${dir} on ${device}: ${run.parameterCount.toLocaleString('en-US')} parameters, ${sequences.length} sequence(s) of ${o.seqLen} tokens, ${o.steps} steps`,
      );
      const losses: number[] = [];
      const bar = new cliProgress.SingleBar(
        {
          format: 'train |{bar}| {value}/{total} steps | loss {loss} | {tps} tok/s | ETA {eta_formatted}',
          hideCursor: true,
          noTTYOutput: o.progress ?? false,
          stream: process.stderr,
        },
        cliProgress.Presets.shades_classic,
      );
      if (process.stderr.isTTY || o.progress) bar.start(o.steps, 0, { loss: '-', tps: '-' });
      let last: StepResult | undefined;
      let tokens = 0;
      let ms = 0;
      for (let step = 0; step < o.steps && !interrupted; step++) {
        last = await run.step(sequences[step % sequences.length]);
        losses.push(last.loss);
        tokens += last.tokens;
        ms += last.ms;
        bar.update(step + 1, { loss: last.loss.toFixed(4), tps: ((tokens / ms) * 1000).toFixed(0) });
        if (!process.stderr.isTTY && !o.progress && (step === 0 || (step + 1) % 10 === 0 || step + 1 === o.steps))
          log(`step ${step + 1}/${o.steps} loss ${last.loss.toFixed(4)} lr ${last.lr.toExponential(2)} ${((tokens / ms) * 1000).toFixed(0)} tok/s`);
        if (o.stopAfter !== undefined && step + 1 >= o.stopAfter) interrupted = true;
      }
      bar.stop();
      await mkdir(o.out, { recursive: true });
      if (adapter) await saveAdapter(o.out, adapter, { baseModel: o.model ?? 'builtin' });
      else await saveWeights(o.out, view, dir);
      if (interrupted) await saveOptimizerState(join(o.out, 'optimizer.safetensors'), run.optimizer.stateDict(), { scheduler: run.schedulerState });
      await writeLossPlot(join(o.out, 'loss.png'), losses, { title: 'training loss' });
      await writeFile(join(o.out, 'losses.json'), `${JSON.stringify({ steps: losses.length, losses })}\n`);
      const first = losses[0];
      log(
        `${interrupted ? 'stopped' : 'done'} after ${losses.length} steps: loss ${first?.toFixed(4)} -> ${last?.loss.toFixed(4)}, ${((tokens / ms) * 1000).toFixed(0)} tok/s, ` +
          `${last?.dispatches ?? 0} dispatches per step (${o.compile ? `compile: ${run.compileStatus}` : `${last?.optimizerDispatches ?? 0} in the optimizer`}); wrote ${adapter ? 'the adapter (PEFT)' : 'the model'}, loss.png${interrupted ? ' and optimizer.safetensors' : ''} to ${o.out}`,
      );
      run.dispose();
      adapter?.dispose();
      return interrupted ? 130 : 0;
    } finally {
      model.dispose();
    }
  } finally {
    process.off('SIGINT', onSigint);
    releaseDevice();
  }
}
