// `npm run bench`: every benchmark, WebGPU against the CPU backend in the same run, as one table.
import { cpus } from 'node:os';
import { diagnose, initDevice, memoryStats, releaseDevice } from '../src/index.js';
import { webgpuBackend } from '../src/runtime/registry.js';
import { dispatchOverheadCases } from './dispatch-overhead.bench.js';
import { elementwiseCases } from './elementwise.bench.js';
import { loadCases } from './load.bench.js';
import { matmulCases } from './matmul.bench.js';
import { moeDecodeCases } from './moe-decode.bench.js';
import { scaledMmCases } from './scaled-mm.bench.js';
import { softmaxCases } from './softmax.bench.js';
import { vaeDecodeCases } from './vae-decode.bench.js';
import { trainStepCases } from './train-step.bench.js';
import { audioCases } from './audio.bench.js';
import { serveLoadCases } from './serve-load.bench.js';
import { soakCases } from './soak.bench.js';
import { speculativeCases } from './speculative.bench.js';
import { gatedDeltaNetCases } from './gated-delta-net.bench.js';
import { peersCases } from './peers.bench.js';
import { compileCases } from './compile.bench.js';
import { whisperCases } from './whisper.bench.js';
import { matchesFilter, parseArgs, printTable, QUICK_TIME, toRows, UsageError, USAGE, type BenchContext, type RowInput } from './harness.js';

const SOFTWARE_ADAPTER = /swiftshader|llvmpipe|lavapipe|warp|fallback/i;

async function main(): Promise<number> {
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`${e.message}\n${USAGE}\n`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }

  const cases = [
    ...dispatchOverheadCases(args.quick),
    ...compileCases(args.quick),
    ...matmulCases(args.quick),
    ...scaledMmCases(args.quick),
    ...elementwiseCases(args.quick),
    ...softmaxCases(args.quick),
    ...loadCases(args.quick),
    ...moeDecodeCases(args.quick),
    ...vaeDecodeCases(args.quick),
    ...trainStepCases(args.quick),
    ...audioCases(args.quick),
    ...whisperCases(args.quick),
    ...gatedDeltaNetCases(args.quick),
    ...serveLoadCases(args.quick),
    ...soakCases(args.quick),
    ...speculativeCases(args.quick),
    ...peersCases(args.quick, args.filter),
  ].filter((c) => matchesFilter(c, args.filter));
  if (cases.length === 0) {
    process.stderr.write(`no benchmark matches --filter ${JSON.stringify(args.filter)}\n`);
    return 2;
  }

  const started = performance.now();
  const out = (line = '') => process.stdout.write(line + '\n');
  const notices: string[] = [];
  // The benches measure the WebGPU path even on a software adapter (CI's SwiftShader); 'auto' alone would take the CPU.
  const device = await initDevice('auto', { allowSoftwareAdapter: true, onNotice: (line) => notices.push(line) });
  const meta: Record<string, unknown> = {
    date: new Date().toISOString(),
    command: `tsx bench/main.ts ${process.argv.slice(2).join(' ')}`.trim(),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpu: `${cpus().length} x ${cpus()[0]?.model ?? 'unknown'}`,
    quick: args.quick,
    filter: args.filter ?? null,
  };

  out(`tensorgpu benchmarks  ${meta.date}  node ${process.version}  ${meta.cpu}`);
  const backend = webgpuBackend();
  if (device === 'webgpu' && backend) {
    const a = backend.adapter;
    meta.adapter = { vendor: a.vendor, architecture: a.architecture, device: a.device, description: a.description };
    out(`adapter: vendor=${a.vendor || '?'} architecture=${a.architecture || '?'} description=${a.description || '?'}${a.device ? ` (${a.device})` : ''}`);
    if (SOFTWARE_ADAPTER.test(`${a.architecture} ${a.description} ${a.device}`)) {
      out('note: this adapter is a software renderer running on the CPU: WebGPU rows are not GPU speeds.');
    }
  } else {
    const d = await diagnose();
    const reason = d.reason ?? notices[0] ?? 'unknown reason';
    meta.webgpuUnavailable = { code: d.code, reason, hint: d.hint ?? null };
    out(`WebGPU unavailable: ${reason}`);
    if (d.hint) out(`  hint: ${d.hint}`);
    out('Only CPU rows are measured.');
  }
  out();

  const ctx: BenchContext = {
    quick: args.quick,
    gpu: device === 'webgpu',
    time: args.quick ? QUICK_TIME : {},
    log: (line) => process.stderr.write(line + '\n'),
  };

  const inputs: RowInput[] = [];
  let failed = false;
  for (const c of cases) {
    ctx.log(`${c.benchmark} ${c.shape}`);
    const liveBefore = memoryStats().liveBytes;
    try {
      inputs.push(...(await c.run(ctx)));
    } catch (e) {
      failed = true;
      const message = (e as Error).message.split('\n')[0];
      ctx.log(`  failed: ${(e as Error).stack ?? message}`);
      inputs.push({ benchmark: c.benchmark, shape: c.shape, backend: ctx.gpu ? 'webgpu' : 'cpu', note: `error: ${message}` });
    }
    // Every case disposes what it made; GPU bytes still live afterwards are a leak in the bench or the library.
    const leaked = memoryStats().liveBytes - liveBefore;
    if (leaked !== 0) {
      failed = true;
      ctx.log(`  leak: ${leaked} GPU bytes still live after ${c.benchmark} ${c.shape}`);
    }
  }

  const rows = toRows(inputs, 'cpu');
  const peak = memoryStats().peakLiveBytes;
  meta.totalSeconds = Math.round((performance.now() - started) / 100) / 10;
  meta.peakGpuLiveBytes = peak;
  // A case that threw or leaked GPU memory fails the run (exit code 1) but does not stop the others.
  meta.ok = !failed;
  printTable(rows, { json: args.json, meta });
  out();
  out(`ratio = median of the row named in 'vs' (same shape; 'cpu': the CPU backend, else that benchmark on the same adapter) / this median: > 1 is faster.`);
  out(`throughput: 2*M*N*K / median for matmul, bytes read + written / median for elementwise and GEMV (weights + scales + activations + output).`);
  out(`total ${meta.totalSeconds} s${ctx.gpu ? `, peak live GPU memory ${(peak / 2 ** 20).toFixed(1)} MiB` : ''}`);
  return failed ? 1 : 0;
}

let code = 1;
try {
  code = await main();
} finally {
  // Dawn keeps the process alive while a device exists.
  releaseDevice();
}
process.exitCode = code;
