// Integer division by zero raises ZeroDivisionError, as torch's CPU does: at once on the CPU backend (and for a JS
// number 0 on both), and on WebGPU at the next read back or synchronize(), through the device error flag that the
// division maps bind (the one-op maps, compile()'s fused chains, the int64 maps). Floats still give Inf / NaN, a
// divisor with no zero never raises (the vec4 map's padding words are not elements), and the flag is cleared by
// the read that raised, so the device keeps working.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { compile, setDefaultDevice, synchronize, tensor, ZeroDivisionError, type Tensor } from '../../src/index.js';
import { elementwiseTuning } from '../../src/runtime/webgpu/kernels/elementwise.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const devices: ('cpu' | 'webgpu')[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

type Division = (a: Tensor, b: Tensor) => Tensor;
const DIVISIONS: [string, Division][] = [
  ['floor_divide', (a, b) => tg.floorDivide(a, b)],
  ['remainder', (a, b) => tg.remainder(a, b)],
  ['fmod', (a, b) => tg.fmod(a, b)],
  ['div trunc', (a, b) => tg.div(a, b, { roundingMode: 'trunc' })],
  ['div floor', (a, b) => tg.div(a, b, { roundingMode: 'floor' })],
];

/** Divisors in [-9, 9] without 0, with one 0 at `zeroAt` unless it is -1. */
function divisors(n: number, zeroAt: number): number[] {
  return Array.from({ length: n }, (_, i) => (i === zeroAt ? 0 : ((i * 7919 + 3) % 9) + 1) * (i % 2 ? -1 : 1));
}
const dividends = (n: number) => Array.from({ length: n }, (_, i) => ((i * 104729) % 2001) - 1000);

/** Runs fn and reads its result: the ZeroDivisionError surfaces from the call (CPU) or the read (WebGPU). */
async function outcome(fn: () => Tensor): Promise<number[] | Error> {
  try {
    const r = fn();
    try {
      return Array.from(await r.toArray());
    } finally {
      r.dispose();
    }
  } catch (err) {
    return err as Error;
  }
}

function expectZeroDivision(got: number[] | Error, what: string) {
  expect(got, what).toBeInstanceOf(ZeroDivisionError);
  expect((got as Error).message, what).toMatch(/floor_divide|remainder|fmod/);
  expect((got as Error).message, what).toMatch(/division by zero/);
}

describe.each(devices)('integer division by zero on %s', (device) => {
  it('int32: every division op raises on a zero divisor and agrees with the CPU otherwise (odd sizes, both map kernels)', async () => {
    for (const n of [1, 5, 1027]) {
      for (const linear of [true, false]) {
        elementwiseTuning.linearFastPath = linear;
        try {
          const a = tensor(dividends(n), { dtype: 'int32', device });
          const good = tensor(divisors(n, -1), { dtype: 'int32', device });
          const onCpu = [tensor(dividends(n), { dtype: 'int32' }), tensor(divisors(n, -1), { dtype: 'int32' })];
          const bad = tensor(divisors(n, n >> 1), { dtype: 'int32', device });
          for (const [name, f] of DIVISIONS) {
            const what = `${name} n=${n} linear=${linear}`;
            const want = await outcome(() => f(onCpu[0], onCpu[1]));
            expect(want, what).not.toBeInstanceOf(Error);
            expect(await outcome(() => f(a, good)), what).toEqual(want);
            expectZeroDivision(await outcome(() => f(a, bad)), what);
            // The read that raised cleared the flag: the same work without a zero reads back.
            expect(await outcome(() => f(a, good)), `${what} after the error`).toEqual(want);
          }
          for (const t of [a, good, bad, ...onCpu]) t.dispose();
        } finally {
          elementwiseTuning.linearFastPath = true;
        }
      }
    }
  });

  it('uint8, a broadcast zero, and a number 0 (raised at the call on both backends); floats still give Inf / NaN', async () => {
    const bytes = tensor([200, 7, 9, 1, 255], { dtype: 'uint8', device });
    const byteZero = tensor([3, 0, 1, 2, 5], { dtype: 'uint8', device });
    expectZeroDivision(await outcome(() => tg.remainder(bytes, byteZero)), 'uint8');
    const a = tensor(dividends(12), { shape: [3, 4], dtype: 'int32', device });
    const column = tensor([2, 0, -3], { shape: [3, 1], dtype: 'int32', device });
    expectZeroDivision(await outcome(() => tg.floorDivide(a, column)), 'broadcast column');
    expectZeroDivision(await outcome(() => tg.floorDivide(a.T, column.reshape([1, 3]))), 'strided view');
    for (const [name, f] of DIVISIONS) expect(() => f(a, 0 as never), name).toThrow(ZeroDivisionError);
    // Float division by zero is IEEE, no error.
    const x = tensor([1, -1, 0], { device });
    expect(Array.from(await tg.floorDivide(x, 0).toArray())).toEqual([Infinity, -Infinity, NaN]);
    expect(Array.from(await tg.fmod(x, tensor([0, 0, 0], { device })).toArray())).toEqual([NaN, NaN, NaN]);
    for (const t of [bytes, byteZero, a, column, x]) t.dispose();
  });

  it('int64: tensors and numbers, past 2^32', async () => {
    const a = tensor(BigInt64Array.from([2n ** 40n + 3n, -(2n ** 35n), 7n]), { device });
    const good = tensor(BigInt64Array.from([-(2n ** 33n), 3n, -2n]), { device });
    const bad = tensor(BigInt64Array.from([5n, 0n, 2n ** 32n]), { device });
    for (const [name, f] of DIVISIONS) {
      expectZeroDivision(await outcome(() => f(a, bad)), `int64 ${name}`);
      expect(() => f(a, 0 as never), `int64 ${name} by 0`).toThrow(ZeroDivisionError);
    }
    const q = tg.floorDivide(a, good);
    expect(Array.from(await tg.toBigInt64Array(q))).toEqual([-129n, -(2n ** 35n) / 3n - 1n, -4n]);
    for (const t of [a, good, bad, q]) t.dispose();
  });

  it('compile(): a fused chain with an integer division raises the same way, and replays exactly without a zero', async () => {
    const fn = (a: Tensor, b: Tensor) => tg.floorDivide(a.mul(3).add(1), b).sub(tg.remainder(a, b));
    const compiled = compile(fn);
    const a = tensor(dividends(1027), { dtype: 'int32', device });
    const good = tensor(divisors(1027, -1), { dtype: 'int32', device });
    const bad = tensor(divisors(1027, 1000), { dtype: 'int32', device });
    for (let call = 0; call < 3; call++) {
      const want = await outcome(() => fn(a, good));
      expect(await outcome(() => compiled(a, good)), `call ${call}`).toEqual(want);
    }
    const s = compiled.stats().signatures[0];
    expect(s.fusedGroups.join(' ')).toContain('5 ops');
    expectZeroDivision(await outcome(() => compiled(a, bad)), 'compiled replay');
    if (device === 'webgpu') {
      // synchronize() raises it too, with no read back.
      compiled(a, bad).dispose();
      await expect(synchronize()).rejects.toThrow(ZeroDivisionError);
    }
    for (const t of [a, good, bad]) t.dispose();
  });
});
