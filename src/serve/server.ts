// The OpenAI-compatible HTTP server (fastify): routes, auth, errors in OpenAI's shape, metrics and graceful
// shutdown. Generation goes through a Scheduler (scheduler.ts); this file only speaks HTTP.
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import type { LoadedModel } from '../models/load.js';
import { ApiError, ModelNotFoundError, ModelOutputApiError, UnauthorizedError, UnavailableError } from './errors.js';
import { ChatOutput, type ChatDelta } from './chat-output/chat-output.js';
import { ModelOutputError } from './chat-output/errors.js';
import { droppedTagTexts } from './chat-output/special-tags.js';
import { planGeneration, type ServedModel } from './generation-plan.js';
import { ServerMetrics } from './metrics.js';
import { constrainPlan } from './response-format.js';
import {
  chatChunk,
  chatCompletion,
  chatLogprobs,
  finishReason,
  sseEvent,
  textChunk,
  textCompletion,
  textLogprobs,
  usageChunk,
  type ResponseIdentity,
  type TokenText,
  type Usage,
} from './openai-format.js';
import type { GeneratedToken, GenerationStats } from '../generate/generate.js';
import type { ChatMessageOut } from './chat-output/chat-output.js';
import { parseChatRequest, parseCompletionRequest, type CompletionRequest } from './request.js';
import { FifoScheduler, type Scheduler, type Sequence, type SequenceRequest } from './scheduler.js';
import { BatchScheduler } from './batch-scheduler.js';
import { isPagedLM } from '../models/causal-lm.js';
import { registerTranscriptionRoutes, type TranscriptionServeOptions } from './transcriptions.js';
import { GrammarPool } from '../generate/grammar-worker/client.js';
import { spawnNodeGrammarWorker } from './grammar-worker/node-worker.js';
import type { GrammarSource } from '../generate/grammar.js';
import { DEFAULT_REQUEST_LIMITS, type RequestLimits } from './schema-checks.js';
import { useStrictJson } from './strict-json.js';

export interface ServeOptions {
  /** The model, or its loading: /health answers 503 until it resolves. */
  model: LoadedModel | Promise<LoadedModel>;
  /** The name clients pass as `model` (and /v1/models lists). */
  servedModelName: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 8000; 0 = any free port (see RunningServer.port). */
  port?: number;
  /** Requests to /v1/* must send `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Requests waiting behind the running one before 429 (default 64). */
  maxQueue?: number;
  /** Largest request body in bytes before 413 (default 1 MiB). */
  maxBodyBytes?: number;
  /** Positions a sequence may fill (default and upper bound: the model's cache capacity). */
  contextLength?: number;
  /**
   * Continuous batching (models with a paged KV cache; others run one sequence at a time): the most sequences per
   * decode step (default 16; 1 turns batching off and runs the FIFO scheduler).
   */
  maxBatch?: number;
  /** Bytes of the paged KV cache (default: maxBatch full-context sequences, at most 1 GiB). */
  kvMemoryBytes?: number;
  /** Positions per KV page (default 16). */
  kvPageSize?: number;
  /** Prompt tokens per prefill chunk (default 128). */
  prefillChunk?: number;
  /** Prompt tokens prefilled per scheduler step over the joining requests' chunks (default 4 x prefillChunk). */
  prefillTokensPerStep?: number;
  /** Share KV pages of common prompt prefixes between requests (continuous batching; default true). */
  prefixCache?: boolean;
  /**
   * Replaces the scheduler the model would get: tests drive the routes with a scheduler whose tokens are scripted
   * (the model's random weights write nothing a parser could read).
   */
  scheduler?: (loaded: LoadedModel, grammars: GrammarSource) => Scheduler;
  /**
   * Limits every request is checked against before any work (schema-checks.ts): nesting of the body and of each
   * schema, schema bytes, tools, enum sizes, pattern and grammar lengths. Each exceeded is a 400 naming it.
   */
  limits?: Partial<RequestLimits>;
  /** Longest a response format may compile in the grammar worker before the request is refused (default 10 s). */
  grammarCompileTimeoutMs?: number;
  /** Most grammar worker threads (default 3): a new format compiles in one whose sequences it does not stall. */
  grammarWorkers?: number;
  /** A Whisper model behind POST /v1/audio/transcriptions and /v1/audio/translations (transcriptions.ts). */
  transcription?: TranscriptionServeOptions;
  log?: (line: string) => void;
}

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly metrics: ServerMetrics;
  /** Resolves once the model is loaded and requests are served. */
  readonly ready: Promise<void>;
  /**
   * Graceful shutdown: new requests get 503, running and queued ones may finish until `deadlineMs` (default 10 s)
   * and are cancelled after it, then the listener closes. The model stays the caller's to dispose.
   */
  close(deadlineMs?: number): Promise<void>;
}

interface State {
  served?: ServedModel;
  scheduler?: Scheduler;
  /** Text of the tags the output decoder drops as special tokens, by token id. */
  droppedTags?: ReadonlyMap<number, string>;
  grammar?: GrammarPool;
  draining: boolean;
}

function sendError(reply: FastifyReply, err: ApiError): FastifyReply {
  return reply.code(err.status).headers(err.headers).send(err.toBody());
}

/** fastify's own errors (bad JSON, body too large, wrong content type) as OpenAI errors. */
function fromFastify(err: FastifyError): ApiError {
  const status = err.statusCode ?? 500;
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new ApiError(413, `The request body is larger than the server accepts (${err.message})`, 'invalid_request_error', null, 'request_too_large');
  if (err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError)
    return new ApiError(400, `The body is not valid JSON: ${err.message}`, 'invalid_request_error', 'body', 'invalid_json');
  if (status >= 400 && status < 500) return new ApiError(status, err.message, 'invalid_request_error', null, err.code ?? null);
  return new ApiError(500, err.message, 'server_error', null, null);
}

function contextLengthOf(loaded: LoadedModel, asked: number | undefined): number {
  const cache = loaded.model.newCache();
  const capacity = cache.capacity;
  cache.dispose();
  return Math.min(capacity, asked ?? capacity);
}

const DEFAULT_KV_BYTES = 1 << 30;

/** The continuous-batching scheduler over a paged KV pool where the model family has one, else the FIFO one. */
function makeScheduler(
  loaded: LoadedModel,
  contextLength: number,
  options: ServeOptions,
  metrics: ServerMetrics,
  grammars: GrammarSource,
  log: (line: string) => void,
): Scheduler {
  const { model, tokenizer } = loaded;
  const maxQueue = options.maxQueue ?? 64;
  const maxBatch = options.maxBatch ?? 16;
  if (!isPagedLM(model) || maxBatch <= 1) {
    log(`scheduler: one sequence at a time (${maxBatch <= 1 ? 'max batch 1' : `${loaded.config.modelType} has no paged KV cache`})`);
    return new FifoScheduler(model, tokenizer!, { maxQueue, observer: metrics.observer(), generate: { grammars } });
  }
  const pageSize = options.kvPageSize ?? 16;
  const perPage = model.kvBytesPerPosition() * pageSize;
  const bytes = options.kvMemoryBytes ?? Math.min(DEFAULT_KV_BYTES, maxBatch * contextLength * model.kvBytesPerPosition());
  const pages = Math.floor(bytes / perPage);
  if (pages < 1)
    throw new RangeError(`--kv-memory ${bytes} bytes holds no page (${perPage} bytes each: ${pageSize} positions of ${model.kvBytesPerPosition()} bytes)`);
  const prefixCache = options.prefixCache ?? true;
  // A recurrent model's prefix cache keeps state snapshots at page boundaries: as many as sequences run.
  const snapshots = prefixCache && model.stateBytesPerSequence ? maxBatch : 0;
  const pool = model.newKvPool({ pageSize, pages, sequences: maxBatch, snapshots });
  const scheduler = new BatchScheduler(model, tokenizer!, pool, {
    maxQueue,
    maxBatch,
    prefillChunk: options.prefillChunk,
    prefillTokensPerStep: options.prefillTokensPerStep,
    prefixCache,
    maxSequence: contextLength,
    observer: metrics.observer(),
    grammars,
  });
  metrics.watchKvPool(pool, () => scheduler.preemptions);
  const states = model.stateBytesPerSequence
    ? `; recurrent state ${(((maxBatch + snapshots) * model.stateBytesPerSequence()) / 2 ** 20).toFixed(1)} MiB (${maxBatch} slots${snapshots > 0 ? `, ${snapshots} prefix-cache snapshots` : ''})`
    : '';
  log(
    `scheduler: continuous batching, up to ${maxBatch} sequences a step; KV cache ${pages} pages of ${pageSize} positions (${((pages * perPage) / 2 ** 20).toFixed(1)} MiB)${states}; prefix cache ${scheduler.prefixCache ? 'on' : 'off'}; ${decodeModeText(scheduler)}`,
  );
  return scheduler;
}

/** The startup line's decode mode: captured buckets, or eager and why. */
function decodeModeText(scheduler: BatchScheduler): string {
  const m = scheduler.decodeMode;
  return m.mode === 'replay' ? `decode steps captured and replayed (batch buckets ${m.buckets.join(', ')})` : `decode steps eager (${m.reason})`;
}

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const log = options.log ?? (() => undefined);
  const metrics = new ServerMetrics();
  const state: State = { draining: false };
  const app: FastifyInstance = Fastify({ bodyLimit: options.maxBodyBytes ?? 1 << 20, logger: false, forceCloseConnections: 'idle' });

  const limits: RequestLimits = { ...DEFAULT_REQUEST_LIMITS, ...options.limits };
  useStrictJson(app, limits);
  const ready = Promise.resolve(options.model).then((loaded) => {
    if (!loaded.tokenizer) throw new Error('the model has no tokenizer.json; the server needs one');
    // The grammar engine runs in worker threads, the first started with the first response format.
    const grammar = new GrammarPool(loaded.tokenizer, loaded.config.vocabSize, spawnNodeGrammarWorker, {
      compileTimeoutMs: options.grammarCompileTimeoutMs,
      maxWorkers: options.grammarWorkers,
      log,
    });
    state.grammar = grammar;
    state.served = { loaded, tokenizer: loaded.tokenizer, contextLength: contextLengthOf(loaded, options.contextLength), grammar };
    state.scheduler =
      options.scheduler?.(loaded, grammar.grammars) ?? makeScheduler(loaded, state.served.contextLength, options, metrics, grammar.grammars, log);
    state.droppedTags = droppedTagTexts(loaded.tokenizer);
  });
  ready.catch((err: unknown) => log(`tensorgpu serve: the model failed to load: ${(err as Error).message}`));

  app.addHook('onRequest', async (request, reply) => {
    if (state.draining && request.url !== '/metrics') return sendError(reply, new UnavailableError('The server is shutting down', 'shutting_down'));
    if (options.apiKey !== undefined && request.url.startsWith('/v1/') && request.headers.authorization !== `Bearer ${options.apiKey}`)
      return sendError(reply, new UnauthorizedError());
  });
  app.addHook('onResponse', async (request, reply) => {
    metrics.requests.inc({ route: request.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) });
    // One line per request (the access log); a streamed answer's time is until its last chunk.
    log(`${request.method} ${request.url} ${reply.statusCode} ${reply.elapsedTime.toFixed(0)} ms`);
  });
  app.setErrorHandler((err: FastifyError, _request, reply) => sendError(reply, err instanceof ApiError ? err : fromFastify(err)));
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new ApiError(404, `No route ${request.method} ${request.url}`, 'not_found_error', null, 'not_found')),
  );

  app.get('/health', async (_request, reply) => {
    if (!state.served) return sendError(reply, new UnavailableError('The model is loading', 'model_loading'));
    return reply.send({ status: 'ok' });
  });
  app.get('/metrics', async (_request, reply) => reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()));

  // /v1/models' `created`: when this server started serving the model (OpenAI gives the model's creation time).
  const created = Math.floor(Date.now() / 1000);
  const modelCard = () => ({
    id: options.servedModelName,
    object: 'model',
    created,
    owned_by: 'tensorgpu',
    ...(state.served ? { max_model_len: state.served.contextLength } : {}),
  });
  app.get('/v1/models', async () => ({ object: 'list', data: [modelCard()] }));
  app.get<{ Params: { model: string } }>('/v1/models/:model', async (request) => {
    if (request.params.model !== options.servedModelName) throw new ModelNotFoundError(request.params.model, options.servedModelName);
    return modelCard();
  });

  const complete = async (req: CompletionRequest, reply: FastifyReply) => {
    if (req.model !== options.servedModelName) throw new ModelNotFoundError(req.model, options.servedModelName);
    const { served, scheduler } = state;
    if (!served || !scheduler) throw new UnavailableError('The model is loading', 'model_loading');
    const plan = await constrainPlan(planGeneration(req, served), req, served);
    const n = req.n ?? 1;
    // Choice i samples with seed + i (one seed for all would give n equal choices).
    const requests = Array.from({ length: n }, (_, i) => ({
      promptIds: plan.promptIds,
      options: i > 0 && plan.options.seed !== undefined ? { ...plan.options, seed: plan.options.seed + i } : plan.options,
    }));
    const sequences = submitChoices(scheduler, requests);
    // A client that goes away cancels its sequences: the worker stops them at the next token and moves on.
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) for (const sequence of sequences) scheduler.cancel(sequence.id, 'client');
    });
    const who: ResponseIdentity = {
      id: `${req.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID()}`,
      created: Math.floor(Date.now() / 1000),
      model: options.servedModelName,
    };
    for (const sequence of sequences) {
      const counted = sequence.result.then((s) => {
        metrics.promptTokens.inc(s.promptTokens);
        metrics.completionTokens.inc(s.generatedTokens);
      });
      counted.catch(() => undefined);
    }
    const tokenText = tokenTextOf(served);
    const droppedTags = state.droppedTags ?? new Map<number, string>();
    // Chat output is read as it comes: reasoning, content and tool calls (a tag dropped as special text put back).
    const chatOf = () =>
      req.kind === 'chat' ? { output: new ChatOutput(plan.chatOutput), textOf: (t: GeneratedToken) => t.text || (droppedTags.get(t.id) ?? '') } : undefined;
    if (req.stream) {
      reply.header('cache-control', 'no-cache').header('x-accel-buffering', 'no').type('text/event-stream; charset=utf-8');
      const streams = sequences.map((sequence, index) => {
        const chat = chatOf();
        const cancel = () => scheduler.cancel(sequence.id, 'client');
        const choice = { index, last: n === 1 };
        return chat ? chatStreamEvents(req, who, sequence, tokenText, chat, cancel, choice) : streamEvents(req, who, sequence, tokenText, choice);
      });
      return reply.send(Readable.from(n === 1 ? streams[0]! : mergedChoiceEvents(req, who, streams, sequences)));
    }
    const answers = await Promise.all(sequences.map((sequence) => answerOf(sequence, chatOf())));
    const stats = answers.map((a) => a.stats);
    if (req.kind === 'text') {
      const choices = answers.map((a, index) => ({ index, text: a.text, logprobs: textLogprobs(a.tokens, tokenText), finish_reason: finishReason(a.stats) }));
      return reply.send({ ...(textCompletion(who, answers[0]!.text, stats[0]!) as object), choices, usage: choiceUsage(stats) });
    }
    const choices = answers.map((a, index) => {
      const message = a.message!;
      return { index, message, logprobs: chatLogprobs(a.tokens, tokenText), finish_reason: finishReason(a.stats, message.tool_calls !== undefined) };
    });
    return reply.send({ ...(chatCompletion(who, answers[0]!.message!, stats[0]!) as object), choices, usage: choiceUsage(stats) });
  };

  app.post('/v1/chat/completions', async (request, reply) => complete(parseChatRequest(request.body, limits), reply));
  app.post('/v1/completions', async (request, reply) => complete(parseCompletionRequest(request.body, limits), reply));

  if (options.transcription) registerTranscriptionRoutes(app, { maxQueue: options.maxQueue, ...options.transcription }, log);
  await app.listen({ host: options.host ?? '127.0.0.1', port: options.port ?? 8000 });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : (options.port ?? 8000);
  const host = options.host ?? '127.0.0.1';
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    metrics,
    ready,
    close(deadlineMs = 10_000) {
      closing ??= (async () => {
        state.draining = true;
        await state.scheduler?.drain(deadlineMs);
        state.scheduler?.dispose?.();
        await state.grammar?.close();
        // Every sequence has ended; a connection still open now is idle or its reader stopped reading (a stream
        // stuck on backpressure): give responses a moment to flush their last events, then cut what is left.
        const closed = app.close();
        setTimeout(() => app.server.closeAllConnections(), 1000).unref();
        await closed;
      })();
      return closing;
    },
  };
}

/** A token's own text, for log-probability entries. */
function tokenTextOf(served: ServedModel): TokenText {
  return (id) => served.tokenizer.decode([id], false, { cleanUpSpaces: false });
}

/** The sequences of a request's choices: one submit, or a group sharing the prompt where the scheduler has one. */
function submitChoices(scheduler: Scheduler, requests: readonly SequenceRequest[]): Sequence[] {
  if (requests.length === 1) return [scheduler.submit(requests[0]!)];
  if (scheduler.submitGroup) return scheduler.submitGroup(requests);
  const sequences: Sequence[] = [];
  try {
    for (const r of requests) sequences.push(scheduler.submit(r));
  } catch (err) {
    for (const s of sequences) scheduler.cancel(s.id, 'client');
    throw err;
  }
  return sequences;
}

/** One choice's whole answer: its text, tokens and stats, and for chat the parsed message. */
async function answerOf(
  sequence: Sequence,
  chat: { output: ChatOutput; textOf: (t: GeneratedToken) => string } | undefined,
): Promise<{ text: string; tokens: GeneratedToken[]; stats: GenerationStats; message?: ChatMessageOut }> {
  let text = '';
  const tokens: GeneratedToken[] = [];
  for await (const t of sequence.tokens) {
    text += chat ? chat.textOf(t) : t.text;
    tokens.push(t);
  }
  const stats = await sequence.result;
  if (sequence.cancelled === 'shutdown') throw new UnavailableError('The server shut down before the request finished', 'shutting_down');
  if (!chat) return { text, tokens, stats };
  try {
    chat.output.push(text);
    chat.output.finish();
  } catch (err) {
    throw asApiError(err, stats);
  }
  return { text, tokens, stats, message: chat.output.message() };
}

/** Usage of a request's choices: the prompt once, every choice's completion tokens. */
function choiceUsage(stats: readonly GenerationStats[]): Usage {
  const completion = stats.reduce((a, s) => a + s.generatedTokens, 0);
  const prompt = stats[0]!.promptTokens;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/**
 * The events of a request's n choice streams as they come (each chunk names its choice's index), then one usage
 * chunk for all of them when asked, then [DONE].
 */
async function* mergedChoiceEvents(
  req: CompletionRequest,
  who: ResponseIdentity,
  streams: AsyncGenerator<string>[],
  sequences: readonly Sequence[],
): AsyncGenerator<string> {
  const next = (i: number) => streams[i]!.next().then((r) => ({ i, r }));
  const pending = new Map(streams.map((_, i) => [i, next(i)]));
  while (pending.size > 0) {
    const { i, r } = await Promise.race(pending.values());
    if (r.done) pending.delete(i);
    else {
      pending.set(i, next(i));
      yield r.value;
    }
  }
  if (req.includeUsage) {
    const stats = await Promise.all(sequences.map((s) => s.result.catch(() => undefined)));
    const done = stats.filter((s): s is GenerationStats => s !== undefined);
    if (done.length > 0)
      yield sseEvent({ ...(usageChunk(who, req.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', done[0]!) as object), usage: choiceUsage(done) });
  }
  yield sseEvent('[DONE]');
}

/** A model-output error as the route answers it (a cut by max_tokens named as the likely cause). */
function asApiError(err: unknown, stats?: { stopReason: string }): unknown {
  if (!(err instanceof ModelOutputError)) return err;
  const cut = stats && stats.stopReason !== 'eos' && stats.stopReason !== 'stop-string' ? ' (the output was cut short by max_tokens or the context)' : '';
  return new ModelOutputApiError(`${err.message}${cut}`, err.code);
}

/** A chat stream: role first, then reasoning_content / content / tool_calls deltas as the output parser completes them. */
async function* chatStreamEvents(
  req: CompletionRequest,
  who: ResponseIdentity,
  sequence: Sequence,
  tokenText: TokenText,
  chat: { output: ChatOutput; textOf: (t: GeneratedToken) => string },
  cancel: () => void,
  choice: StreamChoice = { index: 0, last: true },
): AsyncGenerator<string> {
  const usage = req.includeUsage;
  const at = choice.index;
  let failed = false;
  try {
    yield sseEvent(chatChunk(who, { role: 'assistant', content: '' }, null, usage, null, at));
    for await (const t of sequence.tokens) {
      const deltas: ChatDelta[] = chat.output.push(chat.textOf(t));
      // With log-probabilities every token is a chunk (it may complete no delta: text held back, mid-character).
      if (t.logprobs && deltas.length === 0) deltas.push({ content: '' });
      for (const [i, delta] of deltas.entries()) yield sseEvent(chatChunk(who, delta, null, usage, i === 0 ? chatLogprobs([t], tokenText) : null, at));
    }
    const stats = await sequence.result;
    if (sequence.cancelled === 'shutdown') {
      yield sseEvent(new UnavailableError('The server shut down before the request finished', 'shutting_down').toBody());
    } else {
      try {
        for (const delta of chat.output.finish()) yield sseEvent(chatChunk(who, delta, null, usage, null, at));
      } catch (err) {
        throw asApiError(err, stats);
      }
      yield sseEvent(chatChunk(who, {}, finishReason(stats, chat.output.hasToolCalls), usage, null, at));
      if (usage && choice.last) yield sseEvent(usageChunk(who, 'chat.completion.chunk', stats));
    }
  } catch (err) {
    failed = true;
    const apiError = asApiError(err);
    yield sseEvent(
      apiError instanceof ApiError ? apiError.toBody() : new ApiError(500, `generation failed: ${(err as Error).message}`, 'server_error').toBody(),
    );
  }
  // An answer that cannot be delivered stops its generation now rather than at max_tokens.
  if (failed) cancel();
  if (choice.last) yield sseEvent('[DONE]');
}

/** Which choice a stream is (its chunks' index), and whether it is the request's only one (it ends the stream). */
interface StreamChoice {
  index: number;
  last: boolean;
}

/** A text completion stream: one chunk per token with text (or log-probabilities). */
async function* streamEvents(
  req: CompletionRequest,
  who: ResponseIdentity,
  sequence: Sequence,
  tokenText: TokenText,
  choice: StreamChoice = { index: 0, last: true },
): AsyncGenerator<string> {
  const usage = req.includeUsage;
  const at = choice.index;
  // An empty first chunk: Node writes the response head with it, so the client has its headers as soon as the
  // request is queued rather than with its first token (a chat stream's role chunk does the same).
  yield '';
  try {
    let offset = 0;
    for await (const t of sequence.tokens) {
      // With log-probabilities every token is a chunk (its text may be empty mid-character).
      if (!t.text && !t.logprobs) continue;
      yield sseEvent(textChunk(who, t.text, null, usage, textLogprobs([t], tokenText, offset), at));
      offset += t.logprobs ? tokenText(t.id).length : 0;
    }
    const stats = await sequence.result;
    if (sequence.cancelled === 'shutdown') {
      yield sseEvent(new UnavailableError('The server shut down before the request finished', 'shutting_down').toBody());
    } else {
      yield sseEvent(textChunk(who, '', finishReason(stats), usage, null, at));
      if (usage && choice.last) yield sseEvent(usageChunk(who, 'text_completion', stats));
    }
  } catch (err) {
    yield sseEvent(new ApiError(500, `generation failed: ${(err as Error).message}`, 'server_error').toBody());
  }
  if (choice.last) yield sseEvent('[DONE]');
}
