// LFM2 / LFM2-MoE on the CPU backend against an independent golden reference: test/fixtures/lfm2/<case>.safetensors
// hold the prompt and the outputs of a float64 numpy port of transformers' Lfm2 / Lfm2Moe models
// (tools/lfm2-reference/lfm2_reference.py), run on the float32 random checkpoint writeRandomLfm2Checkpoint produces
// for the same case (tools/lfm2-reference/presets.ts) and seed. Regenerate with:
//   npx tsx tools/lfm2-reference/make-inputs.ts && python3 tools/lfm2-reference/lfm2_reference.py
// Covered: every prompt position's logits (conv and attention layers, dense and MoE feed-forwards, a selection bias
// that changes the choice for some tokens, routed_scaling_factor, tied and untied heads, conv biases, 4 taps), and
// the greedy continuation decoded step by step through the cache (conv state and KV rows), with its logits.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { tensor } from '../../src/ops/creation.js';
import { LFM2_REFERENCE_CASES } from '../../tools/lfm2-reference/presets.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'lfm2');

/**
 * float32 on the CPU against float64: measured max abs errors are ~1e-6 (reported in each assertion's message) on
 * logits up to ~20. 1e-5 (the bar) leaves margin, while a wrong conv tap, state row or router rule moves
 * logits by 1e-2 or more.
 */
const MAX_ABS = 1e-5;

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

describe.each(Object.keys(LFM2_REFERENCE_CASES))('%s vs the transformers numpy reference', (name) => {
  const c = LFM2_REFERENCE_CASES[name];
  let dir: string;
  let loaded: LoadedModel;
  let fixture: SafetensorsFile;
  const read = async (key: string) => {
    const t = await fixture.load(key, { device: 'cpu' });
    const v = await t.toArray();
    t.dispose();
    return v;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), `tensorgpu-lfm2-ref-${name}-`));
    await writeRandomLfm2Checkpoint(dir, c.config, { dtype: 'float32', seed: 1 });
    loaded = await loadModel(dir, { device: 'cpu', maxSequence: 32 });
    fixture = await SafetensorsFile.open(join(FIXTURES, `${name}.safetensors`));
  });

  afterAll(async () => {
    loaded?.model.dispose();
    await fixture?.[Symbol.asyncDispose]();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the fixture is this case (same prompt), and exercises the selection bias where there are MoE layers', async () => {
    expect(Array.from(await read('prompt'))).toEqual(c.prompt);
    const changed = (await read('bias_changed'))[0];
    if (c.config.moe) expect(changed, 'expert choices the bias changes').toBeGreaterThan(0);
  });

  it('logits of every prompt position match', async () => {
    const { model } = loaded;
    const cache = model.newCache();
    const logits = await model.forward(tensor([...c.prompt], { dtype: 'int32', device: 'cpu' }), cache, { lastOnly: false });
    const got = (await logits.toArray()) as Float32Array;
    logits.dispose();
    cache.dispose();
    const want = await read('logits');
    expect(got.length).toBe(want.length);
    const err = maxAbsDiff(got, want);
    const report = `${name} prompt logits: max abs ${err.toExponential(2)}`;
    console.log(report);
    expect(err, report).toBeLessThan(MAX_ABS);
  });

  it('greedy decode through the cache matches, token for token and logit for logit', async () => {
    const { model } = loaded;
    const cache = model.newCache();
    const wantTokens = Array.from(await read('greedy'));
    const wantLogits = await read('greedy_logits');
    const vocab = c.config.vocabSize;
    let input = [...c.prompt];
    const tokens: number[] = [];
    let err = 0;
    for (let step = 0; step < c.greedySteps; step++) {
      const logits = await model.forward(tensor(input, { dtype: 'int32', device: 'cpu' }), cache);
      const row = (await logits.toArray()) as Float32Array;
      logits.dispose();
      err = Math.max(err, maxAbsDiff(row, wantLogits.subarray(step * vocab, (step + 1) * vocab)));
      tokens.push(argmax(row));
      input = [tokens[step]];
    }
    cache.dispose();
    const report = `${name} greedy logits: max abs ${err.toExponential(2)}`;
    console.log(report);
    expect(tokens).toEqual(wantTokens);
    expect(err, report).toBeLessThan(MAX_ABS);
  });
});
