// The grammar worker (generate/grammar-worker, in a Node worker thread: serve/grammar-worker): compiles and matches in a worker thread; a schema that traps
// the engine (arrays nested 70 deep overflow its stack and corrupt its memory) costs a new worker, not the server,
// and the grammars of sequences that were running go on from where they were; a compile past the time limit is a
// GrammarTimeoutError and the worker is replaced the same way.
import { afterAll, describe, expect, it } from 'vitest';
import { GrammarError, type ResponseFormat } from '../../src/generate/grammar.js';
import { GrammarPool, GrammarTimeoutError, GrammarWorker, type SpawnGrammarWorker } from '../../src/generate/grammar-worker/client.js';
import { spawnNodeGrammarWorker } from '../../src/serve/grammar-worker/node-worker.js';
import { qwen3TokenizerDir, TextTokenizer } from '../../src/tokenizer/tokenizer.js';

const nestedArrays = (depth: number): Record<string, unknown> => {
  let s: Record<string, unknown> = { type: 'integer' };
  for (let i = 0; i < depth; i++) s = { type: 'array', items: s };
  return s;
};
const schemaFormat = (schema: Record<string, unknown>): ResponseFormat => ({ type: 'json_schema', json_schema: { schema, strict: true } });
const COLOR = schemaFormat({ type: 'object', properties: { color: { enum: ['red', 'green'] } }, required: ['color'], additionalProperties: false });

const tokenizer = TextTokenizer.fromDirectory(qwen3TokenizerDir());
const workers: GrammarWorker[] = [];

afterAll(async () => {
  for (const w of workers) await w.close();
});

/** Decodes `text`'s tokens through a grammar, checking each is allowed; the grammar's state after. */
async function feed(grammar: { nextMask(): Promise<Int32Array>; accept(id: number): Promise<boolean> }, ids: number[]): Promise<void> {
  for (const id of ids) {
    const mask = await grammar.nextMask();
    expect((mask[id >>> 5]! >>> (id & 31)) & 1, `token ${id}`).toBe(1);
    expect(await grammar.accept(id)).toBe(true);
  }
}

describe('serve: grammar worker', () => {
  it('a worker that cannot start is tried a bounded number of times, then again on the next request', async () => {
    let spawned = 0;
    const dead: SpawnGrammarWorker = () => {
      spawned++;
      return {
        postMessage: () => undefined,
        listen: (_onReply, onLost) => void queueMicrotask(() => onLost('no engine here')),
        terminate: () => undefined,
      };
    };
    const w = GrammarWorker.forTokenizer(tokenizer, 64, dead);
    const err = await w.compile(COLOR).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrammarError);
    expect((err as Error).message).toContain('no engine here');
    const first = spawned;
    expect(first).toBeLessThanOrEqual(5);
    await new Promise((r) => setTimeout(r, 20));
    expect(spawned).toBe(first); // no respawning on its own
    await expect(w.compile(COLOR)).rejects.toThrow(GrammarError);
    expect(spawned).toBeGreaterThan(first);
    await w.close();
  });

  it('a trapping schema replaces the worker; running grammars continue and new formats compile', async () => {
    const w = GrammarWorker.forTokenizer(tokenizer, tokenizer.vocabulary().tokens.length, spawnNodeGrammarWorker);
    workers.push(w);
    const eos = tokenizer.eosTokenIds[0]!;
    const grammar = (await w.grammars(COLOR, {}, [eos]))!;
    const ids = tokenizer.encode('{"color": "re');
    await feed(grammar, ids);
    const err = await w.compile(schemaFormat(nestedArrays(80))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrammarError);
    expect(w.restarts).toBe(1);
    // The running sequence's matcher was rebuilt with its tokens: it finishes the same document.
    await feed(grammar, tokenizer.encode('d"}'));
    const last = await grammar.nextMask();
    expect((last[eos >>> 5]! >>> (eos & 31)) & 1).toBe(1);
    expect(await grammar.accept(eos)).toBe(true);
    expect(grammar.done).toBe(true);
    grammar.dispose();
    // And a new format compiles on the new worker.
    await w.compile(schemaFormat({ type: 'object', properties: { n: { type: 'integer' } } }));
    expect(w.restarts).toBe(1);
  }, 120_000);

  it.each([
    [3, 'in another worker: the running sequence gets its masks meanwhile'],
    [1, 'in the same worker: the running sequence waits for it'],
  ])(
    'a pool of %i: a slow new format compiles %s',
    async (maxWorkers, _what) => {
      const pool = new GrammarPool(tokenizer, tokenizer.vocabulary().tokens.length, spawnNodeGrammarWorker, { maxWorkers, compileTimeoutMs: 600_000 });
      const eos = tokenizer.eosTokenIds[0]!;
      const grammar = (await pool.grammars(COLOR, {}, [eos]))!;
      const ids = tokenizer.encode('{"color": "');
      await feed(grammar, ids.slice(0, -1));
      await grammar.nextMask();
      // A string of up to 100 characters: seconds of compiling (XGrammar unrolls the bound), against a round trip's ms.
      const order: string[] = [];
      const slow = pool.compile(schemaFormat({ type: 'string', maxLength: 100 })).then(() => order.push('compiled'));
      await new Promise((r) => setTimeout(r, 50));
      // accept's answer carries the next mask: one round trip to the sequence's worker.
      const mask = grammar.accept(ids[ids.length - 1]!).then((ok) => order.push(ok ? 'mask' : 'refused'));
      await Promise.all([slow, mask]);
      expect(order).toEqual(maxWorkers > 1 ? ['mask', 'compiled'] : ['compiled', 'mask']);
      expect(pool.size).toBe(Math.min(2, maxWorkers));
      grammar.dispose();
      await pool.close();
    },
    300_000,
  );

  it('a compile past the time limit is a GrammarTimeoutError naming it, and the next compile works', async () => {
    const w = GrammarWorker.forTokenizer(tokenizer, tokenizer.vocabulary().tokens.length, spawnNodeGrammarWorker, { compileTimeoutMs: 1 });
    workers.push(w);
    const err = await w.compile(COLOR).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrammarTimeoutError);
    expect((err as GrammarTimeoutError).message).toContain('1 ms');
    expect(w.restarts).toBe(1);
    w.compileTimeoutMs = 60_000;
    await w.compile(COLOR);
    expect(w.restarts).toBe(1);
  }, 120_000);
});
