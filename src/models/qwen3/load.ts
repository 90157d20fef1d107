// Opens a Qwen3 / Qwen3-MoE checkpoint directory (loadModel, typed as Qwen3Model; other families are an error).
import { CheckpointError } from '../../core/errors.js';
import { loadModel, type LoadedModel, type LoadModelOptions } from '../load.js';
import { Qwen3Model } from './model.js';

export type { LoadedModel, LoadModelOptions };

export async function loadQwen3(dir: string, options: LoadModelOptions = {}): Promise<LoadedModel<Qwen3Model>> {
  const loaded = await loadModel(dir, options);
  if (!(loaded.model instanceof Qwen3Model)) {
    const type = loaded.config.modelType;
    loaded.model.dispose();
    throw new CheckpointError(`model_type '${type}' is not Qwen3 (use loadModel for any supported family)`, { file: `${dir}/config.json` });
  }
  return loaded as LoadedModel<Qwen3Model>;
}
