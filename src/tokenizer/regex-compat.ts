// Inline case-insensitive groups `(?i:...)` in tokenizer.json regexes, made exact for JavaScript.
//
// Hugging Face tokenizers (Rust) compiles tokenizer regexes with Oniguruma, where `(?i:'s|'t|...)` (the GPT-4 /
// Llama 3 / Qwen / LFM2 contraction group) folds case by Unicode rules: `s` also matches U+017F LATIN SMALL LETTER
// LONG S and `k` U+212A KELVIN SIGN. Node 20's V8 has no regexp modifiers, so tokenizers.js rewrites the group
// itself, folding ASCII letters only: `he'ſt` then pre-tokenizes as `he|'ſt` where Rust gives `he|'ſ|t`. We expand
// such groups before tokenizers.js sees them, each letter becoming the class of every code point that folds to it,
// so the library gets a plain group. A group holding anything we do not fold exactly (a character class, a property
// or code-point escape, a nested flag group, a cased non-ASCII letter, a multi-letter fold such as `ss` ~ `ß`) is left
// as it was, to the library's ASCII folding.

/** Code points outside ASCII whose simple case folding is an ASCII letter (CaseFolding.txt, status C/S). */
const NON_ASCII_FOLDS: Readonly<Record<string, string>> = { k: '\u212A', s: '\u017F' };

/** ASCII letter pairs that one code point folds to under Oniguruma's full folding (ß -> ss, ﬅ -> st, ﬁ -> fi, ...). */
const MULTI_CHAR_FOLDS = /ss|st|ff|fi|fl/i;

/** Escapes with a fixed, case-free meaning that may stay inside an expanded group. */
const CASE_FREE_ESCAPES = new Set(['n', 'r', 't', 'f', 'v', 's', 'S', 'd', 'D', 'w', 'W', 'b', 'B']);

const isAsciiLetter = (c: string): boolean => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');

/** Length of the escape starting at `i` (a backslash), braced forms like `\p{L}` and `\x{41}` included. */
function escapeLength(pattern: string, i: number): number {
  const next = pattern.codePointAt(i + 1);
  if (next === undefined) return 1;
  const c = String.fromCodePoint(next);
  if ('pPx'.includes(c) && pattern[i + 2] === '{') {
    const close = pattern.indexOf('}', i + 3);
    if (close >= 0) return close - i + 1;
  }
  return 1 + c.length;
}

/** Index just past the character class opening at `i`; Oniguruma classes nest (`[a[bc]]`, `[[:alpha:]]`). */
function classEnd(pattern: string, i: number): number {
  let j = i + 1;
  if (pattern[j] === '^') j++;
  if (pattern[j] === ']') j++;
  let depth = 1;
  while (j < pattern.length) {
    const c = pattern[j];
    if (c === '\\') j += escapeLength(pattern, j);
    else {
      if (c === '[') depth++;
      else if (c === ']' && --depth === 0) return j + 1;
      j++;
    }
  }
  return pattern.length;
}

/** Index just past the `)` closing the group opening at `i`, or -1 when it is unterminated. */
function groupEnd(pattern: string, i: number): number {
  let depth = 0;
  let j = i;
  while (j < pattern.length) {
    const c = pattern[j];
    if (c === '\\') j += escapeLength(pattern, j);
    else if (c === '[') j = classEnd(pattern, j);
    else {
      if (c === '(') depth++;
      else if (c === ')' && --depth === 0) return j + 1;
      j++;
    }
  }
  return -1;
}

/** The body of a `(?i:...)` group with each letter replaced by its case-fold class, or undefined to leave it alone. */
function foldBody(body: string): string | undefined {
  if (MULTI_CHAR_FOLDS.test(body)) return undefined;
  let out = '';
  for (let i = 0; i < body.length; ) {
    const c = String.fromCodePoint(body.codePointAt(i)!);
    if (c === '\\') {
      const len = escapeLength(body, i);
      const escaped = body.slice(i + 1, i + len);
      if (escaped.length !== 1 || (/[0-9A-Za-z]/.test(escaped) && !CASE_FREE_ESCAPES.has(escaped))) return undefined;
      out += body.slice(i, i + len);
      i += len;
      continue;
    }
    if (c === '[') return undefined;
    if (c === '(' && body[i + 1] === '?' && !/^\(\?(?::|=|!|<=|<!)/.test(body.slice(i))) return undefined;
    if (isAsciiLetter(c)) {
      const lower = c.toLowerCase();
      out += `[${lower}${lower.toUpperCase()}${NON_ASCII_FOLDS[lower] ?? ''}]`;
    } else if (c.toLowerCase() !== c.toUpperCase()) {
      return undefined;
    } else {
      out += c;
    }
    i += c.length;
  }
  return out;
}

/** `pattern` with every `(?i:...)` group that can be folded exactly rewritten as a case-sensitive `(?:...)` group. */
export function expandCaseInsensitiveGroups(pattern: string): string {
  let out = '';
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i];
    if (c === '\\') {
      const len = escapeLength(pattern, i);
      out += pattern.slice(i, i + len);
      i += len;
    } else if (c === '[') {
      const end = classEnd(pattern, i);
      out += pattern.slice(i, end);
      i = end;
    } else if (pattern.startsWith('(?i:', i)) {
      const end = groupEnd(pattern, i);
      if (end < 0) return out + pattern.slice(i);
      const inner = expandCaseInsensitiveGroups(pattern.slice(i + 4, end - 1));
      const folded = foldBody(inner);
      out += folded === undefined ? `(?i:${inner})` : `(?:${folded})`;
      i = end;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** Rewrites `{ pattern: { Regex } }` anywhere below `node` (Split, Replace, Sequences of them); shares what is unchanged. */
function rewritePatterns(node: unknown): unknown {
  if (Array.isArray(node)) {
    const mapped = node.map(rewritePatterns);
    return mapped.some((v, k) => v !== node[k]) ? mapped : node;
  }
  if (node === null || typeof node !== 'object') return node;
  const record = node as Record<string, unknown>;
  let changed: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(record)) {
    let next = rewritePatterns(value);
    const regex = (value as { Regex?: unknown } | null)?.Regex;
    if (key === 'pattern' && typeof regex === 'string') {
      const expanded = expandCaseInsensitiveGroups(regex);
      if (expanded !== regex) next = { ...(value as object), Regex: expanded };
    }
    if (next !== value) (changed ??= { ...record })[key] = next;
  }
  return changed ?? record;
}

/**
 * A tokenizer.json with the `(?i:...)` groups of its normalizer, pre-tokenizer and decoder regexes expanded (see the
 * file comment); the input is not modified, and is returned as is when nothing changes.
 */
export function withExactCaseInsensitiveRegexes(json: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const key of ['normalizer', 'pre_tokenizer', 'decoder']) {
    const next = rewritePatterns(json[key]);
    if (next !== json[key]) (out ??= { ...json })[key] = next;
  }
  return out ?? json;
}
