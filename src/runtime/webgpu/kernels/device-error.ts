// The device-side error flag: kernels that read indices (index_select, gather, cross_entropy, scatter's targets)
// record the first offender in one small storage buffer instead of writing a silent zero; the backend reads it back
// with the next read or synchronize() and raises (CUDA's device-side assert is the model). Words: [0] reports so far
// (the first reporter wins the rest), [1] the op's code, [2] the value (an index, as i32; an int64 one past int32 as
// INT32_MIN or INT32_MAX), [3] the bound it broke (the dim's size); the rest are spare.
import { IndexError, ZeroDivisionError } from '../../../core/errors.js';

/** The ops that report, by code (code = position + 1; 0 means no error). */
export const DEVICE_ERROR_OPS = ['indexSelect', 'gather', 'crossEntropy', 'scatter', 'floor_divide', 'remainder', 'fmod'] as const;
export type DeviceErrorOp = (typeof DEVICE_ERROR_OPS)[number];

export const DEVICE_ERROR_WORDS = 8;

export function deviceErrorCode(op: DeviceErrorOp): number {
  return DEVICE_ERROR_OPS.indexOf(op) + 1;
}

/**
 * WGSL for a kernel with an `err: array<atomic<u32>>` output binding: report_error(op, value, bound) keeps the
 * first report of the batch (atomicAdd is strong, so exactly one invocation wins).
 */
export const DEVICE_ERROR_WGSL = `
fn report_error(op: u32, value: i32, bound: u32) {
  if (atomicAdd(&err[0], 1u) == 0u) {
    atomicStore(&err[1], op);
    atomicStore(&err[2], bitcast<u32>(value));
    atomicStore(&err[3], bound);
  }
}
`;

/** The integer division ops, whose report is a zero divisor. */
const DIVISION_REPORTERS: ReadonlySet<string> = new Set(['floor_divide', 'remainder', 'fmod']);

/**
 * WGSL of `nonzero_i32(y, op) -> i32` and `nonzero_i64(y, op) -> vec2<u32>`: the divisor as it is, reporting op
 * (a deviceErrorCode) when it is zero. The integer division expressions wrap their divisor in it, so a kernel that
 * holds one binds `err` and includes this; the division itself still gives 0 for that element (the read back raises).
 */
export const ZERO_DIVISOR_WGSL = `${DEVICE_ERROR_WGSL}
fn nonzero_i32(y: i32, op: u32) -> i32 {
  if (y == 0) {
    report_error(op, 0, 0u);
  }
  return y;
}
fn nonzero_i64(y: vec2<u32>, op: u32) -> vec2<u32> {
  if (y.x == 0u && y.y == 0u) {
    report_error(op, 0, 0u);
  }
  return y;
}
`;

/** The error a flag read back describes, or undefined when no kernel reported. */
export function deviceError(words: Uint32Array): Error | undefined {
  if (words[0] === 0) return undefined;
  const op = DEVICE_ERROR_OPS[words[1] - 1] ?? `kernel ${words[1]}`;
  const more = words[0] > 1 ? ` (${words[0]} reports in this batch; the first is shown)` : '';
  if (DIVISION_REPORTERS.has(op)) return new ZeroDivisionError(op, ` (found on the GPU; raised at the next read back or synchronize())${more}`);
  const index = words[2] | 0;
  const bound = words[3];
  const what = op === 'crossEntropy' ? `target ${index} is out of range for ${bound} classes` : `index ${index} is out of range for a dim of size ${bound}`;
  return new IndexError(`${op}: ${what} (found on the GPU; raised at the next read back or synchronize())${more}`, op, index);
}
