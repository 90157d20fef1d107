// The decoder families tensorgpu runs, by config.json's model_type: how to parse the config, the tensor layout,
// how to build the model from a checkpoint, and the built-in random-weight presets each family folder declares
// (<family>/presets.ts). loadModel, the CLI's checkpoint commands and the built-in models all go through this one
// table. It runs in a browser page too (loadModel of a Checkpoint), so the tokenizer files the presets ship with
// (read from disk) are builtin.ts's business, not the table's.
import type { Checkpoint } from '../formats/checkpoint.js';
import { CheckpointError } from '../core/errors.js';
import { parseQwen3Config, type Qwen3Config } from './qwen3/config.js';
import { parseLfm2Config, type Lfm2Config } from './lfm2/config.js';
import type { CausalLM, CausalLMConfig, MoeMode } from './causal-lm.js';
import type { DType } from '../core/dtype.js';
import type { RandomCheckpointOptions, WeightSpec } from './random-weights.js';
import type { WeightLoadingOptions } from './layers/weights.js';
import { qwen3WeightSpecs } from './qwen3/layout.js';
import { Qwen3Model } from './qwen3/model.js';
import { QWEN3_PRESETS } from './qwen3/presets.js';
import { writeRandomQwen3Checkpoint } from './qwen3/random-checkpoint.js';
import { loadQwen3Weights } from './qwen3/weights.js';
import { lfm2WeightSpecs } from './lfm2/layout.js';
import { Lfm2Model } from './lfm2/model.js';
import { LFM2_PRESETS } from './lfm2/presets.js';
import { writeRandomLfm2Checkpoint } from './lfm2/random-checkpoint.js';
import { loadLfm2Weights } from './lfm2/weights.js';
import { parseQwen35Config, type Qwen35Config } from './qwen3_5/config.js';
import { qwen35CheckpointLayout, qwen35WeightSpecs } from './qwen3_5/layout.js';
import { Qwen35Model } from './qwen3_5/model.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from './qwen3_5/presets.js';
import { loadQwen35Weights } from './qwen3_5/weights.js';

export interface ModelBuildOptions {
  maxSequence: number;
  kvDtype?: DType;
  moeMode?: MoeMode;
}

export interface ModelFamily<C extends CausalLMConfig = CausalLMConfig> {
  readonly name: string;
  readonly modelTypes: readonly string[];
  parseConfig(json: unknown, file: string): C;
  weightSpecs(config: C): WeightSpec[];
  /** The tensors this checkpoint holds, where the family has more than one layout (default: weightSpecs). */
  checkpointSpecs?(ck: Checkpoint, config: C): WeightSpec[];
  /** Streams the weights and builds the model. */
  load(ck: Checkpoint, config: C, weights: WeightLoadingOptions, model: ModelBuildOptions): Promise<CausalLM>;
  /** Longest context the config allows. */
  maxPositions(config: C): number;
  /** One line: type, layers, width, experts. */
  describe(config: C): string;
  readonly presets: Readonly<Record<string, C>>;
  /** Tensors a checkpoint of this family may hold that the text model does not load, by name prefix. */
  readonly unusedTensors?: readonly { readonly prefix: string; readonly what: string }[];
  writeRandom(dir: string, config: C, options: RandomCheckpointOptions): Promise<string[]>;
}

const moeText = (m?: { numExperts: number; numExpertsPerTok: number }) => (m ? `, ${m.numExperts} experts (top ${m.numExpertsPerTok})` : '');

const QWEN3: ModelFamily<Qwen3Config> = {
  name: 'Qwen3',
  modelTypes: ['qwen3', 'qwen3_moe'],
  parseConfig: parseQwen3Config,
  weightSpecs: qwen3WeightSpecs,
  load: async (ck, config, w, m) => new Qwen3Model(config, await loadQwen3Weights(ck, config, w), m),
  maxPositions: (c) => c.maxPositionEmbeddings,
  describe: (c) => `${c.modelType}, ${c.numHiddenLayers} layers, hidden ${c.hiddenSize}, vocab ${c.vocabSize}${moeText(c.moe)}`,
  presets: QWEN3_PRESETS,
  writeRandom: writeRandomQwen3Checkpoint,
};

const LFM2: ModelFamily<Lfm2Config> = {
  name: 'LFM2',
  modelTypes: ['lfm2', 'lfm2_moe'],
  parseConfig: parseLfm2Config,
  weightSpecs: lfm2WeightSpecs,
  load: async (ck, config, w, m) => new Lfm2Model(config, await loadLfm2Weights(ck, config, w), m),
  maxPositions: (c) => c.maxPositionEmbeddings,
  describe: (c) => {
    const attention = c.layerTypes.filter((t) => t === 'full_attention').length;
    return `${c.modelType}, ${c.numHiddenLayers} layers (${c.numHiddenLayers - attention} conv, ${attention} attention), hidden ${c.hiddenSize}, vocab ${c.vocabSize}${moeText(c.moe)}`;
  },
  presets: LFM2_PRESETS,
  writeRandom: writeRandomLfm2Checkpoint,
};

const QWEN3_5: ModelFamily<Qwen35Config> = {
  name: 'Qwen3.5',
  modelTypes: ['qwen3_5', 'qwen3_5_moe'],
  parseConfig: parseQwen35Config,
  weightSpecs: qwen35WeightSpecs,
  checkpointSpecs: qwen35CheckpointLayout,
  load: async (ck, config, w, m) => new Qwen35Model(config, await loadQwen35Weights(ck, config, w), m),
  maxPositions: (c) => c.maxPositionEmbeddings,
  describe: (c) => {
    const attention = c.layerTypes.filter((t) => t === 'full_attention').length;
    const shared = c.moe ? ' + 1 shared' : '';
    return `${c.modelType}, ${c.numHiddenLayers} layers (${c.numHiddenLayers - attention} Gated DeltaNet, ${attention} gated attention), hidden ${c.hiddenSize}, vocab ${c.vocabSize}${moeText(c.moe)}${shared}`;
  },
  presets: QWEN3_5_PRESETS,
  unusedTensors: [
    { prefix: 'model.visual.', what: 'the vision tower' },
    { prefix: 'mtp.', what: 'the multi-token-prediction layer' },
  ],
  writeRandom: writeRandomQwen35Checkpoint,
};

export const MODEL_FAMILIES: readonly ModelFamily[] = [QWEN3 as unknown as ModelFamily, LFM2 as unknown as ModelFamily, QWEN3_5 as unknown as ModelFamily];

export const SUPPORTED_MODEL_TYPES: readonly string[] = MODEL_FAMILIES.flatMap((f) => f.modelTypes);

/** The family of a config.json, or a CheckpointError naming the model_type and the supported ones. */
const modelTypeOf = (json: unknown): unknown => (json as { model_type?: unknown } | null | undefined)?.model_type;

export function familyOf(json: unknown, file: string): ModelFamily {
  const type = modelTypeOf(json);
  const family = MODEL_FAMILIES.find((f) => typeof type === 'string' && f.modelTypes.includes(type));
  if (typeof type !== 'string')
    throw new CheckpointError(`model_type must be a string (one of ${SUPPORTED_MODEL_TYPES.join(', ')}), got ${JSON.stringify(type) ?? 'nothing'}`, { file });
  if (!family) throw new CheckpointError(`model_type '${type}' is not supported (supported: ${SUPPORTED_MODEL_TYPES.join(', ')})`, { file });
  return family;
}

/** Whether config.json names a supported model_type. */
export function isSupportedModelType(json: unknown): boolean {
  const type = modelTypeOf(json);
  return typeof type === 'string' && SUPPORTED_MODEL_TYPES.includes(type);
}

/** Every built-in preset by name, with its family. */
export function presetNamed(name: string): { family: ModelFamily; config: CausalLMConfig } {
  for (const family of MODEL_FAMILIES) {
    const config = family.presets[name];
    if (config) return { family, config };
  }
  throw new RangeError(`unknown preset '${name}' (presets: ${presetNames().join(', ')})`);
}

export function presetNames(): string[] {
  return MODEL_FAMILIES.flatMap((f) => Object.keys(f.presets));
}
