// The grammar worker's side: XGrammar's engine (WASM) with one vocabulary, its compiled grammars and the matchers of
// constrained sequences. Requests run one at a time in arrival order; each gets one Reply. An error that may have
// corrupted the engine's memory is reported `fatal`, and the client replaces the worker. Runs in a Node worker
// thread (serve/grammar-worker/worker.ts) or a browser Worker (runGrammarWorker, in a script the page bundles).
import type * as Xgrammar from '@mlc-ai/web-xgrammar';
import {
  compileWith,
  engineCompiler,
  engineMessage,
  isEngineTrap,
  grammarEngine,
  jsonSchemaGrammarWith,
  type GrammarEngine,
  type GrammarOptions,
  type ResponseFormat,
} from '../grammar.js';
import type { AcceptResult, Reply, Request } from './protocol.js';

/** Compiled grammars kept for new matchers (a matcher holds its own reference inside the engine). */
const COMPILED_KEPT = 32;

interface Engine {
  readonly xg: GrammarEngine;
  readonly compiler: Xgrammar.GrammarCompiler;
}

let engine: Engine | undefined;
const compiled = new Map<string, Xgrammar.CompiledGrammar>();
const matchers = new Map<number, Xgrammar.GrammarMatcher>();

function ready(): Engine {
  if (!engine) throw new Error('the grammar worker has no vocabulary yet');
  return engine;
}

async function compiledGrammar(key: string, request: { readonly format: ResponseFormat; readonly options: GrammarOptions }): Promise<Xgrammar.CompiledGrammar> {
  let grammar = compiled.get(key);
  if (grammar) {
    compiled.delete(key); // most recent last
  } else {
    const { xg, compiler } = ready();
    grammar = await compileWith(xg, compiler, request.format, request.options);
    while (compiled.size >= COMPILED_KEPT) {
      const [oldest, old] = compiled.entries().next().value!;
      compiled.delete(oldest);
      old.dispose();
    }
  }
  compiled.set(key, grammar);
  return grammar;
}

function matcherOf(id: number): Xgrammar.GrammarMatcher {
  const m = matchers.get(id);
  if (!m) throw new Error(`no matcher ${id}`);
  return m;
}

async function handle(request: Request): Promise<{ value?: unknown; transfer?: ArrayBuffer[] }> {
  switch (request.op) {
    case 'init': {
      const xg = await grammarEngine();
      engine = { xg, ...(await engineCompiler(xg, request.vocabulary)) };
      return {};
    }
    case 'compile':
      await compiledGrammar(request.key, request);
      return {};
    case 'schemaGrammar':
      return { value: await jsonSchemaGrammarWith(ready().xg, JSON.parse(request.schemaJson) as Record<string, unknown>, request.strict) };
    case 'matcher': {
      const grammar = await compiledGrammar(request.key, request);
      const m = await ready().xg.GrammarMatcher.createGrammarMatcher(grammar, request.stops);
      matchers.set(request.matcher, m);
      for (const token of request.tokens) if (!m.acceptToken(token)) throw new Error(`replaying token ${token} failed`);
      return {};
    }
    case 'mask': {
      const mask = await matcherOf(request.matcher).getNextTokenBitmask();
      return { value: mask, transfer: [mask.buffer as ArrayBuffer] };
    }
    case 'accept': {
      const m = matcherOf(request.matcher);
      const ok = m.acceptToken(request.token);
      const terminated = m.isTerminated();
      const mask = ok && !terminated ? await m.getNextTokenBitmask() : undefined;
      const value: AcceptResult = { ok, terminated, ...(mask ? { mask } : {}) };
      return { value, transfer: mask ? [mask.buffer as ArrayBuffer] : [] };
    }
    case 'dispose':
      matchers.get(request.matcher)?.dispose();
      matchers.delete(request.matcher);
      return {};
  }
}

/** Where requests arrive and replies go: a Node worker's parentPort, a browser Worker's global scope. */
export interface GrammarWorkerPort {
  onRequest(handler: (request: Request) => void): void;
  postMessage(reply: Reply, transfer: ArrayBuffer[]): void;
}

/** Answers the requests arriving at `port`, one at a time, in order. */
export function serveGrammarRequests(port: GrammarWorkerPort): void {
  let queue: Promise<void> = Promise.resolve();
  port.onRequest((request) => {
    queue = queue.then(async () => {
      let reply: Reply;
      let transfer: ArrayBuffer[] = [];
      try {
        const out = await handle(request);
        reply = { id: request.id, ok: true, value: out.value };
        transfer = out.transfer ?? [];
      } catch (e) {
        reply = { id: request.id, ok: false, message: engineMessage(e), fatal: isEngineTrap(e) };
      }
      port.postMessage(reply, transfer);
    });
  });
}

/**
 * The body of a browser Worker script serving the grammar engine: the script imports '@mlc-ai/web-xgrammar' (which
 * sets globalThis.xgrammar, or pass its module to setGrammarEngine) and calls this; the page then drives it with
 * webGrammarWorker.
 */
export function runGrammarWorker(): void {
  const scope = globalThis as unknown as {
    addEventListener(type: 'message', listener: (e: { data: Request }) => void): void;
    postMessage(message: Reply, transfer: ArrayBuffer[]): void;
  };
  serveGrammarRequests({
    onRequest: (handler) => scope.addEventListener('message', (e) => handler(e.data)),
    postMessage: (reply, transfer) => scope.postMessage(reply, transfer),
  });
}
