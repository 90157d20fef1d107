// Public API: re-exports only.
export { Tensor, type Scalar, type TensorOrScalar } from './core/tensor.js';
export { DTYPES, parseDType, promoteTypes, type DType } from './core/dtype.js';
export {
  TensorGpuError,
  ShapeError,
  DTypeError,
  DeviceMismatchError,
  DisposedError,
  CaptureError,
  DeviceUnavailableError,
  CheckpointError,
} from './core/errors.js';
export { Generator, manualSeed } from './core/random.js';
export { keep, tidy } from './core/scope.js';
export { withBatchInvariance, batchInvariant } from './core/batch-invariance.js';
export { noGrad, enableGrad, isGradEnabled } from './autograd/grad-mode.js';
export type { Shape } from './core/shape.js';
export type { DeviceName } from './backends/backend.js';
export { initDevice, releaseDevice, getDefaultDevice, setDefaultDevice, type DeviceRequest } from './backends/registry.js';
export { diagnose, isAvailable, type Diagnosis, type DiagnosisCode } from './backends/webgpu/diagnose.js';
export { memoryStats, resetPeakMemory, emptyCache, synchronize, gpuCounters, startProfiling, resetProfile, stopProfiling } from './runtime-stats.js';
export type { KernelTime } from './backends/webgpu/profiler.js';
export type { MemoryStats } from './backends/webgpu/buffer-pool.js';
export * from './ops/index.js';
export * from './audio/index.js';
export { AudioFormatError } from './io/audio-errors.js';
export { decodeWav, encodeWav, readWav, writeWav, toMono, type WavAudio, type WavBitDepth, type EncodeWavOptions } from './io/wav.js';
export { spectrogramPng, writeSpectrogramPng, SPECTROGRAM_COLORMAPS, type SpectrogramColormap, type SpectrogramPngOptions } from './io/spectrogram-image.js';
export { SafetensorsFile, type TensorLoadOptions } from './io/safetensors-reader.js';
export { writeSafetensors, tensorSource, type TensorSource } from './io/safetensors-writer.js';
export { Checkpoint, type Weight, type WeightLoadOptions } from './io/checkpoint.js';
export { writeCheckpoint } from './io/checkpoint-writer.js';
export { parseQwen3Config, type Qwen3Config } from './io/hf-config.js';
export { parseLfm2Config, type Lfm2Config } from './io/lfm2-config.js';
export { loadModel, type LoadedModel, type LoadModelOptions } from './models/load.js';
export { loadQwen3 } from './models/qwen3/load.js';
export type { CausalLM, ModelCache, ForwardOptions, MoeMode } from './models/causal-lm.js';
export { SUPPORTED_MODEL_TYPES } from './models/families.js';
export { Qwen3Model, KvCache } from './models/qwen3/model.js';
export { Lfm2Model, Lfm2Cache } from './models/lfm2/model.js';
export { QWEN3_PRESETS, writeRandomQwen3Checkpoint } from './models/qwen3/random-checkpoint.js';
export { LFM2_PRESETS, writeRandomLfm2Checkpoint } from './models/lfm2/random-checkpoint.js';
export { ensureBuiltinModel } from './models/builtin.js';
export { loadWanVae, type LoadWanVaeOptions, type VaePart } from './models/wan-vae/load.js';
export { WanVae, type CodecProgress, type CodecSteps, type DecodeOptions, type EncodeOptions } from './models/wan-vae/model.js';
export { DEFAULT_TILING, decodeTilePlan, encodeTilePlan, type TilePlan, type TilingOptions } from './models/wan-vae/tiling.js';
export { parseWanVaeConfig, VAE_CLASSES, type WanVaeConfig } from './models/wan-vae/config.js';
export { WAN_VAE_PRESETS, writeRandomWanVae, writeRandomVaePipeline } from './models/wan-vae/random-checkpoint.js';
export { readLatents, writeLatents } from './io/latents-file.js';
export { writeVideoPng } from './io/png-writer.js';
export { expandFramePattern, readVideoPng } from './io/png-frames.js';
export { generate, type GenerateOptions, type GeneratedToken, type GenerationStats } from './generate/generate.js';
export { withGenerationConfig } from './generate/generation-defaults.js';
export { parseGenerationConfig, readGenerationConfig, type GenerationConfig } from './io/generation-config.js';
export { listCachedModels, removeCachedModel, type CachedModel, type CachedRevision, type CacheListing } from './io/hub/cache-list.js';
export { resolveModelPath, parseRepoSpec, hubCacheDir, HubError, type HubOptions, type DownloadProgress, type RepoSpec } from './io/hub/index.js';
export { TextTokenizer, type ChatMessage } from './generate/tokenizer.js';
export * from './optim/index.js';
export * from './train/index.js';
