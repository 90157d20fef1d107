// FifoScheduler on its own: one sequence at a time in arrival order, a full queue refused, a queued sequence
// cancelled without running, and drain refusing new work and cancelling what outlives its deadline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedModel } from '../../src/models/load.js';
import { ApiError, QueueFullError } from '../../src/serve/errors.js';
import { FifoScheduler } from '../../src/serve/scheduler.js';
import { loadTinyModel } from './helpers.js';

let loaded: LoadedModel;

beforeAll(async () => {
  loaded = await loadTinyModel();
}, 60_000);

afterAll(() => loaded?.model.dispose());

const request = (maxNewTokens: number) => ({ promptIds: loaded.tokenizer!.encode('Hello there'), options: { maxNewTokens, temperature: 0 } });

describe('FifoScheduler', () => {
  it('runs sequences one at a time in order, refuses a full queue, and cancels a queued one without running it', async () => {
    const loads: [number, number][] = [];
    const s = new FifoScheduler(loaded.model, loaded.tokenizer!, { maxQueue: 2, observer: { onLoad: (w, r) => loads.push([w, r]) } });
    const first = s.submit(request(3));
    const second = s.submit(request(2));
    const third = s.submit(request(2));
    expect([s.running, s.waiting]).toEqual([1, 2]);
    expect(() => s.submit(request(1))).toThrow(QueueFullError);
    expect(s.cancel(third.id)).toBe(true);
    const ends: number[] = [];
    await Promise.all([first, second].map((q) => q.result.then(() => ends.push(q.id))));
    expect(ends).toEqual([first.id, second.id]);
    expect((await first.result).generatedTokens).toBe(3);
    const cancelled = await third.result;
    expect(cancelled).toMatchObject({ generatedTokens: 0, stopReason: 'aborted' });
    expect(third.cancelled).toBe('client');
    expect(loads.every(([, r]) => r <= 1)).toBe(true);
    expect(loads.at(-1)).toEqual([0, 0]);
  });

  it('drain refuses new sequences and cancels one still running at the deadline', async () => {
    const s = new FifoScheduler(loaded.model, loaded.tokenizer!, { maxQueue: 4 });
    const long = s.submit(request(400));
    await long.tokens[Symbol.asyncIterator]().next();
    await s.drain(50);
    expect(long.cancelled).toBe('shutdown');
    const stats = await long.result;
    expect(stats.stopReason).toBe('aborted');
    expect(stats.generatedTokens).toBeLessThan(400);
    expect(() => s.submit(request(1))).toThrow(ApiError);
    expect(s.running).toBe(0);
  }, 60_000);
});
