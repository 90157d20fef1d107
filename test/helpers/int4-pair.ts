// A 4-bit checkpoint against its dequantized float32 twin (the int4 end-to-end tests of Qwen3 and Qwen3.5 / 3.6).
import { expect } from 'vitest';
import { tensor } from '../../src/index.js';
import type { CausalLM } from '../../src/models/causal-lm.js';
import { maxRelativeToScale } from './compare.js';

/** The logits of every position of each step, fed one after another through one cache (a prefill, then decodes). */
export async function stepLogits(model: CausalLM, steps: readonly (readonly number[])[]): Promise<Float32Array[]> {
  const cache = model.newCache();
  const out: Float32Array[] = [];
  for (const step of steps) {
    const input = tensor([...step], { dtype: 'int32', device: model.device });
    const l = await model.forward(input, cache, { lastOnly: false });
    out.push((await l.toArray()) as Float32Array);
    input.dispose();
    l.dispose();
  }
  cache.dispose();
  return out;
}

/**
 * The 4-bit checkpoint in qdir gives the logits of the float32 one in fdir on the CPU (1e-5 of their scale), and on
 * WebGPU, when there, the CPU's (1e-4). `load` opens a checkpoint on a device (and may check what it opened).
 */
export async function expectInt4MatchesFloat(
  load: (dir: string, device: 'cpu' | 'webgpu') => Promise<{ model: CausalLM }>,
  qdir: string,
  fdir: string,
  steps: readonly (readonly number[])[],
  gpu: boolean,
): Promise<void> {
  const q = await load(qdir, 'cpu');
  const f = await load(fdir, 'cpu');
  const want = await stepLogits(f.model, steps);
  const got = await stepLogits(q.model, steps);
  for (let i = 0; i < steps.length; i++) expect(maxRelativeToScale(got[i], want[i]), `cpu step ${i}`).toBeLessThan(1e-5);
  q.model.dispose();
  f.model.dispose();
  if (!gpu) return;
  const g = await load(qdir, 'webgpu');
  const gl = await stepLogits(g.model, steps);
  for (let i = 0; i < steps.length; i++) expect(maxRelativeToScale(gl[i], got[i]), `webgpu step ${i}`).toBeLessThan(1e-4);
  g.model.dispose();
}
