// View ops (reshape, view, permute, transpose, slice, narrow, select, squeeze, unsqueeze, expand, flatten,
// contiguous, clone) and cat: hand-written expectations for small cases on both devices, and WebGPU against CPU on
// random data, bit-exact. cat of sub-word dtypes (f16, uint8, fp8, bool) writes with atomics on the GPU, so piece
// boundaries that fall inside a 32-bit word are checked on purpose.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTYPES, setDefaultDevice, type DeviceName, type DType, type Tensor } from '../../src/index.js';
import { BITS, checkBoth, randomTensor } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const DEVICES: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

/** 0..23 as int32 [2, 3, 4] on a device. */
function grid(device: DeviceName, dtype: DType = 'int32'): Tensor {
  return tg.arange(24, undefined, 1, { device, dtype }).reshape(2, 3, 4);
}

describe.each(DEVICES)('view ops against hand-written values on %s', (device) => {
  it('reshape: a view when the layout allows, a copy otherwise', async () => {
    const x = grid(device);
    const r = x.reshape(4, 6);
    expect(r.shape).toEqual([4, 6]);
    expect(r.strides).toEqual([6, 1]);
    expect(await r.select(0, 1).tolist()).toEqual([6, 7, 8, 9, 10, 11]);
    expect(x.reshape(-1, 8).shape).toEqual([3, 8]);
    expect(x.reshape([24]).shape).toEqual([24]);
    // Transposed: elements are not in row-major order, so reshape copies.
    const t = x.transpose(0, 2).reshape(24);
    expect(t.isContiguous()).toBe(true);
    expect((await t.tolist()) as number[]).toEqual([0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23]);
    // A view that splits a dim of a permuted tensor keeps sharing storage.
    const p = x.transpose(1, 2).view(2, 2, 2, 3);
    expect(p.strides).toEqual([12, 2, 1, 4]);
    expect(await p.select(0, 1).select(0, 1).tolist()).toEqual([
      [14, 18, 22],
      [15, 19, 23],
    ]);
  });

  it('view() refuses a layout that needs a copy, naming the shape and strides', () => {
    const x = grid(device);
    expect(() => x.transpose(0, 2).view(24)).toThrow(tg.ShapeError);
    expect(() => x.transpose(1, 2).view(8, 3)).toThrow(/view \[8, 3\] is not compatible with the strides \[12, 1, 4\]/);
    expect(() => x.reshape(5, 5)).toThrow(/cannot reshape \[2, 3, 4\] \(24 elements\) to \[5, 5\]/);
    expect(() => x.reshape(-1, -1)).toThrow(/more than one -1/);
    expect(() => x.reshape(7, -1)).toThrow(tg.ShapeError);
  });

  it('permute and transpose', async () => {
    const x = grid(device);
    const p = x.permute(2, 0, 1);
    expect(p.shape).toEqual([4, 2, 3]);
    expect(await p.select(0, 3).tolist()).toEqual([
      [3, 7, 11],
      [15, 19, 23],
    ]);
    expect(await x.permute([-1, -2, -3]).select(2, 1).tolist()).toEqual(await x.select(0, 1).T.tolist());
    expect(await x.select(0, 0).T.tolist()).toEqual([
      [0, 4, 8],
      [1, 5, 9],
      [2, 6, 10],
      [3, 7, 11],
    ]);
    expect(() => x.permute(0, 1)).toThrow(/2 dims given for a tensor of rank 3/);
    expect(() => x.permute(0, 1, 1)).toThrow(/repeated dim/);
    expect(() => x.transpose(0, 3)).toThrow(tg.ShapeError);
    const v = tg.arange(3, undefined, 1, { device });
    expect(v.T.shape).toEqual([3]); // 1-D .T is the tensor itself
  });

  it('slice: negative and out-of-range bounds clamp (Python slicing), steps, empty results', async () => {
    const v = tg.arange(10, undefined, 1, { device });
    expect(await v.slice(0, 2, 8, 3).tolist()).toEqual([2, 5]);
    expect(await v.slice(0, -3).tolist()).toEqual([7, 8, 9]);
    expect(await v.slice(0, -100, 2).tolist()).toEqual([0, 1]);
    expect(await v.slice(0, 5, 100, 2).tolist()).toEqual([5, 7, 9]);
    expect(await v.slice(0, 8, 3).tolist()).toEqual([]);
    expect(await v.slice(0, 20, 30).tolist()).toEqual([]);
    expect(await v.slice(0, undefined, undefined, 4).tolist()).toEqual([0, 4, 8]);
    expect(await v.slice(0, 1, -1, 3).tolist()).toEqual([1, 4, 7]);
    expect(() => v.slice(0, 0, 5, 0)).toThrow(/step must be a positive integer/);
    expect(() => v.slice(0, 0, 5, -1)).toThrow(tg.ShapeError);
    const x = grid(device);
    expect(await x.slice(2, 1, undefined, 2).slice(1, -2).tolist()).toEqual([
      [
        [5, 7],
        [9, 11],
      ],
      [
        [17, 19],
        [21, 23],
      ],
    ]);
  });

  it('narrow and select: negative starts/indices, out of range is a ShapeError', async () => {
    const x = grid(device);
    expect(await x.narrow(2, 1, 2).select(0, 1).tolist()).toEqual([
      [13, 14],
      [17, 18],
      [21, 22],
    ]);
    expect(await x.narrow(1, -1, 1).squeeze().tolist()).toEqual([
      [8, 9, 10, 11],
      [20, 21, 22, 23],
    ]);
    expect(await x.select(1, -1).select(-1, -2).tolist()).toEqual([10, 22]);
    expect(x.narrow(0, 2, 0).shape).toEqual([0, 3, 4]);
    expect(() => x.narrow(2, 3, 2)).toThrow(/narrow: start 3 length 2 is out of range for dim 2 of size 4/);
    expect(() => x.narrow(0, 0, -1)).toThrow(tg.ShapeError);
    expect(() => x.select(1, 3)).toThrow(/select: index 3 is out of range for dim 1 of size 3/);
    expect(() => x.select(3, 0)).toThrow(tg.ShapeError);
  });

  it('squeeze, unsqueeze, expand, flatten', async () => {
    const x = tg.tensor([[[1], [2], [3]]], { device });
    expect(x.shape).toEqual([1, 3, 1]);
    expect(x.squeeze().shape).toEqual([3]);
    expect(x.squeeze(0).shape).toEqual([3, 1]);
    expect(x.squeeze(-1).shape).toEqual([1, 3]);
    expect(x.squeeze(1).shape).toEqual([1, 3, 1]); // size 3: unchanged, like torch
    expect(tg.tensor(5, { device }).unsqueeze(0).shape).toEqual([1]);
    expect(x.unsqueeze(-1).shape).toEqual([1, 3, 1, 1]);
    expect(x.unsqueeze(1).shape).toEqual([1, 1, 3, 1]);
    expect(() => x.unsqueeze(5)).toThrow(tg.ShapeError);
    const col = x.squeeze(0); // [3, 1]
    const e = col.expand(2, 3, 4);
    expect(e.strides[0]).toBe(0);
    expect(e.strides[2]).toBe(0);
    expect(await e.select(0, 1).tolist()).toEqual([
      [1, 1, 1, 1],
      [2, 2, 2, 2],
      [3, 3, 3, 3],
    ]);
    expect(col.expand(-1, 2).shape).toEqual([3, 2]);
    expect(() => col.expand(4, 2)).toThrow(/cannot expand \[3, 1\] float32 to \[4, 2\]/);
    expect(() => col.expand(2)).toThrow(/fewer dims/);
    expect(() => col.expand(-1, 3, 2)).toThrow(tg.ShapeError);
    const g = grid(device);
    expect(g.flatten().shape).toEqual([24]);
    expect(g.flatten(1).shape).toEqual([2, 12]);
    expect(g.flatten(0, 1).shape).toEqual([6, 4]);
    expect(tg.tensor(7, { device }).flatten().shape).toEqual([1]);
    expect(await g.transpose(1, 2).flatten(1).select(0, 0).tolist()).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    expect(() => g.flatten(2, 1)).toThrow(tg.ShapeError);
  });

  it('contiguous is a view when already contiguous, a copy otherwise; clone always copies', async () => {
    const x = grid(device, 'float32');
    const same = x.contiguous();
    expect(same.isContiguous()).toBe(true);
    const t = x.transpose(1, 2);
    expect(t.isContiguous()).toBe(false);
    const c = t.contiguous();
    expect(c.isContiguous()).toBe(true);
    expect(c.strides).toEqual([12, 3, 1]);
    expect(await c.tolist()).toEqual(await t.tolist());
    const k = x.narrow(2, 1, 2).clone();
    expect(k.strides).toEqual([6, 2, 1]);
    x.dispose();
    t.dispose();
    // Views keep their storage alive after the base is disposed; clones own theirs.
    expect(await k.select(0, 0).tolist()).toEqual([
      [1, 2],
      [5, 6],
      [9, 10],
    ]);
    expect((await same.toArray()).length).toBe(24);
  });

  it('cat along every dim with hand-written results, including negative dims and empty pieces', async () => {
    const a = tg.tensor(
      [
        [1, 2],
        [3, 4],
      ],
      { device },
    );
    const b = tg.tensor([[5, 6]], { device });
    expect(await tg.cat([a, b]).tolist()).toEqual([
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
    expect(await tg.cat([a, b.T.reshape(2, 1)], -1).tolist()).toEqual([
      [1, 2, 5],
      [3, 4, 6],
    ]);
    expect(await tg.cat([a, tg.zeros([0, 2], { device }), b], 0).tolist()).toEqual([
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
    expect(await tg.cat([a.T, a], 1).tolist()).toEqual([
      [1, 3, 1, 2],
      [2, 4, 3, 4],
    ]);
    const u = tg.cat([
      tg.tensor(new Uint8Array([1, 2, 3]), { device }),
      tg.tensor(new Uint8Array([4, 5]), { device }),
      tg.tensor(new Uint8Array([6]), { device }),
    ]);
    expect(u.dtype).toBe('uint8');
    expect(await u.tolist()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(() => tg.cat([a, tg.tensor([[1, 2, 3]], { device })])).toThrow(/sizes must match except in dim 0, got \[2, 2\] and \[1, 3\]/);
    const mixed = tg.cat([a, a.to('float16')]); // torch promotes mixed dtypes
    expect(mixed.dtype).toBe('float32');
    expect(await mixed.tolist()).toEqual([
      [1, 2],
      [3, 4],
      [1, 2],
      [3, 4],
    ]);
    expect(mixed.shape).toEqual([a.shape[0] * 2, ...a.shape.slice(1)]);
    mixed.dispose();
    expect(() => tg.cat([a, a.to('float8_e4m3fn')])).toThrow(tg.DTypeError);
    expect(() => tg.cat([])).toThrow(tg.ShapeError);
    expect(() => tg.cat([a, a], 2)).toThrow(tg.ShapeError);
  });
});

describe.skipIf(!gpu.available)(`view ops and cat, WebGPU vs CPU bit-exact on random data ${gpu.skipReason}`, () => {
  it('chains of views read back identically on both devices, every dtype', async () => {
    const views: [string, (t: Tensor) => Tensor][] = [
      ['reshape', (t) => t.reshape(5, -1, 3)],
      ['reshape of transpose (copy)', (t) => t.transpose(0, 2).reshape(-1)],
      ['permute', (t) => t.permute(1, 2, 0)],
      ['slice/narrow/select', (t) => t.slice(2, 1, -1, 3).narrow(1, 1, 5).select(0, 2)],
      ['squeeze/unsqueeze/expand', (t) => t.narrow(1, 3, 1).unsqueeze(0).expand(2, 3, 1, 15).squeeze(2)],
      ['flatten of view', (t) => t.transpose(1, 2).flatten(1)],
      ['contiguous', (t) => t.slice(2, 0, undefined, 2).contiguous()],
      ['clone', (t) => t.narrow(2, 1, 13).clone()],
    ];
    for (const dtype of DTYPES) {
      const x = randomTensor([3, 7, 15], dtype);
      for (const [name, view] of views) {
        const r = await checkBoth([x], view, BITS, `${name} ${dtype}`);
        expect(r.dtype).toBe(dtype);
      }
    }
  });

  it.each(['float32', 'float16', 'bfloat16', 'uint8', 'float8_e4m3fn', 'float8_e5m2', 'bool', 'int32'] as const)(
    'cat along every dim, odd sizes, %s',
    async (dtype) => {
      // Pieces along each dim of [3, 5, 7]: boundaries at odd element offsets fall inside 16- and 8-bit words.
      const pieces: Record<number, number[][]> = {
        0: [
          [1, 5, 7],
          [3, 5, 7],
          [1, 5, 7],
        ],
        1: [
          [3, 1, 7],
          [3, 3, 7],
          [3, 2, 7],
        ],
        2: [
          [3, 5, 1],
          [3, 5, 3],
          [3, 5, 5],
          [3, 5, 2],
        ],
      };
      for (const dim of [0, 1, 2]) {
        const xs = pieces[dim].map((s) => randomTensor(s, dtype, 'normal', 3));
        const r = await checkBoth(xs, (...ts) => tg.cat(ts, dim), BITS, `cat dim ${dim} ${dtype}`);
        expect(r.shape[dim]).toBe(pieces[dim].reduce((n, s) => n + s[dim], 0));
        await checkBoth(xs, (...ts) => tg.cat(ts, dim - 3), BITS, `cat dim ${dim - 3} ${dtype}`);
        // Strided pieces (transposed twice over other dims, stepped slices).
        await checkBoth(
          xs,
          (...ts) =>
            tg.cat(
              ts.map((t) =>
                t
                  .transpose(dim === 0 ? 1 : 0, 2)
                  .contiguous()
                  .transpose(dim === 0 ? 1 : 0, 2),
              ),
              dim,
            ),
          BITS,
          `cat strided ${dtype}`,
        );
      }
      // 1-D pieces of odd lengths: every word boundary case, and many pieces into one word.
      const ones = [5, 3, 1, 1, 1, 7, 4097, 2].map((n) => randomTensor([n], dtype, 'normal', 3));
      await checkBoth(ones, (...ts) => tg.cat(ts), BITS, `cat 1-D ${dtype}`);
      await checkBoth(ones, (...ts) => tg.cat(ts.map((t) => t.slice(0, 0, undefined, 2))), BITS, `cat stepped ${dtype}`);
    },
  );
});
