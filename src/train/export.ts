// The loaded weights back in their Hugging Face names and shapes (the inverse of the loaders' stacking: q|k|v and
// gate|up split by rows, experts unstacked, conv taps back to [H, 1, L]), for saving a fully fine-tuned model as a
// checkpoint the same loaders (and transformers) read.
import { copyFile, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Tensor } from '../core/tensor.js';
import { isFp8 } from '../core/dtype.js';
import { DTypeError } from '../core/errors.js';
import { writeCheckpoint } from '../io/checkpoint-writer.js';
import { tensorSource } from '../io/safetensors-writer.js';
import { contiguous } from '../ops/shape-ops.js';
import type { ProjectionSite, TrainingView } from './decoder-training.js';

/** [name, tensor] in checkpoint order; the tensors are fresh contiguous copies the caller disposes. */
export function hfTensors(view: TrainingView): [string, Tensor][] {
  const out: [string, Tensor][] = [];
  const add = (name: string, t: Tensor) => {
    if (isFp8(t.dtype)) throw new DTypeError(`cannot export '${name}': ${t.describe()} (FP8 weights are saved by their loader's checkpoint, not re-exported)`);
    out.push([name, contiguous(t)]);
  };
  const rows = (s: ProjectionSite) => add(`${s.name}.weight`, s.weight.data.narrow(0, s.rowOffset, s.outFeatures));
  const lfm2 = view.family === 'lfm2';
  add('model.embed_tokens.weight', view.embedTokens);
  view.layers.forEach((l, i) => {
    const p = `model.layers.${i}`;
    add(`${p}.${lfm2 ? 'operator_norm' : 'input_layernorm'}.weight`, l.mixerNorm);
    const m = l.mixer;
    if (m.kind === 'attention') {
      [m.q, m.k, m.v, m.o].forEach(rows);
      const norm = lfm2 ? 'layernorm' : 'norm';
      add(`${p}.self_attn.q_${norm}.weight`, m.weights.qNorm);
      add(`${p}.self_attn.k_${norm}.weight`, m.weights.kNorm);
    } else {
      const c = m.weights;
      rows(m.inProj);
      if (c.inBias) add(`${p}.conv.in_proj.bias`, c.inBias);
      add(`${p}.conv.conv.weight`, c.taps.reshape(c.taps.shape[0], 1, c.taps.shape[1]));
      if (c.tapsBias) add(`${p}.conv.conv.bias`, c.tapsBias);
      rows(m.outProj);
      if (c.outBias) add(`${p}.conv.out_proj.bias`, c.outBias);
    }
    add(`${p}.${lfm2 ? 'ffn_norm' : 'post_attention_layernorm'}.weight`, l.ffNorm);
    const ff = l.ff;
    if (ff.kind === 'dense') [ff.gate, ff.up, ff.down].forEach(rows);
    else {
      const f = `${p}.${lfm2 ? 'feed_forward' : 'mlp'}`;
      const w = ff.weights;
      add(`${f}.gate.weight`, w.router.data);
      if (w.selectionBias) add(`${f}.expert_bias`, w.selectionBias);
      const [gate, up, down] = lfm2 ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj'];
      const half = w.gateUp.data.shape[1] / 2;
      for (let e = 0; e < w.gateUp.data.shape[0]; e++) {
        const gu = w.gateUp.data.select(0, e);
        add(`${f}.experts.${e}.${gate}.weight`, gu.narrow(0, 0, half));
        add(`${f}.experts.${e}.${up}.weight`, gu.narrow(0, half, half));
        add(`${f}.experts.${e}.${down}.weight`, w.down.data.select(0, e));
      }
    }
  });
  add(`model.${lfm2 ? 'embedding_norm' : 'norm'}.weight`, view.norm);
  if (view.lmHead.data !== view.embedTokens) add('lm_head.weight', view.lmHead.data);
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
      if (f.isFile() && !f.name.endsWith('.safetensors') && f.name !== 'model.safetensors.index.json') await copyFile(join(sourceDir, f.name), join(dir, f.name));
    }
    await writeCheckpoint(dir, tensors.map(([name, t]) => [name, tensorSource(t)] as const));
  } finally {
    for (const [, t] of tensors) t.dispose();
  }
}
