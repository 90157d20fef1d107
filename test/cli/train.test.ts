// `tensorgpu train` end to end on the CPU with a small checkpoint carrying the real Qwen3 tokenizer: LoRA training
// on a JSONL file stopped early as Ctrl-C would stop it (adapter, optimizer state, loss.png and losses.json
// written), `generate --adapter` merging the result, `--full` writing a checkpoint that loads again, and bad data
// files as errors naming the line.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { runGenerate } from '../../src/cli/generate.js';
import { runTrain, type TrainCliOptions } from '../../src/cli/train.js';
import { loadModel } from '../../src/models/load.js';
import { writeTinyChatModel } from '../helpers/qwen3.js';

describe('tensorgpu train on the CPU', () => {
  let dir = '';
  let work = '';
  const base: TrainCliOptions = { out: '', steps: 4, lr: 5e-3, seqLen: 12, loraRank: 4, seed: 1, device: 'cpu' };

  beforeAll(async () => {
    dir = await writeTinyChatModel(3);
    work = mkdtempSync(join(tmpdir(), 'tensorgpu-train-cli-'));
    writeFileSync(
      join(work, 'data.jsonl'),
      [
        '{"text": "The sky is blue because air scatters blue light."}',
        '{"prompt": "2 + 2 = ", "completion": "4"}',
        '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]}',
      ].join('\n'),
    );
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });

  it('LoRA on JSONL, stopped after 3 of 4 steps: saves the PEFT adapter, optimizer state and the loss plot', async () => {
    const out = join(work, 'lora');
    const logs: string[] = [];
    const code = await runTrain({ ...base, model: dir, data: join(work, 'data.jsonl'), out, stopAfter: 3 }, (l) => logs.push(l));
    expect(code).toBe(130);
    for (const f of ['adapter_model.safetensors', 'adapter_config.json', 'optimizer.safetensors', 'loss.png', 'losses.json'])
      expect(existsSync(join(out, f)), f).toBe(true);
    expect(JSON.parse(readFileSync(join(out, 'losses.json'), 'utf8')).losses).toHaveLength(3);
    expect(JSON.parse(readFileSync(join(out, 'adapter_config.json'), 'utf8'))).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8 });
    const png = PNG.sync.read(readFileSync(join(out, 'loss.png')));
    expect(png.width).toBeGreaterThan(100);
    expect(logs[0]).toMatch(/^training LoRA r=4 on \d+ projections/);
    expect(logs.at(-1)).toMatch(/^stopped after 3 steps: loss [\d.]+ -> [\d.]+/);

    let text = '';
    const glogs: string[] = [];
    const g = await runGenerate(
      { model: dir, prompt: 'Hello', maxTokens: 2, temperature: 0, topK: 0, topP: 1, device: 'cpu', adapter: out },
      (t) => (text += t),
      (l) => glogs.push(l),
    );
    expect(g).toBe(0);
    expect(glogs.some((l) => l.startsWith(`merged the LoRA adapter ${out} (r=4`))).toBe(true);
  });

  it('--full on a short text lowers the loss and writes a checkpoint that loads', async () => {
    const out = join(work, 'full');
    // One packed window, so every step sees the same sequence and the loss falls step by step.
    writeFileSync(join(work, 'short.txt'), 'one two three four five');
    expect(await runTrain({ ...base, model: dir, data: join(work, 'short.txt'), out, full: true, steps: 4, lr: 1e-2 }, () => {})).toBe(0);
    const losses = JSON.parse(readFileSync(join(out, 'losses.json'), 'utf8')).losses as number[];
    expect(losses.at(-1)!).toBeLessThan(losses[0]);
    expect(existsSync(join(out, 'tokenizer.json'))).toBe(true);
    const reloaded = await loadModel(out, { device: 'cpu', maxSequence: 8 });
    expect(reloaded.config.numHiddenLayers).toBe(2);
    expect(reloaded.tokenizer).toBeDefined();
    reloaded.model.dispose();
  }, 600_000); // a hang guard: full AdamW over the 151936-row embedding is slow on a busy CPU

  it('a bad JSONL line is an error naming the file and line', async () => {
    writeFileSync(join(work, 'bad.jsonl'), '{"text": "fine"}\n{"nope": 1}\n');
    await expect(runTrain({ ...base, model: dir, data: join(work, 'bad.jsonl'), out: join(work, 'bad') }, () => {})).rejects.toThrow(
      /bad\.jsonl:2: a record needs "text"/,
    );
  });
});
