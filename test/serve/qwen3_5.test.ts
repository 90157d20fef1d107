// `tensorgpu serve` with a small Qwen3.6-shaped model (Gated DeltaNet + gated attention + MoE with a shared expert,
// the release-shaped stand-in tokenizer and chat template) on the CPU, through the official openai client: continuous batching (KV pages for the attention layers, a
// state slot per sequence for the DeltaNet layers), a greedy chat streams the same text it returns whole, and two
// concurrent requests both finish with the text each gets alone.
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/runtime/registry.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { qwen3_5TokenizerFiles } from '../../src/models/qwen3_5/tokenizer-files.js';
import { QWEN3_5_PRESETS, writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import type { RunningServer } from '../../src/serve/server.js';
import { MODEL, serve } from './helpers.js';

describe('serve a Qwen3.6-shaped model', () => {
  let loaded: LoadedModel;
  let server: RunningServer;
  let client: OpenAI;

  beforeAll(async () => {
    setDefaultDevice('cpu');
    // The preset's layout at hidden 32 and 4 layers: the 248320-row lm_head is most of a token on the CPU.
    const preset = QWEN3_5_PRESETS['qwen3.6-moe-tiny'];
    const config = {
      ...preset,
      hiddenSize: 32,
      numHiddenLayers: 4,
      layerTypes: preset.layerTypes.slice(0, 4),
      moe: { ...preset.moe!, numExperts: 8, moeIntermediateSize: 32, sharedExpertIntermediateSize: 32 },
    };
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-serve-qwen3_5-'));
    await writeRandomQwen35Checkpoint(dir, config, { seed: 3, extraFiles: await qwen3_5TokenizerFiles() });
    loaded = await loadModel(dir, { device: 'cpu', maxSequence: 128 });
    ({ server, client } = await serve(loaded));
  });

  afterAll(async () => {
    await server?.close();
  });

  it('a greedy chat streams what it returns whole; concurrent requests each get their solo text', async () => {
    const request = (content: string) => ({ model: MODEL, messages: [{ role: 'user' as const, content }], max_tokens: 4, temperature: 0 });
    const solo = await client.chat.completions.create(request('Hello'));
    const text = solo.choices[0]!.message.content ?? '';
    expect(solo.usage!.completion_tokens).toBeGreaterThan(0);
    let streamed = '';
    for await (const chunk of await client.chat.completions.create({ ...request('Hello'), stream: true })) streamed += chunk.choices[0]?.delta.content ?? '';
    expect(streamed).toBe(text);
    const other = await client.chat.completions.create(request('Why is the sky blue?'));
    const [a, b] = await Promise.all([client.chat.completions.create(request('Hello')), client.chat.completions.create(request('Why is the sky blue?'))]);
    expect(a.choices[0]!.message.content).toBe(text);
    expect(b.choices[0]!.message.content).toBe(other.choices[0]!.message.content);
  });

  it('passes chat_template_kwargs.enable_thinking to the template, and names a kwarg the server sets itself', async () => {
    const request = { model: MODEL, messages: [{ role: 'user' as const, content: 'Hi' }], max_tokens: 1, temperature: 0 };
    const usage = async (extra: object) => (await client.chat.completions.create({ ...request, ...extra } as never as typeof request)).usage!.prompt_tokens;
    // Qwen3.6's template: thinking on opens the turn with <think>\n, off with an empty <think>\n\n</think>\n\n.
    const [off, on, unset] = [
      await usage({ chat_template_kwargs: { enable_thinking: false } }),
      await usage({ chat_template_kwargs: { enable_thinking: true } }),
      await usage({}),
    ];
    expect(off).toBeGreaterThan(on);
    expect(unset).toBe(off);
    const bad = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...request, chat_template_kwargs: { add_generation_prompt: false } }),
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain('chat_template_kwargs.add_generation_prompt');
  });
});
