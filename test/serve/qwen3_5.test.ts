// `tensorgpu serve` with the built-in Qwen3.6-shaped model (Gated DeltaNet + gated attention + MoE with a shared
// expert) on the CPU, through the official openai client: continuous batching (KV pages for the attention layers, a
// state slot per sequence for the DeltaNet layers), a greedy chat streams the same text it returns whole, and two
// concurrent requests both finish with the text each gets alone.
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/backends/registry.js';
import { ensureBuiltinModel } from '../../src/models/builtin.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import type { RunningServer } from '../../src/serve/server.js';
import { MODEL, serve } from './helpers.js';

describe('serve a Qwen3.6-shaped model', () => {
  let loaded: LoadedModel;
  let server: RunningServer;
  let client: OpenAI;

  beforeAll(async () => {
    setDefaultDevice('cpu');
    loaded = await loadModel(await ensureBuiltinModel({ preset: 'qwen3.6-moe-tiny' }), { device: 'cpu', maxSequence: 128 });
    ({ server, client } = await serve(loaded));
  });

  afterAll(async () => {
    await server?.close();
  });

  it('a greedy chat streams what it returns whole; concurrent requests each get their solo text', async () => {
    const request = (content: string) => ({ model: MODEL, messages: [{ role: 'user' as const, content }], max_tokens: 6, temperature: 0 });
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
});
