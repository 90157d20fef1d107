// The OpenAI routes through the official `openai` client: chat and text completions, streamed and not, usage
// counts, stop strings, the model list, health and metrics.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type OpenAI from 'openai';
import type { LoadedModel } from '../../src/models/load.js';
import type { RunningServer } from '../../src/serve/server.js';
import { MODEL, loadTinyModel, metric, serve } from './helpers.js';

let loaded: LoadedModel;
let server: RunningServer;
let client: OpenAI;

beforeAll(async () => {
  loaded = await loadTinyModel();
  ({ server, client } = await serve(loaded));
}, 60_000);

afterAll(async () => {
  await server?.close();
  loaded?.model.dispose();
});

const messages = [{ role: 'user' as const, content: 'Write a haiku about GPUs.' }];

describe('serve: OpenAI routes', () => {
  it('answers /health and lists the served model', async () => {
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
  });

  it('streams a greedy chat whose chunks concatenate to the non-streamed text, with usage counts', async () => {
    const request = { model: MODEL, messages, max_tokens: 12, temperature: 0, seed: 3 };
    const whole = await client.chat.completions.create(request);
    const text = whole.choices[0]!.message.content ?? '';
    expect(whole.object).toBe('chat.completion');
    expect(text.length).toBeGreaterThan(0);
    const promptTokens = loaded.tokenizer!.encode(loaded.tokenizer!.applyChatTemplate(messages)).length;
    expect(whole.usage).toEqual({
      prompt_tokens: promptTokens,
      completion_tokens: whole.usage!.completion_tokens,
      total_tokens: promptTokens + whole.usage!.completion_tokens,
    });
    expect(whole.usage!.completion_tokens).toBeGreaterThan(0);
    expect(whole.usage!.completion_tokens).toBeLessThanOrEqual(12);
    if (whole.usage!.completion_tokens === 12) expect(whole.choices[0]!.finish_reason).toBe('length');

    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let streamed = '';
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      streamed += chunk.choices[0]?.delta.content ?? '';
    }
    expect(streamed).toBe(text);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe(whole.choices[0]!.finish_reason);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual(whole.usage);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });

  it('ends the raw event stream with data: [DONE]', async () => {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages, max_tokens: 3, temperature: 0, stream: true }),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const body = await res.text();
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(
      body
        .split('\n\n')
        .filter(Boolean)
        .every((e) => e.startsWith('data: ')),
    ).toBe(true);
  });

  it('completes a text prompt, streamed and not, to the same text', async () => {
    const request = { model: MODEL, prompt: 'The capital of France is', max_tokens: 8, temperature: 0 };
    const whole = await client.completions.create(request);
    expect(whole.object).toBe('text_completion');
    expect(whole.usage!.prompt_tokens).toBe(loaded.tokenizer!.encode(request.prompt).length);
    let streamed = '';
    for await (const chunk of await client.completions.create({ ...request, stream: true })) streamed += chunk.choices[0]?.text ?? '';
    expect(streamed).toBe(whole.choices[0]!.text);
  });

  it('cuts the text before a stop string and reports finish_reason stop', async () => {
    const request = { model: MODEL, prompt: 'Once upon a time', max_tokens: 16, temperature: 0 };
    const text = (await client.completions.create(request)).choices[0]!.text;
    expect(text.length).toBeGreaterThanOrEqual(4);
    const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 2);
    const cut = await client.completions.create({ ...request, stop: [stop] });
    expect(cut.choices[0]!.text).toBe(text.slice(0, text.indexOf(stop)));
    expect(cut.choices[0]!.finish_reason).toBe('stop');
  });

  it('accepts the sampling fields and is reproducible with a seed', async () => {
    const request = {
      model: MODEL,
      messages,
      max_tokens: 6,
      temperature: 0.9,
      top_p: 0.95,
      top_k: 40,
      min_p: 0.01,
      presence_penalty: 0.5,
      frequency_penalty: 0.2,
      repetition_penalty: 1.1,
      seed: 11,
      stop_token_ids: [151645],
    };
    const a = await client.chat.completions.create(request);
    const b = await client.chat.completions.create(request);
    expect(a.choices[0]!.message.content).toBe(b.choices[0]!.message.content);
  });

  it("answers chat logprobs: true with top_logprobs in OpenAI's shape", async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 });
    const content = r.choices[0]!.logprobs!.content!;
    expect(content.length).toBeGreaterThan(0);
    for (const c of content) {
      expect(c.logprob).toBeLessThanOrEqual(0);
      expect(c.top_logprobs).toHaveLength(2);
      expect(c.bytes).toEqual(Array.from(Buffer.from(c.token, 'utf8')));
      expect(c.logprob).toBeCloseTo(c.top_logprobs[0]!.logprob, 9);
    }
    expect(content.map((c) => c.token).join('')).toBe(r.choices[0]!.message.content);
  });

  it('exports Prometheus metrics: requests, tokens, queue, latency, GPU memory', async () => {
    expect(await metric(server, 'tensorgpu_requests_total{route="/v1/chat/completions",status="200"}')).toBeGreaterThan(0);
    expect(await metric(server, 'tensorgpu_prompt_tokens_total')).toBeGreaterThan(0);
    expect(await metric(server, 'tensorgpu_completion_tokens_total')).toBeGreaterThan(0);
    expect(await metric(server, 'tensorgpu_time_to_first_token_seconds_count')).toBeGreaterThan(0);
    expect(await metric(server, 'tensorgpu_inter_token_latency_seconds_count')).toBeGreaterThan(0);
    expect(await metric(server, 'tensorgpu_queue_depth')).toBe(0);
    expect(await metric(server, 'tensorgpu_running_sequences')).toBe(0);
    expect(await metric(server, 'tensorgpu_gpu_memory_bytes{kind="live"}')).toBe(0);
  });
});
