// A Qwen3 / Qwen3-MoE model from an open Checkpoint (a folder, a URL, picked files): modelFromCheckpoint typed as
// Qwen3Model, with other families refused before their weights are read.
import { CheckpointError } from '../../core/errors.js';
import { QWEN3_MODEL_TYPES } from './config.js';
import type { Checkpoint } from '../../formats/checkpoint.js';
import type { ModelFamily } from '../families.js';
import { modelFromCheckpoint, type ModelFromCheckpointOptions } from '../from-checkpoint.js';
import type { Qwen3Model } from './model.js';

export type Qwen3FromCheckpointOptions = Omit<ModelFromCheckpointOptions, 'accept'>;

/** Throws unless the family is Qwen3 (an `accept` check for modelFromCheckpoint / loadModelOf). */
export function requireQwen3(family: ModelFamily, file: string): void {
  if (family.modelTypes.some((t) => !(QWEN3_MODEL_TYPES as readonly string[]).includes(t))) {
    throw new CheckpointError(`the checkpoint is ${family.name}, not Qwen3 (loadModel and modelFromCheckpoint take any supported family)`, { file });
  }
}

export async function qwen3FromCheckpoint(ck: Checkpoint, options: Qwen3FromCheckpointOptions = {}): Promise<Qwen3Model> {
  return (await modelFromCheckpoint(ck, { ...options, accept: requireQwen3 })) as Qwen3Model;
}
