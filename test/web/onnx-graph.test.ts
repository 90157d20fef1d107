// The benchmarks page's ONNX writer, checked by ONNX Runtime itself (its WebAssembly CPU build under Node): the models
// it writes load, and compute what their ops define on fresh random inputs, including dims past one varint byte.
import * as ort from 'onnxruntime-web';
import { describe, expect, it } from 'vitest';
import { onnxModel } from '../../web/onnx-graph.js';

ort.env.wasm.numThreads = 1;

const random = (n: number, seed: number) => {
  let s = seed;
  return Float32Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 30 - 1;
  });
};

async function run(model: Uint8Array, feeds: Record<string, [Float32Array, number[]]>, output: string): Promise<Float32Array> {
  const session = await ort.InferenceSession.create(model);
  try {
    const out = await session.run(Object.fromEntries(Object.entries(feeds).map(([k, [data, dims]]) => [k, new ort.Tensor('float32', data, dims)])));
    return out[output].data as Float32Array;
  } finally {
    await session.release();
  }
}

describe('onnxModel', () => {
  it('writes a MatMul that ONNX Runtime computes as the definition does ([3,200] x [200,130])', async () => {
    const [m, k, n] = [3, 200, 130];
    const [a, b] = [random(m * k, 1), random(k * n, 2)];
    const y = await run(
      onnxModel({ inputs: { a: [m, k], b: [k, n] }, outputs: { y: [m, n] }, nodes: [{ op: 'MatMul', inputs: ['a', 'b'], outputs: ['y'] }] }),
      { a: [a, [m, k]], b: [b, [k, n]] },
      'y',
    );
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) s += a[i * k + p] * b[p * n + j];
        expect(Math.abs(y[i * n + j] - s)).toBeLessThan(1e-4);
      }
    }
  });

  it('writes integer attributes: Softmax over axis 0 of [2, 300] (the default is the last axis)', async () => {
    const x = random(600, 3);
    const y = await run(
      onnxModel({ inputs: { x: [2, 300] }, outputs: { y: [2, 300] }, nodes: [{ op: 'Softmax', inputs: ['x'], outputs: ['y'], ints: { axis: 0 } }] }),
      { x: [x, [2, 300]] },
      'y',
    );
    // axis 0: each column of two sums to one.
    for (let j = 0; j < 300; j++) {
      const [p, q] = [Math.exp(x[j]), Math.exp(x[300 + j])];
      expect(y[j]).toBeCloseTo(p / (p + q), 6);
      expect(y[j] + y[300 + j]).toBeCloseTo(1, 6);
    }
  });

  it('chains nodes through named intermediates', async () => {
    const [x, u, v] = [random(1000, 4), random(1000, 5), random(1000, 6)];
    const model = onnxModel({
      inputs: { x: [1000], u: [1000], v: [1000] },
      outputs: { out: [1000] },
      nodes: [
        { op: 'Add', inputs: ['x', 'u'], outputs: ['s'] },
        { op: 'Mul', inputs: ['s', 'v'], outputs: ['out'] },
      ],
    });
    const y = await run(model, { x: [x, [1000]], u: [u, [1000]], v: [v, [1000]] }, 'out');
    for (let i = 0; i < 1000; i++) expect(y[i]).toBeCloseTo((x[i] + u[i]) * v[i], 6);
  });

  it('refuses values it cannot encode', () => {
    expect(() => onnxModel({ inputs: { x: [-1] }, outputs: { x: [-1] }, nodes: [] })).toThrow(/cannot encode -1/);
  });
});
