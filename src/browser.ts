// The browser entry (package.json's `browser` condition): everything that runs without Node, from the same modules
// as the Node entry. What needs a file system, child processes or the CLI (checkpoint directories, the Hub cache,
// the adapter probe's subprocess, PNG/WAV files on disk) is Node-only and not exported here. Nothing reachable from
// this module imports a Node built-in or Dawn, not even with import(): the few exports with a Node-only path
// (Checkpoint.open, SafetensorsFile.open, the probe in diagnose) reach it through runtime/host.ts, which the Node
// entry fills; here they throw NodeOnlyError.
export { Tensor, type Scalar, type TensorOrScalar } from './core/tensor.js';
export { DTYPES, parseDType, promoteTypes, resultType, canCast, type DType, type PromotionOperand } from './core/dtype.js';
export {
  TensorGpuError,
  ShapeError,
  IndexError,
  ZeroDivisionError,
  InPlaceError,
  DTypeError,
  DeviceMismatchError,
  DisposedError,
  CaptureError,
  DeviceUnavailableError,
  CheckpointError,
  NodeOnlyError,
} from './core/errors.js';
export { Generator, manualSeed } from './core/random.js';
export { keep, tidy } from './core/scope.js';
export { withBatchInvariance, batchInvariant } from './core/batch-invariance.js';
export { noGrad, enableGrad, isGradEnabled } from './autograd/grad-mode.js';
export type { Shape } from './core/shape.js';
export type { DeviceName } from './runtime/backend.js';
export { initDevice, releaseDevice, getDefaultDevice, setDefaultDevice, type DeviceRequest, type InitDeviceOptions } from './runtime/registry.js';
export { diagnose, isAvailable, type Diagnosis, type DiagnosisCode } from './runtime/webgpu/diagnose.js';
export { memoryStats, resetPeakMemory, emptyCache, synchronize, gpuCounters, startProfiling, resetProfile, stopProfiling } from './runtime/stats.js';
export type { KernelTime } from './runtime/webgpu/profiler.js';
export type { MemoryStats } from './runtime/webgpu/buffer-pool.js';
export * from './ops/index.js';
export * from './compile/index.js';
export * from './audio/index.js';
export { Optimizer } from './optim/optimizer.js';
export { SGD } from './optim/sgd.js';
export { Adam, AdamW } from './optim/adam.js';
export { clipGradNorm } from './optim/clip.js';
export { constantLr, linearWithWarmup, cosineWithWarmup, LrScheduler } from './optim/schedule.js';
export { parseQwen3Config, type Qwen3Config } from './models/qwen3/config.js';
export { qwen3WeightSpecs } from './models/qwen3/layout.js';
export { Qwen3Model, KvCache } from './models/qwen3/model.js';
export { generate, type GenerateOptions, type GeneratedToken, type GenerationStats } from './generate/generate.js';
export {
  compileResponseFormat,
  TokenConstraint,
  setGrammarEngine,
  grammarEngine,
  allowAllMask,
  GrammarError,
  type ResponseFormat,
  type JsonSchemaFormat,
  type GrammarOptions,
  type CompiledFormat,
  type GrammarEngine,
  inProcessGrammars,
  type GrammarSource,
  type SequenceGrammar,
} from './generate/grammar.js';
export {
  GrammarWorker,
  GrammarTimeoutError,
  webGrammarWorker,
  type GrammarWorkerOptions,
  type GrammarWorkerHandle,
  type SpawnGrammarWorker,
} from './generate/grammar-worker/client.js';
export { runGrammarWorker, serveGrammarRequests } from './generate/grammar-worker/engine-side.js';
export { TextTokenizer, type ChatMessage, type TokenizerVocabulary } from './tokenizer/text-tokenizer.js';
export { SafetensorsFile, type TensorLoadOptions } from './formats/safetensors-reader.js';
export { encodeSafetensors, tensorSource, type TensorSource } from './formats/safetensors-writer.js';
export { memorySource, blobSource, urlSource, type ByteSource, type UrlSourceOptions } from './formats/byte-source.js';
export { Checkpoint, type Weight } from './formats/checkpoint.js';
export type { PickedFile } from './formats/checkpoint-folders.js';
export {
  clearWeightCache,
  weightCacheUsage,
  fetchText,
  type CachedUrlOptions,
  type CachedFileEvent,
  type WeightCacheOptions,
  type WeightCacheStoreKind,
  type WeightCacheUsage,
  type WeightCacheEntry,
} from './formats/weight-cache.js';
export { QWEN3_PRESETS, randomQwen3Checkpoint } from './models/qwen3/random-checkpoint.js';
export { qwen3FromCheckpoint, type Qwen3FromCheckpointOptions } from './models/qwen3/from-checkpoint.js';
export { loadModel, modelFromCheckpoint, type LoadedModel, type ModelFromCheckpointOptions } from './models/from-checkpoint.js';
export type { CausalLM, ModelCache, ForwardOptions, MoeMode } from './models/causal-lm.js';
export { SUPPORTED_MODEL_TYPES } from './models/families.js';
export { parseLfm2Config, type Lfm2Config } from './models/lfm2/config.js';
export { Lfm2Model, Lfm2Cache } from './models/lfm2/model.js';
export { parseQwen35Config, qwen35ToHfConfig, type Qwen35Config } from './models/qwen3_5/config.js';
export { Qwen35Model, Qwen35Cache } from './models/qwen3_5/model.js';
export { gatedDeltaNetStateBytes } from './ops/gated-delta-net.js';
export { QWEN3_5_PRESETS } from './models/qwen3_5/presets.js';
export { qwen35WeightSpecs } from './models/qwen3_5/layout.js';
export { qwen3_5TokenizerFilesFrom } from './models/qwen3_5/tokenizer.js';
export { randomCheckpointInMemory } from './models/random-weights.js';
export { parseWhisperConfig, whisperToHfConfig, type WhisperConfig } from './models/whisper/config.js';
export { whisperWeightSpecs } from './models/whisper/layout.js';
export { WhisperModel, WhisperCache } from './models/whisper/model.js';
export { WhisperSession } from './models/whisper/session.js';
export { WhisperTokenizer, WHISPER_LANGUAGES, languageCode, type WhisperTask } from './models/whisper/tokenizer.js';
export { WHISPER_PRESETS } from './models/whisper/presets.js';
export { whisperFromCheckpoint, type WhisperFromCheckpointOptions } from './models/whisper/from-checkpoint.js';
export { whisperTokenizerFilesFrom } from './models/whisper/standin-tokenizer.js';
export { transcribe, type TranscribeOptions, type Transcript, type TranscriptSegment } from './transcribe/transcribe.js';
export { compressionRatio, decodeWindow, detectLanguage, type WindowDecodingOptions, type WindowResult } from './transcribe/decoding.js';
export { formatTimestamp, toSrt, toText, toVtt } from './transcribe/segments.js';
