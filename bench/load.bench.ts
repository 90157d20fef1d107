// Checkpoint load: SafetensorsFile.load() of every tensor in a generated safetensors file (LLM-like bf16 shapes, one
// FP8 weight with F32 block scales) to the CPU and to WebGPU, against fs.readFile of the same file in one Buffer.
// Besides time and GB/s each row reports the peak host memory during a load: the streaming reader should hold two
// chunk buffers plus the tensor being loaded, where readFile holds the whole file.
// The file is generated once into os.tmpdir() and reused by later runs; its generation is not timed.
import { readFile, rename, rm, statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { emptyCache, Generator, synchronize } from '../src/index.js';
import type { DeviceName } from '../src/runtime/backend.js';
import { DEFAULT_CHUNK_BYTES, SafetensorsFile } from '../src/formats/safetensors-reader.js';
import { sourceBytes, writeSafetensors, type TensorSource } from '../src/formats/safetensors-writer.js';
import { timeIt, type BenchCase, type BenchContext, type RowInput } from './harness.js';

const MiB = 2 ** 20;
const BENCHMARK = 'checkpoint load';
/** Bumped when the generated file's layout changes, so a cached file from an older bench is regenerated. */
const GENERATOR_TAG = 'tensorgpu bench/load.bench.ts v1';
/** Host memory is sampled this often during a run (the event loop runs between chunk reads, so samples land). */
const SAMPLE_MS = 2;

export function loadCases(quick: boolean): BenchCase[] {
  const target = quick ? 64 * MiB : 1024 * MiB;
  const shape = `${quick ? '64 MiB' : '1 GiB'} bf16 safetensors`;
  return [{ benchmark: BENCHMARK, shape, run: (ctx) => measure(ctx, target, shape) }];
}

// ---------------------------------------------------------------------------------------------------------------
// The generated checkpoint

interface Planned {
  name: string;
  dtype: string;
  shape: number[];
}

/**
 * Tensors of about `target` bytes: an FP8 weight with its F32 128x128 block scales and the final norm, then
 * decoder layers (attention projections [4096,4096] and [1024,4096], norms [4096], MoE experts [768,2048] and
 * [2048,768], all bf16) until the next tensor would not fit, then an `lm_head` filler taking up the rest.
 */
function plan(target: number): Planned[] {
  const out: Planned[] = [];
  let total = 0;
  const bytesOf = (p: Planned) => sourceBytes({ dtype: p.dtype, shape: p.shape, bytes: () => new Uint8Array() });
  const fits = (p: Planned) => total + bytesOf(p) <= target;
  const add = (p: Planned) => {
    out.push(p);
    total += bytesOf(p);
  };
  add({ name: 'model.layers.0.mlp.shared_expert.down_proj.weight', dtype: 'F8_E4M3', shape: [2048, 4096] });
  add({ name: 'model.layers.0.mlp.shared_expert.down_proj.weight_scale_inv', dtype: 'F32', shape: [16, 32] });
  add({ name: 'model.norm.weight', dtype: 'BF16', shape: [4096] });
  const layer = (i: number): Planned[] => {
    const p = `model.layers.${i}`;
    const bf16 = (name: string, shape: number[]): Planned => ({ name: `${p}.${name}`, dtype: 'BF16', shape });
    return [
      bf16('input_layernorm.weight', [4096]),
      bf16('self_attn.q_proj.weight', [4096, 4096]),
      bf16('self_attn.k_proj.weight', [1024, 4096]),
      bf16('self_attn.v_proj.weight', [1024, 4096]),
      bf16('self_attn.o_proj.weight', [4096, 4096]),
      bf16('post_attention_layernorm.weight', [4096]),
      ...[0, 1, 2, 3].flatMap((e) => [
        bf16(`mlp.experts.${e}.gate_proj.weight`, [768, 2048]),
        bf16(`mlp.experts.${e}.up_proj.weight`, [768, 2048]),
        bf16(`mlp.experts.${e}.down_proj.weight`, [2048, 768]),
      ]),
    ];
  };
  fill: for (let i = 0; ; i++) {
    for (const p of layer(i)) {
      if (!fits(p)) break fill;
      add(p);
    }
  }
  const rows = Math.floor((target - total) / (4096 * 2));
  if (rows > 0) add({ name: 'lm_head.weight', dtype: 'BF16', shape: [rows, 4096] });
  return out;
}

/**
 * Cheap bytes with no NaN or Inf: one 1 MiB random block with bit 6 of every byte cleared (so a bf16's exponent
 * stays below 0xFF, as does an e4m3 code's exponent-mantissa below 0x7F), xored with a per-tensor word that also has
 * those bits clear, repeated to the tensor's size.
 */
function sources(planned: readonly Planned[]): [string, TensorSource][] {
  const g = new Generator(20261202);
  const block = new Uint32Array(MiB / 4);
  for (let i = 0; i < block.length; i++) block[i] = g.nextU32() & 0xbfbfbfbf;
  return planned.map((p) => {
    const salt = (g.nextU32() & 0xbfbfbfbf) >>> 0;
    const bytes = () => {
      const size = sourceBytes({ dtype: p.dtype, shape: p.shape, bytes: () => new Uint8Array() });
      if (p.dtype === 'F32') {
        // Block scales: positive and finite, around 1/448 (the e4m3 range) as a quantizer would write them.
        const scales = Float32Array.from({ length: size / 4 }, () => (0.5 + g.uniform()) / 448);
        return new Uint8Array(scales.buffer);
      }
      const mixed = block.map((w) => w ^ salt);
      const src = new Uint8Array(mixed.buffer);
      const out = new Uint8Array(size);
      for (let at = 0; at < size; at += src.length) out.set(src.subarray(0, Math.min(src.length, size - at)), at);
      return out;
    };
    return [p.name, { dtype: p.dtype, shape: p.shape, bytes }];
  });
}

/** Whether `path` is a complete file of this plan (the reader checks that the entries tile the data exactly). */
async function isCurrent(path: string, planned: readonly Planned[]): Promise<boolean> {
  let f: SafetensorsFile;
  try {
    f = await SafetensorsFile.open(path);
  } catch {
    return false;
  }
  try {
    if (f.metadata.generator !== GENERATOR_TAG || f.names.length !== planned.length) return false;
    return planned.every((p) => f.has(p.name) && f.entry(p.name).format === p.dtype && f.entry(p.name).shape.join(',') === p.shape.join(','));
  } finally {
    await f.close();
  }
}

/** The checkpoint's path, generated when missing or stale, or why not (too little room in tmpdir). */
async function checkpoint(ctx: BenchContext, target: number): Promise<{ path: string } | { skip: string }> {
  const planned = plan(target);
  const path = join(tmpdir(), `tensorgpu-bench-load-${target / MiB}MiB.safetensors`);
  if (await isCurrent(path, planned)) return { path };
  const fs = await statfs(tmpdir());
  const free = fs.bavail * fs.bsize;
  if (free < target + 256 * MiB) return { skip: `skipped: ${(free / MiB).toFixed(0)} MiB free in ${tmpdir()}, need ${(target / MiB + 256).toFixed(0)}` };
  ctx.log(`  generating ${path} (${planned.length} tensors, ${(target / MiB).toFixed(0)} MiB; not timed)`);
  const t0 = performance.now();
  const partial = `${path}.${process.pid}.partial`;
  try {
    await writeSafetensors(partial, sources(planned), { format: 'pt', generator: GENERATOR_TAG });
    await rename(partial, path);
  } finally {
    await rm(partial, { force: true });
  }
  ctx.log(`  generated in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return { path };
}

// ---------------------------------------------------------------------------------------------------------------
// Host memory

interface HostPeak {
  /** Resident set size above its value when sampling started. */
  rss: number;
  /** process.memoryUsage().external (which includes arrayBuffers: every Buffer and typed array) above its start. */
  external: number;
}

/** Samples process.memoryUsage() every SAMPLE_MS until stopped; returns the peaks above the first sample. */
function sampleHostMemory(): { stop: () => HostPeak } {
  const m0 = process.memoryUsage();
  const peak: HostPeak = { rss: 0, external: 0 };
  const sample = () => {
    const m = process.memoryUsage();
    peak.rss = Math.max(peak.rss, m.rss - m0.rss);
    peak.external = Math.max(peak.external, m.external - m0.external);
  };
  const timer = setInterval(sample, SAMPLE_MS);
  return {
    stop: () => {
      sample();
      clearInterval(timer);
      return peak;
    },
  };
}

/**
 * A full GC between runs, so that the previous run's garbage (a dead 1 GiB Buffer) is neither counted in a run's
 * starting value nor released during the run, which would hide that much of its peak. Twice: V8 frees ArrayBuffer
 * backing stores (and lowers `external`) on a sweeper after the GC that found them dead; the next GC finishes that
 * sweep first. `--expose-gc` set at run time makes a new context's `gc` callable; undefined if that is unavailable.
 */
function forcedGc(): (() => void) | undefined {
  let gc = (globalThis as { gc?: unknown }).gc;
  if (typeof gc !== 'function') {
    try {
      setFlagsFromString('--expose-gc');
      gc = runInNewContext('gc') as unknown;
    } catch {
      return undefined;
    }
  }
  if (typeof gc !== 'function') return undefined;
  const collect = gc as () => void;
  return () => {
    collect();
    collect();
  };
}

const mib = (bytes: number) => `${(bytes / MiB).toFixed(0)} MiB`;

// ---------------------------------------------------------------------------------------------------------------
// Rows

async function measure(ctx: BenchContext, target: number, shape: string): Promise<RowInput[]> {
  const got = await checkpoint(ctx, target);
  if ('skip' in got) {
    return (['node', 'cpu', 'webgpu'] as const).map((backend) => ({ benchmark: BENCHMARK, shape, backend, note: got.skip }));
  }
  const { path } = got;
  const file = await SafetensorsFile.open(path);
  const names = file.names;
  const fileBytes = file.size;
  const largest = Math.max(...names.map((n) => file.entry(n).end - file.entry(n).begin));
  await file.close();
  const gc = forcedGc();

  /** Times `fn` (1 untimed warm-up, which also warms the page cache) and records each timed run's host peak. */
  const run = async (backend: 'node' | 'cpu' | 'webgpu', what: string, fn: () => Promise<void>): Promise<RowInput> => {
    ctx.log(`  ${backend} ${what}`);
    const peaks: HostPeak[] = [];
    const timing = await timeIt(
      async () => {
        const sampler = sampleHostMemory();
        await fn();
        peaks.push(sampler.stop());
      },
      { ...ctx.time, warmup: 1, beforeEach: gc },
    );
    const timed = peaks.slice(1);
    const rss = Math.max(...timed.map((p) => p.rss));
    const external = Math.max(...timed.map((p) => p.external));
    return {
      benchmark: BENCHMARK,
      shape,
      backend,
      timing,
      bytes: fileBytes,
      baselineBackend: 'node',
      note:
        `${what}; peak host +${mib(external)} external (ArrayBuffers incl.), +${mib(rss)} rss ` +
        `(warm-up run +${mib(peaks[0].external)}, +${mib(peaks[0].rss)})${gc ? '' : '; no forced GC between runs'}`,
    };
  };

  const loadAll = (device: DeviceName) => async () => {
    const f = await SafetensorsFile.open(path);
    try {
      for (const name of f.names) (await f.load(name, { device })).dispose();
      if (device === 'webgpu') await synchronize();
    } finally {
      await f.close();
    }
  };

  const rows: RowInput[] = [];
  rows.push(
    await run('node', 'fs.readFile of the whole file into one Buffer, the baseline of the ratios (all rows: warm page cache)', async () => {
      const buf = await readFile(path);
      if (buf.length !== fileBytes) throw new Error(`readFile gave ${buf.length} bytes, the file has ${fileBytes}`);
    }),
  );
  const what = `SafetensorsFile.load of ${names.length} tensors (largest ${mib(largest)}, ${mib(DEFAULT_CHUNK_BYTES)} chunks), each disposed at once`;
  rows.push(await run('cpu', what, loadAll('cpu')));
  if (ctx.gpu) {
    // From an empty pool, so the warm-up run's figure includes the pool's growth (device memory; host memory on a
    // software adapter) and the timed runs reuse what it pooled.
    emptyCache();
    try {
      rows.push(await run('webgpu', `${what}, then synchronize()`, loadAll('webgpu')));
    } finally {
      // Loaded tensors went back to the buffer pool; release it so later cases start from an empty pool.
      emptyCache();
    }
  } else {
    rows.push({ benchmark: BENCHMARK, shape, backend: 'webgpu', note: 'WebGPU unavailable' });
  }
  return rows;
}
