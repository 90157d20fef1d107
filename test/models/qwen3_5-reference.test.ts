// Qwen3.5 / Qwen3.5-MoE against an independent golden reference: test/fixtures/qwen3_5/<case>.safetensors hold the
// prompt and the outputs of a float64 numpy port of transformers' Qwen3_5 / Qwen3_5Moe text models
// (tools/qwen3_5-reference/qwen3_5_reference.py: the prompt through the chunked delta rule, chunk 64; the greedy
// continuation one token at a time through the recurrent rule; the prompt prefilled in pieces), run on the float32
// random checkpoint writeRandomQwen35Checkpoint produces for the same case (tools/qwen3_5-reference/presets.ts) and
// seed, in the release layout. Regenerate with:
//   npx tsx tools/qwen3_5-reference/make-inputs.ts && python3 tools/qwen3_5-reference/qwen3_5_reference.py
// Covered on the CPU and on WebGPU (see DEVICES for the bars): every prompt position's logits, the split prefill, and the greedy
// continuation through the cache (DeltaNet conv and recurrent states, KV rows of the gated attention layers), token
// for token and logit for logit; a shared expert stacked as expert E and one run beside the fused block; dense.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { tensor } from '../../src/ops/creation.js';
import { QWEN3_5_REFERENCE_CASES } from '../../tools/qwen3_5-reference/presets.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'qwen3_5');
/**
 * float32 against float64. Measured max abs errors (printed by each test) are 1e-6 .. 1e-5 on the prompt and up to
 * 8e-5 on the dense case's last greedy step: there a DeltaNet head's output has an rms of 6.5e-5, below sqrt(eps), so
 * the gated norm scales the float32 state's rounding (its output is a difference of O(1) terms) by ~1000. A wrong
 * conv tap, state row, rotary dim or gate moves logits by 1e-2 or more.
 */
const DEVICES = [
  { device: 'cpu' as const, prompt: 2e-5, greedy: 1.5e-4 },
  ...(gpu.available ? [{ device: 'webgpu' as const, prompt: 1e-4, greedy: 1.5e-4 }] : []),
];

function maxAbsDiff(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

const argmax = (row: ArrayLike<number>) => {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
};

describe.each(Object.keys(QWEN3_5_REFERENCE_CASES))(`%s vs the transformers numpy reference ${gpu.skipReason}`, (name) => {
  const c = QWEN3_5_REFERENCE_CASES[name];
  let dir: string;
  let fixture: SafetensorsFile;
  const models = new Map<string, LoadedModel>();
  const read = async (key: string) => {
    const t = await fixture.load(key, { device: 'cpu' });
    const v = await t.toArray();
    t.dispose();
    return v;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), `tensorgpu-qwen3_5-ref-${name}-`));
    await writeRandomQwen35Checkpoint(dir, c.config, { dtype: 'float32', seed: 1 });
    for (const { device } of DEVICES) models.set(device, await loadModel(dir, { device, maxSequence: 32 }));
    fixture = await SafetensorsFile.open(join(FIXTURES, `${name}.safetensors`));
  });

  afterAll(async () => {
    for (const m of models.values()) m.model.dispose();
    await fixture?.[Symbol.asyncDispose]();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the fixture is this case (same prompt)', async () => {
    expect(Array.from(await read('prompt'))).toEqual(c.prompt);
  });

  it.each(DEVICES)('$device: logits of every prompt position, whole and split', async ({ device, prompt: maxAbs }) => {
    const { model } = models.get(device)!;
    const want = await read('logits');
    for (const sizes of [[c.prompt.length], c.split]) {
      const cache = model.newCache();
      const rows: number[] = [];
      let at = 0;
      for (const n of sizes) {
        const logits = await model.forward(tensor(c.prompt.slice(at, at + n), { dtype: 'int32', device }), cache, { lastOnly: false });
        rows.push(...((await logits.toArray()) as Float32Array));
        logits.dispose();
        at += n;
      }
      cache.dispose();
      expect(rows.length).toBe(want.length);
      const err = maxAbsDiff(rows, want);
      const report = `${name} ${device} prompt logits in ${sizes.join(' + ')}: max abs ${err.toExponential(2)}`;
      console.log(report);
      expect(err, report).toBeLessThan(maxAbs);
    }
  });

  it.each(DEVICES)('$device: greedy decode through the cache matches, token for token and logit for logit', async ({ device, greedy: maxAbs }) => {
    const { model } = models.get(device)!;
    const cache = model.newCache();
    const wantTokens = Array.from(await read('greedy'));
    const wantLogits = await read('greedy_logits');
    const vocab = c.config.vocabSize;
    let input = [...c.prompt];
    const tokens: number[] = [];
    let err = 0;
    for (let step = 0; step < c.greedySteps; step++) {
      const logits = await model.forward(tensor(input, { dtype: 'int32', device }), cache);
      const row = (await logits.toArray()) as Float32Array;
      logits.dispose();
      err = Math.max(err, maxAbsDiff(row, wantLogits.subarray(step * vocab, (step + 1) * vocab)));
      tokens.push(argmax(row));
      input = [tokens[step]];
    }
    cache.dispose();
    const report = `${name} ${device} greedy logits: max abs ${err.toExponential(2)}`;
    console.log(report);
    expect(tokens).toEqual(wantTokens);
    expect(err, report).toBeLessThan(maxAbs);
  });
});
