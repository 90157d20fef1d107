// Public API: re-exports only.
export { Tensor, type Scalar, type TensorOrScalar } from './core/tensor.js';
export { DTYPES, parseDType, promoteTypes, type DType } from './core/dtype.js';
export {
  TensorGpuError,
  ShapeError,
  DTypeError,
  DeviceMismatchError,
  DisposedError,
  DeviceUnavailableError,
  CheckpointError,
} from './core/errors.js';
export { Generator, manualSeed } from './core/random.js';
export type { Shape } from './core/shape.js';
export type { DeviceName } from './backends/backend.js';
export { initDevice, releaseDevice, getDefaultDevice, setDefaultDevice, type DeviceRequest } from './backends/registry.js';
export { diagnose, isAvailable, type Diagnosis, type DiagnosisCode } from './backends/webgpu/diagnose.js';
export { memoryStats, resetPeakMemory, emptyCache, synchronize, gpuCounters } from './runtime-stats.js';
export type { MemoryStats } from './backends/webgpu/buffer-pool.js';
export * from './ops/index.js';
