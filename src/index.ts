// Public API (Node): re-exports only.
// Everything that also runs in a browser (src/browser.ts), then what needs Node (files, the Hub cache, the CLI's
// helpers). A name exported below replaces the browser entry's (TextTokenizer adds fromDirectory).
// The one import that is not a re-export: it installs the Node host (files, Dawn, the adapter probe) that the
// browser-safe modules call for their Node-only paths (Checkpoint.open, SafetensorsFile.open, diagnose, ...).
import './runtime/node-host.js';
export * from './browser.js';
export { AudioFormatError } from './media/audio-errors.js';
export { decodeWav, encodeWav, readWav, writeWav, toMono, type WavAudio, type WavBitDepth, type EncodeWavOptions } from './media/wav.js';
export { spectrogramPng, writeSpectrogramPng, SPECTROGRAM_COLORMAPS, type SpectrogramColormap, type SpectrogramPngOptions } from './media/spectrogram-image.js';
export { writeSafetensors } from './formats/safetensors-writer.js';
export { fileSource } from './formats/byte-source.js';
export type { WeightLoadOptions } from './formats/checkpoint.js';
export { writeCheckpoint } from './formats/checkpoint-writer.js';
export { loadModel, type LoadedModel, type LoadModelOptions } from './models/load.js';
export { spawnNodeGrammarWorker } from './serve/grammar-worker/node-worker.js';
export { loadQwen3 } from './models/qwen3/load.js';
export { writeRandomQwen3Checkpoint } from './models/qwen3/random-checkpoint.js';
export { LFM2_PRESETS, writeRandomLfm2Checkpoint } from './models/lfm2/random-checkpoint.js';
export { writeRandomQwen35Checkpoint } from './models/qwen3_5/presets.js';
export { ensureBuiltinModel } from './models/builtin.js';
export { loadWanVae, type LoadWanVaeOptions, type VaePart } from './models/wan-vae/load.js';
export { WanVae, type CodecProgress, type CodecSteps, type DecodeOptions, type EncodeOptions } from './models/wan-vae/model.js';
export { DEFAULT_TILING, decodeTilePlan, encodeTilePlan, type TilePlan, type TilingOptions } from './models/wan-vae/tiling.js';
export { parseWanVaeConfig, VAE_CLASSES, type WanVaeConfig } from './models/wan-vae/config.js';
export { WAN_VAE_PRESETS, writeRandomWanVae, writeRandomVaePipeline } from './models/wan-vae/random-checkpoint.js';
export { readLatents, writeLatents } from './formats/latents-file.js';
export { writeVideoPng } from './media/png-writer.js';
export { expandFramePattern, readVideoPng } from './media/png-frames.js';
export { withGenerationConfig } from './generate/generation-defaults.js';
export { parseGenerationConfig, readGenerationConfig, type GenerationConfig } from './formats/generation-config.js';
export { listCachedModels, removeCachedModel, type CachedModel, type CachedRevision, type CacheListing } from './models/cached-models.js';
export { resolveModelPath, parseRepoSpec, hubCacheDir, HubError, type HubOptions, type DownloadProgress, type RepoSpec } from './hub/index.js';
export { TextTokenizer, type ChatMessage } from './tokenizer/tokenizer.js';
export * from './optim/index.js';
export * from './train/index.js';
export { loadWhisper, ensureBuiltinWhisper, DEFAULT_WHISPER_MODEL, type LoadedWhisper, type WhisperLoadOptions } from './models/whisper/load.js';
export { writeRandomWhisperCheckpoint } from './models/whisper/random-checkpoint.js';
export { whisperTokenizerFiles } from './models/whisper/tokenizer-files.js';
export { loadAudioFile, loadAudioBytes, decodeWithFfmpeg, hasFfmpeg, type LoadedAudio } from './transcribe/audio-input.js';
