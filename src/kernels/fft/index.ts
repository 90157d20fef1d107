// The FFT's kernels on each backend (ops/fft.ts, ops/stft.ts and audio/whisper.ts call them): one dispatch per
// transform on WebGPU for any length, both backends following the plan of runtime/fft-plan.ts.
import type { FftArgs, Operand, StftArgs } from '../../runtime/backend.js';
import { fftPlan, type FftPlan } from '../../runtime/fft-plan.js';
import { cachedTable } from '../../runtime/webgpu/constant-cache.js';
import type { GpuBuffer } from '../../runtime/webgpu/gpu-context.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import type { WebGpuBackend } from '../../runtime/webgpu/webgpu-backend.js';
import { defineOpKernels } from '../op-kernels.js';
import { fftReference, stftReference } from './cpu.js';
import { fftKernel, fftTables, storeOf } from './webgpu.js';

/** A batch of rows [R0, R1, n] transformed along the last dim (see FftArgs for the input and output forms). */
export interface FftOperands<H> {
  readonly x: Operand<H>;
  readonly args: FftArgs;
}

/** The STFT of signals x [B, T] with window [nFft], framed as StftArgs says, in one dispatch. */
export interface StftOperands<H> {
  readonly x: Operand<H>;
  readonly window: Operand<H>;
  readonly args: StftArgs;
}

/** The plan of length n with its float32 tables (uploaded once per length and device) for the launch in fn. */
function withFftPlan(backend: WebGpuBackend, n: number, fn: (plan: FftPlan, tables: GpuBuffer) => GpuBuffer): GpuBuffer {
  const plan = fftPlan(n);
  return fn(
    plan,
    cachedTable(backend, `fft ${n}`, () => fftTables(plan)),
  );
}

export const fftKernels = defineOpKernels<FftOperands<unknown>>({
  cpu: (_backend, operands) => {
    const { x, args } = operands as FftOperands<never>;
    return fftReference(x, args);
  },
  webgpu: (backend, operands) => {
    const { x, args } = operands as FftOperands<never>;
    const [r0, r1] = x.view.shape;
    const bins = args.output === 'half' ? Math.floor(args.n / 2) + 1 : args.n;
    const width = args.output === 'real' ? 1 : 2;
    const dst = { output: storeOf(args.output), bins, strides: [r1 * bins, bins, 1] as const, elements: r0 * r1 * bins * width };
    return withFftPlan(backend, args.n, (plan, tables) =>
      fftKernel(backend, plan, tables, { kind: 'rows', x: toGpuOperand(x), input: args.input }, dst, args.inverse, args.scale),
    );
  },
});

export const stftKernels = defineOpKernels<StftOperands<unknown>>({
  cpu: (_backend, operands) => {
    const { x, window, args } = operands as StftOperands<never>;
    return stftReference(x, window, args);
  },
  webgpu: (backend, operands) => {
    const { x, window, args } = operands as StftOperands<never>;
    const [batch] = x.view.shape;
    const bins = args.onesided ? Math.floor(args.nFft / 2) + 1 : args.nFft;
    const width = args.output === 'complex' ? 2 : 1;
    const src = {
      kind: 'frames',
      x: toGpuOperand(x),
      window: toGpuOperand(window),
      frames: args.frames,
      hop: args.hop,
      padLeft: args.padLeft,
      reflect: args.padMode === 'reflect',
    } as const;
    const dst = { output: args.output, bins, strides: [bins * args.frames, 1, args.frames] as const, elements: batch * bins * args.frames * width };
    return withFftPlan(backend, args.nFft, (plan, tables) => fftKernel(backend, plan, tables, src, dst, false, args.scale));
  },
});
