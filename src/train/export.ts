// The loaded weights back in their Hugging Face names and shapes (the inverse of the loaders' stacking: q|k|v and
// gate|up split by rows, experts unstacked, conv taps back to [H, 1, L]; for Qwen3.5 the release layout: q_proj's
// queries and gates interleaved back per head, the zero-centred norms' 1 + w back to w, experts fused 3-D and the
// shared expert and its gate taken back out of the stacks), for saving a fully fine-tuned model as a checkpoint the
// same loaders (and transformers) read.
import { copyFile, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Tensor } from '../core/tensor.js';
import { isFp8 } from '../core/dtype.js';
import { DTypeError } from '../core/errors.js';
import { writeCheckpoint } from '../formats/checkpoint-writer.js';
import { tensorSource } from '../formats/safetensors-writer.js';
import { contiguous } from '../ops/shape-ops.js';
import type { TrainingView } from './decoder-training.js';

/** [name, tensor] in checkpoint order (the family names them); the tensors are fresh contiguous copies the caller disposes. */
export function hfTensors(view: TrainingView): [string, Tensor][] {
  const out: [string, Tensor][] = [];
  view.exportWeights((name, t) => {
    if (isFp8(t.dtype)) throw new DTypeError(`cannot export '${name}': ${t.describe()} (FP8 weights are saved by their loader's checkpoint, not re-exported)`);
    out.push([name, contiguous(t)]);
  });
  return out;
}

/**
 * Writes the view's weights as model.safetensors into dir, with the source checkpoint's other files (config.json,
 * tokenizer, generation config) copied beside them, so dir loads as the model it came from.
 */
export async function saveWeights(dir: string, view: TrainingView, sourceDir: string): Promise<void> {
  const tensors = hfTensors(view);
  try {
    await mkdir(dir, { recursive: true });
    for (const f of await readdir(sourceDir, { withFileTypes: true })) {
      if (f.isFile() && !f.name.endsWith('.safetensors') && f.name !== 'model.safetensors.index.json')
        await copyFile(join(sourceDir, f.name), join(dir, f.name));
    }
    await writeCheckpoint(
      dir,
      tensors.map(([name, t]) => [name, tensorSource(t)] as const),
    );
  } finally {
    for (const [, t] of tensors) t.dispose();
  }
}
