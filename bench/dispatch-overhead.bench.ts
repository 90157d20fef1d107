// Host cost of enqueueing work, side by side on one adapter: chains of 2000 eager ops (timed until the last op
// returns, before any GPU wait) of each kind (tensor and number operands, a unary op, an op on a transposed view, a
// broadcast), the add chain captured and replayed, and raw Dawn encoding the same kind of dispatch with prebuilt
// bind groups (the floor) and with a new bind group + uniform write per dispatch. Rows give host µs per dispatch
// (the median column is ms); the ratio is against the raw-Dawn floor of the same run.
import { add, capture, randn, synchronize, type Tensor } from '../src/index.js';
import { webgpuBackend } from '../src/runtime/registry.js';
import { measureDispatchFloor } from '../src/runtime/webgpu/dispatch-floor.js';
import { median, type BenchCase, type BenchContext, type RowInput } from './harness.js';

const FLOOR = 'host/dispatch raw dawn prebuilt';
const CHAIN = 2000;
const SHAPE = `chain ${CHAIN} x [256]`;

export function dispatchOverheadCases(_quick: boolean): BenchCase[] {
  return [{ benchmark: 'host/dispatch', shape: SHAPE, run: (ctx) => measure(ctx) }];
}

/** Runs `body` (which enqueues `dispatches` dispatches) eight times and returns µs per dispatch of the median of the last seven (one garbage collection landing in a run moves a median of three). */
async function hostMicros(dispatches: number, body: () => void | (() => void)): Promise<number> {
  const times: number[] = [];
  for (let r = 0; r < 8; r++) {
    const t0 = performance.now();
    const cleanup = body();
    const dt = performance.now() - t0;
    if (cleanup) cleanup();
    await synchronize();
    if (r > 0) times.push(dt); // the first run fills the pool and compiles
  }
  return (median(times) * 1000) / dispatches;
}

function row(benchmark: string, micros: number, note: string): RowInput {
  // One "run" is one dispatch: the table's median column is then µs/1000 = ms per dispatch.
  return {
    benchmark,
    shape: SHAPE,
    backend: 'webgpu',
    timing: { medianMs: micros / 1000, minMs: micros / 1000, runs: 7, dispatchesPerRun: 1 },
    baselineBenchmark: FLOOR,
    note: `${benchmark}: ${micros.toFixed(1)} µs/dispatch ${note}`,
  };
}

async function measure(ctx: BenchContext): Promise<RowInput[]> {
  const backend = webgpuBackend();
  if (!ctx.gpu || !backend) return [{ benchmark: FLOOR, shape: SHAPE, backend: 'cpu', note: 'WebGPU only' }];
  const x = randn([256], { device: 'webgpu' });
  const y = randn([256], { device: 'webgpu' });
  // The same 256 elements as [16, 16] (its transpose is a strided view) and as [4, 64] with a [64] bias broadcast.
  const square = randn([16, 16], { device: 'webgpu' });
  const rows = randn([4, 64], { device: 'webgpu' });
  const bias = randn([64], { device: 'webgpu' });
  try {
    const chain =
      (op: (t: Tensor) => Tensor, from = x) =>
      () => {
        let t = op(from);
        const made: Tensor[] = [t];
        for (let i = 1; i < CHAIN; i++) made.push((t = op(t)));
        return () => made.forEach((m) => m.dispose());
      };
    const eagerTensor = await hostMicros(
      CHAIN,
      chain((t) => add(t, y)),
    );
    const eagerScalar = await hostMicros(
      CHAIN,
      chain((t) => t.add(1)),
    );
    const scalarDispatches = await countDispatches(() => x.add(1).dispose());
    const eagerUnary = await hostMicros(
      CHAIN,
      chain((t) => t.neg()),
    );
    // An op on a view: t.T is a new (transposed) tensor each step, read by the strided kernel, then disposed.
    const eagerView = await hostMicros(
      CHAIN,
      chain((t) => {
        const v = t.T;
        const r = add(v, square);
        v.dispose();
        return r;
      }, square),
    );
    const eagerBroadcast = await hostMicros(
      CHAIN,
      chain((t) => add(t, bias), rows),
    );

    // Replay: the same chain recorded once, its dispatches replayed with nothing else on the host.
    let out: Tensor | undefined;
    const { graph } = capture('add chain', () => {
      let t = add(x, y);
      for (let i = 1; i < CHAIN; i++) {
        const next = add(t, y);
        t.dispose();
        t = next;
      }
      out = t;
    });
    const replay = await hostMicros(CHAIN, () => graph!.replay());
    graph!.dispose();
    out!.dispose();
    const { prebuiltMicros: floor, prebuiltSameMicros: same, freshMicros: fresh } = await measureDispatchFloor(backend.gpuDevice, CHAIN);

    ctx.log(
      `  eager add(t, y) ${eagerTensor.toFixed(1)} µs, eager add(t, 1) ${eagerScalar.toFixed(1)} µs (${scalarDispatches} dispatches), neg(t) ${eagerUnary.toFixed(1)} µs, add(t.T, y) ${eagerView.toFixed(1)} µs, add(t, bias) ${eagerBroadcast.toFixed(1)} µs, replay ${replay.toFixed(1)} µs, raw prebuilt ${floor.toFixed(1)} µs (same 2 groups ${same.toFixed(1)} µs), raw fresh ${fresh.toFixed(1)} µs`,
    );
    return [
      row(FLOOR, floor, '(setBindGroup + dispatchWorkgroups, prebuilt bind groups over a chain of distinct buffers)'),
      row('host/dispatch raw dawn prebuilt, 2 groups', same, '(the same, alternating two bind groups over two buffers)'),
      row('host/dispatch raw dawn new bind group', fresh, '(createBindGroup + writeBuffer of a uniform per dispatch)'),
      row('host/dispatch replay', replay, '(the add chain captured once, then replayed)'),
      row('host/dispatch eager add(t, y)', eagerTensor, '(tensor operand)'),
      row('host/dispatch eager add(t, 1)', eagerScalar, `(number operand, ${scalarDispatches} dispatch${scalarDispatches === 1 ? '' : 'es'} per op)`),
      row('host/dispatch eager neg(t)', eagerUnary, '(unary op)'),
      row('host/dispatch eager add(t.T, y)', eagerView, '(a transposed view made and disposed each step; strided kernel)'),
      row('host/dispatch eager add(t, bias)', eagerBroadcast, '([4, 64] + [64] broadcast; strided kernel)'),
    ];
  } finally {
    for (const t of [x, y, square, rows, bias]) t.dispose();
  }
}

async function countDispatches(fn: () => void): Promise<number> {
  const b = webgpuBackend()!;
  const before = b.counters.dispatches;
  fn();
  await synchronize();
  return b.counters.dispatches - before;
}
