// qwen3FromCheckpoint: loadModel of an open Checkpoint (a folder, a URL, picked files) typed as Qwen3Model, other
// families refused before their weights are read. Deprecated: loadModel takes every family.
import { CheckpointError } from '../../core/errors.js';
import { QWEN3_MODEL_TYPES } from './config.js';
import type { Checkpoint } from '../../formats/checkpoint.js';
import type { ModelFamily } from '../families.js';
import { loadModel, type ModelFromCheckpointOptions } from '../from-checkpoint.js';
import type { Qwen3Model } from './model.js';

export type Qwen3FromCheckpointOptions = Omit<ModelFromCheckpointOptions, 'accept'>;

/** Throws unless the family is Qwen3 (an `accept` check for loadModel). */
export function requireQwen3(family: ModelFamily, file: string): void {
  if (family.modelTypes.some((t) => !(QWEN3_MODEL_TYPES as readonly string[]).includes(t))) {
    throw new CheckpointError(`the checkpoint is ${family.name}, not Qwen3 (loadModel takes any supported family)`, { file });
  }
}

/**
 * The Qwen3 / Qwen3-MoE model an open Checkpoint holds.
 * @deprecated Use `loadModel(ck, options)`, whose `model` this is: any family.
 */
export async function qwen3FromCheckpoint(ck: Checkpoint, options: Qwen3FromCheckpointOptions = {}): Promise<Qwen3Model> {
  return (await loadModel(ck, { ...options, accept: requireQwen3 })).model as Qwen3Model;
}
