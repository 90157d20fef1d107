// generation_config.json: parsed with typed field errors, filling the sampling options a caller left unset (flags
// win), do_sample false meaning greedy, its eos ids merged into the stop ids; through loadModel/generate() and the CLI.
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/runtime/registry.js';
import { runGenerate } from '../../src/cli/generate.js';
import { CheckpointError } from '../../src/core/errors.js';
import { generate } from '../../src/generate/generate.js';
import { defaultStopIds, withGenerationConfig } from '../../src/generate/generation-defaults.js';
import { parseGenerationConfig, readGenerationConfig, type GenerationConfig } from '../../src/formats/generation-config.js';
import { loadModel } from '../../src/models/load.js';
import { writeTinyChatModel } from '../helpers/qwen3.js';

const FILE = '/m/generation_config.json';
const CLI = { maxNewTokens: 32, temperature: 0.7, topK: 20, topP: 0.8 };

describe('parseGenerationConfig', () => {
  it("reads Qwen3's file; absent and null fields stay unset", () => {
    const qwen = {
      bos_token_id: 151643,
      do_sample: true,
      eos_token_id: [151645, 151643],
      pad_token_id: 151643,
      temperature: 0.6,
      top_k: 20,
      top_p: 0.95,
      transformers_version: '4.51.0',
    };
    expect(parseGenerationConfig(qwen, FILE)).toEqual({
      doSample: true,
      temperature: 0.6,
      topK: 20,
      topP: 0.95,
      minP: undefined,
      repetitionPenalty: undefined,
      maxNewTokens: undefined,
      eosTokenIds: [151645, 151643],
      file: FILE,
    });
    const lfm2 = parseGenerationConfig({ _from_model_config: true, eos_token_id: 7, min_p: null, max_new_tokens: 64, repetition_penalty: 1.05 }, FILE);
    expect([lfm2.doSample, lfm2.minP, lfm2.eosTokenIds, lfm2.maxNewTokens, lfm2.repetitionPenalty]).toEqual([undefined, undefined, [7], 64, 1.05]);
  });

  it.each([
    [{ temperature: -1 }, 'temperature must be a number >= 0, got -1'],
    [{ top_p: 0 }, 'top_p must be a number in (0, 1], got 0'],
    [{ min_p: 2 }, 'min_p must be a number in [0, 1], got 2'],
    [{ top_k: 1.5 }, 'top_k must be an integer >= 0, got 1.5'],
    [{ do_sample: 'yes' }, 'do_sample must be true or false, got "yes"'],
    [{ repetition_penalty: 0 }, 'repetition_penalty must be a number > 0, got 0'],
    [{ max_new_tokens: 0 }, 'max_new_tokens must be an integer >= 1, got 0'],
    [{ eos_token_id: [2, -1] }, 'eos_token_id must be an integer or a list of integers >= 0, got [2,-1]'],
    [[1, 2], 'generation config must be a JSON object, got [1,2]'],
  ])('a bad field is a CheckpointError naming the field and the file: %j', (json, message) => {
    expect(() => parseGenerationConfig(json, FILE)).toThrow(CheckpointError);
    expect(() => parseGenerationConfig(json, FILE)).toThrow(`${FILE}: ${message}`);
  });
});

describe('withGenerationConfig', () => {
  const qwen: GenerationConfig = { doSample: true, temperature: 0.6, topK: 20, topP: 0.95, eosTokenIds: [1], file: FILE };
  const greedy: GenerationConfig = { doSample: false, temperature: 0.9, topK: 5, maxNewTokens: 7, eosTokenIds: [], file: FILE };

  it('without a file the fallback (CLI defaults) applies as before; in the API nothing is filled', () => {
    expect(withGenerationConfig({}, undefined, CLI)).toEqual({ ...CLI, minP: undefined, repetitionPenalty: undefined });
    expect(withGenerationConfig({ topK: 3 }, undefined)).toEqual({
      topK: 3,
      maxNewTokens: undefined,
      temperature: undefined,
      topP: undefined,
      minP: undefined,
      repetitionPenalty: undefined,
    });
  });

  it("the file's fields fill what the options leave unset; given options win", () => {
    expect(withGenerationConfig({}, qwen, CLI)).toMatchObject({ maxNewTokens: 32, temperature: 0.6, topK: 20, topP: 0.95 });
    expect(withGenerationConfig({ temperature: 1.2, topP: 0.5, maxNewTokens: 3 }, qwen, CLI)).toMatchObject({
      maxNewTokens: 3,
      temperature: 1.2,
      topK: 20,
      topP: 0.5,
    });
    expect(withGenerationConfig({}, { ...qwen, minP: 0.15, repetitionPenalty: 1.05 }).minP).toBe(0.15);
    expect(withGenerationConfig({ repetitionPenalty: 1 }, { ...qwen, repetitionPenalty: 1.05 }).repetitionPenalty).toBe(1);
  });

  it('do_sample false is greedy unless the options ask for sampling; max_new_tokens only when unset', () => {
    expect(withGenerationConfig({}, greedy, CLI)).toMatchObject({ temperature: 0, maxNewTokens: 7 });
    expect(withGenerationConfig({ maxNewTokens: 2 }, greedy, CLI).maxNewTokens).toBe(2);
    expect(withGenerationConfig({ temperature: 0.3 }, greedy, CLI).temperature).toBe(0.3);
    // A top-p alone asks for sampling: the file's temperature (else the fallback's) is used.
    expect(withGenerationConfig({ topP: 0.9 }, greedy, CLI).temperature).toBe(0.9);
    expect(withGenerationConfig({ topP: 0.9 }, { ...greedy, temperature: undefined }, CLI).temperature).toBe(0.7);
  });

  it("eos ids: config.json's, the file's and the tokenizer's, once each", () => {
    expect(defaultStopIds([5], { ...qwen, eosTokenIds: [9, 5] }, [5, 11])).toEqual([5, 9, 11]);
    expect(defaultStopIds([5], undefined, [11])).toEqual([5, 11]);
  });
});

describe('generation_config.json through loadModel, generate() and the CLI', () => {
  let dir = '';
  const file = () => join(dir, 'generation_config.json');
  beforeAll(async () => {
    setDefaultDevice('cpu');
    dir = await writeTinyChatModel(3);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  let loaded: Awaited<ReturnType<typeof loadModel>> | undefined;
  afterAll(() => loaded?.model.dispose());

  /** Generates with the folder's generation_config.json as it is now (the weights are loaded once). */
  async function ids(options: Parameters<typeof generate>[3]): Promise<{ ids: number[]; stop: string }> {
    loaded ??= await loadModel(dir, { device: 'cpu' });
    const out: number[] = [];
    const stream = generate(loaded.model, loaded.tokenizer!, 'Hello', { generationConfig: await readGenerationConfig(dir), ...options });
    let r = await stream.next();
    while (!r.done) {
      out.push(r.value.id);
      r = await stream.next();
    }
    return { ids: out, stop: r.value.stopReason };
  }

  it('loadModel exposes it; generate() applies max_new_tokens, do_sample false and the extra eos ids', async () => {
    await rm(file(), { force: true });
    expect(await readGenerationConfig(dir)).toBeUndefined();
    const reference = await ids({ temperature: 0, maxNewTokens: 6, stopTokenIds: [] });
    expect(reference.ids).toHaveLength(6);

    await writeFile(file(), JSON.stringify({ do_sample: false, max_new_tokens: 6, temperature: 50 }));
    const withFile = await loadModel(dir, { device: 'cpu' });
    withFile.model.dispose();
    expect(withFile.generationConfig).toEqual(parseGenerationConfig({ do_sample: false, max_new_tokens: 6, temperature: 50 }, file()));
    // Greedy whatever the seed, and 6 tokens without being told.
    for (const seed of [1, 2]) expect((await ids({ seed, stopTokenIds: [] })).ids).toEqual(reference.ids);
    // Explicit options win: a temperature samples (at 50 the draw is near uniform, so it leaves the greedy path).
    const sampled = await Promise.all([1, 2, 3].map((seed) => ids({ seed, temperature: 50, stopTokenIds: [] })));
    expect(sampled.some((s) => s.ids.join() !== reference.ids.join())).toBe(true);
    expect((await ids({ maxNewTokens: 2, stopTokenIds: [] })).ids).toHaveLength(2);

    // eos_token_id from the file joins the default stop ids: generation stops at the first greedy token after the
    // first that has not come before.
    const at = reference.ids.findIndex((id, i) => i > 0 && !reference.ids.slice(0, i).includes(id));
    expect(at).toBeGreaterThan(0);
    await writeFile(file(), JSON.stringify({ do_sample: false, max_new_tokens: 6, eos_token_id: [reference.ids[at]] }));
    // (The eos token itself is not yielded.)
    expect(await ids({})).toEqual({ ids: reference.ids.slice(0, at), stop: 'eos' });
  });

  it('the CLI: file defaults apply, flags win, a bad field is an error naming the field and the file', async () => {
    await writeFile(file(), JSON.stringify({ do_sample: false, max_new_tokens: 2 }));
    const run = async (flags: { maxTokens?: number; temperature?: number }) => {
      const logs: string[] = [];
      const code = await runGenerate(
        { model: dir, prompt: 'Hello', device: 'cpu', ...flags },
        () => {},
        (l) => logs.push(l),
      );
      return { code, logs };
    };
    const defaults = await run({});
    expect(defaults.code).toBe(0);
    expect(defaults.logs).toContain(`sampling greedy, at most 2 tokens (flags, then ${file()}, then tensorgpu's defaults)`);
    expect(defaults.logs.at(-1)).toMatch(/^\d+ prompt tokens, 2 generated \(max-tokens\)/);
    const flags = await run({ maxTokens: 3, temperature: 0.5 });
    expect(flags.logs).toContain(`sampling temperature 0.5, top-k 20, top-p 0.8, at most 3 tokens (flags, then ${file()}, then tensorgpu's defaults)`);
    expect(flags.logs.at(-1)).toMatch(/^\d+ prompt tokens, 3 generated \(max-tokens\)/);

    await writeFile(file(), JSON.stringify({ top_p: 1.5 }));
    await expect(run({})).rejects.toThrow(`${file()}: top_p must be a number in (0, 1], got 1.5`);
    await writeFile(file(), '{ nope');
    await expect(run({})).rejects.toThrow(CheckpointError);
  });
});
