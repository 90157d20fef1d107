// Constrained decoding (structured outputs): a grammar engine, XGrammar compiled to WASM (@mlc-ai/web-xgrammar, what
// WebLLM uses), gives each step a token bitmask (ceil(V / 32) int32 words, bit i % 32 of word i / 32 set: token i may
// come next); the sampler applies it on the device (sample's `mask`), so the one read per token stays 4 bytes. A
// sequence's matcher then accepts the sampled id; once the grammar is complete only a stop token is allowed, so the
// output ends as a whole document.
//
// What is built once and cached: per tokenizer and vocabulary size the engine's TokenizerInfo (the decoded vocab:
// 150k strings for Qwen) and GrammarCompiler; per compiler the compiled grammars of recent response formats.
//
// Loading the engine: the package is a UMD file inside a `"type": "module"` package. Node's ESM loader cannot run it
// (it calls `require`), so in Node the host evaluates it as CommonJS (runtime/host.ts). A bundler that honours
// `"type": "module"` (esbuild, webpack) runs it as a script that sets `globalThis.xgrammar`, where the library finds
// it: a browser application imports the package itself (`import '@mlc-ai/web-xgrammar'`), or hands the module over
// with setGrammarEngine. The library does not import it: its Emscripten glue names Node's `module` and `url` in
// branches a browser never takes, which a bundler must be told to leave out (esbuild: `external: ['module', 'url']`),
// and every application bundling tensorgpu would have to configure that.
import type * as Xgrammar from '@mlc-ai/web-xgrammar';
import { NodeOnlyError, TensorGpuError } from '../core/errors.js';
import { nodeHost, type NodeHost } from '../runtime/host.js';
import type { TextTokenizer } from '../tokenizer/text-tokenizer.js';

/** The engine's module: `import * as xgrammar from '@mlc-ai/web-xgrammar'` (or its default export). */
export type GrammarEngine = Pick<typeof Xgrammar, 'Grammar' | 'TokenizerInfo' | 'GrammarCompiler' | 'GrammarMatcher'>;

/** OpenAI's JSON schema response format (`response_format.json_schema`). */
export interface JsonSchemaFormat {
  readonly name?: string;
  readonly description?: string;
  /** The schema (an object, or its JSON text); absent: any JSON value. */
  readonly schema?: Record<string, unknown> | boolean | string;
  /**
   * OpenAI's strict mode. The output always follows the schema either way; strict also forbids properties and
   * items the schema does not list (additionalProperties / unevaluatedItems false), as OpenAI's strict mode does.
   */
  readonly strict?: boolean | null;
}

/**
 * What the generated text must be: OpenAI's `response_format` values, plus a regular expression and an EBNF
 * grammar (XGrammar's dialect, GBNF-like: `root ::= ...`), and XGrammar's structural tags (tool calls) as is.
 */
export type ResponseFormat =
  | { readonly type: 'text' }
  | { readonly type: 'json_object' }
  | { readonly type: 'json_schema'; readonly json_schema: JsonSchemaFormat }
  | { readonly type: 'regex'; readonly regex: string }
  | { readonly type: 'grammar'; readonly grammar: string; readonly root?: string }
  | { readonly type: 'structural_tag'; readonly format: Record<string, unknown> };

export interface GrammarOptions {
  /**
   * Allow any whitespace between JSON tokens (default false: one line, `,` and `: ` as in OpenAI's output). A
   * model free to emit whitespace can emit it forever; compact JSON keeps even an untrained model finishing.
   */
  readonly anyWhitespace?: boolean;
  /** With anyWhitespace, at most this many whitespace characters in a row. */
  readonly maxWhitespace?: number;
}

/** Raised for a response format the engine rejects (a bad schema, regex or grammar); `format` names it. */
export class GrammarError extends TensorGpuError {
  constructor(
    message: string,
    readonly format: unknown,
  ) {
    super(message);
    this.name = 'GrammarError';
  }
}

let engine: GrammarEngine | undefined;
let loading: Promise<GrammarEngine> | undefined;
/** The engine came from the installed package (Node), so a fresh instance can replace it after a trap. */
let engineLoadedHere = false;

/** Hands the library the engine module (a browser application: `setGrammarEngine(await import('@mlc-ai/web-xgrammar'))`). */
export function setGrammarEngine(module: GrammarEngine | { default: GrammarEngine }): void {
  // A namespace import of the CommonJS file has the classes at the top, under `default`, or both, by bundler.
  const candidates = [module, (module as { default?: unknown }).default] as Partial<GrammarEngine>[];
  const found = candidates.find((m) => m?.TokenizerInfo && m.GrammarCompiler && m.GrammarMatcher);
  if (!found) throw new TypeError('setGrammarEngine: expected the @mlc-ai/web-xgrammar module (TokenizerInfo, GrammarCompiler, GrammarMatcher)');
  engine = found as GrammarEngine;
}

/** The engine: the one set, else the one the package's script put in globalThis.xgrammar, else (in Node) the installed package. */
export async function grammarEngine(): Promise<GrammarEngine> {
  if (engine) return engine;
  const global = (globalThis as { xgrammar?: GrammarEngine }).xgrammar;
  if (global?.TokenizerInfo) {
    setGrammarEngine(global);
    return engine!;
  }
  let host: NodeHost | undefined;
  try {
    host = nodeHost('the grammar engine');
  } catch (e) {
    if (!(e instanceof NodeOnlyError)) throw e;
  }
  if (!host) {
    throw new TensorGpuError(
      "constrained decoding needs the grammar engine: import '@mlc-ai/web-xgrammar' in the page (or pass its module to setGrammarEngine); bundlers must leave out Node's 'module' and 'url' (esbuild: external: ['module', 'url'])",
    );
  }
  loading ??= host.importCommonJs('@mlc-ai/web-xgrammar').then((m) => {
    setGrammarEngine(m as GrammarEngine);
    engineLoadedHere = true;
    return engine!;
  });
  return loading;
}

interface CompilerEntry {
  readonly info: Xgrammar.TokenizerInfo;
  readonly compiler: Xgrammar.GrammarCompiler;
  /** Compiled grammars by format key, oldest first (bounded: COMPILED_KEPT). */
  readonly compiled: Map<string, Promise<Xgrammar.CompiledGrammar>>;
  readonly utf8: Utf8Guard | undefined;
}

/** GPT-2's byte-to-unicode map (byte-level BPE vocabularies), as code point -> byte. */
function byteLevelDecoder(): Map<number, number> {
  const bytes: number[] = [];
  for (let b = 33; b <= 126; b++) bytes.push(b);
  for (let b = 161; b <= 172; b++) bytes.push(b);
  for (let b = 174; b <= 255; b++) bytes.push(b);
  const map = new Map(bytes.map((b) => [b, b]));
  let n = 0;
  for (let b = 0; b < 256; b++) if (!map.has(b)) map.set(256 + n++, b);
  return map;
}

/**
 * XGrammar matches a multi-byte UTF-8 character by its lead byte and then any continuation bytes, so a byte-level
 * vocabulary's single-byte tokens can spell overlong or surrogate sequences (F0 81 BF AD) that decode to U+FFFD
 * and break a schema's maxLength. The guard keeps what UTF-8 allows: a token starting with a continuation byte
 * outside the range the pending lead byte needs (E0: A0..BF, ED: 80..9F, F0: 90..BF, F4: 80..8F) is masked, and
 * so is every token starting with a byte no UTF-8 text has (C0, C1, F5..FF).
 */
export class Utf8Guard {
  /** [id, first byte] of tokens whose first byte is 80..BF. */
  private readonly continuation: [number, number][] = [];
  private readonly never: number[] = [];
  private readonly bytesOf: (id: number) => number[];

  constructor(tokens: readonly string[]) {
    const decode = byteLevelDecoder();
    this.bytesOf = (id) => Array.from(tokens[id] ?? '', (ch) => decode.get(ch.codePointAt(0)!) ?? 0x3f);
    tokens.forEach((t, id) => {
      if (t.length === 0) return;
      const b = decode.get(t.codePointAt(0)!);
      if (b === undefined) return;
      if (b >= 0x80 && b <= 0xbf) this.continuation.push([id, b]);
      else if (b === 0xc0 || b === 0xc1 || b >= 0xf5) this.never.push(id);
    });
  }

  /** The state after a token: continuation bytes still owed and the range of the next one. */
  advance(state: Utf8State, id: number): Utf8State {
    let { need, lo, hi } = state;
    for (const b of this.bytesOf(id)) {
      if (need > 0) {
        need--;
        [lo, hi] = [0x80, 0xbf];
      } else if (b >= 0xf0) {
        need = 3;
        [lo, hi] = b === 0xf0 ? [0x90, 0xbf] : b === 0xf4 ? [0x80, 0x8f] : [0x80, 0xbf];
      } else if (b >= 0xe0) {
        need = 2;
        [lo, hi] = b === 0xe0 ? [0xa0, 0xbf] : b === 0xed ? [0x80, 0x9f] : [0x80, 0xbf];
      } else if (b >= 0xc0) {
        need = 1;
        [lo, hi] = [0x80, 0xbf];
      }
    }
    return { need, lo, hi };
  }

  /** Clears, in place, the tokens UTF-8 does not allow next. */
  restrict(mask: Int32Array, state: Utf8State): void {
    const clear = (id: number) => {
      mask[id >>> 5]! &= ~(1 << (id & 31));
    };
    for (const id of this.never) clear(id);
    if (state.need > 0 && (state.lo !== 0x80 || state.hi !== 0xbf)) for (const [id, b] of this.continuation) if (b < state.lo || b > state.hi) clear(id);
  }
}

export interface Utf8State {
  readonly need: number;
  readonly lo: number;
  readonly hi: number;
}

/** The state before any token: no continuation byte owed. */
export const UTF8_START: Utf8State = { need: 0, lo: 0x80, hi: 0xbf };

const COMPILED_KEPT = 32;
let compilers = new WeakMap<TextTokenizer, Map<number, Promise<CompilerEntry>>>();

/** What the engine's TokenizerInfo is built from (plain data: it crosses to the server's grammar worker). */
export interface EngineVocabulary {
  readonly tokens: string[];
  readonly vocabType: string;
  readonly prependSpace: boolean;
  readonly vocabSize: number;
  /** The tokenizer's eos ids below vocabSize; undefined lets the engine find them. */
  readonly stops: number[] | undefined;
}

/**
 * The engine's vocabulary for a tokenizer and a logits width (config.json's vocab_size, which may exceed the
 * tokenizer's: the extra ids are never allowed). Special tokens are given no text, so no grammar can produce them;
 * the stop tokens are the matcher's (TokenConstraint's stopTokenIds).
 */
export function engineVocabulary(tokenizer: TextTokenizer, vocabSize: number): EngineVocabulary {
  const vocab = tokenizer.vocabulary();
  // A model with fewer logits than the tokenizer has tokens (a test model) never samples the ids past them.
  const tokens = vocab.tokens.slice(0, vocabSize);
  for (const id of vocab.specialIds) if (id < vocabSize) tokens[id] = '';
  const eos = tokenizer.eosTokenIds.filter((id) => id < vocabSize);
  return { tokens, vocabType: vocab.vocabType, prependSpace: vocab.prependSpace, vocabSize, stops: eos.length > 0 ? eos : undefined };
}

/** The engine's TokenizerInfo and GrammarCompiler for a vocabulary. */
export async function engineCompiler(xg: GrammarEngine, v: EngineVocabulary): Promise<{ info: Xgrammar.TokenizerInfo; compiler: Xgrammar.GrammarCompiler }> {
  const info = await xg.TokenizerInfo.createTokenizerInfo(v.tokens, v.vocabType, v.prependSpace, v.vocabSize, v.stops);
  return { info, compiler: await xg.GrammarCompiler.createGrammarCompiler(info, true) };
}

/** The UTF-8 guard of a vocabulary (byte-level ones only). */
export function utf8GuardOf(v: EngineVocabulary): Utf8Guard | undefined {
  return v.vocabType === 'byte_level' ? new Utf8Guard(v.tokens) : undefined;
}

/** Built once per tokenizer and logits width. */
function compilerFor(tokenizer: TextTokenizer, vocabSize: number): Promise<CompilerEntry> {
  let byWidth = compilers.get(tokenizer);
  if (!byWidth) compilers.set(tokenizer, (byWidth = new Map()));
  let entry = byWidth.get(vocabSize);
  if (!entry) {
    entry = (async () => {
      const xg = await grammarEngine();
      const vocab = engineVocabulary(tokenizer, vocabSize);
      const { info, compiler } = await engineCompiler(xg, vocab);
      return { info, compiler, compiled: new Map(), utf8: utf8GuardOf(vocab) };
    })();
    byWidth.set(vocabSize, entry);
    entry.catch(() => byWidth.delete(vocabSize));
  }
  return entry;
}

function schemaText(format: JsonSchemaFormat): string {
  const s = format.schema;
  if (s === undefined || s === true) return '{}';
  return typeof s === 'string' ? s : JSON.stringify(s);
}

/**
 * XGrammar 0.1.27 writes a string with minLength / maxLength as `[^"\\\r\n]{m,n}`, which admits the control
 * characters JSON forbids inside strings (a tab, U+0000..U+001F): the output would not parse. Its unbounded strings
 * exclude them; bounded ones are narrowed to match (escapes stay out of bounded strings, as XGrammar has them).
 */
const BOUNDED_STRING_CHAR = /\[\^\\?"\\\\\\r\\n\]/g; // as printed: [^\"\\\r\n]
const JSON_STRING_CHAR = '[^\\0-\\x1f\\"\\\\]';

async function compileJsonSchema(
  xg: GrammarEngine,
  c: Xgrammar.GrammarCompiler,
  schema: string,
  strict: boolean,
  o: GrammarOptions,
): Promise<Xgrammar.CompiledGrammar> {
  const any = o.anyWhitespace ?? false;
  // indent -1: one line; separators as OpenAI writes compact JSON.
  const grammar = await xg.Grammar.fromJSONSchema(schema, any, any ? undefined : -1, [',', ': '], strict, any ? o.maxWhitespace : undefined);
  try {
    const ebnf = grammar.toString();
    const narrowed = ebnf.replace(BOUNDED_STRING_CHAR, JSON_STRING_CHAR);
    return await (narrowed === ebnf ? c.compileGrammar(grammar) : c.compileGrammar(narrowed));
  } finally {
    grammar.dispose();
  }
}

/**
 * A JSON schema as XGrammar EBNF text (its start rule `root`), compact and with JSON-safe bounded strings as the
 * json_schema format compiles it: for a grammar that embeds a schema (a tool call wrapped in the model's tags,
 * compiled as `{type: 'grammar', grammar, root}`). Throws GrammarError for a schema the engine rejects.
 */
export async function jsonSchemaGrammar(schema: Record<string, unknown> | boolean, strict: boolean, o: GrammarOptions = {}): Promise<string> {
  try {
    return await jsonSchemaGrammarWith(await grammarEngine(), schema, strict, o);
  } catch (e) {
    if (isEngineTrap(e)) dropTrappedEngine();
    throw e;
  }
}

/** @internal jsonSchemaGrammar on a given engine (the server's grammar worker runs it on its own). */
export async function jsonSchemaGrammarWith(
  xg: GrammarEngine,
  schema: Record<string, unknown> | boolean,
  strict: boolean,
  o: GrammarOptions = {},
): Promise<string> {
  const any = o.anyWhitespace ?? false;
  let grammar: Xgrammar.Grammar;
  try {
    grammar = await xg.Grammar.fromJSONSchema(JSON.stringify(schema), any, any ? undefined : -1, [',', ': '], strict, any ? o.maxWhitespace : undefined);
  } catch (e) {
    throw new GrammarError(`cannot compile the JSON schema: ${engineMessage(e)}`, schema);
  }
  try {
    return grammar.toString().replace(BOUNDED_STRING_CHAR, JSON_STRING_CHAR);
  } finally {
    grammar.dispose();
  }
}

/** @internal A response format compiled by a given engine and compiler (not cached). */
export async function compileWith(
  xg: GrammarEngine,
  c: Xgrammar.GrammarCompiler,
  format: ResponseFormat,
  o: GrammarOptions,
): Promise<Xgrammar.CompiledGrammar> {
  const json = (schema: string, strict: boolean) => compileJsonSchema(xg, c, schema, strict, o);
  switch (format.type) {
    case 'json_object':
      // OpenAI's JSON mode: an object (of anything), not any JSON value.
      return json('{"type": "object"}', false);
    case 'json_schema':
      return json(schemaText(format.json_schema), format.json_schema.strict === true);
    case 'regex':
      return c.compileStructuralTag({ type: 'structural_tag', format: { type: 'regex', pattern: format.regex } });
    case 'grammar':
      return c.compileGrammar(format.grammar, format.root ?? 'root');
    case 'structural_tag':
      return c.compileStructuralTag({ type: 'structural_tag', format: format.format as unknown as Xgrammar.StructuralTagFormat });
    default:
      throw new GrammarError(`unknown response format type ${JSON.stringify((format as { type: unknown }).type)}`, format);
  }
}

/** The engine's message for an exception thrown from WASM (a pointer number, or an Error). */
export function engineMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}

/**
 * Whether an error may have left the engine's memory corrupt: a WASM trap (out-of-bounds access, a bad table index,
 * unreachable), Emscripten's abort, or a JS stack overflow inside the glue. XGrammar's own exceptions (a schema or
 * grammar it rejects) arrive as plain Errors and leave it usable.
 */
export function isEngineTrap(e: unknown): boolean {
  if (e instanceof RangeError || (e instanceof Error && e.name === 'RuntimeError')) return true;
  return /Aborted\(|out of bounds|unreachable|table index|call stack|memory access/i.test(engineMessage(e));
}

/**
 * After a trap, an engine this module loaded itself (Node) is dropped with everything compiled by it: the next
 * format loads a fresh instance. An engine handed over by the application (a browser page) cannot be reloaded
 * here; run it in a worker (GenerateOptions.grammars, webGrammarWorker) to keep a trap from spoiling it.
 */
function dropTrappedEngine(): void {
  if (!engineLoadedHere) return;
  engine = undefined;
  loading = undefined;
  engineLoadedHere = false;
  compilers = new WeakMap();
}

/** A response format compiled for one tokenizer and logits width; TokenConstraint.create makes a matcher per sequence. */
export interface CompiledFormat {
  readonly format: ResponseFormat;
  readonly vocabSize: number;
  readonly grammar: Xgrammar.CompiledGrammar;
  /** @internal the tokenizer's UTF-8 guard (byte-level vocabularies). */
  readonly utf8?: Utf8Guard;
}

/**
 * The cache key of a format and its options: its JSON text. A format nested too deep to serialize (the JS stack
 * ends first) is a GrammarError, not a RangeError from deep inside.
 */
export function formatKey(format: ResponseFormat, options: GrammarOptions = {}): string {
  try {
    return JSON.stringify([format, options.anyWhitespace ?? false, options.maxWhitespace ?? null]);
  } catch (e) {
    throw new GrammarError(`cannot read the ${format.type} response format: ${engineMessage(e)}`, undefined);
  }
}

/**
 * Compiles a response format against a tokenizer (cached: the tokenizer's engine vocabulary once, each distinct
 * format once among the last 32). `undefined` for `{type: 'text'}`, which constrains nothing. Throws GrammarError
 * for a format the engine rejects.
 */
export async function compileResponseFormat(
  tokenizer: TextTokenizer,
  vocabSize: number,
  format: ResponseFormat,
  options: GrammarOptions = {},
): Promise<CompiledFormat | undefined> {
  if (format.type === 'text') return undefined;
  const key = formatKey(format, options);
  const entry = await compilerFor(tokenizer, vocabSize);
  const xg = await grammarEngine();
  let grammar = entry.compiled.get(key);
  if (grammar) {
    entry.compiled.delete(key); // most recent last
  } else {
    grammar = (async () => {
      try {
        return await compileWith(xg, entry.compiler, format, options);
      } catch (e) {
        if (isEngineTrap(e)) dropTrappedEngine();
        throw new GrammarError(`cannot compile the ${format.type} response format: ${engineMessage(e)}`, format);
      }
    })();
    grammar.catch(() => entry.compiled.delete(key));
    while (entry.compiled.size >= COMPILED_KEPT) {
      const [oldest, old] = entry.compiled.entries().next().value!;
      entry.compiled.delete(oldest);
      // Matchers made from it keep their own reference inside the engine.
      old.then((g) => g.dispose()).catch(() => {});
    }
  }
  entry.compiled.set(key, grammar);
  return { format, vocabSize, grammar: await grammar, utf8: entry.utf8 };
}

/**
 * One sequence's grammar state: the next token's bitmask, then the sampled token accepted. `stopTokenIds` are the
 * tokens that may end the output once the grammar is complete (generate's stop ids); `done` once one is accepted.
 */
export class TokenConstraint {
  /** int32 words per mask: ceil(vocabSize / 32). */
  readonly words: number;
  private disposed = false;

  private utf8State: Utf8State = UTF8_START;

  private constructor(
    private readonly matcher: Xgrammar.GrammarMatcher,
    readonly vocabSize: number,
    private readonly utf8: Utf8Guard | undefined,
  ) {
    this.words = Math.ceil(vocabSize / 32);
  }

  static async create(compiled: CompiledFormat, stopTokenIds?: readonly number[]): Promise<TokenConstraint> {
    const xg = await grammarEngine();
    const stops = stopTokenIds && stopTokenIds.length > 0 ? [...stopTokenIds] : undefined;
    return new TokenConstraint(await xg.GrammarMatcher.createGrammarMatcher(compiled.grammar, stops), compiled.vocabSize, compiled.utf8);
  }

  /** The tokens allowed next (bit i % 32 of word i / 32 set: token i allowed). */
  async nextMask(): Promise<Int32Array> {
    const mask = await this.matcher.getNextTokenBitmask();
    this.utf8?.restrict(mask, this.utf8State);
    return mask;
  }

  /** Advances by a sampled token; false when the grammar does not allow it (the state is then unchanged). */
  accept(id: number): boolean {
    const ok = this.matcher.acceptToken(id);
    if (ok && this.utf8) this.utf8State = this.utf8.advance(this.utf8State, id);
    return ok;
  }

  /** A stop token was accepted: the output is complete. */
  get done(): boolean {
    return this.matcher.isTerminated();
  }

  /** The longest text every continuation starts with (jump-forward decoding). */
  forcedText(): string {
    return this.matcher.findJumpForwardString();
  }

  reset(): void {
    this.matcher.reset();
    this.utf8State = UTF8_START;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.matcher.dispose();
  }
}

/**
 * One sequence's grammar as the decode loops drive it: the next token's bitmask, then the sampled token. Either a
 * TokenConstraint in this thread or a matcher in the server's grammar worker (serve/grammar-worker), whose answers
 * arrive asynchronously.
 */
export interface SequenceGrammar {
  nextMask(): Promise<Int32Array>;
  /** Advances by a sampled token; false when the grammar does not allow it. */
  accept(id: number): Promise<boolean>;
  /** A stop token was accepted: the output is complete. */
  readonly done: boolean;
  dispose(): void;
}

/** Makes a sequence's grammar for a response format (undefined for `{type: 'text'}`); stopTokenIds as TokenConstraint.create's. */
export type GrammarSource = (
  format: ResponseFormat,
  options: GrammarOptions | undefined,
  stopTokenIds: readonly number[],
) => Promise<SequenceGrammar | undefined>;

/** Grammars compiled and matched in this thread (compileResponseFormat's cache), for a tokenizer and logits width. */
export function inProcessGrammars(tokenizer: TextTokenizer, vocabSize: number): GrammarSource {
  return async (format, options, stopTokenIds) => {
    const compiled = await compileResponseFormat(tokenizer, vocabSize, format, options);
    if (!compiled) return undefined;
    const constraint = await TokenConstraint.create(compiled, stopTokenIds);
    return {
      nextMask: () => constraint.nextMask(),
      accept: async (id) => constraint.accept(id),
      get done() {
        return constraint.done;
      },
      dispose: () => constraint.dispose(),
    };
  };
}

/** A mask allowing every token of a `vocabSize` row (a batch row without a grammar, beside rows with one). */
export function allowAllMask(vocabSize: number): Int32Array {
  return new Int32Array(Math.ceil(vocabSize / 32)).fill(-1);
}
