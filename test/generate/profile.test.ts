// --profile's bandwidth columns: the bytes launchers count reach the profiler's totals, become GB/s, and are set
// against the adapter's datasheet bandwidth where the GPU is one we know.
import { describe, expect, it } from 'vitest';
import { peakBandwidth } from '../../src/runtime/webgpu/peak-bandwidth.js';
import { formatProfile, kernelGBs } from '../../src/generate/profile.js';
import { linear, randn, rmsNorm, startProfiling, stopProfiling, synchronize } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

describe('peakBandwidth', () => {
  it('knows the GPUs by their adapter descriptions, the more specific name first', () => {
    expect(peakBandwidth({ description: 'NVIDIA H200' })).toEqual({ name: 'NVIDIA H200', gbs: 4800 });
    expect(peakBandwidth({ description: 'NVIDIA H100 80GB HBM3' })?.gbs).toBe(3350);
    expect(peakBandwidth({ description: 'NVIDIA H100 PCIe' })?.gbs).toBe(2000);
    expect(peakBandwidth({ description: 'Apple M3 Ultra' })?.gbs).toBe(819);
    expect(peakBandwidth({ description: 'SwiftShader Device (Subzero)', device: 'swiftshader' })).toBeNull();
    expect(peakBandwidth({ description: '' })).toBeNull();
  });
});

describe('formatProfile', () => {
  const kernels = [
    { kernel: 'gemv', dispatches: 4, totalMicros: 2000, bytes: 8e6 },
    { kernel: 'attention', dispatches: 2, totalMicros: 500 },
  ];
  const cells = (lines: string[], kernel: string) =>
    lines
      .find((l) => l.startsWith(kernel + ' '))!
      .trim()
      .split(/\s+/);

  it('prints MB per token and GB/s for launchers that count bytes, and "-" for the others', () => {
    expect(kernelGBs(kernels[0])).toBeCloseTo(4, 12); // 8e6 bytes in 2000 µs
    expect(kernelGBs(kernels[1])).toBeNull();
    const lines = formatProfile({ decodeSteps: 2, kernels, weightGBs: 4, peak: null });
    expect(lines[1]).toMatch(/^kernel\s+dispatches\/token\s+GPU µs\/token\s+share\s+MB\/token\s+GB\/s$/);
    expect(cells(lines, 'gemv')).toEqual(['gemv', '2.0', '1000.0', '80.0%', '4.00', '4.00']);
    expect(cells(lines, 'attention')).toEqual(['attention', '1.0', '250.0', '20.0%', '-', '-']);
    expect(lines.some((l) => l.includes('no datasheet bandwidth known'))).toBe(true);
  });

  it('adds the share of the datasheet peak when the adapter is a known GPU', () => {
    const lines = formatProfile({
      decodeSteps: 1,
      kernels: [{ kernel: 'gemv', dispatches: 1, totalMicros: 10, bytes: 33.5e6 }],
      weightGBs: 3350,
      peak: { name: 'NVIDIA H100 SXM', gbs: 3350 },
    });
    expect(lines[1]).toMatch(/of 3350 GB\/s$/);
    expect(cells(lines, 'gemv').slice(-2)).toEqual(['3350', '100.0%']);
    expect(lines.at(-1)).toMatch(/3350 GB\/s of active weights \(100\.0% of peak\)$/);
  });
});

describe.skipIf(!gpu.available)(`profiled bytes on WebGPU ${gpu.skipReason}`, () => {
  it("sums each dispatch's counted bytes per kernel family: a GEMV reads its weight and input once and writes its output", async () => {
    const [k, n] = [384, 200];
    const x = randn([1, k], { device: 'webgpu' });
    const w = randn([n, k], { device: 'webgpu' }).mul(0.05);
    const g = randn([k], { device: 'webgpu' });
    linear(x, w).dispose();
    rmsNorm(x, g, 1e-6).dispose();
    await synchronize();
    startProfiling();
    for (let i = 0; i < 3; i++) linear(x, w).dispose();
    rmsNorm(x, g, 1e-6).dispose();
    const times = await stopProfiling();
    const gemv = times.find((t) => t.kernel === 'gemv')!;
    expect(gemv.dispatches).toBe(3);
    expect(gemv.bytes).toBe(3 * 4 * (n * k + k + n));
    const norm = times.find((t) => t.kernel === 'rms-norm')!;
    expect(norm.bytes).toBe(4 * (k + k + k));
    for (const t of [x, w, g]) t.dispose();
  });
});
