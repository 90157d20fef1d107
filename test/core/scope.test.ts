// tidy / keep: every tensor made inside a scope is disposed when it ends, except what it returns (alone, in arrays
// or plain objects) and what keep() exempts; scopes nest; a throwing scope frees everything it made; views made
// inside do not outlive their scope either. On WebGPU the pool's live bytes return to where they were.
import { describe, expect, it } from 'vitest';
import { keep, memoryStats, ones, setDefaultDevice, synchronize, tidy, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

describe('tidy', () => {
  it('disposes intermediates and keeps what is returned', () => {
    const made: Tensor[] = [];
    const x = ones([4]);
    const y = tidy(() => {
      const a = x.add(1);
      const b = a.mul(2);
      made.push(a, b);
      return b.add(a);
    });
    expect(made.every((t) => t.isDisposed)).toBe(true);
    expect(y.isDisposed).toBe(false);
    expect(x.isDisposed).toBe(false);
  });

  it('keeps tensors inside returned arrays and plain objects', () => {
    const out = tidy(() => {
      const a = ones([2]);
      return { pair: [a.add(1), a.add(2)], single: a.mul(3) };
    });
    expect([...out.pair, out.single].some((t) => t.isDisposed)).toBe(false);
  });

  it('nests: what an inner scope returns lives until the outer one ends', () => {
    let inner: Tensor | undefined;
    const outer = tidy(() => {
      inner = tidy(() => ones([3]).add(1));
      expect(inner.isDisposed).toBe(false);
      return inner.add(1);
    });
    expect(inner!.isDisposed).toBe(true);
    expect(outer.isDisposed).toBe(false);
  });

  it('keep() exempts a tensor from every open scope', () => {
    let kept: Tensor | undefined;
    tidy(() =>
      tidy(() => {
        kept = keep(ones([2]).add(5));
      }),
    );
    expect(kept!.isDisposed).toBe(false);
  });

  it('a scope that throws disposes everything it made; an async fn is refused', () => {
    let a: Tensor | undefined;
    expect(() =>
      tidy(() => {
        a = ones([2]);
        throw new RangeError('boom');
      }),
    ).toThrow('boom');
    expect(a!.isDisposed).toBe(true);
    expect(() => tidy(async () => ones([1]))).toThrow(/synchronous/);
  });
});

describe.skipIf(!gpu.available)(`tidy on WebGPU ${gpu.skipReason}`, () => {
  it('returns the pool to its live bytes, views included', async () => {
    await synchronize();
    const before = memoryStats().liveBytes;
    const x = ones([64], { device: 'webgpu' });
    const y = tidy(() =>
      x
        .reshape([8, 8])
        .transpose(0, 1)
        .contiguous()
        .add(x.reshape([8, 8]))
        .sum(1),
    );
    expect(memoryStats().liveBytes - before).toBe(2 * 256);
    x.dispose();
    y.dispose();
    expect(memoryStats().liveBytes).toBe(before);
  });
});
