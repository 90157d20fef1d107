// `tensorgpu serve`: the OpenAI-compatible HTTP server (src/serve/) over one model. Listens first (so /health says
// 503 while the model loads), prints the URL, and on SIGTERM / SIGINT drains, releases the device and exits 0.
import { basename } from 'node:path';
import { getDefaultDevice, releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { checkModelSource, type LoadedModel } from '../models/load.js';
import { startServer } from '../serve/server.js';
import { loadWhisper, type LoadedWhisper } from '../models/whisper/load.js';
import { openModel, type KvDTypeName } from './model-source.js';
import { FifoScheduler } from '../serve/scheduler.js';
import type { GrammarSource } from '../generate/grammar.js';
import type { RequestLimits } from '../serve/schema-checks.js';
import type { CausalLM } from '../models/causal-lm.js';
import { checkSpeculativeFlags, openDraftModel, speculativeConfig, type SpeculativeKind } from './generate.js';
import { checkPortFree, listenError } from './validate.js';

export interface ServeCliOptions {
  model?: string;
  device: DeviceRequest;
  dtype?: 'fp8' | 'int4' | 'float32' | 'float16' | 'bfloat16';
  /** int4's group size along K (32, 64 or 128; default 128). */
  groupSize?: number;
  /** The KV pool's dtype (default f32; fp8 holds about twice the positions of bf16 in --kv-memory). */
  kvDtype?: KvDTypeName;
  host: string;
  port: number;
  apiKey?: string;
  maxQueue: number;
  /** Bytes. */
  maxBody: number;
  /** --request-limit name=value, gathered. */
  requestLimit?: Partial<RequestLimits>;
  /** --grammar-timeout, ms. */
  grammarTimeout?: number;
  grammarWorkers?: number;
  servedModelName?: string;
  /** Positions per sequence (default: min(max_position_embeddings, 4096)). */
  maxModelLen?: number;
  /** Seconds in-flight requests get to finish on SIGTERM / SIGINT before they are cancelled. */
  shutdownTimeout: number;
  maxBatch?: number;
  /** Bytes. */
  kvMemory?: number;
  kvPageSize?: number;
  prefillChunk?: number;
  prefillTokensPerStep?: number;
  /** false with --no-prefix-cache. */
  prefixCache?: boolean;
  /** A Whisper model (folder, Hub id or builtin:whisper-tiny) behind /v1/audio/transcriptions and /v1/audio/translations. */
  transcribeModel?: string;
  /** Bytes: the largest audio upload (default 25 MiB). */
  maxAudioSize?: number;
  /** Speculative decoding for every request (requests then run one at a time): ngram, draft (--draft-model) or mtp. */
  speculative?: SpeculativeKind;
  draftModel?: string;
  numSpeculativeTokens?: number;
}

export async function runServe(o: ServeCliOptions, log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<number> {
  // Listened for from the start, so a signal that arrives while the port is checked or the model loads also ends in
  // a clean close and exit 0. A second one takes the default action (the process ends at once), for an impatient
  // Ctrl-C during the drain.
  let stopListening = () => {};
  const signal = new Promise<NodeJS.Signals>((resolve) => {
    const onTerm = () => (stopListening(), resolve('SIGTERM'));
    const onInt = () => (stopListening(), resolve('SIGINT'));
    stopListening = () => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
    };
    process.on('SIGTERM', onTerm);
    process.on('SIGINT', onInt);
  });
  try {
    return await serveUntilSignal(o, signal, log);
  } finally {
    stopListening();
  }
}

async function serveUntilSignal(o: ServeCliOptions, signal: Promise<NodeJS.Signals>, log: (line: string) => void): Promise<number> {
  // What the flags name is checked before anything loads: the port, and the flags that go together.
  checkSpeculativeFlags({ speculative: o.speculative ?? (o.draftModel ? 'draft' : undefined), draftModel: o.draftModel });
  checkModelSource(o.model);
  checkModelSource(o.draftModel);
  await checkPortFree(o.host, o.port);
  const servedModelName =
    o.servedModelName ??
    (o.model ? (o.model.includes('/') && !o.model.startsWith('.') && !o.model.startsWith('/') ? o.model : basename(o.model)) : 'tensorgpu-default');
  let loaded: LoadedModel | undefined;
  let draft: CausalLM | undefined;
  const speculative = o.speculative ?? (o.draftModel ? 'draft' : undefined);
  const opening = openModel({
    model: o.model,
    device: o.device,
    dtype: o.dtype,
    groupSize: o.groupSize,
    kvDtype: o.kvDtype,
    maxSequence: o.maxModelLen,
    needsTokenizer: 'serve',
    log,
  }).then(async (m) => {
    loaded = m.loaded;
    log(`model ${m.dir} on ${m.device} (loaded in ${(m.loadMs / 1000).toFixed(1)} s), served as '${servedModelName}'`);
    draft = await openDraftModel({ ...o, speculative }, m.device, log);
    return m.loaded;
  });
  // Speculation runs in generate(): requests go one at a time through it (the batch scheduler does not speculate).
  const scheduler =
    speculative &&
    ((l: LoadedModel, grammars: GrammarSource) => {
      log(`scheduler: one sequence at a time, speculative ${speculative} (k=${o.numSpeculativeTokens ?? 4})`);
      const generate = { speculative: speculativeConfig(speculative, draft), numSpeculativeTokens: o.numSpeculativeTokens, grammars };
      return new FifoScheduler(l.model, l.tokenizer!, { maxQueue: o.maxQueue, generate });
    });
  // The Whisper model loads after the text model, on the device that one got.
  let whisper: LoadedWhisper | undefined;
  const transcribeModel = o.transcribeModel;
  const whisperLoading = transcribeModel
    ? opening.then(async () => (whisper = await loadWhisper(transcribeModel, { device: getDefaultDevice(), onNotice: log })))
    : undefined;
  whisperLoading?.catch(() => undefined);
  try {
    const server = await startServer({
      model: opening,
      servedModelName,
      host: o.host,
      port: o.port,
      apiKey: o.apiKey,
      maxQueue: o.maxQueue,
      maxBodyBytes: o.maxBody,
      limits: o.requestLimit,
      grammarCompileTimeoutMs: o.grammarTimeout,
      grammarWorkers: o.grammarWorkers,
      maxBatch: o.maxBatch,
      kvMemoryBytes: o.kvMemory,
      kvPageSize: o.kvPageSize,
      prefillChunk: o.prefillChunk,
      prefillTokensPerStep: o.prefillTokensPerStep,
      prefixCache: o.prefixCache,
      transcription: whisperLoading && { whisper: whisperLoading, servedModelName: transcribeModel!, maxAudioBytes: o.maxAudioSize },
      scheduler: scheduler || undefined,
      log,
    }).catch((e: NodeJS.ErrnoException) => {
      throw e.code && e.syscall === 'listen' ? listenError(o.host, o.port, e) : e;
    });
    process.stdout.write(`tensorgpu serve: listening on ${server.url}/v1\n`);
    try {
      // A model that fails to load ends the command (with the listener closed), as a signal does.
      const outcome = await Promise.race([signal, server.ready.then(() => signal)]);
      log(`tensorgpu serve: ${outcome}: draining (up to ${o.shutdownTimeout} s)`);
    } finally {
      await server.close(o.shutdownTimeout * 1000);
    }
    return 0;
  } finally {
    await opening.catch(() => undefined);
    await whisperLoading?.catch(() => undefined);
    loaded?.model.dispose();
    draft?.dispose();
    whisper?.model.dispose();
    releaseDevice();
  }
}
