// Fine-tuning: the training forward of the model classes (the Gated DeltaNet's composed from differentiable ops),
// LoRA adapters (PEFT files), the training loop, export.
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
export { chunkedGatedDeltaRule, recurrentGatedDeltaRule, gatedDeltaNetMixing } from './gated-delta-rule.js';
export { LoraAdapter, DEFAULT_LORA_TARGETS, defaultLoraTargets, type LoraConfig, type LoraPair } from './lora.js';
export { saveAdapter, loadAdapter, readAdapterConfig, ADAPTER_CONFIG, ADAPTER_WEIGHTS } from './peft.js';
export { FineTune, packSequences, type FineTuneOptions, type StepResult, type Trainable } from './fine-tune.js';
export { hfTensors, saveWeights } from './export.js';
export { SAMPLE_TRAINING_TEXT } from './sample-text.js';
