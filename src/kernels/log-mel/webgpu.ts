// Launchers of Whisper's log-mel: the projection + log with per-workgroup maxima, then the normalization that reduces
// them (two dispatches, no read-back). Each is one invocation per output value.
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { wgslSource, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';
import type { LogMelArgs } from './index.js';

/** nan_max (max-workgroup.wgsl) and workgroup_max(t, v): the workgroup's max, its scratch reusable at once. */
const maxWorkgroupWgsl = () =>
  wgslSource('max-workgroup.wgsl') + workgroupReduce({ name: 'workgroup_max', type: 'f32', combine: 'nan_max(a, b)', result: 'reusable' });

const LOG_MEL_PARAMS = { mels: 'u32', frames: 'u32', chunks: 'u32' } as const;

const logMelProject = defineKernel({
  name: 'log_mel',
  source: 'log-mel.wgsl',
  params: { ...LOG_MEL_PARAMS, bins: 'u32', floor: 'f32', fb_off: 'u32', fb_s0: 'u32', fb_s1: 'u32', p_off: 'u32', p_s0: 'u32', p_s1: 'u32', p_s2: 'u32' },
  outputs: { out: 'f32', partial_max: 'f32' },
  inputs: { filters: 'f32', power: 'f32', bands: 'u32' },
  grid: 'custom',
  constants: () => ({ LOG10_2: Math.log10(2) }),
  functions: maxWorkgroupWgsl,
});

const logMelNormalize = defineKernel({
  name: 'log_mel_normalize',
  source: 'log-mel-normalize.wgsl',
  params: { ...LOG_MEL_PARAMS, dynamic_range: 'f32', offset: 'f32', divisor: 'f32' },
  outputs: { out: 'f32' },
  inputs: { partial_max: 'f32' },
  grid: 'custom',
  constants: () => ({ ITEMS: NORMALIZE_ITEMS }),
  functions: maxWorkgroupWgsl,
});

/** Values each invocation of the normalization writes: every workgroup reduces all partial maxima first. */
const NORMALIZE_ITEMS = 16;

/** power: float32 view [B, K, F]; filters: float32 view [M, K]; bands: u32 [2M], each filter's [first, end) bins. */
export function logMelKernel(ctx: GpuContext, power: GpuOperand, filters: GpuOperand, bands: GpuBuffer, args: LogMelArgs): GpuBuffer {
  const [batch, bins, frames] = power.view.shape;
  const [mels] = filters.view.shape;
  const per = mels * frames;
  const out = ctx.alloc(wordBytes(batch * per, 1));
  if (batch * per === 0) return out;
  const wg = 256;
  const chunks = Math.ceil(per / wg);
  if (chunks > ctx.limits.maxComputeWorkgroupsPerDimension || batch > ctx.limits.maxComputeWorkgroupsPerDimension) {
    throw new RangeError(
      `logMel: ${mels} x ${frames} values per example need ${chunks} workgroups, over the device's ${ctx.limits.maxComputeWorkgroupsPerDimension}`,
    );
  }
  const partial = ctx.alloc(wordBytes(batch * chunks, 1));
  const ps = power.view.strides;
  const fs = filters.view.strides;
  logMelProject.run(
    ctx,
    {},
    {
      mels,
      frames,
      chunks,
      bins,
      floor: args.floor,
      fb_off: filters.view.offset,
      fb_s0: fs[0],
      fb_s1: fs[1],
      p_off: power.view.offset,
      p_s0: ps[0],
      p_s1: ps[1],
      p_s2: ps[2],
    },
    { out, partial_max: partial, filters: filters.buffer, power: power.buffer, bands },
    { workgroups: [chunks, batch, 1] },
  );
  logMelNormalize.run(
    ctx,
    {},
    { mels, frames, chunks, dynamic_range: args.dynamicRange, offset: args.offset, divisor: args.divisor },
    { out, partial_max: partial },
    { workgroups: [Math.ceil(per / (wg * NORMALIZE_ITEMS)), batch, 1] },
  );
  ctx.release(partial);
  return out;
}
