// PyTorch semantics (issue 38): type promotion against the case table tools/torch-semantics-reference writes from
// torch's documented rules (test/fixtures/torch-semantics/cases.json), integer operands converted to the result dtype
// before the op, exact integer sums, `.T` / `.mT`, the device-side index error flag, div / add options, mixed-dtype
// cat, bool arithmetic, embedding and the in-place ops, each on the CPU and on WebGPU.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { capture, crossEntropy, embedding, gather, indexSelect, resultType, tensor, type DType, type Tensor } from '../../src/index.js';
import { checkBoth, randomTensor, tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

interface Cases {
  promotion: { a: [string, string]; b: [string, string | number]; result: DType | null }[];
  conversion: { float: DType; ints: number[]; floats: number[]; sub: number[]; add: number[]; gt: boolean[]; eq: boolean[] }[];
  sum: { values: number[]; fits: boolean; sum: number }[];
}
const cases = JSON.parse(readFileSync(new URL('../fixtures/torch-semantics/cases.json', import.meta.url), 'utf8')) as Cases;

const DEVICES: tg.DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];
const FP8 = new Set(['float8_e4m3fn', 'float8_e5m2']);

/** A tensor for a case operand: [3] with dims, [] for a 0-d one. */
function operand(kind: string, v: string | number, device: tg.DeviceName): Tensor | number {
  if (kind === 'number') return v as number;
  const dtype = v as DType;
  const shape = kind === 'dims' ? [3] : [];
  return tensor(kind === 'dims' ? [1, 0, 1] : 1, { shape, dtype, device });
}

describe('type promotion (torch.result_type) against the case table', () => {
  it('resultType gives torch’s dtype (or refuses) for every pair: dims x dims, dims x 0-d, 0-d x 0-d, numbers', () => {
    expect(cases.promotion.length).toBeGreaterThan(250);
    for (const c of cases.promotion) {
      const label = `${c.a.join(' ')} with ${c.b.join(' ')}`;
      const ops = [c.a, c.b].map(([k, v]) => (k === 'number' ? (v as number) : { dtype: v as DType, ndim: k === 'dims' ? 1 : 0 }));
      if (c.result === null) expect(() => resultType(...ops), label).toThrow(tg.DTypeError);
      else expect(resultType(...ops), label).toBe(c.result);
    }
  });

  for (const device of DEVICES) {
    it(`add, mul and maximum produce the table's dtype on ${device} (FP8 and bool - bool refused)`, async () => {
      for (const c of cases.promotion) {
        const a = operand(c.a[0], c.a[1], device);
        const b = operand(c.b[0], c.b[1], device);
        const label = `${c.a.join(' ')} with ${c.b.join(' ')} on ${device}`;
        const fp8 = FP8.has(String(c.a[1])) || FP8.has(String(c.b[1]));
        if (fp8 || c.result === null) {
          expect(() => tg.add(a, b), label).toThrow(tg.DTypeError);
          continue;
        }
        expect(tg.add(a, b).dtype, label).toBe(c.result);
        expect(tg.mul(a, b).dtype, label).toBe(c.result);
        if (c.result === 'bool') expect(() => tg.sub(a, b), label).toThrow(tg.DTypeError);
        else expect(tg.sub(a, b).dtype, label).toBe(c.result);
        expect(tg.gt(a, b).dtype, label).toBe('bool');
      }
    });
  }

  it('the issue’s examples: f16 + 0-d f32 stays f16; uint8 + 0-d int32 300 wraps in uint8', async () => {
    for (const device of DEVICES) {
      const h = tensor([1, 2, 3, 4], { dtype: 'float16', device });
      expect(h.add(tensor(1.5, { device })).dtype).toBe('float16');
      const bf = tensor([1, 2], { dtype: 'bfloat16', device });
      expect(bf.mul(tensor(2, { device })).dtype).toBe('bfloat16');
      const u = tensor([1, 2], { shape: [1, 2], dtype: 'uint8', device });
      const r = u.add(tensor(300, { dtype: 'int32', device }));
      expect(r.dtype).toBe('uint8');
      expect(Array.from(await r.toArray())).toEqual([45, 46]);
      expect(tensor([1, 2], { dtype: 'int32', device }).add(tensor(0.5, { dtype: 'float16', device })).dtype).toBe('float16');
    }
  });
});

describe('integer operands are converted to the result dtype first', () => {
  for (const device of DEVICES) {
    it(`int32 - / + / > / == float16, bfloat16, float32 on ${device}`, async () => {
      for (const c of cases.conversion) {
        const ints = tensor(c.ints, { dtype: 'int32', device });
        const fl = tensor(c.floats, { dtype: c.float, device });
        expect(Array.from(await ints.sub(fl).toArray()), `sub ${c.float}`).toEqual(c.sub);
        expect(Array.from(await ints.add(fl).toArray()), `add ${c.float}`).toEqual(c.add);
        expect(Array.from(await fl.sub(ints).toArray()), `rsub ${c.float}`).toEqual(c.sub.map((x) => (x === 0 ? 0 : -x)));
        expect(Array.from(await ints.gt(fl).toArray(), Boolean), `gt ${c.float}`).toEqual(c.gt);
        expect(Array.from(await ints.eq(fl).toArray(), Boolean), `eq ${c.float}`).toEqual(c.eq);
      }
    });
  }

  it('random int32 x float16/bfloat16/float32 agree between the backends (odd sizes, broadcasting, empty)', async () => {
    if (!gpu.available) return;
    for (const dtype of ['float16', 'bfloat16', 'float32'] as const) {
      for (const n of [0, 1, 3, 1025]) {
        const ints = tensor(
          Array.from({ length: n }, (_, i) => ((i * 2654435761) % 40000) - 20000 + (i % 3)),
          { dtype: 'int32', device: 'cpu' },
        );
        const fl = randomTensor([n], dtype);
        for (const op of ['add', 'sub', 'mul', 'div', 'maximum', 'gt', 'eq'] as const)
          await checkBoth(
            [ints, fl],
            (a, b) => (tg[op] as (x: Tensor, y: Tensor) => Tensor)(a, b),
            op === 'div' ? tolerance(dtype) : 'bits',
            `${op} ${dtype} [${n}]`,
          );
      }
    }
  });
});

describe('integer sums are int64 (torch sums ints into int64), exact past int32', () => {
  for (const device of DEVICES) {
    it(`the case table on ${device}`, async () => {
      for (const c of cases.sum) {
        const x = tensor(c.values, { dtype: 'int32', shape: [c.values.length], device });
        const s = x.sum();
        expect(s.dtype).toBe('int64');
        expect(await s.item(), `${c.values.length} values (fits int32: ${c.fits})`).toBe(c.sum);
      }
    });
  }

  it('sums over a dim of uint8, bool and strided int32 agree with the CPU', async () => {
    if (!gpu.available) return;
    for (const dtype of ['int32', 'uint8', 'bool'] as const) {
      const x = randomTensor([5, 257], dtype);
      await checkBoth([x], (t) => t.sum(1), 'bits', `${dtype} sum(1)`);
      await checkBoth([x], (t) => t.sum(0), 'bits', `${dtype} sum(0)`);
      await checkBoth([x], (t) => t.T.sum(1, { keepdim: true }), 'bits', `${dtype} T.sum(1)`);
    }
  });
});

describe('.T reverses all dims; .mT swaps the last two', () => {
  it('shapes and values on 3-D, 2-D, 1-D and 0-d', async () => {
    const x = tg.arange(24).reshape(2, 3, 4);
    expect(x.T.shape).toEqual([4, 3, 2]);
    expect(x.mT.shape).toEqual([2, 4, 3]);
    expect(x.mH.shape).toEqual([2, 4, 3]);
    expect(await x.T.contiguous().tolist()).toEqual(await x.permute(2, 1, 0).contiguous().tolist());
    expect(tg.arange(3).T.shape).toEqual([3]);
    expect(tensor(2).T.shape).toEqual([]);
    expect(tg.arange(6).reshape(2, 3).T.shape).toEqual([3, 2]);
    expect(() => tg.arange(3).mT).toThrow(tg.ShapeError);
  });
});

describe.skipIf(!gpu.available)('out-of-range indices raise an IndexError on WebGPU (device error flag)', () => {
  it('indexSelect, gather, embedding, crossEntropy: at the next read or synchronize(), naming the op and index', async () => {
    const x = tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3], device: 'webgpu' });
    const idx = (v: number[], shape?: number[]) => tensor(v, { dtype: 'int32', shape, device: 'webgpu' });
    await expect(indexSelect(x, 1, idx([0, 3])).toArray()).rejects.toThrow(/indexSelect: index 3 is out of range for a dim of size 3/);
    await expect(indexSelect(x, 0, idx([-1])).toArray()).rejects.toThrow(tg.IndexError);
    await expect(gather(x, 1, idx([0, 5], [1, 2])).toArray()).rejects.toThrow(/gather: index 5/);
    await expect(embedding(idx([0, 2], [1, 2]), x).toArray()).rejects.toThrow(tg.IndexError);
    const logits = tg.randn([3, 4], { device: 'webgpu' });
    const loss = crossEntropy(logits, idx([0, 4, -100]));
    await expect(loss.item()).rejects.toThrow(/crossEntropy: target 4 is out of range for 4 classes/);
    // ignore_index is not an error, and a negative target other than it is.
    expect(Number.isFinite(await crossEntropy(logits, idx([0, -100, 3])).item())).toBe(true);
    crossEntropy(logits, idx([0, -2, 3]));
    await expect(tg.synchronize()).rejects.toThrow(/target -2/);
    // Cleared after each report: good work reads back.
    expect(Array.from(await indexSelect(x, 1, idx([2, 0])).toArray())).toEqual([3, 1, 6, 4]);
    // The CPU raises at once.
    expect(() => indexSelect(tensor([1, 2, 3], { device: 'cpu' }), 0, tensor([3], { dtype: 'int32', device: 'cpu' }))).toThrow(tg.IndexError);
  });

  it('inside a captured step the flag still works on replay', async () => {
    const x = tensor([1, 2, 3, 4], { device: 'webgpu' });
    const ids = tensor([0, 1], { dtype: 'int32', device: 'webgpu' });
    const { result, graph } = capture('index', () => indexSelect(x, 0, ids));
    expect(Array.from(await result.toArray())).toEqual([1, 2]);
    tg.writeTensor(ids, [3, 4]);
    graph!.replay();
    await expect(result.toArray()).rejects.toThrow(/index 4 is out of range/);
    tg.writeTensor(ids, [3, 2]);
    graph!.replay();
    expect(Array.from(await result.toArray())).toEqual([4, 3]);
    graph!.dispose();
  });
});

describe('options and mixed types', () => {
  for (const device of DEVICES) {
    it(`div roundingMode, add/sub alpha, cat of mixed dtypes, bool * bool, embedding of rank 2 on ${device}`, async () => {
      const a = tensor([7, -7, 7, -7, 5, 0], { dtype: 'int32', device });
      const b = tensor([2, 2, -2, -2, 5, 3], { dtype: 'int32', device });
      expect(Array.from(await tg.div(a, b, { roundingMode: 'trunc' }).toArray())).toEqual([3, -3, -3, 3, 1, 0]);
      expect(Array.from(await tg.div(a, b, { roundingMode: 'floor' }).toArray())).toEqual([3, -4, -4, 3, 1, 0]);
      expect(tg.div(a, b, { roundingMode: 'trunc' }).dtype).toBe('int32');
      const fa = tensor([7.5, -7.5, 1, -0.5, Number.NaN, Number.POSITIVE_INFINITY], { device });
      const fb = tensor([2, 2, 3, 4, 1, 2], { device });
      expect(Array.from(await tg.div(fa, fb, { roundingMode: 'trunc' }).toArray())).toEqual([3, -3, 0, -0, Number.NaN, Number.POSITIVE_INFINITY]);
      // floor: Inf // 2 is NaN, as torch's div_floor (fmod(Inf, 2) is NaN).
      expect(Array.from(await tg.div(fa, fb, { roundingMode: 'floor' }).toArray())).toEqual([3, -4, 0, -1, Number.NaN, Number.NaN]);
      expect(Array.from(await tg.add(a, b, { alpha: 3 }).toArray())).toEqual([13, -1, 1, -13, 20, 9]);
      expect(Array.from(await tg.sub(fa, fb, { alpha: 0.5 }).toArray())).toEqual([6.5, -8.5, -0.5, -2.5, Number.NaN, Number.POSITIVE_INFINITY]);
      expect(() => tg.add(a, b, { alpha: 0.5 })).toThrow(tg.DTypeError);
      const h = tensor([1, 2049], { dtype: 'float16', device });
      expect(await tg.add(h, h, { alpha: 0.5 }).tolist()).toEqual([1.5, 3072]);
      const c = tg.cat([tensor([1, 2], { dtype: 'int32', device }), tensor([0.5], { dtype: 'float16', device }), tensor([1], { dtype: 'bool', device })]);
      expect(c.dtype).toBe('float16');
      expect(await c.tolist()).toEqual([1, 2, 0.5, 1]);
      const t = tensor([1, 1, 0, 0], { dtype: 'bool', device });
      const f = tensor([1, 0, 1, 0], { dtype: 'bool', device });
      expect(t.mul(f).dtype).toBe('bool');
      expect(await t.mul(f).tolist()).toEqual([true, false, false, false]);
      expect(await t.add(f).tolist()).toEqual([true, true, true, false]);
      const w = tensor([0, 1, 10, 11, 20, 21], { shape: [3, 2], device });
      const e = embedding(tensor([2, 0, 1, 1], { dtype: 'int32', shape: [2, 2], device }), w);
      expect(e.shape).toEqual([2, 2, 2]);
      expect(await e.tolist()).toEqual([
        [
          [20, 21],
          [0, 1],
        ],
        [
          [10, 11],
          [10, 11],
        ],
      ]);
    });
  }

  it('embedding gradients sum repeated ids into the weight', async () => {
    const w = tensor([0, 1, 10, 11, 20, 21], { shape: [3, 2] }).requiresGrad_();
    embedding(tensor([1, 1, 2], { dtype: 'int32', shape: [3, 1] }), w)
      .sum()
      .backward();
    expect(await w.grad!.tolist()).toEqual([
      [0, 0],
      [2, 2],
      [1, 1],
    ]);
  });
});

describe('in-place ops', () => {
  for (const device of DEVICES) {
    it(`add_, sub_, mul_, div_, clamp_, fill_, zero_, copy_ write through views on ${device}`, async () => {
      const x = tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3], device });
      const v0 = x.storage.version;
      expect(x.add_(1)).toBe(x);
      expect(x.storage.version).toBeGreaterThan(v0);
      expect(await x.tolist()).toEqual([
        [2, 3, 4],
        [5, 6, 7],
      ]);
      x.select(1, 1).mul_(10); // a strided view: column 1
      expect(await x.tolist()).toEqual([
        [2, 30, 4],
        [5, 60, 7],
      ]);
      x.T.sub_(tensor([1, 2, 3], { shape: [3, 1], device }), { alpha: 2 });
      expect(await x.tolist()).toEqual([
        [0, 26, -2],
        [3, 56, 1],
      ]);
      x.div_(2).clamp_(0, 10);
      expect(await x.tolist()).toEqual([
        [0, 10, 0],
        [1.5, 10, 0.5],
      ]);
      x.narrow(1, 1, 2).fill_(7);
      expect(await x.tolist()).toEqual([
        [0, 7, 7],
        [1.5, 7, 7],
      ]);
      x.select(0, 0).zero_();
      x.select(0, 1).copy_(tensor([9, 8, 7], { dtype: 'int32', device }));
      expect(await x.tolist()).toEqual([
        [0, 0, 0],
        [9, 8, 7],
      ]);
      x.copy_(tensor([4, 5, 6], { device })); // broadcast to [2, 3]
      expect(await x.tolist()).toEqual([
        [4, 5, 6],
        [4, 5, 6],
      ]);
      // In-place cannot change the dtype: an int tensor refuses a float result, and cannot broadcast itself up.
      const i = tensor([1, 2], { dtype: 'int32', device });
      expect(() => i.div_(2)).toThrow(tg.DTypeError);
      expect(() => i.add_(0.5)).toThrow(tg.DTypeError);
      expect(Array.from(await i.add_(tensor(3, { dtype: 'int32', device })).toArray())).toEqual([4, 5]);
      expect(() => i.add_(tensor([[1], [2]], { dtype: 'int32', device }))).toThrow(tg.ShapeError);
      const h = tensor([1, 2], { dtype: 'float16', device });
      h.mul_(tensor(2.5, { device })); // a 0-d float32 keeps float16
      expect(await h.tolist()).toEqual([2.5, 5]);
      expect(() => tensor([true, false], { dtype: 'bool', device }).add_(1)).toThrow(tg.DTypeError);
    });
  }

  it('autograd: a leaf that requires grad refuses; a saved tensor written in place fails backward; history rebases', async () => {
    const w = tensor([1, 2, 3]).requiresGrad_();
    expect(() => w.add_(1)).toThrow(tg.InPlaceError);
    tg.noGrad(() => w.add_(1));
    expect(await w.tolist()).toEqual([2, 3, 4]);
    const y = w.mul(2);
    const z = y.mul(y); // saves y
    y.add_(1);
    expect(() => z.sum().backward()).toThrow(/modified in place/);
    const u = w.mul(3);
    u.add_(w); // u = 3w + w: gradient 4
    u.sum().backward();
    expect(await w.grad!.tolist()).toEqual([4, 4, 4]);
  });
});
