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
import { tidy } from '../core/scope.js';
import { TEXT_PREFIX } from '../models/qwen3_5/layout.js';
import type { TrainingView } from './decoder-training.js';
import { joinSiteParts, sitePlacements, type ProjectionSite } from './projection.js';

/** [name, tensor] in checkpoint order; the tensors are fresh contiguous copies the caller disposes. */
export function hfTensors(view: TrainingView): [string, Tensor][] {
  const out: [string, Tensor][] = [];
  const add = (name: string, t: Tensor) => {
    if (isFp8(t.dtype)) throw new DTypeError(`cannot export '${name}': ${t.describe()} (FP8 weights are saved by their loader's checkpoint, not re-exported)`);
    out.push([name, contiguous(t)]);
  };
  const rows = (s: ProjectionSite) => add(`${s.name}.weight`, siteRows(s));
  if (view.family === 'qwen3_5') {
    qwen35Tensors(view, add, rows);
    return out;
  }
  const lfm2 = view.family === 'lfm2';
  add('model.embed_tokens.weight', view.embedTokens);
  view.layers.forEach((l, i) => {
    const p = `model.layers.${i}`;
    add(`${p}.${lfm2 ? 'operator_norm' : 'input_layernorm'}.weight`, l.mixerNorm);
    const m = l.mixer;
    if (m.kind === 'deltaNet' || m.kind === 'gatedAttention') throw new TypeError(`hfTensors: a ${m.kind} layer in a ${view.family} view`);
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

/** A site's rows of its (stacked) weight, in the checkpoint's order; an expert site's of its expert. */
function siteRows(s: ProjectionSite): Tensor {
  const pieces = sitePlacements(s).map((p) => (s.expert === undefined ? p.weight.data : p.weight.data.select(0, s.expert)).narrow(0, p.rowOffset, p.rows));
  return joinSiteParts(s, pieces);
}

/** Qwen3.5 / Qwen3.5-MoE in the release layout (model.language_model., fused 3-D experts). */
function qwen35Tensors(view: TrainingView, add: (name: string, t: Tensor) => void, rows: (s: ProjectionSite) => void): void {
  // The zero-centred norms are kept as 1 + w.
  const centred = (name: string, t: Tensor) => {
    const w = tidy(() => t.sub(1));
    add(name, w);
    w.dispose(); // add kept its own view
  };
  add(`${TEXT_PREFIX}embed_tokens.weight`, view.embedTokens);
  view.layers.forEach((l, i) => {
    const p = `${TEXT_PREFIX}layers.${i}`;
    centred(`${p}.input_layernorm.weight`, l.mixerNorm);
    const m = l.mixer;
    if (m.kind === 'deltaNet') {
      const w = m.weights;
      [m.qkv, m.z, m.b, m.a].forEach(rows);
      add(`${p}.linear_attn.conv1d.weight`, w.conv.reshape(w.conv.shape[0], 1, w.conv.shape[1]));
      add(`${p}.linear_attn.dt_bias`, w.dtBias);
      add(`${p}.linear_attn.A_log`, w.aLog);
      add(`${p}.linear_attn.norm.weight`, w.norm);
      rows(m.out);
    } else if (m.kind === 'gatedAttention') {
      [m.q, m.k, m.v, m.o].forEach(rows);
      centred(`${p}.self_attn.q_norm.weight`, m.weights.qNorm);
      centred(`${p}.self_attn.k_norm.weight`, m.weights.kNorm);
    } else throw new TypeError(`hfTensors: a ${m.kind} layer in a qwen3_5 view`);
    centred(`${p}.post_attention_layernorm.weight`, l.ffNorm);
    const ff = l.ff;
    if (ff.kind === 'dense') [ff.gate, ff.up, ff.down].forEach(rows);
    else {
      const f = `${p}.mlp`;
      const w = ff.weights;
      const e = ff.experts.length;
      add(`${f}.gate.weight`, w.router.data.narrow(0, 0, e));
      add(`${f}.experts.gate_up_proj`, w.gateUp.data.narrow(0, 0, e));
      add(`${f}.experts.down_proj`, w.down.data.narrow(0, 0, e));
      const shared = ff.shared;
      if (shared) {
        [shared.gate, shared.up, shared.down].forEach(rows);
        add(`${f}.shared_expert_gate.weight`, shared.expert === undefined ? w.shared!.gate.data : w.router.data.narrow(0, shared.expert, 1));
      }
    }
  });
  centred(`${TEXT_PREFIX}norm.weight`, view.norm);
  if (view.lmHead.data !== view.embedTokens) add('lm_head.weight', view.lmHead.data);
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
