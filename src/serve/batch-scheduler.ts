// Continuous batching: the running sequences share decode steps. Each step of the worker loop
//   1. admits every waiting sequence (arrival order) while the batch has room and the KV pool has pages for the
//      prompt (and, for a model with recurrent layers, a state slot): requests that arrive together join together;
//   2. runs prefill chunks (at most `prefillChunk` prompt tokens each) of the joining sequences, oldest first, until
//      the step's budget of `prefillTokensPerStep` prompt tokens is spent (vLLM's chunked prefill under
//      max_num_batched_tokens), so several new prompts start in one step while a long one is still spread over steps
//      instead of stalling the others;
//   3. runs one decode forward for every sequence that has a token to feed, each at its own position in its own
//      pages, with the weights read once for all of them;
//   4. samples every row that needs a token on the device in one dispatch per logits tensor (each sequence's own
//      parameters and seed, `sampleRows`) and reads all the ids back at once. A sequence with a response format
//      keeps a grammar matcher (SequenceGrammar) whose bitmask for the next token is uploaded as its row of the
//      step's masks (rows without one allow every token), so rows under different schemas share the dispatch and
//      the read stays one id per row; the matcher then accepts the id, and the sequence ends once it is complete.
// Sequences that finish or are cancelled leave at the next step and give their pages back. Pages are taken as
// sequences grow; when a step finds the pool empty, the youngest sequence is preempted (pages freed, requeued at
// the front with its tokens so far, recomputed when it is admitted again), so the oldest always progress.
// Decode steps run batch-invariant (core/batch-invariance.ts): a sequence's tokens do not depend on its neighbours.
// Prefill chunks run alone, one forward each (a step with several does not fuse them), with boundaries fixed by the
// sequence's own prompt: its logits never depend on what else joined.
// On WebGPU the decode forward is captured per batch-size bucket and replayed (captured-step.ts): same tokens, far
// less host work; it runs eagerly, with the reason in `decodeMode`, on the CPU, with TENSORGPU_CAPTURE=0 or
// `capture: false`, and for a family whose batched step is not capturable yet.
// With the prefix cache (models/layers/prefix-cache.ts, on by default), every page a sequence fills is indexed by
// the hash of its token prefix; an admitted sequence shares the cached pages its ids start with and prefills from
// the first token after them (at least its last token is always computed, for its logits: when the whole prompt is
// cached, the last page is copied before that token is written into it). For a model with recurrent layers the hit
// ends at the deepest page with a state snapshot, and its prefill chunks end on page boundaries so they get one.
import { batchInvariant, withBatchInvariance } from '../core/batch-invariance.js';
import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { resolveGeneration, tokenDraw, type GenerationStats, type ResolvedGeneration } from '../generate/generate.js';
import { allowAllMask, GrammarError, inProcessGrammars, type GrammarSource, type SequenceGrammar } from '../generate/grammar.js';
import { SequenceOutput } from '../generate/sequence-output.js';
import { tokenLogprobs } from '../generate/logprobs.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import type { PagedCausalLM } from '../models/causal-lm.js';
import { PagedSequence, type PagedKvPool, type PagedSlot } from '../models/layers/paged-kv.js';
import type { PrefixCache, PrefixEntry } from '../models/layers/prefix-cache.js';
import { tensor } from '../ops/creation.js';
import { indexSelect } from '../ops/index-select.js';
import { sampleRows } from '../ops/sample.js';
import { cat, narrow } from '../ops/shape-ops.js';
import { gpuCounters } from '../runtime/stats.js';
import { CapturedDecodeSteps, type DecodeStepMode } from './captured-step.js';
import { ContextLengthError, QueueFullError, UnavailableError } from './errors.js';
import {
  cancelQueued,
  idleOrCancel,
  Job,
  macrotask,
  type CancelReason,
  type Scheduler,
  type SchedulerObserver,
  type Sequence,
  type SequenceRequest,
} from './scheduler.js';

export interface BatchObserver extends SchedulerObserver {
  /**
   * After each step: sequences in its decode forward, the GPU dispatches the step queued, and how its decode
   * forward ran (undefined when it had none).
   */
  onStep?(decodeBatch: number, dispatches: number, mode?: DecodeStepMode): void;
  /** A sequence was admitted with `hitTokens` of its `promptTokens` (ids so far) already in cached pages. */
  onPrefixLookup?(promptTokens: number, hitTokens: number): void;
  /** A prefill chunk of `tokens` tokens ran. */
  onPrefill?(tokens: number): void;
}

export interface BatchSchedulerOptions {
  /** Most sequences waiting before submit throws QueueFullError. */
  maxQueue: number;
  /** Most sequences running at once (sharing a decode step); default 16. */
  maxBatch?: number;
  /** Prompt tokens per prefill chunk; default 128. */
  prefillChunk?: number;
  /**
   * Prompt tokens prefilled per step, over the joining sequences' chunks (whole chunks: the oldest joining sequence
   * always runs one); default 4 x prefillChunk. It bounds how long a step of new prompts stalls the running decodes.
   */
  prefillTokensPerStep?: number;
  /** Positions a sequence may reach (the model's RoPE tables); the KV pool's positions bound it too. */
  maxSequence: number;
  /**
   * Shares full KV pages between sequences by the hash of their token prefix (default true). A model with recurrent
   * layers needs a pool with snapshot slots (PagedKvPoolOptions.snapshots), else its sequences share nothing.
   */
  prefixCache?: boolean;
  /** Capture the batched decode step per batch-size bucket and replay it (default true; WebGPU only). */
  capture?: boolean;
  observer?: BatchObserver;
  /** Where response formats are compiled and matched (the server: its grammar worker; default: this thread). */
  grammars?: GrammarSource;
}

/** Decode forwards by how they ran, with their host time (queueing only) and the dispatches they queued. */
export interface DecodeStepStats {
  steps: Record<DecodeStepMode, number>;
  hostMs: Record<DecodeStepMode, number>;
  /** The host ms of the last STEP_TIMES_KEPT steps of each mode (for medians: a preempted step skews the mean). */
  stepHostMs: Record<DecodeStepMode, number[]>;
  dispatches: Record<DecodeStepMode, number>;
}

const STEP_TIMES_KEPT = 256;

/** A sequence on the worker: its pages, what it still has to prefill, and its output so far. */
class Running {
  readonly plan: ResolvedGeneration;
  readonly output: SequenceOutput;
  /** Prompt, then every generated id: what a preempted sequence recomputes. */
  readonly ids: number[];
  /** Positions of `ids` in the cache; ids[filled..] still need a prefill (after admission or preemption). */
  filled = 0;
  generated = 0;
  readonly stats: GenerationStats;
  readonly startedAt = performance.now();
  lastTokenAt: number;
  decodeDispatches = 0;
  decodeSteps = 0;
  /** Leading pages already in the prefix index (or found there), and the hash key of the last of them. */
  indexed = 0;
  chainKey = '';
  /** The response format's matcher (made once the sequence is admitted), in step with `generated`. */
  constraint: SequenceGrammar | undefined;

  constructor(
    readonly job: Job,
    readonly sequence: PagedSequence,
    model: PagedCausalLM,
    tokenizer: TextTokenizer,
  ) {
    this.plan = resolveGeneration(model, tokenizer, job.request.options);
    this.output = new SequenceOutput(tokenizer, this.plan.stops, this.plan.options.stopStrings);
    this.ids = [...job.request.promptIds];
    this.stats = { promptTokens: this.ids.length, generatedTokens: 0, prefillMs: 0, decodeMs: 0, dispatchesPerToken: 0, stopReason: 'max-tokens' };
    this.lastTokenAt = job.submittedAt;
  }

  /** Ready for a decode step: everything but the last id is in the cache. */
  get decoding(): boolean {
    return this.generated > 0 && this.filled === this.ids.length - 1;
  }
}

/** A row of logits to sample from and the sequence it belongs to. */
interface SampleRow {
  run: Running;
  logits: Tensor;
  row: number;
}

export class BatchScheduler implements Scheduler {
  private readonly queue: Job[] = [];
  /** Preempted sequences, resumed before new ones. */
  private readonly resumable: Running[] = [];
  private readonly active: Running[] = [];
  private nextId = 1;
  private accepting = true;
  private idle: Promise<void> = Promise.resolve();
  private working = false;
  readonly maxBatch: number;
  private readonly grammars: GrammarSource;
  readonly prefillChunk: number;
  readonly prefillTokensPerStep: number;
  /** Positions one sequence may hold: the model's limit and the whole pool's. */
  readonly maxPositions: number;
  preemptions = 0;
  /** Tokens run through prefill chunks (cached prefixes not included). */
  prefilledTokens = 0;
  /** The prefix index over the pool, when on (for a model with recurrent layers, only with snapshot slots). */
  readonly prefixCache: PrefixCache | undefined;
  /** The first choice of a group (submitGroup), by each later choice: they wait until its prompt is cached. */
  private readonly leaderOf = new WeakMap<Job, Job>();
  /** The recorded batched decode steps. */
  readonly captured: CapturedDecodeSteps;
  readonly decodeStats: DecodeStepStats = {
    steps: { record: 0, replay: 0, eager: 0 },
    hostMs: { record: 0, replay: 0, eager: 0 },
    stepHostMs: { record: [], replay: [], eager: [] },
    dispatches: { record: 0, replay: 0, eager: 0 },
  };

  constructor(
    private readonly model: PagedCausalLM,
    private readonly tokenizer: TextTokenizer,
    readonly pool: PagedKvPool,
    private readonly options: BatchSchedulerOptions,
  ) {
    this.maxBatch = options.maxBatch ?? 16;
    this.prefillChunk = options.prefillChunk ?? 128;
    this.prefillTokensPerStep = options.prefillTokensPerStep ?? 4 * this.prefillChunk;
    this.maxPositions = Math.min(options.maxSequence, pool.pages * pool.pageSize);
    const recurrent = pool.states !== undefined;
    if ((options.prefixCache ?? true) && (!recurrent || pool.states!.snapshotSlots > 0)) this.prefixCache = pool.enablePrefixCache();
    this.captured = new CapturedDecodeSteps(model, pool, { maxBatch: this.maxBatch, maxPositions: this.maxPositions, capture: options.capture });
    this.grammars = options.grammars ?? inProcessGrammars(tokenizer, model.config.vocabSize);
  }

  /** How decode steps run: 'replay' (captured per batch-size bucket) or 'eager' with the reason. */
  get decodeMode(): { mode: 'replay' | 'eager'; reason?: string; buckets: readonly number[] } {
    const reason = this.captured.reason;
    return reason === undefined ? { mode: 'replay', buckets: this.captured.buckets } : { mode: 'eager', reason, buckets: [] };
  }

  /** Prompt tokens served from cached pages so far. */
  get prefixHitTokens(): number {
    return this.prefixCache?.hitTokens ?? 0;
  }

  get waiting(): number {
    return this.queue.length + this.resumable.length;
  }

  get running(): number {
    return this.active.length;
  }

  submit(request: SequenceRequest): Sequence {
    if (!this.accepting) throw new UnavailableError('The server is shutting down', 'shutting_down');
    if (this.waiting >= this.options.maxQueue) throw new QueueFullError(this.options.maxQueue, 1);
    const maxNew = request.options.maxNewTokens ?? 128;
    if (request.promptIds.length + maxNew > this.maxPositions) throw new ContextLengthError(request.promptIds.length, maxNew, this.maxPositions);
    const job = new Job(this.nextId++, request);
    this.queue.push(job);
    this.report();
    if (!this.working) {
      this.working = true;
      this.idle = this.work().finally(() => (this.working = false));
    }
    return job;
  }

  submitGroup(requests: readonly SequenceRequest[]): Sequence[] {
    if (this.waiting + requests.length > this.options.maxQueue) throw new QueueFullError(this.options.maxQueue, 1);
    const jobs = requests.map((r) => this.submit(r) as Job);
    if (this.prefixCache) for (const job of jobs.slice(1)) this.leaderOf.set(job, jobs[0]!);
    return jobs;
  }

  /** A later choice of a group waits while its first choice's prompt is still queued or being prefilled. */
  private waitsForLeader(job: Job): boolean {
    const leader = this.leaderOf.get(job);
    if (!leader) return false;
    if (this.queue.includes(leader)) return true;
    const run = this.active.find((r) => r.job === leader);
    return run !== undefined && run.generated === 0;
  }

  cancel(id: number, reason: CancelReason = 'client'): boolean {
    const run = [...this.active, ...this.resumable].find((r) => r.job.id === id);
    if (run) {
      // Left at the start of the next step, its pages with it.
      run.job.cancelled ??= reason;
      run.job.controller.abort();
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
        for (const run of [...this.active, ...this.resumable]) this.cancel(run.job.id, 'shutdown');
      },
    );
  }

  /** Frees the recorded steps and the KV pool (after drain). */
  dispose(): void {
    this.captured.dispose();
    this.pool.dispose();
  }

  private report(): void {
    this.options.observer?.onLoad?.(this.waiting, this.running);
  }

  private async work(): Promise<void> {
    while (this.queue.length > 0 || this.resumable.length > 0 || this.active.length > 0) {
      // The event loop's turn comes before each step, the first included: requests whose handlers run in that turn
      // are all queued by admission (they join this step together), and a streamed request's response head goes out
      // before a step that, on the CPU backend, holds the event loop until it ends.
      await macrotask();
      this.leaveCancelled();
      this.admit();
      await this.startConstraints();
      if (this.active.length > 0) await this.step();
    }
  }

  /** Cancelled sequences (running or preempted) end now. */
  private leaveCancelled(): void {
    for (const run of [...this.active, ...this.resumable]) {
      if (run.job.controller.signal.aborted) this.finish(run, 'aborted');
    }
  }

  /** Preempted sequences first, then new ones in arrival order, while the batch has room and the pool the pages. */
  private admit(): void {
    for (;;) {
      if (this.active.length >= this.maxBatch) return;
      const resumed = this.resumable[0];
      const ids = resumed ? resumed.ids : this.queue[0]?.request.promptIds;
      if (ids === undefined) return;
      if (!resumed && this.waitsForLeader(this.queue[0]!)) return;
      const sequence = resumed ? resumed.sequence : new PagedSequence(this.pool);
      const hit = this.shareCachedPrefix(sequence, ids);
      // The prompt plus the first generated token must fit now; later pages are taken as the sequence grows.
      if (hit === undefined || !sequence.reserve(ids.length + 1)) {
        sequence.release();
        return;
      }
      const run = resumed ? this.resumable.shift()! : new Running(this.queue.shift()!, sequence, this.model, this.tokenizer);
      const last = hit.entries[hit.entries.length - 1];
      if (last && this.pool.states) this.prefixCache!.restore(last, sequence.stateSlot!);
      if (hit.tokens > 0) this.prefixCache!.hit(hit.entries, hit.tokens);
      run.indexed = hit.entries.length;
      run.chainKey = last?.key ?? '';
      run.filled = hit.tokens;
      this.options.observer?.onPrefixLookup?.(ids.length, hit.tokens);
      this.active.push(run);
      this.report();
    }
  }

  /**
   * Puts the cached pages `ids` starts with at the head of an empty sequence and returns them with the tokens they
   * cover (undefined when the copy-on-write page could not be had). At least the last id is left to compute.
   */
  private shareCachedPrefix(sequence: PagedSequence, ids: readonly number[]): { entries: PrefixEntry[]; tokens: number } | undefined {
    const cache = this.prefixCache;
    if (!cache) return { entries: [], tokens: 0 };
    let entries = cache.match(ids);
    const ps = this.pool.pageSize;
    if (this.pool.states) {
      // A recurrent model restarts from a snapshot, which only the end of a page can give: the deepest page that has
      // one and leaves a token to compute.
      let n = entries.length;
      while (n > 0 && (entries[n - 1]!.snapshot === undefined || n * ps >= ids.length)) n--;
      entries = entries.slice(0, n);
    }
    if (entries.length === 0) return { entries, tokens: 0 };
    sequence.adopt(entries.map((e) => e.page));
    const covered = entries.length * ps;
    if (covered < ids.length) return { entries, tokens: covered };
    // The whole prompt is cached: its last token runs again for its logits, written into a copy of the last page.
    if (!sequence.copyOnWrite(entries.length - 1)) return undefined;
    return { entries: entries.slice(0, -1), tokens: ids.length - 1 };
  }

  /**
   * Indexes run's pages completed up to `filled` under their prefix hashes; for a model with recurrent layers, the
   * state of a page that ends exactly at `filled` is kept as its snapshot.
   */
  private indexPages(run: Running): void {
    const cache = this.prefixCache;
    if (!cache) return;
    const ps = this.pool.pageSize;
    const full = Math.floor(run.filled / ps);
    for (; run.indexed < full; run.indexed++) {
      const p = run.indexed;
      const entry = cache.insert(run.chainKey, run.ids.slice(p * ps, (p + 1) * ps), run.sequence.pages[p]!);
      run.chainKey = entry.key;
      if (this.pool.states && (p + 1) * ps === run.filled) cache.snapshot(entry, run.sequence.stateSlot!);
    }
  }

  /**
   * Makes room for `positions` in run's pages, preempting the youngest other sequences if the pool is empty; false
   * when run itself had to be preempted.
   */
  private grow(run: Running, positions: number): boolean {
    while (!run.sequence.reserve(positions)) {
      const youngest = this.active[this.active.length - 1];
      if (!youngest) return false;
      this.preempt(youngest);
      if (youngest === run) return false;
    }
    return true;
  }

  private preempt(run: Running): void {
    this.active.splice(this.active.indexOf(run), 1);
    run.sequence.release();
    run.filled = 0;
    run.indexed = 0;
    run.chainKey = '';
    this.resumable.unshift(run);
    this.preemptions++;
    this.report();
  }

  private async step(): Promise<void> {
    const d0 = gpuCounters().dispatches;
    const rows: SampleRow[] = [];
    const temps: Tensor[] = [];
    let decodeBatch = 0;
    let mode: DecodeStepMode | undefined;
    try {
      const joined = this.prefill(rows, temps);
      // One decode forward for every sequence with a token to feed (those that ran a prefill chunk wait a step).
      const decoding = this.active.filter((r) => r.decoding && !joined.has(r));
      // (A sequence preempted by an earlier one's growth this step is skipped: it holds no pages now.)
      const fed = decoding.filter((r) => this.active.includes(r) && this.grow(r, r.ids.length));
      const batch = fed.filter((r) => this.active.includes(r));
      if (batch.length > 0) {
        const slots = batch.map((r) => ({ sequence: r.sequence, start: r.ids.length - 1, rows: 1 }));
        const tokens = batch.map((r) => r.ids[r.ids.length - 1]!);
        const t0 = performance.now();
        const f0 = gpuCounters().dispatches;
        const captured = this.captured.run(tokens, slots);
        // A captured step's logits are its fixed output buffer (kept for the next replay).
        const logits = captured?.logits ?? this.forward(tokens, slots, true);
        if (!captured) temps.push(logits);
        mode = captured?.mode ?? 'eager';
        const stats = this.decodeStats;
        stats.steps[mode]++;
        const hostMs = performance.now() - t0;
        stats.hostMs[mode] += hostMs;
        const times = stats.stepHostMs[mode];
        if (times.push(hostMs) > STEP_TIMES_KEPT) times.shift();
        stats.dispatches[mode] += gpuCounters().dispatches - f0;
        batch.forEach((run, row) => {
          run.filled = run.ids.length;
          this.indexPages(run);
          rows.push({ run, logits, row });
        });
        decodeBatch = batch.length;
      }
      // Rows that report log-probabilities read their logits row too (read together with the ids).
      const rawRows = rows.map(({ run, logits, row }) => (run.plan.options.logprobs !== undefined ? narrow(logits, 0, row, 1).toArray() : undefined));
      const ids = rows.length > 0 ? await this.sampleAll(rows) : [];
      const raw = await Promise.all(rawRows);
      const dispatches = gpuCounters().dispatches - d0;
      for (const run of batch) {
        run.decodeDispatches += dispatches / Math.max(1, rows.length);
        run.decodeSteps++;
      }
      // The grammars take the sampled ids first (a worker's matchers answer asynchronously).
      const allowed = await Promise.all(rows.map(({ run }, i) => run.constraint?.accept(ids[i]!).catch((err: unknown) => err) ?? true));
      rows.forEach(({ run }, i) => this.accept(run, ids[i]!, allowed[i], raw[i]));
      this.options.observer?.onStep?.(decodeBatch, dispatches, mode);
    } catch (err) {
      for (const run of [...this.active]) this.fail(run, err);
    } finally {
      for (const t of temps) t.dispose();
    }
  }

  /**
   * Prefill chunks of the joining sequences, oldest first, each its own forward, until the step's budget of prompt
   * tokens is spent: the first chunk always runs, a later one when it fits what is left (a sequence may run several
   * consecutive chunks; one whose next chunk does not fit lets younger ones with smaller chunks go). A chunk's bounds
   * depend only on its sequence (its own prompt, pages and progress), never on the budget, so neither do its tokens.
   * Pushes the rows of sequences whose prompt is now all in; returns the sequences that ran a chunk.
   */
  private prefill(rows: SampleRow[], temps: Tensor[]): Set<Running> {
    const joined = new Set<Running>();
    let spent = 0;
    for (const run of [...this.active]) {
      // (A sequence preempted by an earlier one's growth this step is skipped: it holds no pages now.)
      while (this.active.includes(run) && !run.decoding && run.filled < run.ids.length) {
        const end = this.chunkEnd(run);
        if (spent > 0 && spent + end - run.filled > this.prefillTokensPerStep) break;
        if (!this.grow(run, end)) break;
        const slot: PagedSlot = { sequence: run.sequence, start: run.filled, rows: end - run.filled };
        const logits = this.forward(run.ids.slice(run.filled, end), [slot], false);
        temps.push(logits);
        spent += end - run.filled;
        this.prefilledTokens += end - run.filled;
        this.options.observer?.onPrefill?.(end - run.filled);
        run.filled = end;
        joined.add(run);
        this.indexPages(run);
        // The whole prompt (for a preempted sequence, prompt and tokens so far) is in: sample the next token.
        if (end === run.ids.length) rows.push({ run, logits, row: 0 });
      }
    }
    return joined;
  }

  /** Where run's next prefill chunk ends: `prefillChunk` tokens on, or the end of its ids. */
  private chunkEnd(run: Running): number {
    const end = Math.min(run.ids.length, run.filled + this.prefillChunk);
    // A recurrent model's chunks end on page boundaries where they can, so the page gets a state snapshot.
    const aligned = end - (end % this.pool.pageSize);
    return this.prefixCache && this.pool.states && aligned > run.filled ? aligned : end;
  }

  /** Matchers for admitted sequences with a response format (compiled when the request was validated: cached). */
  private async startConstraints(): Promise<void> {
    for (const run of [...this.active]) {
      const format = run.plan.options.responseFormat;
      if (!format || run.constraint) continue;
      try {
        run.constraint = await this.grammars(format, run.plan.options.grammarOptions, [...run.plan.stops]);
      } catch (err) {
        this.fail(run, err);
      }
    }
  }

  /** The model over these tokens; decode steps batch-invariant. */
  private forward(tokens: number[], slots: PagedSlot[], decode: boolean): Tensor {
    const run = () => tidy(() => this.model.forwardPaged(tensor(tokens, { dtype: 'int32', device: this.model.device }), slots, this.pool));
    return decode && !batchInvariant() ? withBatchInvariance(run) : run();
  }

  /**
   * Samples each row with its sequence's parameters and draw: one sampleRows dispatch per logits tensor (the decode
   * forward's, a finished prefill's), one read for all ids.
   */
  private async sampleAll(rows: SampleRow[]): Promise<number[]> {
    const masks = await Promise.all(rows.map((r) => r.run.constraint?.nextMask()));
    const groups = new Map<Tensor, number[]>();
    rows.forEach((r, i) => (groups.get(r.logits) ?? groups.set(r.logits, []).get(r.logits)!).push(i));
    const order = [...groups.values()].flat();
    const ids = tidy(() => {
      const parts = [...groups].map(([logits, members]) => {
        const at = members.map((i) => rows[i]!.row);
        const contiguous = at.every((r, k) => r === at[0]! + k);
        const picked = contiguous ? narrow(logits, 0, at[0]!, at.length) : indexSelect(logits, 0, tensor(at, { dtype: 'int32', device: logits.device }));
        const draws = tensor(
          members.map((i) => tokenDraw(rows[i]!.run.plan.options, rows[i]!.run.generated)),
          { device: logits.device },
        );
        return sampleRows(
          picked,
          members.map((i) => ({ ...rows[i]!.run.plan.sampling, previousTokens: rows[i]!.run.plan.usePenalties ? rows[i]!.run.ids : undefined })),
          {
            draws,
            masks: stepMasks(
              members.map((i) => masks[i]),
              logits,
            ),
          },
        );
      });
      return parts.length === 1 ? parts[0]! : cat(parts, 0);
    });
    try {
      const got = await ids.toArray();
      const out = new Array<number>(rows.length);
      order.forEach((row, k) => (out[row] = got[k]!));
      return out;
    } finally {
      ids.dispose();
    }
  }

  /** A sampled id (and its logits row, for log-probabilities): emit it, or end the sequence. */
  private accept(run: Running, id: number, allowed: unknown, logits?: ArrayLike<number>): void {
    const now = performance.now();
    const observer = this.options.observer;
    if (id < 0) return this.fail(run, new Error('every logit is -Inf or NaN; nothing can be sampled'));
    if (allowed instanceof Error) return this.fail(run, allowed);
    if (allowed !== true)
      return this.fail(run, new GrammarError(`sampled token ${id}, which the response format does not allow`, run.plan.options.responseFormat));
    const index = run.generated;
    run.generated++;
    run.stats.generatedTokens++;
    run.ids.push(id);
    if (index === 0) {
      run.stats.prefillMs = now - run.startedAt;
      observer?.onFirstToken?.((now - run.job.submittedAt) / 1000);
    } else observer?.onInterToken?.((now - run.lastTokenAt) / 1000);
    run.lastTokenAt = now;
    const out = run.output.push(id);
    if (out.emit) run.job.tokens.push({ id, text: out.text, index, ...(logits ? { logprobs: tokenLogprobs(logits, id, run.plan.options.logprobs!) } : {}) });
    if (out.stop) return this.finish(run, out.stop);
    // The grammar ended on a stop token that is not among the stops.
    if (run.constraint?.done) return this.finish(run, 'eos');
    if (run.generated >= run.plan.maxNew) return this.finish(run, 'max-tokens');
    if (run.ids.length >= this.maxPositions) return this.finish(run, 'cache-full');
  }

  private leave(run: Running): void {
    for (const list of [this.active, this.resumable]) {
      const at = list.indexOf(run);
      if (at >= 0) list.splice(at, 1);
    }
    run.sequence.release();
    run.constraint?.dispose();
    this.report();
  }

  private finish(run: Running, reason: GenerationStats['stopReason']): void {
    this.leave(run);
    const s = run.stats;
    s.stopReason = reason;
    s.decodeMs = run.generated > 0 ? performance.now() - run.startedAt - s.prefillMs : 0;
    s.dispatchesPerToken = run.decodeSteps > 0 ? run.decodeDispatches / run.decodeSteps : 0;
    run.job.tokens.end();
    run.job.settle.resolve(s);
  }

  private fail(run: Running, err: unknown): void {
    this.leave(run);
    run.job.tokens.end(err);
    run.job.settle.reject(err);
  }
}

/**
 * The masks of one sampleRows dispatch, int32 [rows, ceil(V / 32)] uploaded to the logits' device: each constrained
 * row's grammar mask, every bit set for the others; undefined when no row is constrained.
 */
function stepMasks(masks: (Int32Array | undefined)[], logits: Tensor): Tensor | undefined {
  if (masks.every((m) => m === undefined)) return undefined;
  const vocab = logits.shape[1]!;
  const words = Math.ceil(vocab / 32);
  const all = allowAllMask(vocab);
  const data = new Int32Array(masks.length * words);
  masks.forEach((m, k) => data.set(m ?? all, k * words));
  return tensor(data, { dtype: 'int32', device: logits.device, shape: [masks.length, words] });
}
