// The server's Prometheus metrics (prom-client), in a registry of its own so several servers in one process (tests)
// do not share counters: requests by route and status, tokens, queue depth, running sequences, latency histograms,
// decode steps by mode (captured replay or eager), prefill and prefix-cache tokens, and the device's memory (runtime/stats' memoryStats(), read at scrape time).
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { memoryStats } from '../runtime/stats.js';
import type { BatchObserver } from './batch-scheduler.js';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class ServerMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'tensorgpu_requests_total',
    help: 'HTTP requests by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  });
  readonly promptTokens = new Counter({ name: 'tensorgpu_prompt_tokens_total', help: 'Prompt tokens of generation requests', registers: [this.registry] });
  readonly completionTokens = new Counter({ name: 'tensorgpu_completion_tokens_total', help: 'Generated tokens', registers: [this.registry] });
  readonly queueDepth = new Gauge({ name: 'tensorgpu_queue_depth', help: 'Sequences waiting for the worker', registers: [this.registry] });
  readonly running = new Gauge({ name: 'tensorgpu_running_sequences', help: 'Sequences being generated', registers: [this.registry] });
  readonly timeToFirstToken = new Histogram({
    name: 'tensorgpu_time_to_first_token_seconds',
    help: 'Seconds from arrival to the first generated token',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly decodeBatch = new Histogram({
    name: 'tensorgpu_decode_batch_size',
    help: 'Sequences sharing each decode step',
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers: [this.registry],
  });
  readonly stepDispatches = new Counter({
    name: 'tensorgpu_step_dispatches_total',
    help: 'GPU dispatches queued by scheduler steps',
    registers: [this.registry],
  });
  readonly decodeSteps = new Counter({
    name: 'tensorgpu_decode_steps_total',
    help: 'Batched decode forwards by how they ran: record (captured while running), replay (a captured step), eager',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });
  readonly prefillTokens = new Counter({
    name: 'tensorgpu_prefill_tokens_total',
    help: 'Tokens run through prefill (continuous batching; prompt tokens found in the prefix cache are not)',
    registers: [this.registry],
  });
  readonly prefixCacheQueryTokens = new Counter({
    name: 'tensorgpu_prefix_cache_query_tokens_total',
    help: 'Prompt tokens of sequences admitted to the continuous batch (looked up in the prefix cache)',
    registers: [this.registry],
  });
  readonly prefixCacheHitTokens = new Counter({
    name: 'tensorgpu_prefix_cache_hit_tokens_total',
    help: 'Prompt tokens whose KV pages came from the prefix cache instead of a prefill',
    registers: [this.registry],
  });
  readonly interTokenLatency = new Histogram({
    name: 'tensorgpu_inter_token_latency_seconds',
    help: 'Seconds between consecutive generated tokens',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  constructor() {
    new Gauge({
      name: 'tensorgpu_gpu_memory_bytes',
      help: 'GPU memory (0 on the CPU backend): live tensors, peak live, pooled for reuse, allocated in all',
      labelNames: ['kind'] as const,
      registers: [this.registry],
      collect() {
        const m = memoryStats();
        this.set({ kind: 'live' }, m.liveBytes);
        this.set({ kind: 'peak_live' }, m.peakLiveBytes);
        this.set({ kind: 'pooled' }, m.pooledBytes);
        this.set({ kind: 'allocated' }, m.allocatedBytes);
      },
    });
  }

  /**
   * The KV pool's pages, read at scrape time (continuous batching only): pages in use, kept by the prefix cache
   * for reuse (evicted when needed) and in all, and preemptions.
   */
  watchKvPool(pool: { readonly pages: number; readonly freePages: number; readonly cachedPages?: number }, preemptions: () => number): void {
    new Gauge({
      name: 'tensorgpu_kv_pages',
      help: 'Pages of the paged KV cache: used by sequences, cached (no sequence uses them; evicted when needed) and total',
      labelNames: ['kind'] as const,
      registers: [this.registry],
      collect() {
        this.set({ kind: 'used' }, pool.pages - pool.freePages);
        this.set({ kind: 'cached' }, pool.cachedPages ?? 0);
        this.set({ kind: 'total' }, pool.pages);
      },
    });
    new Counter({
      name: 'tensorgpu_preemptions_total',
      help: 'Sequences preempted (pages freed, recomputed later) because the KV pool was full',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(preemptions());
      },
    });
  }

  /** Feeds the queue and latency metrics from a scheduler. */
  observer(): BatchObserver {
    return {
      onStep: (batch, dispatches, mode) => {
        if (batch > 0) this.decodeBatch.observe(batch);
        if (mode) this.decodeSteps.inc({ mode });
        this.stepDispatches.inc(dispatches);
      },
      onLoad: (waiting, running) => {
        this.queueDepth.set(waiting);
        this.running.set(running);
      },
      onPrefixLookup: (prompt, hit) => {
        this.prefixCacheQueryTokens.inc(prompt);
        this.prefixCacheHitTokens.inc(hit);
      },
      onPrefill: (tokens) => this.prefillTokens.inc(tokens),
      onFirstToken: (s) => this.timeToFirstToken.observe(s),
      onInterToken: (s) => this.interTokenLatency.observe(s),
    };
  }
}
