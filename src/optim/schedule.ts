// Learning-rate schedules as multipliers of the base lr by step (transformers' get_*_schedule_with_warmup lambdas),
// applied through LrScheduler (torch's LambdaLR): lr = baseLr * schedule(step), step 0 at construction.

/** Step -> multiplier of the base learning rate. */
export type LrSchedule = (step: number) => number;

/** transformers' get_constant_schedule: 1 at every step. */
export function constantLr(): LrSchedule {
  return () => 1;
}

/** step / warmup during warmup (transformers' float(max(1, warmup)) guards warmup 0). */
function warmupFactor(step: number, warmup: number): number {
  return step / Math.max(1, warmup);
}

function checkSteps(name: string, warmup: number, total: number): void {
  if (!Number.isInteger(warmup) || warmup < 0) throw new RangeError(`${name}: warmup must be an integer >= 0, got ${warmup}`);
  if (!Number.isInteger(total) || total < 0) throw new RangeError(`${name}: total must be an integer >= 0, got ${total}`);
}

/**
 * transformers' get_linear_schedule_with_warmup: linear from 0 to 1 over `warmup` steps, then linear down to 0 at
 * `total` steps, 0 after.
 */
export function linearWithWarmup(warmup: number, total: number): LrSchedule {
  checkSteps('linearWithWarmup', warmup, total);
  return (step) => (step < warmup ? warmupFactor(step, warmup) : Math.max(0, (total - step) / Math.max(1, total - warmup)));
}

/**
 * transformers' get_cosine_schedule_with_warmup (half a cycle) with get_cosine_with_min_lr_schedule_with_warmup's
 * min_lr_rate: linear warmup, then 0.5 (1 + cos(pi progress)) scaled into [minRatio, 1], progress running from 0
 * at `warmup` to 1 at `total` (and on past it, as transformers' does).
 */
export function cosineWithWarmup(warmup: number, total: number, minRatio = 0): LrSchedule {
  checkSteps('cosineWithWarmup', warmup, total);
  if (!(minRatio >= 0 && minRatio <= 1)) throw new RangeError(`cosineWithWarmup: minRatio must be in [0, 1], got ${minRatio}`);
  return (step) => {
    if (step < warmup) return warmupFactor(step, warmup);
    const progress = (step - warmup) / Math.max(1, total - warmup);
    const factor = 0.5 * (1 + Math.cos(Math.PI * 0.5 * 2 * progress));
    return Math.max(0, factor * (1 - minRatio) + minRatio);
  };
}

/** What LrScheduler sets: anything with a writable lr (every Optimizer). */
export interface HasLr {
  lr: number;
}

/**
 * torch.optim.lr_scheduler.LambdaLR over one optimizer: remembers the optimizer's lr as the base, sets
 * lr = base * schedule(0) now and base * schedule(n) after the n-th step() (call it after optimizer.step()).
 */
export class LrScheduler {
  readonly baseLr: number;
  private last = 0;

  constructor(
    readonly optimizer: HasLr,
    readonly schedule: LrSchedule,
  ) {
    this.baseLr = optimizer.lr;
    this.apply();
  }

  /** Scheduler steps taken (torch's last_epoch). */
  get lastStep(): number {
    return this.last;
  }

  /** The lr set by the last step (torch's get_last_lr()[0]). */
  get lastLr(): number {
    return this.optimizer.lr;
  }

  step(): void {
    this.last++;
    this.apply();
  }

  /** The step count, to save beside the optimizer's state. */
  stateDict(): { lastStep: number; baseLr: number } {
    return { lastStep: this.last, baseLr: this.baseLr };
  }

  /** Restores the step count (and so the lr) of a saved scheduler; the base lr must match. */
  loadStateDict(sd: { lastStep: number; baseLr: number }): void {
    if (!Number.isInteger(sd.lastStep) || sd.lastStep < 0) throw new RangeError(`LrScheduler.loadStateDict: lastStep ${sd.lastStep}`);
    if (sd.baseLr !== this.baseLr) throw new RangeError(`LrScheduler.loadStateDict: saved base lr ${sd.baseLr}, this scheduler's ${this.baseLr}`);
    this.last = sd.lastStep;
    this.apply();
  }

  private apply(): void {
    this.optimizer.lr = this.baseLr * this.schedule(this.last);
  }
}
