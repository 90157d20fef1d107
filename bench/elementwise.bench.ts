// Memory-bound elementwise ops on contiguous f32 vectors, WebGPU against the CPU reference backend.
// Throughput counts the minimum traffic (each input read once, the output written once), as GB/s.
import { add, exp, randn, synchronize, Generator, type Tensor } from '../src/index.js';
import { elementwiseTuning } from '../src/runtime/webgpu/kernels/elementwise.js';
import { primeGpu, timeIt, type BenchCase, type BenchContext, type RowInput, type TimeOptions } from './harness.js';

const F32 = 4;

interface ElementwiseOp {
  name: string;
  inputs: number;
  apply: (xs: Tensor[]) => Tensor;
}

const OPS: ElementwiseOp[] = [
  { name: 'add f32', inputs: 2, apply: ([a, b]) => add(a, b) },
  { name: 'exp f32', inputs: 1, apply: ([x]) => exp(x) },
];

export function elementwiseCases(quick: boolean): BenchCase[] {
  const sizes = quick ? [1 << 20] : [1 << 20, 1 << 24];
  return OPS.flatMap((op) => sizes.map((n) => elementwiseCase(op, n)));
}

function elementwiseCase(op: ElementwiseOp, n: number): BenchCase {
  const shape = `[${n >= 1 << 20 && n % (1 << 20) === 0 ? `${n >> 20}M` : n}]`;
  // 16M elements take seconds per run on the CPU backend and on a software adapter: no warm-up run there (the
  // pipeline is compiled by primeGpu on a tiny input first).
  const time: TimeOptions = n >= 1 << 24 ? { warmup: 0 } : {};
  return { benchmark: op.name, shape, run: (ctx) => measure(ctx, op, n, shape, time) };
}

async function measure(ctx: BenchContext, op: ElementwiseOp, n: number, shape: string, time: TimeOptions): Promise<RowInput[]> {
  const base = { benchmark: op.name, shape, bytes: (op.inputs + 1) * n * F32 };
  const rows: RowInput[] = [];
  const g = new Generator(42);
  const cpuInputs = Array.from({ length: op.inputs }, () => randn([n], { device: 'cpu', generator: g }));
  const owned: Tensor[] = [...cpuInputs];
  try {
    if (ctx.gpu) {
      const gpuInputs: Tensor[] = [];
      for (const t of cpuInputs) {
        const moved = await t.to('webgpu');
        owned.push(moved);
        gpuInputs.push(moved);
      }
      await primeGpu(
        op.name,
        Array.from({ length: op.inputs }, () => [256]),
        op.apply,
      );
      ctx.log(`  webgpu ${op.name} ${shape}`);
      const timing = await timeIt(
        async () => {
          const y = op.apply(gpuInputs);
          await synchronize();
          y.dispose();
        },
        { ...ctx.time, ...time },
      );
      rows.push({ ...base, backend: 'webgpu', timing });
      // The fast path's tail as it was before issue 35 (a loop after an early return), in the same process: its ratio
      // is the current kernel's median over this one's (below 1: the loop tail is slower).
      elementwiseTuning.loopTail = true;
      try {
        await primeGpu(
          `${op.name} loop tail`,
          Array.from({ length: op.inputs }, () => [256]),
          op.apply,
        );
        ctx.log(`  webgpu ${op.name} loop tail ${shape}`);
        const before = await timeIt(
          async () => {
            const y = op.apply(gpuInputs);
            await synchronize();
            y.dispose();
          },
          { ...ctx.time, ...time },
        );
        rows.push({ ...base, benchmark: `${op.name} loop tail`, backend: 'webgpu', timing: before, baselineBenchmark: op.name });
      } finally {
        elementwiseTuning.loopTail = false;
      }
    }
    ctx.log(`  cpu ${op.name} ${shape}`);
    rows.push({ ...base, backend: 'cpu', timing: await timeIt(() => op.apply(cpuInputs).dispose(), { ...ctx.time, ...time }) });
    return rows;
  } finally {
    for (const t of owned) t.dispose();
  }
}
