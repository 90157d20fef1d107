// Who runs which sequence when. The Scheduler interface is what the routes see (submit / cancel / drain, plus the
// queue figures for metrics); FifoScheduler is the first implementation: one worker owns the model and runs one
// sequence at a time, in arrival order: `--max-batch 1`, and models without a paged KV cache. The
// continuous-batching scheduler (batch-scheduler.ts, several sequences per decode step) implements the same interface.
import { generate, type GeneratedToken, type GenerateOptions, type GenerationStats } from '../generate/generate.js';
import type { CausalLM } from '../models/causal-lm.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import { QueueFullError, UnavailableError } from './errors.js';

export interface SequenceRequest {
  promptIds: readonly number[];
  options: GenerateOptions;
}

export type CancelReason = 'client' | 'shutdown';

export interface Sequence {
  readonly id: number;
  /** Tokens as they are generated; ends when the sequence ends, throws if generation failed. */
  readonly tokens: AsyncIterable<GeneratedToken>;
  /** How it ended (stopReason 'aborted' when cancelled); rejects if generation failed. */
  readonly result: Promise<GenerationStats>;
  /** Why it was cancelled, if it was. */
  readonly cancelled: CancelReason | undefined;
}

export interface SchedulerObserver {
  /** Sequences waiting and running, after every change. */
  onLoad?(waiting: number, running: number): void;
  /** Seconds from submit to a sequence's first token. */
  onFirstToken?(seconds: number): void;
  /** Seconds between consecutive tokens of a sequence. */
  onInterToken?(seconds: number): void;
}

export interface Scheduler {
  /** Queues a sequence; throws QueueFullError when the queue is full, UnavailableError once draining. */
  submit(request: SequenceRequest): Sequence;
  /**
   * Queues the choices of one request (`n > 1`): sequences with the same prompt, all or none. A scheduler with a
   * prefix cache prefills the prompt once and lets the others share its pages (batch-scheduler.ts); without it the
   * route submits them one by one.
   */
  submitGroup?(requests: readonly SequenceRequest[]): Sequence[];
  /** Cancels a waiting or running sequence (a running one stops at its next token). False if it is unknown. */
  cancel(id: number, reason?: CancelReason): boolean;
  /** Stops accepting; lets waiting and running sequences finish until `deadlineMs`, then cancels the rest. */
  drain(deadlineMs: number): Promise<void>;
  readonly waiting: number;
  readonly running: number;
  /** Frees what the scheduler holds on the device (after drain). */
  dispose?(): void;
}

/** A push-fed async iterable of tokens (one reader). */
class TokenChannel implements AsyncIterable<GeneratedToken> {
  private readonly buffered: GeneratedToken[] = [];
  private ended = false;
  private failure: unknown;
  private wake?: () => void;

  push(t: GeneratedToken): void {
    this.buffered.push(t);
    this.wake?.();
  }

  end(failure?: unknown): void {
    this.ended = true;
    this.failure = failure;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<GeneratedToken> {
    for (;;) {
      const t = this.buffered.shift();
      if (t) {
        yield t;
        continue;
      }
      if (this.ended) {
        if (this.failure !== undefined) throw this.failure;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}

export class Job implements Sequence {
  readonly tokens = new TokenChannel();
  readonly controller = new AbortController();
  readonly result: Promise<GenerationStats>;
  cancelled: CancelReason | undefined;
  settle!: { resolve: (s: GenerationStats) => void; reject: (e: unknown) => void };
  readonly submittedAt = performance.now();

  constructor(
    readonly id: number,
    readonly request: SequenceRequest,
  ) {
    this.result = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
    // A reader that only iterates tokens must not leave an unhandled rejection behind.
    this.result.catch(() => undefined);
  }
}

/** The result of a sequence cancelled while it waited. */
function abortedBeforeStart(job: Job): GenerationStats {
  return { promptTokens: job.request.promptIds.length, generatedTokens: 0, prefillMs: 0, decodeMs: 0, dispatchesPerToken: 0, stopReason: 'aborted' };
}

/** Takes a job that has not started out of the queue and settles it as aborted; false when it is not queued. */
export function cancelQueued(queue: Job[], id: number, reason: CancelReason): boolean {
  const at = queue.findIndex((j) => j.id === id);
  if (at < 0) return false;
  const [job] = queue.splice(at, 1);
  job!.cancelled = reason;
  job!.tokens.end();
  job!.settle.resolve(abortedBeforeStart(job!));
  return true;
}

/**
 * Waits until `idle()` settles or the deadline passes; past the deadline `cancelAll` runs (cancelled work leaves
 * within a step) and the wait goes on to the end.
 */
export async function idleOrCancel(idle: () => Promise<void>, deadlineMs: number, cancelAll: () => void): Promise<void> {
  const timer = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), Math.max(0, deadlineMs)).unref());
  if ((await Promise.race([idle().then(() => 'done' as const), timer])) === 'late') cancelAll();
  await idle();
}

export interface FifoSchedulerOptions {
  /** Most sequences waiting (not counting the running one) before submit throws QueueFullError. */
  maxQueue: number;
  observer?: SchedulerObserver;
  /**
   * What every sequence's generate() gets besides its request's options: speculative decoding (`serve --speculative`),
   * the server's grammar worker.
   */
  generate?: Pick<GenerateOptions, 'speculative' | 'numSpeculativeTokens' | 'grammars'>;
}

/** Yields to the event loop (I/O, timers): on the CPU backend a whole generation is otherwise one long task. */
export const macrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class FifoScheduler implements Scheduler {
  private readonly queue: Job[] = [];
  private current: Job | undefined;
  private nextId = 1;
  private accepting = true;
  private idle: Promise<void> = Promise.resolve();

  constructor(
    private readonly model: CausalLM,
    private readonly tokenizer: TextTokenizer,
    private readonly options: FifoSchedulerOptions,
  ) {}

  get waiting(): number {
    return this.queue.length;
  }

  get running(): number {
    return this.current ? 1 : 0;
  }

  submit(request: SequenceRequest): Sequence {
    if (!this.accepting) throw new UnavailableError('The server is shutting down', 'shutting_down');
    if (this.queue.length >= this.options.maxQueue) throw new QueueFullError(this.options.maxQueue, 1);
    const job = new Job(this.nextId++, request);
    this.queue.push(job);
    this.report();
    if (!this.current) this.idle = this.work();
    return job;
  }

  cancel(id: number, reason: CancelReason = 'client'): boolean {
    if (this.current?.id === id) {
      this.current.cancelled ??= reason;
      this.current.controller.abort();
      return true;
    }
    if (!cancelQueued(this.queue, id, reason)) return false;
    this.report();
    return true;
  }

  async drain(deadlineMs: number): Promise<void> {
    this.accepting = false;
    await idleOrCancel(
      () => this.idle,
      deadlineMs,
      () => {
        for (const job of [...this.queue]) this.cancel(job.id, 'shutdown');
        if (this.current) this.cancel(this.current.id, 'shutdown');
      },
    );
  }

  private report(): void {
    this.options.observer?.onLoad?.(this.waiting, this.running);
  }

  private async work(): Promise<void> {
    for (let job = this.queue.shift(); job; job = this.queue.shift()) {
      this.current = job;
      this.report();
      // The event loop's turn first: the route that submitted the job sends its response head before a prefill that,
      // on the CPU backend, holds the loop until it ends.
      await macrotask();
      await this.run(job);
      this.current = undefined;
      this.report();
    }
  }

  private async run(job: Job): Promise<void> {
    const observer = this.options.observer;
    try {
      const options = { ...this.options.generate, ...job.request.options, signal: job.controller.signal };
      const stream = generate(this.model, this.tokenizer, job.request.promptIds, options);
      let last = job.submittedAt;
      let r = await stream.next();
      while (!r.done) {
        const now = performance.now();
        if (r.value.index === 0) observer?.onFirstToken?.((now - job.submittedAt) / 1000);
        else observer?.onInterToken?.((now - last) / 1000);
        last = now;
        job.tokens.push(r.value);
        await macrotask();
        r = await stream.next();
      }
      job.tokens.end();
      job.settle.resolve(r.value);
    } catch (err) {
      job.tokens.end(err);
      job.settle.reject(err);
    }
  }
}
