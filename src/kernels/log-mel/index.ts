// logMel's kernels on each backend (audio/whisper.ts calls it): Whisper's log-mel features from a power spectrogram.
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { cachedTable } from '../../runtime/webgpu/constant-cache.js';
import { defineOpKernels } from '../op-kernels.js';
import { logMelReference } from './cpu.js';
import { logMelKernel } from './webgpu.js';

/** Whisper's log-mel normalization. */
export interface LogMelArgs {
  /** log10(max(mel, floor)). */
  readonly floor: number;
  /** Values below each example's max - dynamicRange are raised to it. */
  readonly dynamicRange: number;
  /** Then (x + offset) / divisor. */
  readonly offset: number;
  readonly divisor: number;
  /**
   * Optional: each filter's nonzero bins as [first, end) (a mel filter spans a few bins), so the projection skips
   * the rest; a promise about filters, not a change of the result.
   */
  readonly bands?: readonly (readonly [number, number])[];
}

/** power [B, bins, frames] and filters [mels, bins], float32; returns float32 [B, mels, frames]. */
export interface LogMelOperands<H> {
  readonly power: Operand<H>;
  readonly filters: Operand<H>;
  readonly args: LogMelArgs;
}

export const logMelKernels = defineOpKernels<LogMelOperands<unknown>>({
  cpu: (_backend, operands) => logMelReference(operands as LogMelOperands<never>),
  /** Two dispatches: projection + log10 with partial maxima, then the normalization. */
  webgpu: (backend, operands) => {
    const { power, filters, args } = operands as LogMelOperands<never>;
    const [mels, bins] = filters.view.shape;
    const ranges = new Uint32Array(2 * mels);
    for (let m = 0; m < mels; m++) [ranges[2 * m], ranges[2 * m + 1]] = args.bands?.[m] ?? [0, bins];
    const bands = cachedTable(backend, `log-mel bands ${ranges.join(',')}`, () => new Int32Array(ranges.buffer));
    return logMelKernel(backend, toGpuOperand(power), toGpuOperand(filters), bands, args);
  },
});
