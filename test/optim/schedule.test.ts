// Learning-rate schedules (transformers' get_*_schedule_with_warmup lambdas) at chosen steps, and LrScheduler
// (torch's LambdaLR) driving an optimizer's lr.
import { describe, expect, it } from 'vitest';
import { AdamW, constantLr, cosineWithWarmup, linearWithWarmup, LrScheduler, SGD, tensor } from '../../src/index.js';

describe('learning-rate schedules', () => {
  it('constantLr', () => {
    const f = constantLr();
    expect([0, 1, 100, 1e6].map(f)).toEqual([1, 1, 1, 1]);
  });

  it('linearWithWarmup(10, 110): up over the warmup, down to 0 at the end, 0 after', () => {
    const f = linearWithWarmup(10, 110);
    expect(f(0)).toBe(0);
    expect(f(5)).toBe(0.5);
    expect(f(10)).toBe(1);
    expect(f(60)).toBe(0.5);
    expect(f(85)).toBeCloseTo(0.25, 15);
    expect(f(110)).toBe(0);
    expect(f(200)).toBe(0);
    // No warmup: transformers' max(1, warmup) guard.
    expect(linearWithWarmup(0, 4)(0)).toBe(1);
    expect(linearWithWarmup(0, 4)(1)).toBe(0.75);
  });

  it('cosineWithWarmup(4, 104, minRatio): half a cosine from 1 to minRatio after the warmup', () => {
    const f = cosineWithWarmup(4, 104);
    expect(f(0)).toBe(0);
    expect(f(2)).toBe(0.5);
    expect(f(4)).toBe(1);
    expect(f(29)).toBeCloseTo(0.5 * (1 + Math.cos(Math.PI * 0.25)), 15);
    expect(f(54)).toBeCloseTo(0.5, 15);
    expect(f(104)).toBeCloseTo(0, 15);
    // Past the end the cosine rises again, as transformers' does.
    expect(f(129)).toBeCloseTo(0.5 * (1 + Math.cos(Math.PI * 1.25)), 15);
    const g = cosineWithWarmup(4, 104, 0.1);
    expect(g(2)).toBe(0.5);
    expect(g(4)).toBeCloseTo(1, 15);
    expect(g(54)).toBeCloseTo(0.55, 15);
    expect(g(104)).toBeCloseTo(0.1, 15);
    expect(() => cosineWithWarmup(-1, 10)).toThrow(RangeError);
    expect(() => cosineWithWarmup(1, 10, 2)).toThrow(RangeError);
  });

  it('LrScheduler sets lr = base * schedule(step): step 0 at construction, one per step()', () => {
    const p = tensor([1]).requiresGrad_();
    const opt = new AdamW([p], { lr: 0.2 });
    const sched = new LrScheduler(opt, linearWithWarmup(2, 6));
    expect(opt.lr).toBe(0);
    const lrs: number[] = [];
    for (let i = 0; i < 7; i++) {
      sched.step();
      lrs.push(opt.lr);
    }
    expect(lrs.map((x) => +x.toFixed(12))).toEqual([0.1, 0.2, 0.15, 0.1, 0.05, 0, 0]);
    expect(sched.lastStep).toBe(7);
    expect(sched.lastLr).toBe(opt.lr);
    const again = new LrScheduler(new SGD([p], { lr: 0.2 }), linearWithWarmup(2, 6));
    again.loadStateDict(sched.stateDict());
    expect(again.lastStep).toBe(7);
    expect(() => again.loadStateDict({ lastStep: 1, baseLr: 1 })).toThrow(RangeError);
  });

  it('the lr set between steps is the one the next step uses', async () => {
    const p = tensor([1, 1]).requiresGrad_();
    const opt = new SGD([p], { lr: 1 });
    p.grad = tensor([1, 2]);
    opt.lr = 0.5;
    opt.step();
    opt.lr = 0.25;
    opt.step();
    expect(Array.from(await p.toArray())).toEqual([1 - 0.75, 1 - 1.5]);
  });
});
