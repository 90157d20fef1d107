// Writes a checkpoint directory in Hugging Face's layout: config.json, then model.safetensors or, past the shard
// size, model-0000i-of-0000n.safetensors shards with model.safetensors.index.json.
// Node only, through the Node host: browser bundles reach this module (random checkpoints) but never call it.
import { nodeHost } from '../runtime/host.js';
import { sourceBytes, writeSafetensors, type TensorSource } from './safetensors-writer.js';

export interface CheckpointWriteOptions {
  /** Written as config.json when given. */
  config?: Record<string, unknown>;
  /** Start a new shard when the next tensor would take a shard past this many bytes (default: one file). */
  shardBytes?: number;
  /** Extra JSON files (generation_config.json, tokenizer.json, ...), by file name. */
  extraFiles?: Record<string, string>;
  /** Weight file stem: 'model' (transformers, the default) or 'diffusion_pytorch_model' (diffusers). */
  stem?: 'model' | 'diffusion_pytorch_model';
}

/** Writes `tensors` in order, splitting them into shards; returns the weight file names. */
export async function writeCheckpoint(
  dir: string,
  tensors: readonly (readonly [string, TensorSource])[],
  options: CheckpointWriteOptions = {},
): Promise<string[]> {
  const host = nodeHost('writeCheckpoint');
  const inDir = (name: string) => host.joinPath(dir, name);
  await host.makeDirectory(dir);
  if (options.config) await host.writeText(inDir('config.json'), JSON.stringify(options.config, null, 2) + '\n');
  for (const [file, text] of Object.entries(options.extraFiles ?? {})) await host.writeText(inDir(file), text);
  const limit = options.shardBytes ?? Infinity;
  const shards: (readonly [string, TensorSource])[][] = [[]];
  let size = 0;
  let total = 0;
  for (const t of tensors) {
    const bytes = sourceBytes(t[1]);
    total += bytes;
    if (size > 0 && size + bytes > limit) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1].push(t);
    size += bytes;
  }
  const metadata = { format: 'pt' };
  const stem = options.stem ?? 'model';
  if (shards.length === 1) {
    await writeSafetensors(inDir(`${stem}.safetensors`), shards[0], metadata);
    return [`${stem}.safetensors`];
  }
  const pad = (i: number) => String(i).padStart(5, '0');
  const names = shards.map((_, i) => `${stem}-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`);
  const weightMap: Record<string, string> = {};
  for (let i = 0; i < shards.length; i++) {
    for (const [name] of shards[i]) weightMap[name] = names[i];
    await writeSafetensors(inDir(names[i]), shards[i], metadata);
  }
  await host.writeText(inDir(`${stem}.safetensors.index.json`), JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2) + '\n');
  return names;
}
