// Launchers of the spectral kernels around the FFT: istft's overlap-add, Whisper's log-mel (projection + log with
// per-workgroup maxima, then the normalization that reduces them: two dispatches, no read-back) and polyphase
// resampling. Each is one invocation per output value.
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { defineKernel } from './kernel.js';
import { wgslSource } from './wgsl.js';
import type { LogMelArgs } from '../../backend.js';

const overlapAdd = defineKernel({
  name: 'overlap_add',
  source: 'overlap-add.wgsl',
  variant: { fdtype: 'dtype', wdtype: 'dtype' },
  params: {
    total: 'u32',
    length: 'u32',
    pad_left: 'u32',
    n_fft: 'u32',
    hop: 'u32',
    frames: 'u32',
    f_off: 'u32',
    f_s0: 'u32',
    f_s1: 'u32',
    f_s2: 'u32',
    w_off: 'u32',
    w_s: 'u32',
  },
  outputs: { out: 'f32' },
  inputs: { frames: { packed: 'fdtype' }, window: { packed: 'wdtype' } },
  grid: { threads: 'total', invoke: 'overlap_add_at' },
});

const LOG_MEL_PARAMS = { mels: 'u32', frames: 'u32', chunks: 'u32' } as const;

const logMelProject = defineKernel({
  name: 'log_mel',
  source: 'log-mel.wgsl',
  params: { ...LOG_MEL_PARAMS, bins: 'u32', floor: 'f32', fb_off: 'u32', fb_s0: 'u32', fb_s1: 'u32', p_off: 'u32', p_s0: 'u32', p_s1: 'u32', p_s2: 'u32' },
  outputs: { out: 'f32', partial_max: 'f32' },
  inputs: { filters: 'f32', power: 'f32', bands: 'u32' },
  grid: 'custom',
  constants: () => ({ LOG10_2: Math.log10(2) }),
  functions: () => wgslSource('max-workgroup.wgsl'),
});

const logMelNormalize = defineKernel({
  name: 'log_mel_normalize',
  source: 'log-mel-normalize.wgsl',
  params: { ...LOG_MEL_PARAMS, dynamic_range: 'f32', offset: 'f32', divisor: 'f32' },
  outputs: { out: 'f32' },
  inputs: { partial_max: 'f32' },
  grid: 'custom',
  constants: () => ({ ITEMS: NORMALIZE_ITEMS }),
  functions: () => wgslSource('max-workgroup.wgsl'),
});

/** Values each invocation of the normalization writes: every workgroup reduces all partial maxima first. */
const NORMALIZE_ITEMS = 16;

const resample = defineKernel({
  name: 'resample',
  source: 'resample.wgsl',
  variant: { dtype: 'dtype' },
  params: { total: 'u32', length: 'u32', phases: 'u32', width: 'u32', stride: 'u32', pad_left: 'u32', t_len: 'u32', x_off: 'u32', x_s0: 'u32', x_s1: 'u32' },
  outputs: { out: 'f32' },
  inputs: { x: { packed: 'dtype' }, kernel: 'f32' },
  grid: { threads: 'total', invoke: 'resample_at' },
});

export function overlapAddKernel(ctx: GpuContext, frames: GpuOperand, window: GpuOperand, hop: number, padLeft: number, length: number): GpuBuffer {
  const [batch, count, nFft] = frames.view.shape;
  const total = batch * length;
  const out = ctx.alloc(wordBytes(total, 1));
  if (total === 0) return out;
  const s = frames.view.strides;
  overlapAdd.run(
    ctx,
    { fdtype: frames.dtype, wdtype: window.dtype },
    {
      total,
      length,
      pad_left: padLeft,
      n_fft: nFft,
      hop,
      frames: count,
      f_off: frames.view.offset,
      f_s0: s[0],
      f_s1: s[1],
      f_s2: s[2],
      w_off: window.view.offset,
      w_s: window.view.strides[0] ?? 0,
    },
    { out, frames: frames.buffer, window: window.buffer },
  );
  return out;
}

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

/** kernel: contiguous float32 [P, W]; x: [B, T] of any float dtype and strides. */
export function resampleKernel(ctx: GpuContext, x: GpuOperand, kernel: GpuOperand, stride: number, padLeft: number, length: number): GpuBuffer {
  const [batch, t] = x.view.shape;
  const [phases, width] = kernel.view.shape;
  const total = batch * length;
  const out = ctx.alloc(wordBytes(total, 1));
  if (total === 0) return out;
  resample.run(
    ctx,
    { dtype: x.dtype },
    { total, length, phases, width, stride, pad_left: padLeft, t_len: t, x_off: x.view.offset, x_s0: x.view.strides[0], x_s1: x.view.strides[1] },
    { out, x: x.buffer, kernel: kernel.buffer },
  );
  return out;
}
