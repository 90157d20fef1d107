// Every refusal in OpenAI's error shape: bad JSON and fields (400 naming the field), unsupported fields, unknown
// model (404), context_length_exceeded, a full queue (429 + Retry-After), a body too large (413), a missing API key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import type { LoadedModel } from '../../src/models/load.js';
import type { RunningServer } from '../../src/serve/server.js';
import { MODEL, loadTinyModel, metric, serve, until } from './helpers.js';

let loaded: LoadedModel;
let server: RunningServer;
let client: OpenAI;

beforeAll(async () => {
  loaded = await loadTinyModel();
  ({ server, client } = await serve(loaded, { maxBodyBytes: 16 * 1024 }));
}, 60_000);

afterAll(async () => {
  await server?.close();
  loaded?.model.dispose();
});

const messages = [{ role: 'user' as const, content: 'Hi' }];

async function post(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return {
    status: res.status,
    headers: res.headers,
    json: (await res.json()) as { error: { message: string; type: string; param: string | null; code: string | null } },
  };
}

async function refusal(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpenAI.APIError);
  return err as InstanceType<typeof OpenAI.APIError>;
}

describe('serve: errors', () => {
  it('refuses a body that is not JSON with 400 invalid_json', async () => {
    const r = await post(`${server.url}/v1/chat/completions`, '{"model": ');
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    expect(typeof r.json.error.message).toBe('string');
  });

  it('names the bad field with 400', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ temperature: 'hot' }, 'temperature'],
      [{ top_p: 0 }, 'top_p'],
      [{ max_tokens: 0 }, 'max_tokens'],
      [{ messages: [] }, 'messages'],
      [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
      [{ stop: 3 }, 'stop'],
      [{ stop_token_ids: ['a'] }, 'stop_token_ids'],
      [{ seed: 1.5 }, 'seed'],
      [{ model: 5 }, 'model'],
      [{ n: 0 }, 'n'],
      [{ n: 1.5 }, 'n'],
      [{ logprobs: 'yes' }, 'logprobs'],
      [{ top_logprobs: 2 }, 'top_logprobs'],
      [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
    ];
    for (const [patch, param] of cases) {
      const r = await post(`${server.url}/v1/chat/completions`, JSON.stringify({ model: MODEL, messages, max_tokens: 2, ...patch }));
      expect(r.status, JSON.stringify(patch)).toBe(400);
      expect(r.json.error.param, JSON.stringify(patch)).toBe(param);
      expect(r.json.error.type).toBe('invalid_request_error');
    }
    const logprobs = await post(`${server.url}/v1/completions`, JSON.stringify({ model: MODEL, prompt: 'x', logprobs: 6 }));
    expect(logprobs.status).toBe(400);
    expect(logprobs.json.error).toMatchObject({ param: 'logprobs', code: 'invalid_value' });
    expect(logprobs.json.error.message).toMatch(/an integer in \[0, 5\]/);
  });

  it('answers 404 for an unknown model', async () => {
    const err = await refusal(client.chat.completions.create({ model: 'gpt-4o', messages, max_tokens: 2 }));
    expect(err.status).toBe(404);
    expect(err.code).toBe('model_not_found');
    expect(err.param).toBe('model');
  });

  it('refuses prompt + max_tokens over the context with context_length_exceeded', async () => {
    const err = await refusal(client.chat.completions.create({ model: MODEL, messages, max_tokens: 600 }));
    expect(err.status).toBe(400);
    expect(err.code).toBe('context_length_exceeded');
    expect(err.message).toMatch(/maximum context length is 512/);
    const long = await refusal(client.completions.create({ model: MODEL, prompt: 'word '.repeat(600), max_tokens: 1 }));
    expect(long.code).toBe('context_length_exceeded');
  });

  it('answers 413 for a body over the limit', async () => {
    const r = await post(`${server.url}/v1/completions`, JSON.stringify({ model: MODEL, prompt: 'x'.repeat(20_000), max_tokens: 1 }));
    expect(r.status).toBe(413);
    expect(r.json.error.code).toBe('request_too_large');
  });

  it('answers 404 in the error shape for an unknown route', async () => {
    const r = await post(`${server.url}/v1/embeddings`, '{}');
    expect(r.status).toBe(404);
    expect(r.json.error.type).toBe('not_found_error');
  });
});

describe('serve: --api-key', () => {
  it('requires Authorization: Bearer KEY on /v1 (401 otherwise), not on /health', async () => {
    const { server: keyed, client: good } = await serve(loaded, { apiKey: 'sekret' });
    try {
      const bad = new OpenAI({ baseURL: `${keyed.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
      const err = await refusal(bad.models.list());
      expect(err.status).toBe(401);
      expect(err.type).toBe('authentication_error');
      expect((await fetch(`${keyed.url}/v1/models`)).status).toBe(401);
      expect((await good.models.list()).data[0]!.id).toBe(MODEL);
      expect((await fetch(`${keyed.url}/health`)).status).toBe(200);
    } finally {
      await keyed.close();
    }
  });
});

describe('serve: --max-queue', () => {
  it('answers 429 with Retry-After once the queue is full', async () => {
    // Two sequences share decode steps, one waits; the next request is refused.
    const { server: small, client: c } = await serve(loaded, { maxQueue: 1, maxBatch: 2 });
    const aborts = [new AbortController(), new AbortController(), new AbortController()];
    try {
      const body = JSON.stringify({ model: MODEL, messages, max_tokens: 200, temperature: 0, stream: true });
      const opened = aborts.map((a) =>
        fetch(`${small.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: a.signal }).catch(
          () => undefined,
        ),
      );
      await until(async () => (await metric(small, 'tensorgpu_running_sequences')) === 2 && (await metric(small, 'tensorgpu_queue_depth')) === 1);
      const err = await refusal(c.chat.completions.create({ model: MODEL, messages, max_tokens: 2 }));
      expect(err.status).toBe(429);
      expect(err.code).toBe('queue_full');
      expect(Number(err.headers?.get('retry-after'))).toBeGreaterThan(0);
      for (const a of aborts) a.abort();
      await Promise.all(opened);
      await until(async () => (await metric(small, 'tensorgpu_running_sequences')) === 0 && (await metric(small, 'tensorgpu_queue_depth')) === 0);
      expect(await metric(small, 'tensorgpu_completion_tokens_total')).toBeLessThan(400);
    } finally {
      for (const a of aborts) a.abort();
      await small.close();
    }
  }, 60_000);
});
