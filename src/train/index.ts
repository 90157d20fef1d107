// Fine-tuning: the training forward of the model classes (the shared decoder forward with each family's training
// blocks; Qwen3.5's Gated DeltaNet composed from differentiable ops), LoRA adapters (PEFT files), the training loop,
// export.
export {
  trainingView,
  trainingLogits,
  type TrainingView,
  type TrainingLayer,
  type TrainingFamily,
  type TrainingForwardOptions,
  type ProjectionSite,
  type ProjectionDelta,
} from './decoder-training.js';
export { chunkedGatedDeltaRule, recurrentGatedDeltaRule, gatedDeltaNetMixing } from '../models/qwen3_5/gated-delta-rule.js';
export { LoraAdapter, DEFAULT_LORA_TARGETS, defaultLoraTargets, type LoraConfig, type LoraPair } from './lora.js';
export { saveAdapter, loadAdapter, readAdapterConfig, ADAPTER_CONFIG, ADAPTER_WEIGHTS } from './peft.js';
export { FineTune, packSequences, type FineTuneOptions, type StepResult, type Trainable } from './fine-tune.js';
export { hfTensors, saveWeights } from './export.js';
export { SAMPLE_TRAINING_TEXT } from './sample-text.js';
