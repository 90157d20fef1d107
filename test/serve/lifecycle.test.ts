// A client that disconnects cancels its sequence (the worker moves on); /health is 503 until the model loads;
// close() drains: in-flight requests finish (or are cancelled after the deadline), then the server refuses.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedModel } from '../../src/models/load.js';
import { startServer } from '../../src/serve/server.js';
import { MODEL, loadTinyModel, metric, serve, until } from './helpers.js';

let loaded: LoadedModel;

beforeAll(async () => {
  loaded = await loadTinyModel();
}, 60_000);

afterAll(() => loaded?.model.dispose());

const messages = [{ role: 'user' as const, content: 'Tell me a long story.' }];

describe('serve: cancellation', () => {
  it('stops generating when the client aborts a stream, and serves the next request', async () => {
    const { server, client } = await serve(loaded);
    try {
      const abort = new AbortController();
      const stream = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 300, temperature: 0, stream: true }, { signal: abort.signal });
      let chunks = 0;
      // The client ends the iteration (or throws, depending on timing) once aborted; either way the socket closes.
      await (async () => {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content && ++chunks === 2) abort.abort();
        }
      })().catch(() => undefined);
      expect(chunks).toBe(2);
      await until(async () => (await metric(server, 'tensorgpu_running_sequences')) === 0);
      const next = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 3, temperature: 0 });
      expect(next.choices[0]!.finish_reason).toBeDefined();
      expect(await metric(server, 'tensorgpu_running_sequences')).toBe(0);
      expect(await metric(server, 'tensorgpu_queue_depth')).toBe(0);
      // The aborted sequence stopped early: far fewer than its 300 tokens were generated in all.
      expect(await metric(server, 'tensorgpu_completion_tokens_total')).toBeLessThan(100);
    } finally {
      await server.close();
    }
  }, 60_000);
});

describe('serve: startup and shutdown', () => {
  it('answers /health 503 until the model is loaded, then 200', async () => {
    let resolve!: (m: LoadedModel) => void;
    const server = await startServer({ model: new Promise<LoadedModel>((r) => (resolve = r)), servedModelName: MODEL, port: 0 });
    try {
      const early = await fetch(`${server.url}/health`);
      expect(early.status).toBe(503);
      expect(((await early.json()) as { error: { code: string } }).error.code).toBe('model_loading');
      resolve(loaded);
      await server.ready;
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('close() lets an in-flight request finish, answers 503 meanwhile, then refuses connections', async () => {
    const { server, client } = await serve(loaded);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 6,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const closed = server.close(30_000);
    expect((await fetch(`${server.url}/health`)).status).toBe(503);
    let usage: number | undefined;
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) usage = r.value.usage?.completion_tokens ?? usage;
    expect(usage).toBeGreaterThan(0);
    await closed;
    await expect(fetch(`${server.url}/health`)).rejects.toThrow();
  }, 60_000);

  it('close() cancels what is still running at the deadline', async () => {
    const { server, client } = await serve(loaded);
    const stream = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 300, temperature: 0, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    await server.close(200);
    // The stream ends with an error event (the server shut down), which the client raises, long before the 300
    // tokens it asked for (counted in chunks, not in time, so a busy machine cannot fail it).
    let chunks = 1;
    await expect(
      (async () => {
        for (let r = await iterator.next(); !r.done; r = await iterator.next()) chunks++;
      })(),
    ).rejects.toThrow(/shut down/);
    expect(chunks).toBeLessThan(300);
    expect(await metric(server, 'tensorgpu_running_sequences').catch(() => 0)).toBe(0);
  }, 60_000);
});
