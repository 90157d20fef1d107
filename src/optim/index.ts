// Optimizers, gradient clipping, learning-rate schedules and optimizer state files.
export { Optimizer, type CommonOptimizerOptions, type HyperValue, type OptimizerStateDict, type ParamState, type ParamStateAccess } from './optimizer.js';
export { SGD, type SgdOptions, type SgdHyper } from './sgd.js';
export { Adam, AdamW, type AdamOptions, type AdamHyper } from './adam.js';
export { clipGradNorm, type ClipGradNormOptions } from './clip.js';
export { constantLr, linearWithWarmup, cosineWithWarmup, LrScheduler, type LrSchedule, type HasLr } from './schedule.js';
export {
  saveOptimizerState,
  loadOptimizerState,
  disposeOptimizerState,
  type LoadedOptimizerState,
  type SaveOptimizerStateOptions,
  type SchedulerState,
} from './state-file.js';
export { flatParameters, flatSpan, type FlatSpan } from './flat-parameters.js';
