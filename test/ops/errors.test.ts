// Bad input gives a typed error that names the offending value, on both devices: shape mismatches, unsupported
// dtypes, use after dispose, mixed devices, invalid dims, bad reshapes, unknown dtype names. Nothing hangs or
// crashes, and the device keeps working afterwards. (Use after releaseDevice(): release-device.test.ts.)
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DeviceName, type DType, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const DEVICES: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

describe.each(DEVICES)('bad input on %s', (device) => {
  const t = (shape: number[], dtype: DType = 'float32') => tg.ones(shape, { device, dtype });

  it('shape mismatch in a binary op names both shapes', () => {
    expect(() => t([2, 3]).add(t([4]))).toThrow(tg.ShapeError);
    expect(() => t([2, 3]).add(t([4]))).toThrow(/shapes \[2, 3\] and \[4\] cannot be broadcast \(dim 1: 3 vs 4\)/);
    expect(() => tg.mul(t([5, 1, 2]), t([3, 3]))).toThrow(/\[5, 1, 2\] and \[3, 3\]/);
    expect(() => t([3]).lt(t([2]))).toThrow(tg.ShapeError);
  });

  it('matmul shape errors name both shapes', () => {
    expect(() => t([2, 3]).matmul(t([4, 5]))).toThrow(tg.ShapeError);
    expect(() => t([2, 3]).matmul(t([4, 5]))).toThrow(/inner dims differ: \[2, 3\] @ \[4, 5\] \(3 vs 4\)/);
    expect(() => t([3]).matmul(t([4]))).toThrow(/\[3\] @ \[4\]/);
    expect(() => t([2, 2, 3]).matmul(t([3, 3, 4]))).toThrow(/cannot be broadcast/);
    expect(() => tg.tensor(1, { device }).matmul(t([1]))).toThrow(/at least 1 dim, got \[\] and \[1\]/);
  });

  it('unsupported dtypes are a DTypeError naming the dtype', () => {
    expect(() => t([2], 'float8_e4m3fn').exp()).toThrow(tg.DTypeError);
    expect(() => t([2], 'float8_e4m3fn').exp()).toThrow(/exp does not take float8_e4m3fn/);
    expect(() => t([2], 'float8_e5m2').add(1)).toThrow(/add does not take float8_e5m2/);
    expect(() => t([2], 'float8_e5m2').mul(t([2]))).toThrow(tg.DTypeError);
    expect(() => t([2, 2], 'int32').matmul(t([2, 2]))).toThrow(/matmul does not take int32.*supported: float32, float16, bfloat16/);
    expect(() => t([2, 2], 'float8_e4m3fn').matmul(t([2, 2], 'float8_e4m3fn'))).toThrow(tg.DTypeError);
    expect(() => t([2, 2]).matmul(t([2, 2], 'float16'))).toThrow(/one dtype, got \[2, 2\] float32 and \[2, 2\] float16/);
    expect(() => t([2], 'bool').neg()).toThrow(/neg does not take bool/);
    expect(() => t([2], 'bool').sub(t([2], 'bool'))).toThrow(/sub does not take two bool operands/);
    expect(() => t([2], 'int32').mean()).toThrow(/mean needs a floating tensor, got \[2\] int32/);
    expect(() => t([2], 'float8_e4m3fn').sum()).toThrow(tg.DTypeError);
    expect(() => tg.add(1 as never, 2 as never)).toThrow(/at least one tensor/);
  });

  it('use after dispose is a DisposedError naming the tensor, for reads, ops and views', async () => {
    const x = t([2, 3]);
    const y = t([2, 3]);
    x.dispose();
    expect(x.isDisposed).toBe(true);
    expect(() => x.add(y)).toThrow(tg.DisposedError);
    expect(() => y.add(x)).toThrow(/tensor \[2, 3\] float32 was used after dispose\(\)/);
    expect(() => x.exp()).toThrow(tg.DisposedError);
    expect(() => x.sum()).toThrow(tg.DisposedError);
    expect(() => x.T).toThrow(tg.DisposedError);
    expect(() => x.reshape(6)).toThrow(tg.DisposedError);
    expect(() => x.to('float16')).toThrow(tg.DisposedError);
    expect(() => x.add(1)).toThrow(tg.DisposedError);
    expect(() => tg.sub(1, x)).toThrow(tg.DisposedError);
    expect(() => tg.cat([y, x])).toThrow(tg.DisposedError);
    await expect(x.toArray()).rejects.toThrow(tg.DisposedError);
    await expect(x.to(device === 'cpu' ? 'webgpu' : 'cpu')).rejects.toThrow(tg.DisposedError);
    expect(x.toString()).toMatch(/disposed/);
    x.dispose(); // idempotent
    // A view made before dispose stays usable.
    const z = t([4]);
    const v = z.narrow(0, 1, 2);
    z.dispose();
    expect(Array.from(await v.toArray())).toEqual([1, 1]);
    expect(Array.from(await y.add(1).toArray())).toEqual([2, 2, 2, 2, 2, 2]);
  });

  it('invalid dims are a ShapeError naming the dim and the rank', () => {
    const x = t([2, 3]);
    expect(() => x.sum(2)).toThrow(/dim 2 is out of range for a tensor of rank 2 \(expected -2..1\)/);
    expect(() => x.argmax(-3)).toThrow(tg.ShapeError);
    expect(() => x.transpose(0, 5)).toThrow(tg.ShapeError);
    expect(() => x.select(2, 0)).toThrow(tg.ShapeError);
    expect(() => x.squeeze(3)).toThrow(tg.ShapeError);
    expect(() => x.flatten(0, 4)).toThrow(tg.ShapeError);
    expect(() => tg.cat([x, x], -3)).toThrow(tg.ShapeError);
    expect(() => x.sum(0.5)).toThrow(tg.ShapeError);
  });

  it('reshape/view size mismatches name both shapes and element counts', () => {
    const x = t([2, 3]);
    expect(() => x.reshape(4, 2)).toThrow(/cannot reshape \[2, 3\] \(6 elements\) to \[4, 2\] \(8 elements\)/);
    expect(() => x.view(5)).toThrow(tg.ShapeError);
    expect(() => x.reshape(-1, 4)).toThrow(/cannot reshape \[2, 3\]/);
    expect(() => x.reshape(2, -3)).toThrow(tg.ShapeError);
    expect(() => x.T.view(6)).toThrow(/use reshape\(\) \(copies\) or contiguous\(\)/);
    expect(() => x.expand(3, 3)).toThrow(tg.ShapeError);
  });

  it('unknown dtype names are a DTypeError naming the name', () => {
    expect(() => tg.zeros([2], { device, dtype: 'float64' })).toThrow(/unknown dtype 'float64'/);
    expect(() => t([2]).to('uint64' as DType)).toThrow(tg.DTypeError);
    expect(() => tg.parseDType('f8')).toThrow(/unknown dtype 'f8'/);
    expect(tg.parseDType('half')).toBe('float16');
  });

  it('errors are TensorGpuError subclasses with their class name', () => {
    try {
      t([2]).add(t([3]));
      expect.fail('no error');
    } catch (err) {
      expect(err).toBeInstanceOf(tg.TensorGpuError);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).name).toBe('ShapeError');
    }
  });
});

describe.skipIf(!gpu.available)(`mixing devices ${gpu.skipReason}`, () => {
  it('an op on a CPU and a WebGPU tensor is a DeviceMismatchError naming both devices', async () => {
    const c = tg.ones([2, 2]);
    const g = tg.ones([2, 2], { device: 'webgpu' });
    const cases: [string, () => Tensor][] = [
      ['add', () => c.add(g)],
      ['add (gpu first)', () => g.add(c)],
      ['lt', () => g.lt(c)],
      ['matmul', () => c.matmul(g)],
      ['maximum', () => tg.maximum(g, c)],
      ['cat', () => tg.cat([c, g])],
    ];
    for (const [name, fn] of cases) {
      expect(fn, name).toThrow(tg.DeviceMismatchError);
      expect(fn, name).toThrow(/on cpu and .* on webgpu|on webgpu and .* on cpu/);
    }
    expect(() => c.add(g)).toThrow(
      /add: expected all tensors on one device, got \[2, 2\] float32 on cpu and \[2, 2\] float32 on webgpu; move one with await t.to\('cpu'\)/,
    );
    // Both still work after the errors.
    expect(Array.from(await g.add(g).toArray())).toEqual([2, 2, 2, 2]);
    expect(Array.from(await c.add(await g.to('cpu')).toArray())).toEqual([2, 2, 2, 2]);
  });

  it('WebGPU errors do not poison the device: queued work before and after still reads back', async () => {
    const g = tg.arange(6, undefined, 1, { device: 'webgpu', dtype: 'float32' });
    const pending = g.mul(2);
    expect(() => g.add(tg.ones([5], { device: 'webgpu' }))).toThrow(tg.ShapeError);
    expect(() => g.matmul(g.reshape(2, 3))).toThrow(tg.ShapeError);
    expect(Array.from(await pending.toArray())).toEqual([0, 2, 4, 6, 8, 10]);
    expect(await g.sum().item()).toBe(15);
  });
});
