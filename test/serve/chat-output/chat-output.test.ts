// Reading chat output: reasoning, content and tool calls from fixtures of what Qwen3, Qwen3.5 / Qwen3.6 and LFM2
// write. Each fixture is also streamed in random splits; the deltas, put together as an OpenAI client puts them
// together, must give the non-streamed message.
import { describe, expect, it } from 'vitest';
import { ChatOutput, type ChatDelta, type ChatMessageOut, type ChatOutputOptions } from '../../../src/serve/chat-output/chat-output.js';
import { ModelOutputError, ToolCallSyntaxError, ToolChoiceError } from '../../../src/serve/chat-output/errors.js';
import { LFM2_TOOL_CALLS, QWEN_TOOL_CALLS } from '../../../src/serve/chat-output/tool-call-formats.js';

const TOOLS = new Map([
  ['get_weather', { parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' }, units: { enum: ['C', 'F'] } } } }],
  ['get_time', { parameters: { type: 'object', properties: { tz: { type: 'string' } } } }],
]);
const qwen: ChatOutputOptions = { toolCalls: QWEN_TOOL_CALLS, tools: TOOLS };
const lfm2: ChatOutputOptions = { toolCalls: LFM2_TOOL_CALLS, tools: TOOLS };

/** The whole output at once: the non-streamed answer. */
function whole(text: string, options: ChatOutputOptions): ChatMessageOut {
  const out = new ChatOutput(options);
  out.push(text);
  out.finish();
  return out.message();
}

/** A deterministic stream of random cut points. */
function splits(text: string, seed: number): string[] {
  let s = seed;
  const rand = () => (s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32;
  const pieces: string[] = [];
  for (let at = 0; at < text.length; ) {
    const n = 1 + Math.floor(rand() * 6);
    pieces.push(text.slice(at, at + n));
    at += n;
  }
  return pieces;
}

/** The deltas put together the way the openai client's stream helpers do. */
function accumulate(deltas: ChatDelta[]): ChatMessageOut {
  let content = '';
  let reasoning = '';
  const calls: { id: string; type: 'function'; function: { name: string; arguments: string } }[] = [];
  for (const d of deltas) {
    content += d.content ?? '';
    reasoning += d.reasoning_content ?? '';
    for (const c of d.tool_calls ?? []) {
      if (c.id !== undefined) {
        expect(c.index).toBe(calls.length);
        expect(c.function.arguments).toBe('');
        calls.push({ id: c.id, type: 'function', function: { name: c.function.name!, arguments: '' } });
      } else calls[c.index]!.function.arguments += c.function.arguments;
    }
  }
  return {
    role: 'assistant',
    content: content === '' && calls.length > 0 ? null : content,
    ...(reasoning !== '' ? { reasoning_content: reasoning } : {}),
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  };
}

function streamed(text: string, options: ChatOutputOptions, seed: number): ChatMessageOut {
  const out = new ChatOutput(options);
  const deltas: ChatDelta[] = [];
  for (const piece of splits(text, seed)) deltas.push(...out.push(piece));
  deltas.push(...out.finish());
  return accumulate(deltas);
}

const withoutIds = (m: ChatMessageOut) => ({ ...m, tool_calls: m.tool_calls?.map((c) => ({ ...c, id: c.id.startsWith('call_') && c.id.length === 29 })) });

const call = (name: string, args: object) => ({ id: true, type: 'function', function: { name, arguments: JSON.stringify(args) } });

const FIXTURES: [string, string, ChatOutputOptions, object][] = [
  [
    'Qwen3 thinking, tags in the output',
    '<think>\nThe user wants 2+2.\nThat is 4.\n</think>\n\nThe answer is 4.',
    qwen,
    { content: 'The answer is 4.', reasoning_content: 'The user wants 2+2.\nThat is 4.' },
  ],
  [
    'Qwen3.5 thinking opened by the prompt, then an XML call typed by the schema',
    'I should look it up.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco, CA\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=units>\nC\n</parameter>\n</function>\n</tool_call>',
    { ...qwen, startsInReasoning: true },
    { content: null, reasoning_content: 'I should look it up.', tool_calls: [call('get_weather', { city: 'San Francisco, CA', days: 3, units: 'C' })] },
  ],
  [
    'Qwen3 parallel JSON calls after some content',
    'Let me check both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>',
    qwen,
    { content: 'Let me check both.', tool_calls: [call('get_weather', { city: 'Paris', days: 2 }), call('get_time', { tz: 'Europe/Paris' })] },
  ],
  [
    'LFM2 Pythonic calls, then content',
    '<|tool_call_start|>[get_weather(city="Paris", days=2), get_time(tz="CET")]<|tool_call_end|>Checking both now.',
    lfm2,
    { content: 'Checking both now.', tool_calls: [call('get_weather', { city: 'Paris', days: 2 }), call('get_time', { tz: 'CET' })] },
  ],
  [
    'LFM2 thinking then a call',
    '<think>Need the weather.</think><|tool_call_start|>[get_weather(city="Oslo")]<|tool_call_end|>',
    lfm2,
    { content: null, reasoning_content: 'Need the weather.', tool_calls: [call('get_weather', { city: 'Oslo' })] },
  ],
  ['plain content with tag-like text stays as written', '  a < b, <tool_ x </think> y  \n', qwen, { content: '  a < b, <tool_ x </think> y  \n' }],
  [
    'tool tags are plain content when no tools are offered',
    'x <tool_call>\n{"name": "f"}\n</tool_call>',
    {},
    { content: 'x <tool_call>\n{"name": "f"}\n</tool_call>' },
  ],
  [
    'thinking cut short (no </think>) is all reasoning',
    'still thinking about it  ',
    { startsInReasoning: true },
    { content: '', reasoning_content: 'still thinking about it' },
  ],
  ['an empty think block (thinking off)', '<think>\n\n</think>\n\nHi.', {}, { content: 'Hi.' }],
];

describe('ChatOutput', () => {
  it.each(FIXTURES)('%s', (_name, text, options, expected) => {
    const message = whole(text, options);
    expect(withoutIds(message)).toEqual({ role: 'assistant', ...expected });
    for (let seed = 1; seed <= 40; seed++) expect(withoutIds(streamed(text, options, seed))).toEqual(withoutIds(message));
  });

  it.each([
    ['arguments that are not JSON', '<tool_call>\n{"name": "get_weather", "arguments": {city: Paris}}\n</tool_call>', qwen, ToolCallSyntaxError, 'not JSON'],
    ['a JSON call without a name', '<tool_call>\n{"arguments": {}}\n</tool_call>', qwen, ToolCallSyntaxError, '"name"'],
    [
      'an XML integer that is not one',
      '<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>',
      qwen,
      ToolCallSyntaxError,
      "parameter 'days'",
    ],
    [
      'a Python call with a positional argument',
      '<|tool_call_start|>[get_weather("Paris")]<|tool_call_end|>',
      lfm2,
      ToolCallSyntaxError,
      'positional argument',
    ],
    ['a call left open', 'ok <tool_call>\n{"name": "get_time", "arguments": {}}', qwen, ToolCallSyntaxError, 'ended inside a tool call'],
    ['a tool that was not offered', '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>', qwen, ToolChoiceError, "'rm_rf'"],
    [
      'two calls with parallel_tool_calls false',
      '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call><tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
      { ...qwen, parallelToolCalls: false },
      ToolChoiceError,
      'parallel_tool_calls',
    ],
    ['no call where one is required', 'I will not call anything.', { ...qwen, toolChoice: { kind: 'required' } }, ToolChoiceError, 'tool_choice'],
    [
      'a call of another function than the named one',
      '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
      { ...qwen, toolChoice: { kind: 'function', name: 'get_weather' } },
      ToolChoiceError,
      "'get_weather'",
    ],
  ] as const)('refuses %s, streamed or not', (_name, text, options, type, message) => {
    expect(() => whole(text, options as ChatOutputOptions)).toThrow(type);
    expect(() => whole(text, options as ChatOutputOptions)).toThrow(message);
    for (let seed = 1; seed <= 10; seed++) {
      let caught: unknown;
      try {
        streamed(text, options as ChatOutputOptions, seed);
      } catch (e) {
        caught = e;
      }
      expect(caught).toBeInstanceOf(ModelOutputError);
      expect((caught as Error).message).toContain(message);
    }
  });
});
