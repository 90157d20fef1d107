// A bounded load test of `tensorgpu serve` on loopback: a generated Qwen3-MoE (Qwen3-30B-A3B's routing at a width a
// software adapter runs) served in-process on 127.0.0.1, streaming completions from 1, 4 and 16 concurrent clients
// (each one request with its own token-id prompt, a fixed max_tokens, greedy), with continuous batching and, as the
// baseline, one sequence at a time (--max-batch 1). Every request must stream the text it streamed alone (the
// 1-client pass runs every prompt one after another first). Reported: aggregate generated tokens/s, time to first
// token (p50 / p95 / p99), time to the response headers (the client has the head: the server took the request; p50 /
// p95), inter-token latency, dispatches per scheduler step and per generated token; the ratio column of `serve cN` is
// its aggregate throughput against `serve c1`.
// The multi-turn case: 4 concurrent conversations of 4 turns (2 of 3 in quick runs), each turn's prompt the previous one plus a reply and a
// new user message (token ids, a 48-token system prefix shared by all), with the prefix cache and without
// (--no-prefix-cache): prefill tokens saved and time to first token; the texts must match.
// The captured batched step: 8 greedy sequences on one BatchScheduler with captured decode steps (replayed per
// batch-size bucket, serve/captured-step.ts) and on one with eager steps, same model, same run: dispatches and host
// µs per batched decode forward (queueing only, no GPU wait), the ratio of `serve step captured` against eager; the
// tokens must match. Once for the Qwen3-MoE above, once for the built-in Qwen3.6 (DeltaNet states per sequence).
import { mkdtempSync, rmSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { qwen3TokenizerFiles } from '../src/tokenizer/tokenizer.js';
import type { Qwen3Config } from '../src/models/qwen3/config.js';
import { loadModel, type LoadedModel } from '../src/models/load.js';
import { writeRandomQwen3Checkpoint } from '../src/models/qwen3/random-checkpoint.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../src/models/qwen3_5/presets.js';
import { qwen3_5TokenizerFiles } from '../src/models/qwen3_5/tokenizer-files.js';
import { gpuCounters } from '../src/runtime/stats.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { BatchScheduler } from '../src/serve/batch-scheduler.js';
import type { PagedCausalLM } from '../src/models/causal-lm.js';
import type { BenchCase, BenchContext, RowInput } from './harness.js';
import { benchConfig } from './moe-decode.bench.js';

const MODEL = 'bench';

/** The MoE decode bench's model at 2 layers, with fewer experts in quick runs, and a bos id for the tokenizer. */
function config(quick: boolean): Qwen3Config {
  const c = benchConfig(quick);
  return { ...c, numHiddenLayers: 2, bosTokenId: 1, eosTokenIds: [2], moe: { ...c.moe!, numExperts: quick ? 16 : 32 } };
}

interface Streamed {
  text: string;
  tokens: number;
  /** From sending the request to its response headers (a streamed answer's headers go out once it is queued). */
  headersMs: number;
  ttftMs: number;
  gapsMs: number[];
}

/**
 * POSTs a JSON body; resolves with the response once its head arrives. node:http rather than fetch: fetch gives up
 * on a response whose head takes over 300 s, which a request waiting its turn on a loaded 2-core machine can.
 */
function post(url: string, body: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, resolve);
    req.on('error', reject);
    req.end(body);
  });
}

/** One streaming completion, timed per event. */
async function stream(server: RunningServer, prompt: number[], maxTokens: number): Promise<Streamed> {
  const t0 = performance.now();
  const res = await post(
    `${server.url}/v1/completions`,
    JSON.stringify({ model: MODEL, prompt, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  );
  const headersMs = performance.now() - t0;
  if (res.statusCode !== 200) throw new Error(`serve load: HTTP ${res.statusCode}: ${(await res.toArray()).join('')}`);
  const out: Streamed = { text: '', tokens: 0, headersMs, ttftMs: 0, gapsMs: [] };
  let last = t0;
  let buffered = '';
  const decoder = new TextDecoder();
  for await (const bytes of res) {
    buffered += decoder.decode(bytes as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (!event.startsWith('data: ')) continue; // an SSE comment
      const data = event.replace(/^data: /, '');
      if (data === '[DONE]') continue;
      const chunk = JSON.parse(data) as { choices: { text: string }[]; usage?: { completion_tokens: number } };
      if (chunk.usage) out.tokens = chunk.usage.completion_tokens;
      const text = chunk.choices[0]?.text;
      if (text === undefined) continue;
      const now = performance.now();
      if (out.text === '' && out.ttftMs === 0) out.ttftMs = now - t0;
      else out.gapsMs.push(now - last);
      last = now;
      out.text += text;
    }
  }
  return out;
}

function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function scrape(server: RunningServer, series: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

interface Pass {
  clients: number;
  results: Streamed[];
  wallMs: number;
  dispatches: number;
  steps: number;
}

/** `clients` concurrent streams, client i sending prompts[i]. */
async function pass(server: RunningServer, prompts: number[][], clients: number, maxTokens: number): Promise<Pass> {
  const steps0 = await scrape(server, 'tensorgpu_decode_batch_size_count');
  const d0 = gpuCounters().dispatches;
  const t0 = performance.now();
  const results = await Promise.all(prompts.slice(0, clients).map((p) => stream(server, p, maxTokens)));
  const wallMs = performance.now() - t0;
  return { clients, results, wallMs, dispatches: gpuCounters().dispatches - d0, steps: (await scrape(server, 'tensorgpu_decode_batch_size_count')) - steps0 };
}

export function serveLoadCases(quick: boolean): BenchCase[] {
  const c = config(quick);
  const shape = `${c.numHiddenLayers}L h${c.hiddenSize} ${c.moe!.numExperts}e top${c.moe!.numExpertsPerTok}, ${quick ? 8 : 16} tokens`;
  const turns = `${c.numHiddenLayers}L h${c.hiddenSize}, ${quick ? '2 conversations x 3' : '4 conversations x 4'} turns`;
  const qwen3Step: StepModel = {
    shape: `${c.numHiddenLayers}L h${c.hiddenSize} ${c.moe!.numExperts}e, 8 sequences`,
    vocabSize: c.vocabSize,
    write: async (dir) => void (await writeRandomQwen3Checkpoint(dir, c, { seed: 9, extraFiles: await qwen3TokenizerFiles() })),
  };
  const qwen36Step = qwen36Model(quick);
  return [
    { benchmark: 'serve', shape, run: (ctx) => measure(ctx, c, shape) },
    { benchmark: 'serve', shape: turns, run: (ctx) => measureMultiTurn(ctx, c, turns) },
    { benchmark: 'serve', shape: qwen3Step.shape, run: (ctx) => measureCapturedStep(ctx, qwen3Step) },
    { benchmark: 'serve', shape: qwen36Step.shape, run: (ctx) => measureCapturedStep(ctx, qwen36Step) },
  ];
}

/** The built-in Qwen3.6 preset (Gated DeltaNet + gated attention + MoE); quick runs narrow its 248,320-row vocabulary. */
const QWEN3_6 = 'qwen3.6-moe-tiny';

interface StepModel {
  shape: string;
  vocabSize: number;
  write(dir: string): Promise<void>;
}

function qwen36Model(quick: boolean): StepModel {
  const preset = QWEN3_5_PRESETS[QWEN3_6]!;
  const c = quick ? { ...preset, vocabSize: 512, eosTokenIds: [2] } : preset;
  return {
    shape: `${QWEN3_6}${quick ? ' (vocab 512)' : ''}, 8 sequences`,
    vocabSize: c.vocabSize,
    write: async (dir) => void (await writeRandomQwen35Checkpoint(dir, c, { seed: 9, outputSpread: true, extraFiles: await qwen3_5TokenizerFiles() })),
  };
}

/** Host µs and dispatches per batched decode forward, captured (replayed) against eager, in one run. */
async function measureCapturedStep(ctx: BenchContext, m: StepModel): Promise<RowInput[]> {
  const shape = m.shape;
  const names = ['serve step captured', 'serve step eager'];
  if (!ctx.gpu) return names.map((benchmark) => ({ benchmark, shape, backend: 'cpu' as const, note: 'WebGPU only' }));
  const maxTokens = ctx.quick ? 8 : 24;
  const prompts = Array.from({ length: 8 }, (_, i) => Array.from({ length: 4 + (i % 3) }, (_, j) => (89 * i + 17 * j + 5) % m.vocabSize));
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-serve-step-'));
  let loaded: LoadedModel | undefined;
  const rows: RowInput[] = [];
  try {
    await m.write(dir);
    loaded = await loadModel(dir, { device: 'webgpu', maxSequence: 256 });
    const model = loaded.model as PagedCausalLM;
    const texts: number[][][] = [];
    // Eager first (it compiles the pipelines), then captured, then eager again for the timed eager figures.
    const runs: { capture: boolean; stats: BatchScheduler['decodeStats'] }[] = [];
    for (const capture of [false, true, false]) {
      const pool = model.newKvPool({ pageSize: 16, pages: 8 * Math.ceil((8 + maxTokens) / 16) + 8, sequences: 8 });
      const sched = new BatchScheduler(model, loaded.tokenizer!, pool, { maxQueue: 16, maxBatch: 8, maxSequence: 256, capture });
      try {
        const seqs = prompts.map((promptIds) => sched.submit({ promptIds, options: { maxNewTokens: maxTokens, temperature: 0, stopTokenIds: [-1] } }));
        const got: number[][] = [];
        for (const seq of seqs) {
          const ids: number[] = [];
          for await (const t of seq.tokens) ids.push(t.id);
          got.push(ids);
        }
        texts.push(got);
        runs.push({ capture, stats: structuredClone(sched.decodeStats) });
      } finally {
        sched.dispose();
      }
    }
    const wrong = texts[1]!.findIndex((t, i) => JSON.stringify(t) !== JSON.stringify(texts[2]![i]));
    if (wrong >= 0) throw new Error(`serve step: sequence ${wrong} gave other tokens with captured steps than with eager ones`);
    for (const [i, { stats }] of [runs[1]!, runs[2]!].entries()) {
      const mode = i === 0 ? 'replay' : 'eager';
      const steps = stats.steps[mode];
      // The median step: on a loaded machine single steps are preempted for 100 ms and more, which a mean of 10 carries.
      const hostUs = percentile(stats.stepHostMs[mode], 50) * 1000;
      const meanUs = (stats.hostMs[mode] / steps) * 1000;
      const dispatches = stats.dispatches[mode] / steps;
      const recorded = i === 0 ? `; ${stats.steps.record} steps recorded (one per bucket), ${stats.steps.eager} eager` : '';
      const note = `${mode}: ${steps} batched steps, median ${hostUs.toFixed(0)} us host (mean ${meanUs.toFixed(0)}) and ${dispatches.toFixed(1)} dispatches per step${recorded}; tokens equal`;
      ctx.log(`  ${names[i]}: ${note}`);
      rows.push({
        benchmark: names[i]!,
        shape,
        backend: 'webgpu',
        timing: { medianMs: hostUs / 1000, minMs: Math.min(...stats.stepHostMs[mode]), runs: steps, dispatchesPerRun: dispatches },
        baselineBenchmark: names[1],
        note,
      });
    }
  } finally {
    loaded?.model.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** Multi-turn chats with and without the prefix cache: prefill tokens, hits and time to first token. */
async function measureMultiTurn(ctx: BenchContext, c: Qwen3Config, shape: string): Promise<RowInput[]> {
  const names = ['serve multi-turn prefix cache', 'serve multi-turn no prefix cache'];
  if (!ctx.gpu) return names.map((benchmark) => ({ benchmark, shape, backend: 'cpu' as const, note: 'WebGPU only' }));
  const maxTokens = ctx.quick ? 4 : 8;
  const [conversations, turns] = ctx.quick ? [2, 3] : [4, 4];
  const ids = (n: number, seed: number) => Array.from({ length: n }, (_, j) => (97 * seed + 31 * j + 5) % c.vocabSize);
  const system = ids(48, 1);
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-serve-turns-'));
  let loaded: LoadedModel | undefined;
  const rows: RowInput[] = [];
  try {
    await writeRandomQwen3Checkpoint(dir, c, { seed: 9, extraFiles: await qwen3TokenizerFiles() });
    loaded = await loadModel(dir, { device: 'webgpu', maxSequence: 512 });
    const texts: string[][] = [];
    for (const [i, prefixCache] of [true, false].entries()) {
      const server = await startServer({ model: loaded, servedModelName: MODEL, port: 0, maxQueue: 64, prefixCache, contextLength: 512 });
      try {
        await server.ready;
        await stream(server, ids(5, 99), 2); // compiles the pipelines
        const [prefill0, hit0] = [await scrape(server, 'tensorgpu_prefill_tokens_total'), await scrape(server, 'tensorgpu_prefix_cache_hit_tokens_total')];
        const ttft: number[] = [];
        const d0 = gpuCounters().dispatches;
        const t0 = performance.now();
        const got = await Promise.all(
          Array.from({ length: conversations }, async (_, conv) => {
            let prompt = [...system];
            const out: string[] = [];
            for (let turn = 0; turn < turns; turn++) {
              prompt = [...prompt, ...ids(8, 10 * conv + turn + 2)];
              const r = await stream(server, prompt, maxTokens);
              ttft.push(r.ttftMs);
              out.push(r.text);
              prompt = [...prompt, ...ids(maxTokens, 10 * conv + turn + 50)]; // the reply as the client sends it back
            }
            return out;
          }),
        );
        const wallMs = performance.now() - t0;
        texts.push(got.flat());
        const prefill = (await scrape(server, 'tensorgpu_prefill_tokens_total')) - prefill0;
        const hit = (await scrape(server, 'tensorgpu_prefix_cache_hit_tokens_total')) - hit0;
        const mean = ttft.reduce((a, b) => a + b, 0) / ttft.length;
        const note = `${prefill} tokens prefilled, ${hit} from the prefix cache; TTFT mean ${mean.toFixed(0)} / p50 ${percentile(ttft, 50).toFixed(0)} ms; ${ttft.length} requests in ${(wallMs / 1000).toFixed(2)} s`;
        ctx.log(`  ${names[i]}: ${note}`);
        rows.push({
          benchmark: names[i]!,
          shape,
          backend: 'webgpu',
          timing: {
            medianMs: percentile(ttft, 50),
            minMs: Math.min(...ttft),
            runs: ttft.length,
            dispatchesPerRun: (gpuCounters().dispatches - d0) / ttft.length,
          },
          baselineBenchmark: names[1],
          note,
        });
      } finally {
        await server.close();
      }
    }
    const wrong = texts[0]!.findIndex((t, i) => t !== texts[1]![i]);
    if (wrong >= 0)
      throw new Error(
        `serve multi-turn: request ${wrong} streamed ${JSON.stringify(texts[0]![wrong])} with the prefix cache, ${JSON.stringify(texts[1]![wrong])} without`,
      );
  } finally {
    loaded?.model.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

async function measure(ctx: BenchContext, c: Qwen3Config, shape: string): Promise<RowInput[]> {
  const names = ['serve c1', 'serve c4', 'serve c16', 'serve c16 unbatched'];
  if (!ctx.gpu) return names.map((benchmark) => ({ benchmark, shape, backend: 'cpu' as const, note: 'WebGPU only' }));
  const maxTokens = ctx.quick ? 8 : 16;
  const prompts = Array.from({ length: 16 }, (_, i) => Array.from({ length: 6 + (i % 5) }, (_, j) => (97 * i + 31 * j + 5) % c.vocabSize));
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-serve-'));
  let loaded: LoadedModel | undefined;
  const rows: RowInput[] = [];
  try {
    await writeRandomQwen3Checkpoint(dir, c, { seed: 9, extraFiles: await qwen3TokenizerFiles() });
    loaded = await loadModel(dir, { device: 'webgpu', maxSequence: 256 });
    const passes: Pass[] = [];
    let unbatched: Pass | undefined;
    for (const maxBatch of [16, 1]) {
      const server = await startServer({ model: loaded, servedModelName: MODEL, port: 0, maxBatch, maxQueue: 64 });
      try {
        await server.ready;
        await stream(server, prompts[0]!, 2); // compiles the pipelines
        if (maxBatch === 16) {
          // Every prompt alone first: the reference texts, and the 1-client figures.
          const alone: Streamed[] = [];
          const d0 = gpuCounters().dispatches;
          const steps0 = await scrape(server, 'tensorgpu_decode_batch_size_count');
          const t0 = performance.now();
          for (const p of prompts) alone.push(await stream(server, p, maxTokens));
          passes.push({
            clients: 1,
            results: alone,
            wallMs: performance.now() - t0,
            dispatches: gpuCounters().dispatches - d0,
            steps: (await scrape(server, 'tensorgpu_decode_batch_size_count')) - steps0,
          });
          for (const clients of [4, 16]) {
            const p = await pass(server, prompts, clients, maxTokens);
            const wrong = p.results.findIndex((r, i) => r.text !== alone[i]!.text);
            if (wrong >= 0)
              throw new Error(
                `serve load: with ${clients} clients, request ${wrong} streamed ${JSON.stringify(p.results[wrong]!.text)}, alone ${JSON.stringify(alone[wrong]!.text)}`,
              );
            passes.push(p);
          }
        } else {
          unbatched = await pass(server, prompts, 16, maxTokens);
        }
      } finally {
        await server.close();
      }
    }
    for (const [i, p] of [...passes, unbatched!].entries()) {
      const tokens = p.results.reduce((a, r) => a + r.tokens, 0);
      const tps = tokens / (p.wallMs / 1000);
      const ttft = p.results.map((r) => r.ttftMs);
      const headers = p.results.map((r) => r.headersMs);
      const gaps = p.results.flatMap((r) => r.gapsMs);
      const perStep = p.steps > 0 ? (p.dispatches / p.steps).toFixed(1) : 'n/a';
      const note = `${p.clients} client${p.clients > 1 ? 's' : ''}${i === 3 ? ', one sequence at a time' : ''}: ${p.results.length} requests, ${tokens} tokens in ${(p.wallMs / 1000).toFixed(2)} s = ${tps.toFixed(1)} tok/s; TTFT p50 ${percentile(ttft, 50).toFixed(0)} / p95 ${percentile(ttft, 95).toFixed(0)} / p99 ${percentile(ttft, 99).toFixed(0)} ms; headers p50 ${percentile(headers, 50).toFixed(0)} / p95 ${percentile(headers, 95).toFixed(0)} ms; ITL p50 ${percentile(gaps, 50).toFixed(1)} / p99 ${percentile(gaps, 99).toFixed(1)} ms; ${(p.dispatches / tokens).toFixed(1)} dispatches/token, ${perStep} per step${i > 0 && i < 3 ? '; every text equal to its run alone' : ''}`;
      ctx.log(`  ${names[i]}: ${note}`);
      const msPerToken = p.wallMs / tokens;
      rows.push({
        benchmark: names[i]!,
        shape,
        backend: 'webgpu',
        timing: { medianMs: msPerToken, minMs: msPerToken, runs: p.results.length, dispatchesPerRun: p.dispatches / tokens },
        baselineBenchmark: 'serve c1',
        note,
      });
    }
  } finally {
    loaded?.model.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
