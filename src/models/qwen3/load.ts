// Opens a Qwen3 / Qwen3-MoE checkpoint directory (loadModel, typed as Qwen3Model; other families are refused
// before their weights are read).
import { loadModelOf, type LoadedModel, type LoadModelOptions } from '../load.js';
import { requireQwen3 } from './from-checkpoint.js';
import type { Qwen3Model } from './model.js';

export type { LoadedModel, LoadModelOptions };

export async function loadQwen3(dir: string, options: LoadModelOptions = {}): Promise<LoadedModel<Qwen3Model>> {
  return (await loadModelOf(dir, options, requireQwen3)) as LoadedModel<Qwen3Model>;
}
