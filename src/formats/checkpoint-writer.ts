// Writes a checkpoint directory in Hugging Face's layout: config.json, then model.safetensors or, past the shard
// size, model-0000i-of-0000n.safetensors shards with model.safetensors.index.json.
// node:fs and node:path are imported when used: browser bundles reach this module (random checkpoints) but never
// call it.
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
  const [{ mkdir, writeFile }, { join }] = await Promise.all([import('node:fs/promises'), import('node:path')]);
  await mkdir(dir, { recursive: true });
  if (options.config) await writeFile(join(dir, 'config.json'), JSON.stringify(options.config, null, 2) + '\n');
  for (const [file, text] of Object.entries(options.extraFiles ?? {})) await writeFile(join(dir, file), text);
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
    await writeSafetensors(join(dir, `${stem}.safetensors`), shards[0], metadata);
    return [`${stem}.safetensors`];
  }
  const pad = (i: number) => String(i).padStart(5, '0');
  const names = shards.map((_, i) => `${stem}-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`);
  const weightMap: Record<string, string> = {};
  for (let i = 0; i < shards.length; i++) {
    for (const [name] of shards[i]) weightMap[name] = names[i];
    await writeSafetensors(join(dir, names[i]), shards[i], metadata);
  }
  await writeFile(join(dir, `${stem}.safetensors.index.json`), JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2) + '\n');
  return names;
}
