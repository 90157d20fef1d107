// A small benchmark harness: timing of async work, rows with throughput and a ratio against a baseline measured
// in the same run, an aligned text table and the same rows as JSON.
import { writeFileSync } from 'node:fs';
import { median } from '../src/generate/measure.js';
import { gpuCounters, randn, synchronize, type Tensor } from '../src/index.js';

export { median };

/** 'node': plain Node.js with no tensorgpu backend, for baselines outside the library (e.g. `fs.readFile`). */
export type BackendName = 'webgpu' | 'cpu' | 'node';

export interface BenchOptions {
  /** Only cases whose `benchmark shape` contains this text (case-insensitive). */
  filter?: string;
  /** Fewer and smaller sizes, for a CI smoke run. */
  quick: boolean;
  /** Also write the rows (and run metadata) to this JSON file. */
  json?: string;
}

/** What a bench file knows about the run it is part of. */
export interface BenchContext {
  quick: boolean;
  /** Whether the WebGPU device is up; without it only CPU rows are measured. */
  gpu: boolean;
  /** Timing defaults of this run (fewer runs with --quick); a case's own options override them. */
  time: TimeOptions;
  /** Progress lines (stderr), so stdout holds only the report. */
  log: (line: string) => void;
}

/** One line of the report: a benchmark at one shape on one backend. */
export interface BenchCase {
  benchmark: string;
  shape: string;
  /** Measures every backend of this case; the rows share benchmark and shape so ratios can be taken. */
  run: (ctx: BenchContext) => Promise<RowInput[]>;
}

export interface TimeOptions {
  /** Untimed runs first (buffer-pool fill, JIT; pipelines are best compiled on a tiny problem beforehand). */
  warmup?: number;
  /** Timed runs: at least this many... */
  minRuns?: number;
  /** ...and until at least this much timed time has passed... */
  minMs?: number;
  /** ...but never more runs than this... */
  maxRuns?: number;
  /**
   * ...and none once this much timed time has passed, even below minRuns (at least one run is always made):
   * a case that takes seconds per run on a slow adapter gets fewer runs instead of stretching the whole bench.
   */
  maxMs?: number;
  /** Untimed, before every run (warm-up included): e.g. a forced GC, so each run starts from the same heap. */
  beforeEach?: () => void | Promise<void>;
}

export interface Timing {
  medianMs: number;
  minMs: number;
  runs: number;
  /** GPU dispatches per call of the timed function (warm-up calls included), from gpuCounters(). */
  dispatchesPerRun: number;
}

const DEFAULT_TIME: Required<Omit<TimeOptions, 'beforeEach'>> = { warmup: 1, minRuns: 5, minMs: 300, maxRuns: 200, maxMs: 3000 };

/** --quick: a smoke run, where a median of 3 is precise enough. */
export const QUICK_TIME: TimeOptions = { minRuns: 3, minMs: 0, maxMs: 1000 };

/**
 * Times `fn`, which must finish its own work: GPU code ends with `await synchronize()` inside `fn`, so the time
 * covers execution and not only queueing. Returns median and minimum over the timed runs.
 */
export async function timeIt(fn: () => Promise<void> | void, options: TimeOptions = {}): Promise<Timing> {
  const o = { ...DEFAULT_TIME, ...options };
  const dispatchesBefore = gpuCounters().dispatches;
  for (let i = 0; i < o.warmup; i++) {
    await o.beforeEach?.();
    await fn();
  }
  const times: number[] = [];
  let total = 0;
  while (times.length === 0 || (times.length < o.maxRuns && total < o.maxMs && (times.length < o.minRuns || total < o.minMs))) {
    await o.beforeEach?.();
    const t0 = performance.now();
    await fn();
    const dt = performance.now() - t0;
    times.push(dt);
    total += dt;
  }
  const calls = o.warmup + times.length;
  return {
    medianMs: median(times),
    minMs: Math.min(...times),
    runs: times.length,
    dispatchesPerRun: (gpuCounters().dispatches - dispatchesBefore) / calls,
  };
}

const primed = new Set<string>();

/**
 * Runs `op` once on tiny WebGPU inputs of `shapes`, once per `key` and process, so its pipeline is compiled
 * before any timed or warm-up run (on a software adapter compiling a shader takes longer than running it).
 */
export async function primeGpu(key: string, shapes: readonly (readonly number[])[], op: (xs: Tensor[]) => Tensor): Promise<void> {
  if (primed.has(key)) return;
  const xs = shapes.map((s) => randn(s, { device: 'webgpu' }));
  try {
    op(xs).dispose();
    await synchronize();
  } finally {
    for (const x of xs) x.dispose();
  }
  primed.add(key);
}

/** What a bench reports; the harness turns it into a Row (throughput, ratio). */
export interface RowInput {
  benchmark: string;
  shape: string;
  backend: BackendName;
  timing?: Timing;
  /** Floating-point operations per run: throughput in GFLOP/s. */
  flops?: number;
  /** Bytes read + written per run (minimum traffic): throughput in GB/s. Used when `flops` is absent. */
  bytes?: number;
  /** Why there is no timing ('skipped (too slow)', 'WebGPU unavailable', an error), or a remark under the table. */
  note?: string;
  /**
   * Take the ratio against this benchmark's row of the same shape on the same backend (e.g. FP8 GEMV vs f32 GEMV
   * on one adapter) instead of against the CPU baseline.
   */
  baselineBenchmark?: string;
  /** Take the ratio against this backend's row of the same benchmark and shape (e.g. 'node': a plain Node.js baseline). */
  baselineBackend?: BackendName;
}

export interface Row {
  benchmark: string;
  shape: string;
  backend: BackendName;
  medianMs: number | null;
  minMs: number | null;
  runs: number;
  throughput: number | null;
  unit: 'GFLOP/s' | 'GB/s' | null;
  /** Baseline median / this median for the same benchmark and shape: > 1 is faster than the baseline. */
  ratio: number | null;
  /** What the ratio compares against: a backend ('cpu') or another benchmark on the same backend. */
  baseline: string;
  /** GPU dispatches per op (WebGPU rows only): machine-independent, compare against the documented baseline. */
  dispatchesPerOp: number | null;
  note: string | null;
}

export function toRows(inputs: readonly RowInput[], baseline: BackendName = 'cpu'): Row[] {
  const key = (r: { benchmark: string; shape: string }) => `${r.benchmark}\u0000${r.shape}`;
  const base = new Map<string, number>();
  for (const r of inputs) if (r.backend === baseline && r.timing) base.set(key(r), r.timing.medianMs);
  const sameBackend = new Map<string, number>();
  for (const r of inputs) if (r.timing) sameBackend.set(`${key(r)}\u0000${r.backend}`, r.timing.medianMs);
  return inputs.map((r) => {
    const t = r.timing;
    const unit = r.flops !== undefined ? 'GFLOP/s' : r.bytes !== undefined ? 'GB/s' : null;
    const amount = r.flops ?? r.bytes;
    const b = r.baselineBenchmark
      ? sameBackend.get(`${key({ benchmark: r.baselineBenchmark, shape: r.shape })}\u0000${r.backend}`)
      : r.baselineBackend
        ? sameBackend.get(`${key(r)}\u0000${r.baselineBackend}`)
        : base.get(key(r));
    return {
      benchmark: r.benchmark,
      shape: r.shape,
      backend: r.backend,
      medianMs: t ? t.medianMs : null,
      minMs: t ? t.minMs : null,
      runs: t ? t.runs : 0,
      // Both units are 1e9 per second, so amount / ms / 1e6.
      throughput: t && amount !== undefined && t.medianMs > 0 ? amount / t.medianMs / 1e6 : null,
      unit: t ? unit : null,
      ratio: t && b !== undefined && t.medianMs > 0 ? b / t.medianMs : null,
      baseline: r.baselineBenchmark ?? r.baselineBackend ?? baseline,
      dispatchesPerOp: t && r.backend === 'webgpu' ? t.dispatchesPerRun : null,
      note: r.note ?? null,
    };
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Output

const DASH = '-';

function fmtNumber(x: number): string {
  if (x >= 100) return x.toFixed(0);
  if (x >= 10) return x.toFixed(1);
  if (x >= 1) return x.toFixed(2);
  return x.toPrecision(2);
}

function fmtCount(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}

export function formatTable(rows: readonly Row[]): string {
  const header = ['benchmark', 'shape', 'backend', 'median ms', 'min ms', 'runs', 'throughput', 'ratio', 'vs', 'dispatches/op'];
  const rightAligned = [false, false, false, true, true, true, true, true, false, true];
  const cells = rows.map((r) => [
    r.benchmark,
    r.shape,
    r.backend,
    r.medianMs === null ? (r.note ?? DASH) : fmtNumber(r.medianMs),
    r.minMs === null ? DASH : fmtNumber(r.minMs),
    r.medianMs === null ? DASH : String(r.runs),
    r.throughput === null ? DASH : `${fmtNumber(r.throughput)} ${r.unit}`,
    r.ratio === null ? DASH : `${fmtNumber(r.ratio)}x`,
    r.ratio === null ? '' : r.baseline,
    r.dispatchesPerOp === null ? DASH : fmtCount(r.dispatchesPerOp),
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...cells.map((row) => row[c].length)));
  const line = (row: string[]) =>
    row
      .map((s, c) => (rightAligned[c] ? s.padStart(widths[c]) : s.padEnd(widths[c])))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

/** Prints the table to stdout and, with `json`, writes `{...meta, rows}` there too. */
export function printTable(rows: readonly Row[], options: { json?: string; meta?: Record<string, unknown> } = {}): void {
  process.stdout.write(formatTable(rows) + '\n');
  const notes = rows.filter((r) => r.medianMs !== null && r.note);
  for (const r of notes) process.stdout.write(`note: ${r.benchmark} ${r.shape} ${r.backend}: ${r.note}\n`);
  if (options.json) {
    writeFileSync(options.json, JSON.stringify({ ...options.meta, rows }, null, 2) + '\n');
    process.stdout.write(`rows written to ${options.json}\n`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Command line

export const USAGE = `usage: tsx bench/main.ts [--filter TEXT] [--quick] [--json FILE]
  --filter TEXT  run only the cases whose "benchmark shape" contains TEXT (case-insensitive), e.g. matmul, gemv, 1024, exp
  --quick        fewer and smaller sizes (CI smoke run)
  --json FILE    also write the rows and run metadata as JSON to FILE`;

export class UsageError extends Error {}

export function parseArgs(argv: readonly string[]): BenchOptions & { help: boolean } {
  const out: BenchOptions & { help: boolean } = { quick: false, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case '--filter':
        out.filter = value();
        break;
      case '--json':
        out.json = value();
        break;
      case '--quick':
        out.quick = true;
        break;
      case '--help':
      case '-h':
        out.help = true;
        break;
      default:
        throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  return out;
}

export function matchesFilter(c: Pick<BenchCase, 'benchmark' | 'shape'>, filter: string | undefined): boolean {
  return !filter || `${c.benchmark} ${c.shape}`.toLowerCase().includes(filter.toLowerCase());
}
