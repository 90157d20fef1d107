// SGD (torch.optim.SGD, single-tensor path): momentum, dampening, Nesterov, weight decay and maximize; with
// momentum, a float32 momentum_buffer per parameter that starts as the first gradient. One fused backend call per
// parameter per step; with capturable, the lr is read on the device (and a device count marks the buffer's first
// step), so a recorded step replays right under a schedule.
import { runKernel } from '../kernels/registry.js';
import type { Backend } from '../runtime/backend.js';
import type { Tensor } from '../core/tensor.js';
import { Optimizer, type CommonOptimizerOptions, type ParamStateAccess } from './optimizer.js';

export interface SgdOptions extends CommonOptimizerOptions {
  /** Default 1e-3. */
  lr?: number;
  /** Default 0 (no momentum buffer). */
  momentum?: number;
  /** Default 0. */
  dampening?: number;
  /** weightDecay * param added to the gradient (default 0). */
  weightDecay?: number;
  /** Nesterov momentum (needs momentum > 0 and dampening 0). */
  nesterov?: boolean;
  maximize?: boolean;
}

export interface SgdHyper {
  lr: number;
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  maximize: boolean;
}

export class SGD extends Optimizer<SgdHyper> {
  constructor(params: readonly Tensor[], options: SgdOptions = {}) {
    super(
      'SGD',
      params,
      {
        lr: options.lr ?? 1e-3,
        momentum: options.momentum ?? 0,
        dampening: options.dampening ?? 0,
        weightDecay: options.weightDecay ?? 0,
        nesterov: options.nesterov ?? false,
        maximize: options.maximize ?? false,
      },
      options,
    );
  }

  protected validate(h: SgdHyper): void {
    if (!(h.lr >= 0)) throw new RangeError(`SGD: invalid learning rate ${h.lr}`);
    if (!(h.momentum >= 0)) throw new RangeError(`SGD: invalid momentum value ${h.momentum}`);
    if (!Number.isFinite(h.dampening)) throw new RangeError(`SGD: invalid dampening ${h.dampening}`);
    if (!(h.weightDecay >= 0)) throw new RangeError(`SGD: invalid weight_decay value ${h.weightDecay}`);
    if (h.nesterov && (h.momentum <= 0 || h.dampening !== 0))
      throw new RangeError(`SGD: Nesterov momentum requires a momentum and zero dampening (got momentum ${h.momentum}, dampening ${h.dampening})`);
  }

  protected update(backend: Backend, param: Tensor, grad: Tensor, state: ParamStateAccess): void {
    const h = this.hyper;
    let buf: Tensor | undefined;
    let first = false;
    if (h.momentum !== 0) {
      buf = state.tensor('momentum_buffer');
      if (!buf) {
        buf = state.create('momentum_buffer');
        first = true;
      }
    }
    const lr = this.deviceLr;
    let capturable: { counter: unknown; lr: unknown; decoupledWd: number } | undefined;
    if (lr) {
      // The count only decides the momentum buffer's first step; the lr is read on the device.
      const counter = state.counter((steps) => [first ? 0 : Math.max(1, steps), 0, 0]);
      runKernel('optimCount', backend, { counter: counter.storage.handle, beta1: 0, beta2: 0 });
      capturable = { counter: counter.storage.handle, lr: lr.storage.handle, decoupledWd: 0 };
    }
    runKernel('sgdStep', backend, {
      param: param.operand(),
      grad: grad.operand(),
      momentumBuffer: buf?.storage.handle,
      hyper: {
        lr: h.lr,
        momentum: h.momentum,
        dampening: h.dampening,
        nesterov: h.nesterov,
        weightDecay: h.weightDecay,
        maximize: h.maximize,
        first,
      },
      capturable,
    });
  }
}
