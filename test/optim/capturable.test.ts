// capturable optimizers (torch's capturable=True): the step count, bias corrections and lr live on the device. N
// steps through the capturable path equal N steps through the host path under an lr schedule (AdamW, Adam with
// amsgrad, SGD with momentum; per-tensor and over a flat arena; CPU and WebGPU), and on WebGPU one step recorded with
// capture() and replayed gives the parameters of as many eager steps, where the host path's replay would not.
import { describe, expect, it } from 'vitest';
import {
  Adam,
  AdamW,
  capture,
  copyInto,
  flatParameters,
  gpuCounters,
  LrScheduler,
  linearWithWarmup,
  SGD,
  setDefaultDevice,
  synchronize,
  tensor,
  type Optimizer,
  type Tensor,
} from '../../src/index.js';
import { expectClose, randomValues } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const STEPS = 12;
const SHAPES = [[37], [5, 7], [3]];
// The bias corrections from the device recurrence in float32 vs the host's float64: measured about 2e-7 apart.
const TOL = { atol: 2e-6, rtol: 2e-6 };

type Make = (ps: Tensor[], capturable: boolean) => Optimizer;
const OPTIMIZERS: Record<string, Make> = {
  AdamW: (ps, capturable) => new AdamW(ps, { lr: 5e-2, weightDecay: 0.1, capturable }),
  'Adam amsgrad, L2': (ps, capturable) => new Adam(ps, { lr: 5e-2, weightDecay: 0.01, amsgrad: true, capturable }),
  'SGD momentum': (ps, capturable) => new SGD(ps, { lr: 5e-2, momentum: 0.9, dampening: 0.1, capturable }),
};

const init = SHAPES.map((s, i) =>
  randomValues(
    s.reduce((a, b) => a * b, 1),
    'float32',
    'normal',
    100 + i,
  ),
);
const grads = Array.from({ length: STEPS }, (_, t) =>
  SHAPES.map((s, i) =>
    randomValues(
      s.reduce((a, b) => a * b, 1),
      'float32',
      'normal',
      1000 * t + i,
    ),
  ),
);

function params(device: 'cpu' | 'webgpu', flat: boolean): Tensor[] {
  const ps = SHAPES.map((s, i) => tensor(init[i], { shape: s, device }));
  if (!flat) return ps.map((p) => p.requiresGrad_());
  const f = flatParameters(ps);
  for (const p of ps) p.dispose();
  return f;
}

/** STEPS steps of fresh gradients under a warmup + linear decay schedule; the final parameter values. */
async function train(make: Make, capturable: boolean, device: 'cpu' | 'webgpu', flat: boolean): Promise<number[][]> {
  const ps = params(device, flat);
  const opt = make(ps, capturable);
  const sched = new LrScheduler(opt, linearWithWarmup(3, STEPS));
  for (let t = 0; t < STEPS; t++) {
    ps.forEach((p, i) => {
      if (flat) writeGrad(p, grads[t][i]);
      else p.grad = tensor(grads[t][i], { shape: p.shape, device });
    });
    opt.step();
    sched.step();
  }
  const out = await read(ps);
  opt.dispose();
  for (const p of ps) p.dispose();
  return out;
}

/** The values of each tensor, read one after another (flat parameters share one storage). */
async function read(ps: readonly Tensor[]): Promise<number[][]> {
  const out: number[][] = [];
  for (const p of ps) out.push(Array.from(await p.toArray()));
  return out;
}

/** Writes a flat parameter's gradient into its slot of the gradient arena (where backward would). */
function writeGrad(p: Tensor, values: readonly number[]): void {
  p.grad ??= p.gradBuffer!.detach();
  const g = tensor(values, { shape: p.shape, device: p.device });
  copyInto(p.grad!, g);
  g.dispose();
}

describe('capturable optimizers: device step count and lr vs the host path', () => {
  for (const device of ['cpu', 'webgpu'] as const) {
    for (const [name, make] of Object.entries(OPTIMIZERS)) {
      for (const flat of [false, true]) {
        it.skipIf(device === 'webgpu' && !gpu.available)(`${name} on ${device}${flat ? ', flat arena' : ''}`, async () => {
          const host = await train(make, false, device, flat);
          const dev = await train(make, true, device, flat);
          host.forEach((h, i) => expectClose(dev[i], h, TOL, `${name} param ${i}`));
          // The schedule and bias corrections moved the parameters: a path that ignored them would not match.
          expect(Math.abs(host[0][0] - init[0][0])).toBeGreaterThan(1e-3);
        });
      }
    }
  }
});

describe.skipIf(!gpu.available)(`capturable optimizers replayed from one captured step ${gpu.skipReason}`, () => {
  /** Eager steps vs one eager step, one captured, then replays: the same parameters when capturable. */
  async function replayed(make: Make, capturable: boolean): Promise<{ eager: number[][]; replay: number[][]; dispatches: number }> {
    const run = async (record: boolean) => {
      const ps = params('webgpu', true);
      ps.forEach((p, i) => writeGrad(p, grads[0][i])); // the same gradients every step: replays read them in place
      const opt = make(ps, capturable);
      const sched = new LrScheduler(opt, linearWithWarmup(3, STEPS));
      let dispatches = 0;
      opt.step(); // an eager first step makes the state (and uploads the counters)
      sched.step();
      if (record) {
        await synchronize();
        const { graph } = capture('optimizer step', () => opt.step());
        sched.step();
        dispatches = graph!.dispatches;
        for (let t = 2; t < STEPS; t++) {
          graph!.replay();
          sched.step();
        }
        await synchronize(); // the replays are submitted before the step's uniforms go
        graph!.dispose();
      } else {
        for (let t = 1; t < STEPS; t++) {
          opt.step();
          sched.step();
        }
      }
      const out = await read(ps);
      opt.dispose();
      for (const p of ps) p.dispose();
      return { out, dispatches };
    };
    const eager = await run(false);
    const replay = await run(true);
    return { eager: eager.out, replay: replay.out, dispatches: replay.dispatches };
  }

  for (const [name, make] of Object.entries(OPTIMIZERS)) {
    it(`${name}: replays equal eager steps; the host path's replay does not`, async () => {
      const ok = await replayed(make, true);
      ok.eager.forEach((e, i) => expectClose(ok.replay[i], e, { atol: 1e-6, rtol: 1e-6 }, `${name} param ${i}`));
      // Over the flat arena: the count and the update.
      expect(ok.dispatches).toBe(2);
      const stale = await replayed(make, false);
      const apart = stale.eager[0].some((e, j) => Math.abs(e - stale.replay[0][j]) > 1e-4);
      expect(apart).toBe(true);
    });
  }

  it('the counter costs one dispatch per state per step', async () => {
    const ps = params('webgpu', false);
    ps.forEach((p, i) => (p.grad = tensor(grads[0][i], { shape: p.shape, device: 'webgpu' })));
    const opt = new AdamW(ps, { capturable: true });
    opt.step();
    await synchronize();
    const before = gpuCounters().dispatches;
    opt.step();
    expect(gpuCounters().dispatches - before).toBe(2 * ps.length);
    opt.dispose();
    for (const p of ps) p.dispose();
  });
});
