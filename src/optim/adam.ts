// Adam and AdamW (torch.optim.Adam / AdamW, single-tensor path): per parameter a float32 exp_avg and exp_avg_sq
// (and max_exp_avg_sq with amsgrad) and a step count; the bias corrections are computed here in float64 from the
// step count, as PyTorch does with Python floats, and the whole update is one fused backend call. With capturable
// (torch's capturable=True) the step count, bias corrections and lr are device tensors instead: one more dispatch
// advances the count, and the same recorded dispatches are right at every step.
import { runKernel } from '../kernels/registry.js';
import type { Backend } from '../runtime/backend.js';
import type { Tensor } from '../core/tensor.js';
import { Optimizer, type CommonOptimizerOptions, type ParamStateAccess } from './optimizer.js';

export interface AdamOptions extends CommonOptimizerOptions {
  /** Default 1e-3. */
  lr?: number;
  /** Default [0.9, 0.999]. */
  betas?: readonly [number, number];
  /** Default 1e-8. */
  eps?: number;
  /** Adam: an L2 term added to the gradient (default 0). AdamW: decoupled decay of the parameter (default 1e-2). */
  weightDecay?: number;
  /** Divide by the running maximum of exp_avg_sq (default false). */
  amsgrad?: boolean;
  /** Maximize the objective (default false). */
  maximize?: boolean;
}

export interface AdamHyper {
  lr: number;
  betas: readonly [number, number];
  eps: number;
  weightDecay: number;
  amsgrad: boolean;
  maximize: boolean;
}

class AdamBase extends Optimizer<AdamHyper> {
  protected constructor(
    name: string,
    params: readonly Tensor[],
    options: AdamOptions,
    private readonly decoupled: boolean,
  ) {
    super(
      name,
      params,
      {
        lr: options.lr ?? 1e-3,
        betas: options.betas ?? [0.9, 0.999],
        eps: options.eps ?? 1e-8,
        weightDecay: options.weightDecay ?? (decoupled ? 1e-2 : 0),
        amsgrad: options.amsgrad ?? false,
        maximize: options.maximize ?? false,
      },
      options,
    );
  }

  protected validate(h: AdamHyper): void {
    if (!(h.lr >= 0)) throw new RangeError(`${this.name}: invalid learning rate ${h.lr}`);
    if (!(h.eps >= 0)) throw new RangeError(`${this.name}: invalid epsilon ${h.eps}`);
    if (h.betas.length !== 2) throw new RangeError(`${this.name}: betas must be two numbers, got [${h.betas.join(', ')}]`);
    h.betas.forEach((b, i) => {
      if (!(b >= 0 && b < 1)) throw new RangeError(`${this.name}: invalid beta parameter at index ${i}: ${b}`);
    });
    if (!(h.weightDecay >= 0)) throw new RangeError(`${this.name}: invalid weight decay ${h.weightDecay}`);
  }

  protected update(backend: Backend, param: Tensor, grad: Tensor, state: ParamStateAccess): void {
    const h = this.hyper;
    const [beta1, beta2] = h.betas;
    const first = state.step === 0;
    const m = first ? state.create('exp_avg') : state.tensor('exp_avg')!;
    const v = first ? state.create('exp_avg_sq') : state.tensor('exp_avg_sq')!;
    // amsgrad turned on after some steps (a loaded state dict): the running max starts from zero, as torch's does.
    let vmax: Tensor | undefined;
    let vmaxFirst = first;
    if (h.amsgrad) {
      vmax = state.tensor('max_exp_avg_sq');
      if (!vmax) {
        vmax = state.create('max_exp_avg_sq');
        vmaxFirst = true;
      }
    }
    const t = state.step + 1;
    const decoupled = this.decoupled && h.weightDecay !== 0;
    const hyper = {
      decay: decoupled ? 1 - h.lr * h.weightDecay : 1,
      weightDecay: this.decoupled ? 0 : h.weightDecay,
      beta1,
      beta2,
      eps: h.eps,
      stepSize: h.lr / (1 - beta1 ** t),
      biasCorrection2Sqrt: Math.sqrt(1 - beta2 ** t),
      maximize: h.maximize,
      first,
    };
    const lr = this.deviceLr;
    let capturable: { counter: unknown; lr: unknown; decoupledWd: number } | undefined;
    if (lr) {
      // torch's capturable path: step += 1 on the device, the bias corrections and lr read there by the update.
      const counter = state.counter((steps) => [steps, 1 - beta1 ** steps, 1 - beta2 ** steps]);
      runKernel('optimCount', backend, { counter: counter.storage.handle, beta1, beta2 });
      capturable = { counter: counter.storage.handle, lr: lr.storage.handle, decoupledWd: decoupled ? h.weightDecay : 0 };
    }
    if (vmax && vmaxFirst !== first) {
      // The fused kernel reads every state as zeros or none: a fresh max beside older moments needs zeros in it.
      zeroState(backend, vmax);
    }
    runKernel('adamStep', backend, {
      param: param.operand(),
      grad: grad.operand(),
      m: m.storage.handle,
      v: v.storage.handle,
      vmax: vmax?.storage.handle,
      hyper,
      capturable,
    });
  }
}

/** Writes zeros over a float32 state tensor's storage (a rare path: amsgrad switched on mid-training). */
function zeroState(backend: Backend, t: Tensor): void {
  backend.writeBytes(t.storage.handle, 0, new Uint8Array(t.numel * 4));
}

/** torch.optim.Adam: weightDecay adds weightDecay * param to the gradient (L2). */
export class Adam extends AdamBase {
  constructor(params: readonly Tensor[], options: AdamOptions = {}) {
    super('Adam', params, options, false);
  }
}

/** torch.optim.AdamW: weightDecay (default 1e-2) decays the parameter by lr * weightDecay before the update. */
export class AdamW extends AdamBase {
  constructor(params: readonly Tensor[], options: AdamOptions = {}) {
    super('AdamW', params, options, true);
  }
}
