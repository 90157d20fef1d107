// The messages between the server and its grammar worker (worker.ts). Every request carries an id; the worker
// answers each, in the order it received them, with a Reply of the same id.
import type { EngineVocabulary, GrammarOptions, ResponseFormat } from '../grammar.js';

export type Request =
  /** Builds the engine's vocabulary and compiler; the first message a worker gets. */
  | { readonly op: 'init'; readonly id: number; readonly vocabulary: EngineVocabulary }
  /** Compiles a format (kept among the worker's recent ones under `key`). */
  | { readonly op: 'compile'; readonly id: number; readonly key: string; readonly format: ResponseFormat; readonly options: GrammarOptions }
  /** A JSON schema as EBNF text (jsonSchemaGrammar), for grammars that embed a schema. */
  | { readonly op: 'schemaGrammar'; readonly id: number; readonly schemaJson: string; readonly strict: boolean }
  /** A matcher for a sequence over the format under `key` (compiled again if it left the cache), then `tokens` accepted. */
  | {
      readonly op: 'matcher';
      readonly id: number;
      readonly matcher: number;
      readonly key: string;
      readonly format: ResponseFormat;
      readonly options: GrammarOptions;
      readonly stops: number[] | undefined;
      readonly tokens: number[];
    }
  | { readonly op: 'mask'; readonly id: number; readonly matcher: number }
  /** Accepts a token; answers AcceptResult (with the next mask unless the matcher terminated). */
  | { readonly op: 'accept'; readonly id: number; readonly matcher: number; readonly token: number }
  | { readonly op: 'dispose'; readonly id: number; readonly matcher: number };

export interface AcceptResult {
  readonly ok: boolean;
  readonly terminated: boolean;
  readonly mask?: Int32Array;
}

export type Reply =
  | { readonly id: number; readonly ok: true; readonly value?: unknown }
  | {
      readonly id: number;
      readonly ok: false;
      readonly message: string;
      /**
       * The engine trapped or aborted (WebAssembly.RuntimeError, Emscripten's abort, a stack overflow): its memory
       * may be corrupt, so the worker must not be used again.
       */
      readonly fatal: boolean;
    };
