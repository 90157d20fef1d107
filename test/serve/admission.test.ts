// Admission under concurrent load (issue 48): sequences submitted together all join the BatchScheduler's first step
// and several prompts prefill in one step under its prompt-token budget, with the tokens each gives alone; and a
// streamed request gets its response headers (for chat, the role chunk too) once it is queued, before any token.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerationStats } from '../../src/generate/generate.js';
import { setDefaultDevice } from '../../src/index.js';
import type { PagedCausalLM } from '../../src/models/causal-lm.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { BatchScheduler, type BatchSchedulerOptions } from '../../src/serve/batch-scheduler.js';
import { QueueFullError } from '../../src/serve/errors.js';
import type { Scheduler, Sequence, SequenceRequest } from '../../src/serve/scheduler.js';
import type { RunningServer } from '../../src/serve/server.js';
import { qwen3TokenizerFiles, StreamingDecoder, type TextTokenizer } from '../../src/tokenizer/tokenizer.js';
import { TINY_CHAT_MOE } from '../helpers/qwen3.js';
import { loadTinyModel, MODEL, serve } from './helpers.js';

setDefaultDevice('cpu');

let loaded: LoadedModel;
const servers: RunningServer[] = [];

// The tiny chat model with a 512-token vocabulary (as in batching.test.ts): steps stay cheap on the CPU.
beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-admission-'));
  await writeRandomQwen3Checkpoint(
    dir,
    { ...TINY_CHAT_MOE, vocabSize: 512, bosTokenId: 1, eosTokenIds: [2] },
    { seed: 11, extraFiles: await qwen3TokenizerFiles() },
  );
  loaded = await loadModel(dir, { device: 'cpu', maxSequence: 256 });
}, 60_000);

afterAll(async () => {
  for (const s of servers) await s.close();
  loaded.model.dispose();
});

/** Prompts of 3, 9, 1, 12, 5 and 7 tokens. */
const PROMPTS = [3, 9, 1, 12, 5, 7].map((n, i) => Array.from({ length: n }, (_, j) => (41 * i + 13 * j + 3) % 512));

/** What each step did: the prefill chunks it ran (their tokens), and the load when it ended. */
interface StepRecord {
  prefills: number[];
  admitted: number;
  running: number;
  waiting: number;
}

async function run(options: Partial<BatchSchedulerOptions>, together: boolean): Promise<{ tokens: number[][]; steps: StepRecord[] }> {
  const model = loaded.model as PagedCausalLM;
  const pool = model.newKvPool({ pageSize: 4, pages: 64 });
  const steps: StepRecord[] = [];
  let current: StepRecord = { prefills: [], admitted: 0, running: 0, waiting: 0 };
  const sched: BatchScheduler = new BatchScheduler(model, loaded.tokenizer!, pool, {
    maxQueue: 16,
    maxSequence: 256,
    ...options,
    observer: {
      onPrefixLookup: () => current.admitted++,
      onPrefill: (tokens) => current.prefills.push(tokens),
      onStep: () => {
        steps.push({ ...current, running: sched.running, waiting: sched.waiting });
        current = { prefills: [], admitted: 0, running: 0, waiting: 0 };
      },
    },
  });
  const request = (promptIds: number[]) => ({ promptIds, options: { maxNewTokens: 4, temperature: 0, stopTokenIds: [-1] } });
  const tokensOf = async (seq: Sequence) => {
    const ids: number[] = [];
    for await (const t of seq.tokens) ids.push(t.id);
    return ids;
  };
  const tokens: number[][] = [];
  try {
    if (together) tokens.push(...(await Promise.all(PROMPTS.map((p) => tokensOf(sched.submit(request(p)))))));
    else for (const p of PROMPTS) tokens.push(await tokensOf(sched.submit(request(p))));
    expect(sched.pool.freePages).toBe(sched.pool.pages);
  } finally {
    sched.dispose();
  }
  return { tokens, steps };
}

describe('BatchScheduler admission', () => {
  it('admits six sequences submitted together in the first step and prefills them all there (default budget)', async () => {
    const { tokens, steps } = await run({}, true);
    expect(steps[0]).toMatchObject({ admitted: 6, running: 6, waiting: 0 });
    expect(steps[0]!.prefills).toEqual(PROMPTS.map((p) => p.length));
    const alone = await run({}, false);
    expect(tokens).toEqual(alone.tokens);
  });

  it('runs several prefill chunks per step within the prompt-token budget, the tokens those of each sequence alone', async () => {
    const options = { prefillChunk: 4, prefillTokensPerStep: 8 };
    const { tokens, steps } = await run(options, true);
    expect(steps[0]).toMatchObject({ admitted: 6, running: 6, waiting: 0 });
    const prefilling = steps.filter((s) => s.prefills.length > 0);
    for (const s of prefilling) expect(s.prefills.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(8);
    expect(Math.max(...prefilling.map((s) => s.prefills.length))).toBeGreaterThan(1);
    // 37 prompt tokens in chunks of at most 4 (11 chunks): one chunk per step would take 11 steps.
    expect(prefilling.length).toBeLessThan(11);
    expect(prefilling.flatMap((s) => s.prefills).reduce((a, b) => a + b, 0)).toBe(37);
    // Chunk bounds are the sequence's own: the same tokens alone, with one chunk per step, and with the default budget.
    expect(tokens).toEqual((await run(options, false)).tokens);
    expect(tokens).toEqual((await run({ prefillChunk: 4, prefillTokensPerStep: 1 }, true)).tokens);
    expect(tokens).toEqual((await run({}, true)).tokens);
  });
});

/** A scheduler whose sequences hold their tokens (the scripted text) back until `release()`. */
class HeldScheduler implements Scheduler {
  private nextId = 1;
  private opened!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.opened = resolve));
  full = false;
  readonly waiting = 0;
  readonly running = 0;

  constructor(
    private readonly tokenizer: TextTokenizer,
    private readonly text: string,
  ) {}

  release(): void {
    this.opened();
  }

  submit(request: SequenceRequest): Sequence {
    if (this.full) throw new QueueFullError(1, 1);
    const decoder = new StreamingDecoder(this.tokenizer);
    const tokens = this.tokenizer.encode(this.text).map((id, index) => ({ id, index, text: decoder.push(id) }));
    const stats: GenerationStats = {
      promptTokens: request.promptIds.length,
      generatedTokens: tokens.length,
      prefillMs: 0,
      decodeMs: 0,
      dispatchesPerToken: 0,
      stopReason: 'eos',
    };
    const gate = this.gate;
    return {
      id: this.nextId++,
      cancelled: undefined,
      result: gate.then(() => stats),
      tokens: (async function* () {
        await gate;
        yield* tokens;
      })(),
    };
  }

  cancel(): boolean {
    return true;
  }

  async drain(): Promise<void> {}
}

/** SSE events from a response body, one `data:` payload at a time. */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const bytes of body) {
    buffered += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (event.startsWith('data: ')) yield event.slice(6);
    }
  }
}

describe('streamed responses at admission', () => {
  // The full-vocabulary tiny model: the routes check prompt ids against it (it never runs: the tokens are scripted).
  let chat: LoadedModel;
  beforeAll(async () => {
    chat = await loadTinyModel();
  }, 60_000);
  afterAll(() => chat.model.dispose());

  async function start(): Promise<{ held: HeldScheduler; post: (path: string, body: object) => Promise<Response> }> {
    const held = new HeldScheduler(chat.tokenizer!, 'Hello there');
    const { server } = await serve(chat, { scheduler: () => held });
    servers.push(server);
    const post = (path: string, body: object) =>
      fetch(`${server.url}/v1${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, ...body }) });
    return { held, post };
  }

  it('sends a chat stream its headers and role chunk before the first token', async () => {
    const { held, post } = await start();
    // The tokens are held: the response (its headers, then its first event) must come without them.
    const res = await post('/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const it = events(res.body!);
    const first = JSON.parse((await it.next()).value as string) as { choices: { delta: { role?: string; content?: string } }[] };
    expect(first.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    held.release();
    let content = '';
    const rest: string[] = [];
    for await (const data of it) {
      rest.push(data);
      if (data !== '[DONE]') content += (JSON.parse(data) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '';
    }
    expect(content).toBe('Hello there');
    expect(rest.at(-1)).toBe('[DONE]');
  });

  it('sends a text completion stream its headers before the first token, the events unchanged', async () => {
    const { held, post } = await start();
    const res = await post('/completions', { prompt: 'Hi', max_tokens: 8, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    held.release();
    const texts: string[] = [];
    for await (const data of events(res.body!)) {
      if (data !== '[DONE]') texts.push((JSON.parse(data) as { choices: { text: string }[] }).choices[0]!.text);
    }
    expect(texts.join('')).toBe('Hello there');
    // No empty event before the tokens: the head went out alone.
    expect(texts[0]).not.toBe('');
  });

  it('answers a streamed request the queue cannot take with a plain 429', async () => {
    const { held, post } = await start();
    held.full = true;
    const res = await post('/completions', { prompt: 'Hi', max_tokens: 8, stream: true });
    expect(res.status).toBe(429);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('queue_full');
  });
});
