// Opens a Qwen3 / Qwen3-MoE checkpoint directory (loadModel, typed as Qwen3Model; other families are refused
// before their weights are read).
import { CheckpointError } from '../../core/errors.js';
import { QWEN3_MODEL_TYPES } from '../../io/hf-config.js';
import { loadModelOf, type LoadedModel, type LoadModelOptions } from '../load.js';
import type { Qwen3Model } from './model.js';

export type { LoadedModel, LoadModelOptions };

export async function loadQwen3(dir: string, options: LoadModelOptions = {}): Promise<LoadedModel<Qwen3Model>> {
  const loaded = await loadModelOf(dir, options, (family, file) => {
    if (family.modelTypes.some((t) => !(QWEN3_MODEL_TYPES as readonly string[]).includes(t))) {
      throw new CheckpointError(`the checkpoint is ${family.name}, not Qwen3 (use loadModel for any supported family)`, { file });
    }
  });
  return loaded as LoadedModel<Qwen3Model>;
}
