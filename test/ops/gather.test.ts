import { describe, expect, it } from 'vitest';
import { DTypeError, ShapeError, gather, randn, setDefaultDevice, tensor, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

/** torch.gather by its definition, on plain arrays: the expectation every backend is checked against. */
function gatherByDefinition(x: ArrayLike<number>, xShape: number[], dim: number, idx: ArrayLike<number>, idxShape: number[]): number[] {
  const stride = (shape: number[]) => shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const xs = stride(xShape);
  const is = stride(idxShape);
  return Array.from({ length: idx.length }, (_, e) => {
    const coord = is.map((s, d) => Math.floor(e / s) % idxShape[d]);
    coord[dim] = idx[e];
    return x[coord.reduce((acc, c, d) => acc + c * xs[d], 0)];
  });
}

const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

describe(`gather ${gpu.skipReason}`, () => {
  for (const device of devices) {
    for (const dtype of ['float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'uint8', 'bool'] as const) {
      it(`${dtype} on ${device}: every dim, odd sizes, strided x`, async () => {
        const x = (await randn([5, 7, 3], { device: 'cpu' }).mul(10).to(device)).to(dtype);
        const xs: Tensor[] = [x, x.transpose(0, 2)];
        for (const xv of xs) {
          for (let dim = 0; dim < 3; dim++) {
            const idxShape = xv.shape.map((s, d) => (d === dim ? 4 : Math.max(1, s - 1)));
            const n = idxShape.reduce((a, b) => a * b, 1);
            const ids = Int32Array.from({ length: n }, (_, i) => (i * 5 + 1) % xv.shape[dim]);
            const idx = tensor(ids, { shape: idxShape, dtype: 'int32', device });
            const got = await gather(xv, dim, idx).toArray();
            const want = gatherByDefinition(await xv.contiguous().toArray(), [...xv.shape], dim, ids, idxShape);
            expect(Array.from(got)).toEqual(want);
          }
        }
      });
    }
  }

  it('rejects a non-int32 index, a rank mismatch and an index larger than x off dim', () => {
    const x = randn([3, 4]);
    expect(() => gather(x, 1, tensor([[0]], { dtype: 'float32' }))).toThrow(DTypeError);
    expect(() => gather(x, 1, tensor([0], { dtype: 'int32' }))).toThrow(/rank/);
    expect(() => gather(x, 1, tensor([[0], [0], [0], [0]], { dtype: 'int32' }))).toThrow(ShapeError);
    expect(() => gather(x, 1, tensor([[4]], { dtype: 'int32' }))).toThrow(/out of range/);
  });

  it.skipIf(!gpu.available)('an out-of-range index raises an IndexError on WebGPU at the next read back, never a silent zero', async () => {
    const x = randn([2, 3], { device: 'webgpu' }).add(5);
    const got = gather(
      x,
      1,
      tensor(
        [
          [0, 7],
          [-1, 2],
        ],
        { dtype: 'int32', device: 'webgpu' },
      ),
    );
    await expect(got.toArray()).rejects.toThrow(/gather: index 7 is out of range for a dim of size 3/);
    got.dispose();
    const fine = gather(x, 1, tensor([[0], [2]], { dtype: 'int32', device: 'webgpu' }));
    expect(Array.from(await fine.toArray()).every((v) => v !== 0)).toBe(true);
  });
});
