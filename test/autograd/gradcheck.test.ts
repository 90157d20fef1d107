// Reverse-mode autograd: every backward rule against central finite differences on the CPU backend, WebGPU
// gradients against the CPU's, and the tape's conventions (accumulation across backward() calls, zeroGrad,
// noGrad, detach, leaves vs results, errors that name the problem, saved tensors released after backward, no
// memory growth over repeated steps, inference without requiresGrad recording nothing).
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, ShapeError, memoryStats, noGrad, enableGrad, setDefaultDevice, synchronize, tensor, type Tensor } from '../../src/index.js';
import { expectClose, randomTensor, tolerance } from '../helpers/compare.js';
import { gradcheck } from '../helpers/gradcheck.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const R = (shape: number[], dist: 'normal' | 'positive' = 'normal', scale = 1) => randomTensor(shape, 'float32', dist, scale);

describe('autograd: backward rules vs central differences (CPU)', () => {
  it('elementwise arithmetic with broadcasting, JS numbers, pow, maximum/minimum, where', async () => {
    await gradcheck('add broadcast', (a, b) => a.add(b), [R([2, 3]), R([3])]);
    await gradcheck('sub broadcast', (a, b) => a.sub(b), [R([2, 1, 3]), R([4, 1])]);
    await gradcheck('mul broadcast', (a, b) => a.mul(b), [R([3, 4]), R([3, 1])]);
    await gradcheck('div', (a, b) => a.div(b), [R([5]), R([5], 'positive')]);
    await gradcheck('number - x / 3', (a) => tg.sub(2, a.div(3)), [R([4])]);
    await gradcheck('pow tensor ** tensor', (a, b) => a.pow(b), [R([6], 'positive'), R([6])]);
    await gradcheck('pow x ** 3 (negative bases)', (a) => a.pow(3), [R([7])]);
    await gradcheck('pow x ** -0.5', (a) => a.pow(-0.5), [R([5], 'positive')]);
    await gradcheck('pow 2 ** x', (a) => tg.pow(2, a), [R([5])]);
    await gradcheck('maximum / minimum', (a, b) => a.maximum(b).add(a.minimum(b).mul(3)), [R([8]), R([8])]);
    const cond = randomTensor([2, 5], 'bool');
    await gradcheck('where broadcast', (a, b) => tg.where(cond, a, b), [R([5]), R([2, 5])]);
    await gradcheck('where with a number', (a) => tg.where(cond, a.exp(), 0), [R([2, 5])]);
  });

  it('unary ops', async () => {
    for (const [name, fn, dist] of [
      ['neg', (a: Tensor) => a.neg(), 'normal'],
      ['abs', (a: Tensor) => a.abs(), 'normal'],
      ['relu', (a: Tensor) => a.relu(), 'normal'],
      ['exp', (a: Tensor) => a.exp(), 'normal'],
      ['log', (a: Tensor) => a.log(), 'positive'],
      ['sqrt', (a: Tensor) => a.sqrt(), 'positive'],
      ['rsqrt', (a: Tensor) => a.rsqrt(), 'positive'],
      ['tanh', (a: Tensor) => a.tanh(), 'normal'],
      ['sigmoid', (a: Tensor) => a.sigmoid(), 'normal'],
      ['silu', (a: Tensor) => a.silu(), 'normal'],
      ['gelu', (a: Tensor) => a.gelu(), 'normal'],
      ['gelu tanh', (a: Tensor) => a.gelu({ approximate: 'tanh' }), 'normal'],
    ] as const) {
      // abs and relu have a kink at 0: random normals keep away from it by more than eps almost surely.
      await gradcheck(name, fn, [R([9], dist, 2)]);
    }
  });

  it('reductions, matmul, softmax, logSoftmax', async () => {
    await gradcheck('sum all', (a) => a.sum(), [R([3, 4])]);
    await gradcheck('sum dim 0', (a) => a.sum(0), [R([3, 4])]);
    await gradcheck('mean dim -1 keepdim', (a) => a.mean(-1, { keepdim: true }), [R([3, 4])]);
    await gradcheck('mean all', (a) => a.mean(), [R([2, 3, 2])]);
    await gradcheck('matmul 2-D', (a, b) => a.matmul(b), [R([3, 4]), R([4, 2])]);
    await gradcheck('matmul batched with a broadcast batch', (a, b) => a.matmul(b), [R([2, 3, 4]), R([4, 5])]);
    await gradcheck('matmul vector @ matrix', (a, b) => a.matmul(b), [R([4]), R([4, 3])]);
    await gradcheck('matmul matrix @ vector', (a, b) => a.matmul(b), [R([2, 4]), R([4])]);
    await gradcheck('linear with bias', (a, w, b) => tg.linear(a, w, b), [R([3, 4]), R([5, 4]), R([5])]);
    await gradcheck('linear batched with a residual', (a, w, r) => tg.linear(a, w, undefined, { residual: r }).exp(), [
      R([2, 3, 4]),
      R([5, 4], 'normal', 0.3),
      R([2, 3, 5]),
    ]);
    await gradcheck('softmax last dim', (a) => a.softmax(-1), [R([3, 5], 'normal', 2)]);
    await gradcheck('softmax dim 0', (a) => a.softmax(0), [R([4, 3], 'normal', 2)]);
    await gradcheck('logSoftmax', (a) => a.logSoftmax(-1), [R([2, 7], 'normal', 2)]);
  });

  it('views and copies: reshape, permute, transpose, slice, narrow, select, squeeze, unsqueeze, expand, flatten, cat, to', async () => {
    await gradcheck('reshape', (a) => a.reshape(6, 2).exp(), [R([3, 4])]);
    await gradcheck('permute', (a) => a.permute(2, 0, 1).mul(a.permute(2, 0, 1).exp()), [R([2, 3, 4])]);
    await gradcheck('transpose + contiguous', (a) => a.transpose(0, 1).contiguous().exp(), [R([3, 4])]);
    await gradcheck('slice with a step', (a) => a.slice(1, 1, 5, 2).exp(), [R([3, 6])]);
    await gradcheck('narrow', (a) => a.narrow(0, 1, 2).exp(), [R([4, 3])]);
    await gradcheck('select', (a) => a.select(1, 2).exp(), [R([3, 4])]);
    await gradcheck('squeeze / unsqueeze', (a) => a.unsqueeze(1).exp().squeeze(1), [R([3, 4])]);
    await gradcheck('expand', (a) => a.expand(3, 4).exp(), [R([1, 4])]);
    await gradcheck('flatten', (a) => a.flatten().exp(), [R([2, 2, 3])]);
    await gradcheck('cat', (a, b) => tg.cat([a, b.exp(), a], 1), [R([2, 3]), R([2, 2])]);
    // Through a float16 round trip the gradient passes unchanged (differences would only see the rounding steps).
    const h = R([5]).requiresGrad_();
    h.to('float16').to('float32').mul(2).sum().backward();
    expect(Array.from(await h.grad!.toArray())).toEqual([2, 2, 2, 2, 2]);
    const b16 = R([3, 2]).to('bfloat16').requiresGrad_();
    b16.to('float32').exp().sum().backward();
    expect(b16.grad!.dtype).toBe('bfloat16');
    await gradcheck('clone', (a) => a.clone().mul(a), [R([5])]);
  });

  it('a small MLP: linear layers by matmul, silu, softmax cross-entropy by logSoftmax', async () => {
    const target = tensor([
      [0, 1, 0],
      [1, 0, 0],
    ]);
    const loss = (x: Tensor, w1: Tensor, w2: Tensor) => x.matmul(w1).silu().matmul(w2).logSoftmax(-1).mul(target).sum().neg();
    await gradcheck('mlp', loss, [R([2, 4]), R([4, 5]), R([5, 3])]);
  });
});

describe('autograd: transformer ops vs central differences (CPU)', () => {
  it('rmsNorm (with and without weight), rope, swiglu', async () => {
    await gradcheck('rmsNorm with weight', (x, w) => tg.rmsNorm(x, w, 1e-6), [R([3, 8]), R([8])]);
    await gradcheck('rmsNorm without weight', (x) => tg.rmsNorm(x, undefined, 1e-5), [R([2, 2, 6])]);
    const angles = R([6, 3]);
    const cos = tg.tensor(Array.from(await angles.toArray(), Math.cos), { shape: [6, 3] });
    const sin = tg.tensor(Array.from(await angles.toArray(), Math.sin), { shape: [6, 3] });
    await gradcheck('rope at offset 2', (x) => tg.rope(x, cos, sin, 2), [R([3, 2, 6])]);
    await gradcheck('swiglu', (x) => tg.swiglu(x), [R([3, 10])]);
  });

  it('attention: GQA, causal with a query offset, non-causal, a query that sees no key', async () => {
    await gradcheck('attention GQA 4/2 causal', (q, k, v) => tg.attention(q, k, v, { causal: true }), [R([3, 4, 4]), R([5, 2, 4]), R([5, 2, 4])]);
    await gradcheck('attention MHA non-causal', (q, k, v) => tg.attention(q, k, v), [R([2, 2, 3]), R([4, 2, 3]), R([4, 2, 3])]);
    await gradcheck('attention causal offset -1 (first query sees no key)', (q, k, v) => tg.attention(q, k, v, { causal: true, queryOffset: -1 }), [
      R([3, 2, 4]),
      R([3, 1, 4]),
      R([3, 1, 4]),
    ]);
  });

  it('indexSelect as an embedding (repeated indices add up) and along dim 1; crossEntropy with ignoreIndex', async () => {
    const ids = tensor([2, 0, 2, 3, 2], { dtype: 'int32' });
    await gradcheck('embedding rows', (w) => tg.indexSelect(w, 0, ids), [R([4, 3])]);
    await gradcheck('indexSelect dim 1', (w) => tg.indexSelect(w, 1, tensor([1, 1, 0], { dtype: 'int32' })), [R([2, 3, 2])]);
    const targets = tensor([1, -100, 4, 0], { dtype: 'int32' });
    await gradcheck('crossEntropy mean', (l) => tg.crossEntropy(l, targets), [R([4, 5], 'normal', 2)]);
    await gradcheck('crossEntropy sum', (l) => tg.crossEntropy(l, targets, { reduction: 'sum' }), [R([4, 5], 'normal', 2)]);
    await gradcheck('crossEntropy none, [2, 2, C]', (l) => tg.crossEntropy(l, targets.reshape(2, 2), { reduction: 'none' }), [R([2, 2, 5], 'normal', 2)]);
    // The loss itself equals -log_softmax at the target, averaged over the targets kept.
    const logits = R([4, 5]);
    const lsm = await logits.logSoftmax(-1).toArray();
    const want = -(lsm[0 * 5 + 1] + lsm[2 * 5 + 4] + lsm[3 * 5 + 0]) / 3;
    expectClose([await tg.crossEntropy(logits, targets).item()], [want], tolerance('float32', 'transcendental'), 'crossEntropy value');
    expect(Number.isNaN(await tg.crossEntropy(logits, tensor([-100, -100, -100, -100], { dtype: 'int32' })).item())).toBe(true);
  });
});

describe('autograd: the tape', () => {
  it('accumulates across backward() calls; zeroGrad; leaves and results; detach; noGrad; enableGrad', async () => {
    const x = tensor([1, 2, 3], { requiresGrad: true });
    expect(x.isLeaf && x.requiresGrad).toBe(true);
    const y = x.mul(x).sum();
    expect(y.isLeaf).toBe(false);
    expect(y.gradFn?.name).toBe('sum');
    y.backward();
    x.mul(3).sum().backward();
    expect(Array.from(await x.grad!.toArray())).toEqual([5, 7, 9]); // 2x + 3
    x.zeroGrad();
    expect(x.grad).toBeUndefined();
    const d = x.detach();
    expect(d.requiresGrad).toBe(false);
    expect(noGrad(() => x.mul(2)).requiresGrad).toBe(false);
    expect(noGrad(() => enableGrad(() => x.mul(2))).requiresGrad).toBe(true);
    // A tensor used twice gets the sum of both paths.
    const z = tensor([2], { requiresGrad: true });
    z.mul(z).add(z.exp()).sum().backward();
    expectClose(await z.grad!.toArray(), [4 + Math.exp(2)], tolerance('float32'), 'z*z + exp(z)');
  });

  it('each leaf owns its gradient: in-place updates of one never reach another (a + b hands both the same gradient)', async () => {
    const a = tensor([1, 2, 3], { requiresGrad: true });
    const b = tensor([4, 5, 6], { requiresGrad: true });
    const c = tensor([[1], [2]], { requiresGrad: true });
    a.add(b).add(c).sum().backward();
    tg.copyInto(a.grad!, tensor([9, 9, 9]));
    expect(Array.from(await b.grad!.toArray())).toEqual([2, 2, 2]);
    expect(b.grad!.isContiguous() && c.grad!.isContiguous()).toBe(true);
    expect(Array.from(await c.grad!.toArray())).toEqual([3, 3]);
  });

  it('errors name what is wrong', async () => {
    expect(() => tensor([1, 2], { dtype: 'int32', requiresGrad: true })).toThrow(/only floating tensors can require grad, got \[2\] int32/);
    const x = tensor([1, 2], { requiresGrad: true });
    expect(() => x.mul(2).backward()).toThrow(ShapeError);
    expect(() => tensor([1, 2]).sum().backward()).toThrow(DTypeError);
    expect(() => x.mul(2).requiresGrad_(false)).toThrow(/only leaves can change it/);
    const y = x.exp().sum();
    y.backward();
    expect(() => y.backward()).toThrow(/a second time/);
    expect(() => x.max().backward()).toThrow(/backward through max is not implemented yet/);
    expect(() => x.mul(2).backward(tensor([1, 2, 3]))).toThrow(/grad has shape \[3\]/);
    // Writing into a tensor that a rule saved, between forward and backward, is refused.
    const w = tensor([1, 2], { requiresGrad: true });
    const c = tensor([3, 4]);
    const prod = w.mul(c).sum();
    tg.copyInto(c, tensor([0, 0]));
    expect(() => prod.backward()).toThrow(/modified in place/);
  });

  it('inference records nothing: no node, no saved tensor, same dispatches', async () => {
    const x = R([4, 4]);
    const y = x.matmul(x).silu().softmax(-1);
    expect(y.gradFn).toBeUndefined();
    expect(y.requiresGrad).toBe(false);
  });
});

describe.skipIf(!gpu.available)(`autograd on WebGPU ${gpu.skipReason}`, () => {
  it('gradients equal the CPU backend on an MLP with broadcasting, views and softmax; rows longer than a workgroup', async () => {
    const shapes = [[3, 300], [300, 70], [70], [70, 5]];
    const cpuInputs = shapes.map((s) => R(s, 'normal', 0.2));
    const target = tg.softmax(R([3, 5]), -1);
    const loss = (x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, t: Tensor) =>
      x.matmul(w1).add(b1).gelu().matmul(w2).logSoftmax(-1).mul(t).sum().neg().add(w1.pow(2).mean().mul(0.1));
    const grads = async (inputs: Tensor[], t: Tensor) => {
      const leaves = inputs.map((i) => i.detach().requiresGrad_());
      loss(leaves[0], leaves[1], leaves[2], leaves[3], t).backward();
      return Promise.all(leaves.map((l) => l.grad!.toArray()));
    };
    const onCpu = await grads(cpuInputs, target);
    const gpuInputs = await Promise.all(cpuInputs.map((t) => t.to('webgpu')));
    const onGpu = await grads(gpuInputs, await target.to('webgpu'));
    onGpu.forEach((g, i) => expectClose(g, onCpu[i], { atol: 1e-5, rtol: 1e-4 }, `d/dinput${i}`));
  });

  it('linear with a bfloat16 weight and float32 activations: the weight gradient comes back in bfloat16', async () => {
    const x = R([4, 33]);
    const w = R([17, 33], 'normal', 0.2).to('bfloat16');
    const b = R([17]);
    const run = async (dev: 'cpu' | 'webgpu') => {
      const [xd, wd, bd] = await Promise.all([x, w, b].map((t) => t.to(dev)));
      [xd, wd, bd].forEach((t) => t.requiresGrad_());
      tg.linear(xd, wd, bd).tanh().sum().backward();
      expect(wd.grad!.dtype).toBe('bfloat16');
      return Promise.all([xd, wd, bd].map((t) => t.grad!.toArray()));
    };
    const [cpu, gpuGrads] = [await run('cpu'), await run('webgpu')];
    expectClose(gpuGrads[0], cpu[0], { atol: 1e-5, rtol: 1e-4 }, 'dx');
    expectClose(gpuGrads[1], cpu[1], tolerance('bfloat16', 'accumulate'), 'dW (bf16)');
    expectClose(gpuGrads[2], cpu[2], { atol: 1e-5, rtol: 1e-4 }, 'db');
  });

  it('a decoder block (embedding, rmsNorm, GQA causal attention with rope, swiglu MLP, crossEntropy): gradients equal the CPU', async () => {
    const [S, H, KV, D, E, I, V] = [19, 4, 2, 16, 64, 96, 300];
    const angles = R([S, D / 2]);
    const a = Array.from(await angles.toArray());
    const cos = tensor(a.map(Math.cos), { shape: [S, D / 2] });
    const sin = tensor(a.map(Math.sin), { shape: [S, D / 2] });
    const ids = tensor(
      Array.from({ length: S }, (_, i) => (i * 37) % V),
      { dtype: 'int32' },
    );
    const targets = tensor(
      Array.from({ length: S }, (_, i) => (i * 11 + 3) % V),
      { dtype: 'int32' },
    );
    const params = [
      R([V, E], 'normal', 0.5),
      R([E]),
      R([(H + 2 * KV) * D, E], 'normal', 0.1),
      R([E, H * D], 'normal', 0.1),
      R([2 * I, E], 'normal', 0.1),
      R([E, I], 'normal', 0.1),
    ];
    const forward = (p: Tensor[], c: Tensor, s: Tensor, x: Tensor, t: Tensor) => {
      const [emb, norm, wqkv, wo, wgu, wd] = p;
      const h = tg.indexSelect(emb, 0, x);
      const qkv = tg.linear(tg.rmsNorm(h, norm, 1e-6), wqkv);
      const q = tg.rope(qkv.narrow(1, 0, H * D).reshape(S, H, D), c, s, 0);
      const k = tg.rope(qkv.narrow(1, H * D, KV * D).reshape(S, KV, D), c, s, 0);
      const v = qkv.narrow(1, (H + KV) * D, KV * D).reshape(S, KV, D);
      const h2 = tg.linear(tg.attention(q, k, v, { causal: true }).reshape(S, H * D), wo, undefined, { residual: h });
      const h3 = tg.linear(tg.swiglu(tg.linear(h2, wgu)), wd).add(h2);
      return tg.crossEntropy(tg.linear(h3, emb), t);
    };
    const grads = async (dev: 'cpu' | 'webgpu') => {
      const moved = await Promise.all([...params, cos, sin, ids, targets].map((t) => t.to(dev)));
      const leaves = moved.slice(0, params.length).map((t) => t.requiresGrad_());
      forward(leaves, moved[6], moved[7], moved[8], moved[9]).backward();
      return Promise.all(leaves.map((l) => l.grad!.toArray()));
    };
    const cpu = await grads('cpu');
    const onGpu = await grads('webgpu');
    onGpu.forEach((g, i) => expectClose(g, cpu[i], { atol: 2e-5, rtol: 2e-3 }, `param ${i}`));
  });

  it('releases saved activations: GPU memory returns to its start after backward, no growth over steps', async () => {
    const w = (await R([64, 64], 'normal', 0.1).to('webgpu')).requiresGrad_();
    const x = await R([8, 64]).to('webgpu');
    await synchronize();
    const step = () => {
      // The intermediates die with the scope before backward runs: the tape's saved views keep what it needs.
      const loss = tg.tidy(() => x.matmul(w).tanh().matmul(w).softmax(-1).pow(2).sum());
      loss.backward();
      loss.dispose();
      w.zeroGrad();
    };
    step();
    await synchronize();
    const start = memoryStats().liveBytes;
    for (let i = 0; i < 50; i++) step();
    await synchronize();
    expect(memoryStats().liveBytes).toBe(start);
  });
});
