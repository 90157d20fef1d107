// LFM2's Pythonic tool calls: a Python list of calls with keyword arguments, `[f(a=1, b="x"), g()]`. A strict
// parser for exactly the literals a call can carry (strings, numbers, True / False / None, lists, tuples, dicts,
// nested), nothing evaluated; and the reverse, to put earlier calls back into a prompt.
import { TensorGpuError } from '../../core/errors.js';

/** Text that is not a list of Python calls with literal keyword arguments; `at` is the character offset. */
export class PythonCallSyntaxError extends TensorGpuError {
  constructor(
    readonly reason: string,
    readonly text: string,
    readonly at: number,
  ) {
    super(`${reason} at offset ${at} of ${JSON.stringify(text)}`);
  }
}

export interface ParsedCall {
  name: string;
  arguments: Record<string, unknown>;
}

const NAME = /[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*/y;
const IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
const NUMBER = /[-+]?(?:\d[\d_]*\.?[\d_]*(?:[eE][-+]?\d+)?|\.\d[\d_]*(?:[eE][-+]?\d+)?)/y;
const ESCAPES: Readonly<Record<string, string>> = { n: '\n', t: '\t', r: '\r', '\\': '\\', "'": "'", '"': '"', '0': '\0', b: '\b', f: '\f', v: '\v' };

class Reader {
  at = 0;
  constructor(readonly text: string) {}

  fail(reason: string): never {
    throw new PythonCallSyntaxError(reason, this.text, this.at);
  }

  skipSpace(): void {
    while (this.at < this.text.length && /\s/.test(this.text[this.at]!)) this.at++;
  }

  peek(): string {
    this.skipSpace();
    return this.text[this.at] ?? '';
  }

  expect(ch: string): void {
    if (this.peek() !== ch) this.fail(`expected '${ch}'${this.at < this.text.length ? `, found '${this.text[this.at]}'` : ', found the end'}`);
    this.at++;
  }

  match(re: RegExp): string | undefined {
    this.skipSpace();
    re.lastIndex = this.at;
    const m = re.exec(this.text);
    if (!m) return undefined;
    this.at += m[0].length;
    return m[0];
  }

  /** Items up to `close`, separated by commas, a trailing comma allowed (as Python allows it). */
  items(close: string, item: () => void): void {
    while (this.peek() !== close) {
      item();
      if (this.peek() === ',') this.at++;
      else if (this.peek() !== close) this.fail(`expected ',' or '${close}'`);
    }
    this.at++;
  }

  value(): unknown {
    const ch = this.peek();
    if (ch === '"' || ch === "'") return this.string();
    if (ch === '[' || ch === '(') {
      this.at++;
      const list: unknown[] = [];
      this.items(ch === '[' ? ']' : ')', () => list.push(this.value()));
      return list;
    }
    if (ch === '{') {
      this.at++;
      const dict: Record<string, unknown> = {};
      this.items('}', () => {
        const key = this.value();
        if (typeof key !== 'string' && typeof key !== 'number') this.fail('a dict key must be a string or a number');
        this.expect(':');
        dict[String(key)] = this.value();
      });
      return dict;
    }
    const word = this.match(IDENT);
    if (word !== undefined) {
      if (word === 'True') return true;
      if (word === 'False') return false;
      if (word === 'None') return null;
      this.at -= word.length;
      this.fail(`'${word}' is not a literal (strings, numbers, True, False, None, lists, dicts)`);
    }
    const num = this.match(NUMBER);
    if (num === undefined || num === '-' || num === '+') this.fail('expected a literal value');
    const value = Number(num.replaceAll('_', ''));
    if (!Number.isFinite(value)) this.fail(`'${num}' is not a finite number`);
    return value;
  }

  string(): string {
    const quote = this.text[this.at]!;
    const triple = this.text.startsWith(quote.repeat(3), this.at);
    const end = triple ? quote.repeat(3) : quote;
    this.at += end.length;
    let out = '';
    for (;;) {
      if (this.at >= this.text.length) this.fail('unterminated string');
      if (this.text.startsWith(end, this.at)) {
        this.at += end.length;
        return out;
      }
      const ch = this.text[this.at++]!;
      if (ch === '\n' && !triple) this.fail('newline in a string');
      if (ch !== '\\') {
        out += ch;
        continue;
      }
      const esc = this.text[this.at++] ?? '';
      if (esc in ESCAPES) out += ESCAPES[esc];
      else if (esc === 'x' || esc === 'u' || esc === 'U') {
        const digits = this.text.slice(this.at, this.at + (esc === 'x' ? 2 : esc === 'u' ? 4 : 8));
        if (!/^[0-9a-fA-F]+$/.test(digits) || digits.length !== (esc === 'x' ? 2 : esc === 'u' ? 4 : 8)) this.fail(`bad \\${esc} escape`);
        out += String.fromCodePoint(parseInt(digits, 16));
        this.at += digits.length;
      } else if (esc === '\n') continue;
      else out += `\\${esc}`;
    }
  }

  call(): ParsedCall {
    const name = this.match(NAME);
    if (name === undefined) this.fail('expected a function name');
    this.expect('(');
    const args: Record<string, unknown> = {};
    this.items(')', () => {
      const key = this.match(IDENT);
      if (key === undefined) this.fail('positional argument: expected a keyword argument (name=value)');
      if (this.peek() !== '=') this.fail(`positional argument '${key}': tool calls take keyword arguments only`);
      this.at++;
      if (key in args) this.fail(`argument '${key}' given twice`);
      args[key] = this.value();
    });
    return { name, arguments: args };
  }
}

/** `[f(a=1), g()]` (or one bare call, `f(a=1)`) as calls; throws PythonCallSyntaxError naming the offset. */
export function parsePythonCalls(text: string): ParsedCall[] {
  const r = new Reader(text);
  const calls: ParsedCall[] = [];
  if (r.peek() === '[') {
    r.at++;
    r.items(']', () => calls.push(r.call()));
  } else calls.push(r.call());
  if (r.peek() !== '') r.fail('unexpected text after the calls');
  return calls;
}

/** A JSON value as a Python literal (strings quoted as Python's repr would, with double quotes). */
export function pythonLiteral(value: unknown): string {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : 'None';
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(pythonLiteral).join(', ')}]`;
  if (typeof value === 'object')
    return `{${Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pythonLiteral(v)}`)
      .join(', ')}}`;
  return JSON.stringify(String(value));
}

/** Calls as the Python list LFM2 writes: `[f(a=1, b="x"), g()]`. */
export function pythonCalls(calls: readonly ParsedCall[]): string {
  const one = (c: ParsedCall) =>
    `${c.name}(${Object.entries(c.arguments)
      .map(([k, v]) => `${k}=${pythonLiteral(v)}`)
      .join(', ')})`;
  return `[${calls.map(one).join(', ')}]`;
}
