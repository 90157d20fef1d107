// `tensorgpu generate` and `tensorgpu bench` on the CPU with a small checkpoint that carries the real Qwen3
// tokenizer: the streamed text, the statistics line, and bench's fused vs per-expert comparison; and the built-in
// LFM2-MoE by `--model builtin:lfm2-moe-tiny` (LFM2's layout and tokenizer shape, chat template included), and the
// built-in Qwen3.6-shaped model (the release's layout, tokenizer shape and chat template).
import { beforeAll, describe, expect, it } from 'vitest';
import { runBench } from '../../src/cli/bench.js';
import { runGenerate } from '../../src/cli/generate.js';
import { writeTinyChatModel } from '../helpers/qwen3.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';

describe('model commands on the CPU', () => {
  let dir = '';

  beforeAll(async () => {
    dir = await writeTinyChatModel(2);
  });

  it('generate streams text and reports prompt/generated tokens and speeds', async () => {
    let text = '';
    const logs: string[] = [];
    const code = await runGenerate(
      { model: dir, prompt: 'Hello', maxTokens: 3, temperature: 0, topK: 0, topP: 1, device: 'cpu' },
      (t) => (text += t),
      (l) => logs.push(l),
    );
    expect(code).toBe(0);
    expect(text.endsWith('\n')).toBe(true);
    expect(logs.some((l) => l.startsWith(`model ${dir} on cpu`))).toBe(true);
    expect(logs.at(-1)).toMatch(/^\d+ prompt tokens, 3 generated \(max-tokens\); prefill [\d.]+ tok\/s, decode [\d.]+ tok\/s$/);
  });

  it('bench measures the fused MoE block and the per-expert loop, with the active bytes per token', async () => {
    const lines: string[] = [];
    const code = await runBench(
      { model: dir, device: 'cpu', promptTokens: 3, decodeTokens: 2, moe: 'both' },
      (l) => lines.push(l),
      () => {},
    );
    expect(code).toBe(0);
    expect(lines[0]).toContain('qwen3_moe, 2 layers, 4 experts, top 2) on cpu');
    expect(lines[1]).toMatch(/^weights: [\d.]+ [KMG]iB for [\d,]+ parameters, [\d.]+ bytes per parameter/);
    expect(lines[2]).toMatch(/^weight bytes a decode step must read \(active weights once\): /);
    // On the CPU nothing is captured: the fused forward runs eagerly.
    expect(lines.some((l) => l.startsWith('eager ') && l.includes('decode 2 tokens'))).toBe(true);
    expect(lines.some((l) => l.startsWith('captured'))).toBe(false);
    expect(lines.some((l) => l.startsWith('per-expert'))).toBe(true);
    // Dispatches and read-backs are WebGPU figures: the CPU prints none (not "0 dispatches/token").
    expect(lines.at(-1)).toMatch(/^fused \(eager\) vs per-expert: [\d.]+x decode tok\/s$/);
    expect(lines.filter((l) => /dispatch|reads\/token|peak GPU/.test(l))).toEqual([]);
    expect(lines.find((l) => l.startsWith('eager '))).toMatch(/tok\/s, host \d+ µs\/token, [\d.]+ GB\/s of active weights$/);
    const json: string[] = [];
    await runBench(
      { model: dir, device: 'cpu', promptTokens: 2, decodeTokens: 1, moe: 'fused', json: true },
      (l) => json.push(l),
      () => {},
    );
    const parsed = JSON.parse(json.join('\n')) as { results: Record<string, { decodeSteps: number }>; activeWeightBytes: number };
    expect(Object.keys(parsed.results)).toEqual(['eager']);
    expect(parsed.results.eager.decodeSteps).toBe(1);
    expect(parsed.activeWeightBytes).toBeGreaterThan(0);
  });

  it('builtin:lfm2-moe-tiny generates through the chat template and benches fused against per-expert', async () => {
    let text = '';
    const logs: string[] = [];
    const code = await runGenerate(
      { model: 'builtin:lfm2-moe-tiny', prompt: 'Hello', maxTokens: 3, temperature: 0, topK: 0, topP: 1, device: 'cpu' },
      (t) => (text += t),
      (l) => logs.push(l),
    );
    expect(code).toBe(0);
    expect(text.length).toBeGreaterThan(1);
    // Through the chat template (<|startoftext|><|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n), not
    // the 1-2 tokens of the raw word.
    const stats = /^(\d+) prompt tokens, 3 generated \(max-tokens\)/.exec(logs.at(-1) ?? '');
    expect(Number(stats?.[1])).toBeGreaterThanOrEqual(9);
    const lines: string[] = [];
    expect(
      await runBench(
        { model: 'builtin:lfm2-moe-tiny', device: 'cpu', promptTokens: 2, decodeTokens: 1, moe: 'both' },
        (l) => lines.push(l),
        () => {},
      ),
    ).toBe(0);
    expect(lines[0]).toContain('lfm2_moe, 6 layers, 32 experts, top 4) on cpu');
    expect(lines.at(-1)).toMatch(/^fused \(eager\) vs per-expert: [\d.]+x decode tok\/s/);
    await expect(
      runBench(
        { model: 'builtin:lfm2-huge', device: 'cpu', promptTokens: 2, decodeTokens: 1 },
        () => {},
        () => {},
      ),
    ).rejects.toThrow(/unknown preset 'lfm2-huge' \(presets: .*lfm2-moe-tiny/);
  });

  it('builtin:qwen3.6-moe-tiny generates through the chat template; bench reports state bytes', async () => {
    let text = '';
    const logs: string[] = [];
    const code = await runGenerate(
      { model: 'builtin:qwen3.6-moe-tiny', prompt: 'Hello', maxTokens: 2, temperature: 0, topK: 0, topP: 1, device: 'cpu' },
      (t) => (text += t),
      (l) => logs.push(l),
    );
    expect(code).toBe(0);
    expect(text.length).toBeGreaterThan(1);
    // Through Qwen3.6's template (<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n).
    const stats = /^(\d+) prompt tokens, 2 generated \(max-tokens\)/.exec(logs.at(-1) ?? '');
    expect(Number(stats?.[1])).toBeGreaterThanOrEqual(9);
    // bench on the preset's layers with a 512-token vocabulary (the 248320-row lm_head is most of a CPU token).
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-qwen3_5-'));
    await writeRandomQwen35Checkpoint(dir, { ...QWEN3_5_PRESETS['qwen3.6-moe-tiny'], vocabSize: 512, eosTokenIds: [2] }, { seed: 1 });
    const lines: string[] = [];
    expect(
      await runBench(
        { model: dir, device: 'cpu', promptTokens: 2, decodeTokens: 1, moe: 'fused' },
        (l) => lines.push(l),
        () => {},
      ),
    ).toBe(0);
    expect(lines[0]).toContain('qwen3_5_moe, 8 layers, 32 experts, top 4) on cpu');
    // 6 DeltaNet layers of 4 value heads, each a conv window of 3 x 96 and a 32 x 32 state (float32); 2 attention layers of
    // 2 KV heads of 128.
    expect(lines).toContain(
      'cache per sequence: recurrent state 123.0 KiB (constant in the context) + KV 4.0 KiB per position (attention layers only; 16.1 MiB at 4096 positions)',
    );
    // Dispatches by layer kind are a WebGPU figure (test/models/qwen3_5.test.ts); the CPU row has none.
    expect(lines.find((l) => l.startsWith('eager'))).not.toMatch(/dispatch|\/layer/);
  });
});
