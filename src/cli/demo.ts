// `tensorgpu demo`: the built-in default job until text generation lands: picks a device ('auto' falls back to CPU
// with the reason), runs a matmul, an elementwise chain and an FP8 decode step (GEMV + sampling), checks them
// against the CPU backend, and prints time, throughput, dispatches and peak GPU memory.
import { releaseDevice, webgpuBackend, type DeviceRequest } from '../runtime/registry.js';
import { chooseDevice } from './device.js';
import { manualSeed } from '../core/random.js';
import type { Tensor } from '../core/tensor.js';
import { randn } from '../ops/creation.js';
import { quantize } from '../ops/quantize.js';
import { sample } from '../ops/sample.js';
import { scaledMm } from '../ops/scaled-mm.js';
import { gpuCounters, memoryStats, synchronize } from '../runtime/stats.js';

export interface DemoOptions {
  device?: DeviceRequest;
  /** Square matmul size. */
  size?: number;
  out?: (line: string) => void;
}

async function timed(fn: () => Tensor, runs: number): Promise<{ ms: number; result: Tensor }> {
  let result = fn();
  await synchronize(); // warm-up: pipeline compilation stays out of the timing
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    result.dispose();
    const t0 = performance.now();
    result = fn();
    await synchronize();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)], result };
}

/** Largest |a-b| / (1 + |b|) over all elements. */
function maxRelError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let worst = 0;
  for (let i = 0; i < b.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / (1 + Math.abs(b[i])));
  return worst;
}

export async function runDemo(options: DemoOptions = {}): Promise<number> {
  const out = options.out ?? ((line: string) => console.log(line));
  const n = options.size ?? 512;
  const device = await chooseDevice(options.device ?? 'auto', out);
  const gpu = webgpuBackend();
  out(`device: ${device}${gpu ? ` (${[gpu.adapter.vendor, gpu.adapter.architecture, gpu.adapter.description].filter(Boolean).join(' / ')})` : ''}`);
  try {
    manualSeed(0);
    const a = randn([n, n], { device });
    const b = randn([n, n], { device });
    const before = gpuCounters().dispatches;
    const mm = await timed(() => a.matmul(b), 5);
    const gflops = (2 * n ** 3) / (mm.ms * 1e6);
    out(`matmul ${n}x${n} @ ${n}x${n} float32: ${mm.ms.toFixed(2)} ms, ${gflops.toFixed(1)} GFLOP/s`);
    const ew = await timed(() => a.mul(b).add(1).silu(), 5);
    out(`silu(a*b+1) on ${n * n} elements: ${ew.ms.toFixed(2)} ms`);
    // A decode step in miniature: one activation row through an FP8 weight (128x128 block scales), then sampling.
    const x = randn([1, n], { device });
    const qx = quantize(x, { granularity: 'group128' });
    const qw = quantize(b, { granularity: 'block128' });
    const fp8 = await timed(() => scaledMm(qx.data, qw.data.T, { scaleA: qx.scale, scaleB: qw.scale, outDtype: 'float32' }), 5);
    out(
      `FP8 GEMV [1,${n}] x [${n},${n}]^T (block scales): ${fp8.ms.toFixed(2)} ms, weight ${(qw.data.numel / 2 ** 20).toFixed(2)} MiB + ${qw.scale.numel * 4} B scales`,
    );
    const token = await sample(fp8.result, { topK: 50, topP: 0.9, seed: 0 });
    out(`sampled token ${token} of ${n} (top-k 50, top-p 0.9, on ${device})`);
    if (device !== 'cpu') {
      const [ac, bc] = [await a.to('cpu'), await b.to('cpu')];
      const errMm = maxRelError(await mm.result.toArray(), await ac.matmul(bc).toArray());
      const errEw = maxRelError(await ew.result.toArray(), await ac.mul(bc).add(1).silu().toArray());
      const cpuFp8 = scaledMm(await qx.data.to('cpu'), (await qw.data.to('cpu')).T, {
        scaleA: await qx.scale.to('cpu'),
        scaleB: await qw.scale.to('cpu'),
        outDtype: 'float32',
      });
      const errFp8 = maxRelError(await fp8.result.toArray(), await cpuFp8.toArray());
      out(`check vs CPU backend: matmul max rel error ${errMm.toExponential(2)}, elementwise ${errEw.toExponential(2)}, FP8 GEMV ${errFp8.toExponential(2)}`);
      const dispatches = gpuCounters().dispatches - before;
      const mem = memoryStats();
      out(`GPU dispatches: ${dispatches}; peak GPU memory ${(mem.peakAllocatedBytes / 2 ** 20).toFixed(1)} MiB`);
      if (errMm > 1e-4 || errEw > 1e-5 || errFp8 > 1e-4) {
        out('FAILED: the WebGPU results differ from the CPU backend');
        return 1;
      }
    }
    return 0;
  } finally {
    releaseDevice();
  }
}
