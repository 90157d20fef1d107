// LFM2's Pythonic tool calls: the strict literal parser (and its errors, with the offset) and the printer that
// puts calls back into a prompt.
import { describe, expect, it } from 'vitest';
import { PythonCallSyntaxError, parsePythonCalls, pythonCalls } from '../../../src/serve/chat-output/python-calls.js';

describe('parsePythonCalls', () => {
  it('reads a list of calls with every literal kind, nested', () => {
    const text = `[get_weather(city="Paris", days=3, metric=True), search(q='it\\'s "quoted"\\n', limit=-2.5e1, tags=["a", 'b'], opts={"deep": False, 'n': None, 1: (1, 2,)},), noop()]`;
    expect(parsePythonCalls(text)).toEqual([
      { name: 'get_weather', arguments: { city: 'Paris', days: 3, metric: true } },
      { name: 'search', arguments: { q: 'it\'s "quoted"\n', limit: -25, tags: ['a', 'b'], opts: { deep: false, n: null, '1': [1, 2] } } },
      { name: 'noop', arguments: {} },
    ]);
  });

  it('reads one bare call, dotted names, triple-quoted and escaped strings', () => {
    expect(parsePythonCalls(' tools.run(code="""a\nb""", u="\\u00e9\\x41") ')).toEqual([{ name: 'tools.run', arguments: { code: 'a\nb', u: 'éA' } }]);
  });

  it.each([
    ['[f(a=1, 2)]', 'expected a keyword argument'],
    ['[f(x)]', 'positional argument'],
    ['[f(a=b)]', "'b' is not a literal"],
    ['[f(a="x)]', 'unterminated string'],
    ['[f(a=1, a=2)]', "argument 'a' given twice"],
    ['[f(a=1)] trailing', 'unexpected text after the calls'],
    ['[f(a=1)', "expected ',' or ']'"],
    ['[f(a=__import__("os"))]', 'is not a literal'],
  ])('refuses %j (%s), naming the offset', (text, reason) => {
    let caught: unknown;
    try {
      parsePythonCalls(text);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(PythonCallSyntaxError);
    expect((caught as PythonCallSyntaxError).message).toContain(reason);
    expect((caught as PythonCallSyntaxError).at).toBeGreaterThanOrEqual(0);
  });

  it('prints calls that parse back to the same calls', () => {
    const calls = [
      { name: 'f', arguments: { s: 'a "b"\n', n: 1.5, t: true, z: null, l: [1, 'x'], d: { k: false } } },
      { name: 'g', arguments: {} },
    ];
    const text = pythonCalls(calls);
    expect(text).toBe('[f(s="a \\"b\\"\\n", n=1.5, t=True, z=None, l=[1, "x"], d={"k": False}), g()]');
    expect(parsePythonCalls(text)).toEqual(calls);
  });
});
