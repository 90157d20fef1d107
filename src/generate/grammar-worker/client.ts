// The grammar engine in a worker (engine-side.ts): XGrammar compiles schemas and computes token masks there, so a
// compile that runs long never stalls the caller's event loop (a server's /health and other requests still answer),
// and a compile that traps (a deeply nested schema overflows the engine's stack and corrupts its memory) takes only
// the worker down. Node's worker threads (serve/grammar-worker/node-worker.ts) and browser Workers
// (webGrammarWorker) are driven the same way.
// - A compile has a time limit; past it, or after a fatal error, the worker is terminated and a new one started.
//   The constrained sequences running then keep going: their matchers are rebuilt in the new worker (each format
//   compiled again, the sequence's accepted tokens replayed) before any request that was waiting is sent on. The
//   request that caused it gets a GrammarError, or a GrammarTimeoutError naming the limit.
// - A matcher's answers are asynchronous: `accept` returns with the next token's mask, so a decode step costs one
//   round trip per constrained sequence.
import {
  engineVocabulary,
  formatKey,
  GrammarError,
  utf8GuardOf,
  UTF8_START,
  type EngineVocabulary,
  type GrammarOptions,
  type GrammarSource,
  type ResponseFormat,
  type SequenceGrammar,
  type Utf8Guard,
  type Utf8State,
} from '../grammar.js';
import type { TextTokenizer } from '../../tokenizer/text-tokenizer.js';
import type { AcceptResult, Reply, Request } from './protocol.js';

/** The worker was closed (the server is shutting down) while a request waited on it. */
export class GrammarWorkerClosedError extends GrammarError {
  constructor() {
    super('the grammar worker was closed', undefined);
    this.name = 'GrammarWorkerClosedError';
  }
}

/** A compile that ran past the limit (its worker was replaced). */
export class GrammarTimeoutError extends GrammarError {
  constructor(
    readonly limitMs: number,
    format: unknown,
  ) {
    super(`compiling the response format took longer than the server's limit of ${limitMs} ms`, format);
    this.name = 'GrammarTimeoutError';
  }
}

export interface GrammarWorkerOptions {
  /** Longest a compile may run before the worker is replaced and the request refused (default 10 s). */
  compileTimeoutMs?: number;
  log?: (line: string) => void;
}

type Payload<R> = R extends unknown ? Omit<R, 'id'> : never;

interface Call {
  readonly request: Request;
  resolve(value: unknown): void;
  reject(err: unknown): void;
  timer?: ReturnType<typeof setTimeout>;
  /** The worker it was sent to (a restart re-sends the calls the old one left unanswered). */
  generation: number;
}

/** A started worker as the client drives it. */
export interface GrammarWorkerHandle {
  postMessage(request: Request): void;
  /** Replies, and `lost` once if the worker dies or fails to start. */
  listen(onReply: (reply: Reply) => void, onLost: (why: string) => void): void;
  terminate(): void;
}

/** Starts a worker running the engine side (serveGrammarRequests). */
export type SpawnGrammarWorker = () => GrammarWorkerHandle;

const DEFAULT_COMPILE_TIMEOUT_MS = 10_000;
/** Restarts in a row (no call answered between them) before the calls waiting are refused instead of re-sent. */
const MAX_RESTARTS_IN_A_ROW = 3;

export class GrammarWorker {
  /** Settable: applies to the next compile. */
  compileTimeoutMs: number;
  /** Workers replaced so far (a timeout or a fatal error). */
  restarts = 0;
  private worker!: GrammarWorkerHandle;
  private generation = 0;
  private nextId = 1;
  private readonly calls = new Map<number, Call>();
  /** The constrained sequences alive now, rebuilt in a new worker. */
  private readonly live = new Map<number, WorkerGrammar>();
  private nextMatcher = 1;
  /** Compiles run one at a time, so a time limit measures one compile. */
  private compiles: Promise<unknown> = Promise.resolve();
  private compilesWaiting = 0;
  /** Keys of the formats compiled here (for a pool's choice of worker). */
  private readonly compiledKeys = new Set<string>();
  private restarting = false;
  private restartsInARow = 0;
  /** Gave up after restarts in a row; the next request starts a worker again. */
  private broken = false;
  private closed = false;
  readonly utf8: Utf8Guard | undefined;
  private readonly log: (line: string) => void;

  constructor(
    private readonly vocabulary: EngineVocabulary,
    private readonly spawn: SpawnGrammarWorker,
    options: GrammarWorkerOptions = {},
  ) {
    this.compileTimeoutMs = options.compileTimeoutMs ?? DEFAULT_COMPILE_TIMEOUT_MS;
    this.log = options.log ?? (() => undefined);
    this.utf8 = utf8GuardOf(vocabulary);
    this.start();
  }

  /** The worker for a model's tokenizer and logits width. */
  static forTokenizer(tokenizer: TextTokenizer, vocabSize: number, spawn: SpawnGrammarWorker, options?: GrammarWorkerOptions): GrammarWorker {
    return new GrammarWorker(engineVocabulary(tokenizer, vocabSize), spawn, options);
  }

  /** Compiles a format (cached in the worker); throws GrammarError, or GrammarTimeoutError past the limit. */
  async compile(format: ResponseFormat, options: GrammarOptions = {}): Promise<void> {
    if (format.type === 'text') return;
    const key = formatKey(format, options);
    try {
      await this.timed({ op: 'compile', key, format, options }, format);
    } catch (e) {
      if (e instanceof GrammarTimeoutError || !(e instanceof GrammarError)) throw e;
      throw new GrammarError(`cannot compile the ${format.type} response format: ${e.message}`, format);
    }
  }

  /** jsonSchemaGrammar in the worker. */
  async jsonSchemaGrammar(schema: Record<string, unknown> | boolean, strict: boolean): Promise<string> {
    let schemaJson: string;
    try {
      schemaJson = JSON.stringify(schema);
    } catch (e) {
      throw new GrammarError(`cannot read the JSON schema: ${(e as Error).message}`, undefined);
    }
    return (await this.timed({ op: 'schemaGrammar', schemaJson, strict }, schema)) as string;
  }

  /** Sequences' grammars matched in the worker (the schedulers' GrammarSource). */
  readonly grammars: GrammarSource = async (format, options = {}, stopTokenIds) => {
    if (format.type === 'text') return undefined;
    const key = formatKey(format, options);
    const stops = stopTokenIds.length > 0 ? [...stopTokenIds] : this.vocabulary.stops;
    const grammar = new WorkerGrammar(this, this.nextMatcher++, { key, format, options, stops });
    this.live.set(grammar.matcher, grammar);
    try {
      await this.timed(grammar.createRequest(), format);
    } catch (e) {
      this.live.delete(grammar.matcher);
      throw e;
    }
    return grammar;
  };

  /** Stops the worker; calls still waiting are refused. */
  async close(): Promise<void> {
    this.closed = true;
    for (const call of this.calls.values()) {
      if (call.timer) clearTimeout(call.timer);
      call.reject(new GrammarWorkerClosedError());
    }
    this.calls.clear();
    this.worker.terminate();
  }

  /** Constrained sequences with a matcher in this worker. */
  get liveMatchers(): number {
    return this.live.size;
  }

  /** A compile (or a matcher's creation, which may compile) is running or waiting. */
  get compiling(): boolean {
    return this.compilesWaiting > 0;
  }

  /** Whether this worker compiled `key` (it may have left the worker's cache since). */
  hasCompiled(key: string): boolean {
    return this.compiledKeys.has(key);
  }

  /** @internal */
  forget(grammar: WorkerGrammar): void {
    if (!this.live.delete(grammar.matcher)) return;
    this.call({ op: 'dispose', matcher: grammar.matcher }).catch(() => undefined);
  }

  /** @internal One request to the worker, answered in order. */
  call(payload: Payload<Request>): Promise<unknown> {
    return this.send(payload).done;
  }

  private send(payload: Payload<Request>): { call?: Call; done: Promise<unknown> } {
    if (this.closed) return { done: Promise.reject(new GrammarWorkerClosedError()) };
    if (this.broken) {
      // The engine failed to come up several times in a row: a new request tries a fresh worker once more.
      this.broken = false;
      this.restartsInARow = 0;
      this.start();
    }
    const request = { ...payload, id: this.nextId++ } as Request;
    let call!: Call;
    const done = new Promise((resolve, reject) => {
      call = { request, resolve, reject, generation: this.generation };
    });
    this.calls.set(request.id, call);
    // During a restart the call waits: it is sent after the matchers are rebuilt.
    if (!this.restarting) this.post(request);
    return { call, done };
  }

  /** A compiling request, one at a time, under the time limit. */
  private timed(payload: Payload<Request>, format: unknown): Promise<unknown> {
    this.compilesWaiting++;
    const key = 'key' in payload ? payload.key : undefined;
    const run = this.compiles.then(() => {
      const { call, done } = this.send(payload);
      if (!call) return done;
      call.timer = setTimeout(() => {
        this.calls.delete(call.request.id);
        this.dropCulprit(call.request);
        call.reject(new GrammarTimeoutError(this.compileTimeoutMs, format));
        void this.restart(`a compile ran past ${this.compileTimeoutMs} ms`);
      }, this.compileTimeoutMs);
      return done;
    });
    this.compiles = run.catch(() => undefined);
    const counted = run.then(
      (value) => {
        this.compilesWaiting--;
        if (key !== undefined) this.compiledKeys.add(key);
        return value;
      },
      (err: unknown) => {
        this.compilesWaiting--;
        throw err;
      },
    );
    return counted;
  }

  /** A request that broke the worker is not repeated in the next one: its matcher is not rebuilt. */
  private dropCulprit(request: Request): void {
    if (request.op === 'matcher') this.live.delete(request.matcher);
  }

  private post(request: Request): void {
    try {
      this.worker.postMessage(request);
    } catch (e) {
      // A value the structured clone cannot copy (nested past its stack).
      this.settle({ id: request.id, ok: false, message: (e as Error).message, fatal: false });
    }
  }

  private start(): void {
    const generation = ++this.generation;
    const worker = this.spawn();
    worker.listen(
      (reply) => {
        if (generation === this.generation) this.settle(reply);
      },
      (why) => {
        if (generation === this.generation && !this.closed) void this.restart(why);
      },
    );
    this.worker = worker;
    this.post({ op: 'init', id: 0, vocabulary: this.vocabulary });
  }

  private settle(reply: Reply): void {
    if (reply.id === 0) {
      if (!reply.ok) this.log(`grammar worker: the engine failed to start: ${reply.message}`);
      return;
    }
    const call = this.calls.get(reply.id);
    if (!call) return;
    this.calls.delete(reply.id);
    if (call.timer) clearTimeout(call.timer);
    this.restartsInARow = 0;
    if (reply.ok) return call.resolve(reply.value);
    const format = 'format' in call.request ? call.request.format : undefined;
    if (reply.fatal) this.dropCulprit(call.request);
    call.reject(new GrammarError(reply.message, format));
    if (reply.fatal) void this.restart(`the engine trapped: ${reply.message}`);
  }

  /** Replaces the worker: a new engine, the live matchers rebuilt, then the calls left unanswered sent again. */
  private async restart(why: string): Promise<void> {
    if (this.restarting || this.closed) return;
    this.restarting = true;
    this.restarts++;
    this.restartsInARow++;
    this.log(`grammar worker: replaced (${why})`);
    this.worker.terminate();
    for (const call of this.calls.values()) if (call.timer) clearTimeout(call.timer);
    if (this.restartsInARow > MAX_RESTARTS_IN_A_ROW) {
      // No new worker until the next request (a worker that cannot start would otherwise be respawned forever).
      const err = new GrammarError(`the grammar worker failed ${this.restartsInARow} times in a row (${why})`, undefined);
      for (const grammar of this.live.values()) grammar.fail(err);
      this.live.clear();
      for (const call of this.calls.values()) call.reject(err);
      this.calls.clear();
      this.broken = true;
      this.restarting = false;
      return;
    }
    this.compiledKeys.clear();
    this.start();
    // Matchers first (in the new worker's queue ahead of everything), then the waiting calls in their order.
    for (const grammar of this.live.values()) this.post({ ...grammar.createRequest(), id: this.nextId++ });
    this.restarting = false;
    for (const [id, call] of [...this.calls]) {
      // A matcher's creation or disposal is already in the rebuilt state.
      const r = call.request;
      if (r.op === 'matcher' || r.op === 'dispose') {
        this.calls.delete(id);
        call.resolve(undefined);
        continue;
      }
      call.generation = this.generation;
      this.post(r);
    }
  }
}

interface MatcherSpec {
  readonly key: string;
  readonly format: ResponseFormat;
  readonly options: GrammarOptions;
  readonly stops: number[] | undefined;
}

/** One sequence's matcher in the worker, with what rebuilds it: its format and the tokens it accepted. */
class WorkerGrammar implements SequenceGrammar {
  private readonly accepted: number[] = [];
  private prefetched: Int32Array | undefined;
  private failure: Error | undefined;
  private utf8State: Utf8State = UTF8_START;
  done = false;
  private disposed = false;

  constructor(
    private readonly owner: GrammarWorker,
    readonly matcher: number,
    private readonly spec: MatcherSpec,
  ) {}

  createRequest(): Payload<Request> {
    const { key, format, options, stops } = this.spec;
    return { op: 'matcher', matcher: this.matcher, key, format, options, stops, tokens: [...this.accepted] };
  }

  fail(err: Error): void {
    this.failure = err;
  }

  async nextMask(): Promise<Int32Array> {
    if (this.failure) throw this.failure;
    const mask = this.prefetched ?? ((await this.owner.call({ op: 'mask', matcher: this.matcher })) as Int32Array);
    this.prefetched = undefined;
    this.owner.utf8?.restrict(mask, this.utf8State);
    return mask;
  }

  async accept(id: number): Promise<boolean> {
    if (this.failure) throw this.failure;
    const r = (await this.owner.call({ op: 'accept', matcher: this.matcher, token: id })) as AcceptResult;
    if (!r.ok) return false;
    this.accepted.push(id);
    if (this.owner.utf8) this.utf8State = this.owner.utf8.advance(this.utf8State, id);
    this.done = r.terminated;
    this.prefetched = r.mask;
    return true;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.owner.forget(this);
  }
}

/** What request validation needs of the engine: compiling a format, a schema as EBNF. */
export interface GrammarCompiling {
  compile(format: ResponseFormat, options?: GrammarOptions): Promise<void>;
  jsonSchemaGrammar(schema: Record<string, unknown> | boolean, strict: boolean): Promise<string>;
}

export interface GrammarPoolOptions extends GrammarWorkerOptions {
  /** Most workers (default 3): each holds the engine and the vocabulary (tens of MB for a 150k-token vocabulary). */
  maxWorkers?: number;
}

/**
 * Grammar workers for one vocabulary, started as needed. A compile blocks its worker's matchers until it ends (the
 * engine runs one thing at a time), so a new format goes to a worker running no constrained sequence where there is
 * one (starting another, up to maxWorkers), and a sequence's matcher goes to the worker that compiled its format: one
 * client's slow schema does not stall the masks of the others. The first worker starts with the first format.
 */
export class GrammarPool implements GrammarCompiling {
  private readonly workers: GrammarWorker[] = [];
  private readonly maxWorkers: number;
  private readonly vocabulary: () => EngineVocabulary;
  private engineVocabulary: EngineVocabulary | undefined;

  private readonly options: GrammarPoolOptions;

  constructor(
    tokenizer: TextTokenizer,
    vocabSize: number,
    private readonly spawn: SpawnGrammarWorker,
    options: GrammarPoolOptions = {},
  ) {
    this.options = { ...options };
    this.maxWorkers = Math.max(1, options.maxWorkers ?? 3);
    this.vocabulary = () => (this.engineVocabulary ??= engineVocabulary(tokenizer, vocabSize));
  }

  /** Workers started. */
  get size(): number {
    return this.workers.length;
  }

  /** The worker for `key`: the one that compiled it, else an idle one, else a new one, else the least busy. */
  private pick(key: string | undefined): GrammarWorker {
    const known = key === undefined ? undefined : this.workers.find((w) => w.hasCompiled(key));
    if (known) return known;
    const idle = this.workers.find((w) => w.liveMatchers === 0 && !w.compiling);
    if (idle) return idle;
    if (this.workers.length < this.maxWorkers) {
      const w = new GrammarWorker(this.vocabulary(), this.spawn, this.options);
      this.workers.push(w);
      return w;
    }
    const load = (w: GrammarWorker) => w.liveMatchers + (w.compiling ? 1000 : 0);
    return this.workers.reduce((best, w) => (load(w) < load(best) ? w : best));
  }

  compile(format: ResponseFormat, options: GrammarOptions = {}): Promise<void> {
    if (format.type === 'text') return Promise.resolve();
    return this.pick(formatKey(format, options)).compile(format, options);
  }

  jsonSchemaGrammar(schema: Record<string, unknown> | boolean, strict: boolean): Promise<string> {
    return this.pick(undefined).jsonSchemaGrammar(schema, strict);
  }

  readonly grammars: GrammarSource = async (format, options = {}, stops) => {
    if (format.type === 'text') return undefined;
    return this.pick(formatKey(format, options)).grammars(format, options, stops);
  };

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.close()));
  }
}

/**
 * A grammar worker in a browser: `scriptUrl` is a module Worker script the page bundles, which imports
 * '@mlc-ai/web-xgrammar' and calls runGrammarWorker(). Pass its `grammars` to generate() (GenerateOptions.grammars).
 */
export function webGrammarWorker(tokenizer: TextTokenizer, vocabSize: number, scriptUrl: string | URL, options?: GrammarWorkerOptions): GrammarWorker {
  interface WebWorker {
    postMessage(message: unknown): void;
    addEventListener(type: 'message', listener: (e: { data: Reply }) => void): void;
    addEventListener(type: 'error', listener: (e: { message?: string }) => void): void;
    terminate(): void;
  }
  const WorkerClass = (globalThis as { Worker?: new (url: string | URL, options: { type: 'module' }) => WebWorker }).Worker;
  if (!WorkerClass) throw new TypeError('webGrammarWorker: this environment has no Worker');
  return GrammarWorker.forTokenizer(
    tokenizer,
    vocabSize,
    () => {
      const w = new WorkerClass(scriptUrl, { type: 'module' });
      return {
        postMessage: (request) => w.postMessage(request),
        listen(onReply, onLost) {
          w.addEventListener('message', (e) => onReply(e.data));
          w.addEventListener('error', (e) => onLost(`the grammar worker failed: ${e.message ?? 'error'}`));
        },
        terminate: () => w.terminate(),
      };
    },
    options,
  );
}
