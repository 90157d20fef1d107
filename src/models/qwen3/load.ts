// loadQwen3: loadModel typed as Qwen3Model, other families refused before their weights are read. Deprecated:
// loadModel takes every family.
import { loadModel, type LoadedModel, type LoadModelOptions } from '../load.js';
import { requireQwen3 } from './from-checkpoint.js';
import type { Qwen3Model } from './model.js';

export type { LoadedModel, LoadModelOptions };

/**
 * A Qwen3 / Qwen3-MoE checkpoint directory (or repo id, or `builtin:<preset>`), typed as Qwen3Model.
 * @deprecated Use `loadModel(source, options)`: the same model, any family.
 */
export async function loadQwen3(dir: string, options: LoadModelOptions = {}): Promise<LoadedModel<Qwen3Model>> {
  const accept = options.accept;
  return (await loadModel(dir, {
    ...options,
    accept: (family, file) => {
      requireQwen3(family, file);
      accept?.(family, file);
    },
  })) as LoadedModel<Qwen3Model>;
}
