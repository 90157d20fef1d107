// Tool calls and reasoning through the official openai client: the real route, chat template and stream, with the
// model's output scripted (ScriptedScheduler) as Qwen3 and LFM2 write it. Tools reach the template, calls come back
// as tool_calls (streamed and not, parallel, forced, refused when they do not parse), tool results and earlier calls
// render into the next prompt, and <think> comes back as reasoning_content.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedModel } from '../../src/models/load.js';
import { lfm2TokenizerFiles } from '../../src/models/lfm2/tokenizer.js';
import type { RunningServer } from '../../src/serve/server.js';
import { TextTokenizer } from '../../src/tokenizer/tokenizer.js';
import { MODEL, loadTinyModel, serve } from './helpers.js';
import { ScriptedScheduler } from './scripted-scheduler.js';

type Chunk = OpenAI.Chat.Completions.ChatCompletionChunk;
type Message = OpenAI.Chat.Completions.ChatCompletionMessage & { reasoning_content?: string };

const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
    },
  },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } },
];
const ASK = [{ role: 'user' as const, content: 'Weather and time in Paris?' }];

let loaded: LoadedModel;
const servers: RunningServer[] = [];

async function scripted(model: LoadedModel): Promise<{ client: OpenAI; script: ScriptedScheduler; server: RunningServer }> {
  const script = new ScriptedScheduler(model.tokenizer!);
  const { server, client } = await serve(model, { scheduler: () => script });
  servers.push(server);
  return { client, script, server };
}

/** A stream put together as the client's users do, and its chunks. */
async function collect(stream: AsyncIterable<Chunk>): Promise<{ message: Message; finish: string | null; chunks: Chunk[] }> {
  const chunks: Chunk[] = [];
  let content = '';
  let reasoning = '';
  let finish: string | null = null;
  const calls: OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[] = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    const choice = chunk.choices[0];
    if (!choice) continue;
    const delta = choice.delta as Chunk['choices'][0]['delta'] & { reasoning_content?: string };
    content += delta.content ?? '';
    reasoning += delta.reasoning_content ?? '';
    for (const c of delta.tool_calls ?? []) {
      if (c.id) calls[c.index] = { id: c.id, type: 'function', function: { name: c.function!.name!, arguments: c.function!.arguments ?? '' } };
      else calls[c.index]!.function.arguments += c.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  const message = {
    role: 'assistant',
    content: content === '' && calls.length > 0 ? null : content,
    ...(reasoning ? { reasoning_content: reasoning } : {}),
    ...(calls.length ? { tool_calls: calls } : {}),
  } as Message;
  return { message, finish, chunks };
}

beforeAll(async () => {
  loaded = await loadTinyModel();
}, 60_000);

afterAll(async () => {
  for (const s of servers) await s.close();
  loaded?.model.dispose();
});

describe('serve: Qwen3 tool calls and reasoning', () => {
  let client: OpenAI;
  let script: ScriptedScheduler;
  let server: RunningServer;
  beforeAll(async () => ({ client, script, server } = await scripted(loaded)));

  const PARALLEL =
    'Checking both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>';

  it('renders the tools into the prompt and returns parallel calls, the same streamed and not', async () => {
    script.next(PARALLEL, PARALLEL);
    const whole = await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS });
    const prompt = script.prompts.at(-1)!;
    expect(prompt).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
    expect(prompt).toContain('"name": "get_time"');
    const message = whole.choices[0]!.message;
    expect(whole.choices[0]!.finish_reason).toBe('tool_calls');
    expect(message.content).toBe('Checking both.');
    expect(
      message.tool_calls!.map((c) => [c.type, c.type === 'function' && c.function.name, c.type === 'function' && JSON.parse(c.function.arguments)]),
    ).toEqual([
      ['function', 'get_weather', { city: 'Paris', days: 2 }],
      ['function', 'get_time', { tz: 'Europe/Paris' }],
    ]);
    expect(message.tool_calls!.every((c) => /^call_[\w-]{24}$/.test(c.id))).toBe(true);

    const streamed = await collect(await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS, stream: true }));
    expect(streamed.finish).toBe('tool_calls');
    const strip = (m: Message) => ({ ...m, tool_calls: m.tool_calls?.map((c) => c.type === 'function' && c.function) });
    expect(strip(streamed.message)).toEqual(strip({ ...message, refusal: undefined } as unknown as Message));
    // OpenAI's order: id, type and name with empty arguments first, then the arguments.
    const first = streamed.chunks.find((c) => c.choices[0]?.delta.tool_calls)!.choices[0]!.delta.tool_calls![0]!;
    expect(first).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather', arguments: '' } });
    expect(first.id).toMatch(/^call_/);
  });

  it('renders an assistant turn with tool_calls and the tool results through the template', async () => {
    script.next('It is 21 °C and 14:00 in Paris.');
    const r = await client.chat.completions.create({
      model: MODEL,
      tools: TOOLS,
      messages: [
        ...ASK,
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
            { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{"tz": "CET"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
        { role: 'tool', tool_call_id: 'call_2', content: '14:00' },
      ],
    });
    expect(r.choices[0]!.message.content).toBe('It is 21 °C and 14:00 in Paris.');
    expect(r.choices[0]!.finish_reason).toBe('stop');
    const prompt = script.prompts.at(-1)!;
    expect(prompt).toContain('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>');
    expect(prompt).toContain('<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response>\n<tool_response>\n14:00\n</tool_response><|im_end|>');
  });

  it('forces a named tool by offering only it, and answers 500 model_error when the model does not call it', async () => {
    const choice = { type: 'function' as const, function: { name: 'get_time' } };
    script.next('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>');
    const r = await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS, tool_choice: choice });
    expect(script.prompts.at(-1)).not.toContain('get_weather');
    expect(r.choices[0]!.message.tool_calls![0]).toMatchObject({ function: { name: 'get_time', arguments: '{}' } });

    script.next('I would rather not.');
    const err = await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS, tool_choice: 'required' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(500);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('tool_choice_not_followed');
    expect((err as Error).message).toContain('tool_choice asked for a tool call');
  });

  it('answers a call whose arguments do not parse with a clear error, streamed or not', async () => {
    const bad = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {city: Paris}}\n</tool_call>';
    script.next(bad, bad);
    const err = await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('invalid_tool_call');
    expect((err as Error).message).toContain('does not parse');
    expect((err as Error).message).toContain('{city: Paris}');
    const streamErr = await collect(await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS, stream: true })).catch((e: unknown) => e);
    expect(streamErr).toBeInstanceOf(OpenAI.APIError);
    expect((streamErr as Error).message).toContain('does not parse');
  });

  it('with tool_choice none offers no tools and leaves tool tags as content', async () => {
    const text = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>';
    script.next(text);
    const r = await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS, tool_choice: 'none' });
    expect(script.prompts.at(-1)).not.toContain('<tools>');
    expect(r.choices[0]!.message).toMatchObject({ content: text });
    expect(r.choices[0]!.message.tool_calls).toBeUndefined();
  });

  it('returns <think> as reasoning_content (enable_thinking, reasoning_effort), streamed and not', async () => {
    const text = '<think>\nParis is in CET.\n</think>\n\nIt is 14:00.';
    script.next(text, text);
    const request = {
      model: MODEL,
      messages: ASK,
      chat_template_kwargs: { enable_thinking: true },
    } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
    const whole = await client.chat.completions.create(request);
    expect(script.prompts.at(-1)!.endsWith('<|im_start|>assistant\n')).toBe(true);
    expect(whole.choices[0]!.message).toMatchObject({ content: 'It is 14:00.', reasoning_content: 'Paris is in CET.' });
    const streamed = await collect(await client.chat.completions.create({ ...request, stream: true }));
    expect(streamed.message).toEqual({ role: 'assistant', content: 'It is 14:00.', reasoning_content: 'Paris is in CET.' });
    expect(streamed.finish).toBe('stop');

    // Qwen3's template has enable_thinking, not reasoning_effort: 'none' switches thinking off, the rest on.
    script.next('a', 'b');
    await client.chat.completions.create({ model: MODEL, messages: ASK, reasoning_effort: 'none' } as never);
    expect(script.prompts.at(-1)!.endsWith('<think>\n\n</think>\n\n')).toBe(true);
    await client.chat.completions.create({ model: MODEL, messages: ASK, reasoning_effort: 'high' });
    expect(script.prompts.at(-1)!.endsWith('<|im_start|>assistant\n')).toBe(true);
  });

  it('refuses bad tool fields with a 400 naming the field', async () => {
    const post = (body: object) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: ASK, ...body }),
      });
    for (const [body, param] of [
      [{ tools: [{ type: 'function', function: { name: 'bad name' } }] }, 'tools[0].function.name'],
      [{ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice.function.name'],
      [{ tool_choice: 'required' }, 'tool_choice'],
      [
        { messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'x', type: 'function', function: { name: 'f', arguments: '{oops' } }] }] },
        'messages[0].tool_calls[0].function.arguments',
      ],
      [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id'],
      [{ reasoning_effort: 'extreme' }, 'reasoning_effort'],
    ] as const) {
      const res = await post(body);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { param: string } }).error.param).toBe(param);
    }
  });
});

describe('serve: LFM2 Pythonic tool calls', () => {
  let client: OpenAI;
  let script: ScriptedScheduler;
  beforeAll(async () => {
    const files = await lfm2TokenizerFiles();
    const tokenizer = new TextTokenizer(JSON.parse(files['tokenizer.json']!), JSON.parse(files['tokenizer_config.json']!));
    ({ client, script } = await scripted({ ...loaded, tokenizer }));
  });

  it('renders tools into the system turn, reads calls written between special tokens, and puts them back into the history', async () => {
    const text = '<|tool_call_start|>[get_weather(city="Paris", days=2), get_time(tz="CET")]<|tool_call_end|>Checking.';
    script.next(text, text);
    const whole = await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS });
    expect(script.prompts.at(-1)).toContain('List of tools: <|tool_list_start|>[{"type": "function", "function": {"name": "get_weather"');
    const message = whole.choices[0]!.message;
    expect(whole.choices[0]!.finish_reason).toBe('tool_calls');
    expect(message.content).toBe('Checking.');
    expect(message.tool_calls!.map((c) => c.type === 'function' && [c.function.name, c.function.arguments])).toEqual([
      ['get_weather', '{"city":"Paris","days":2}'],
      ['get_time', '{"tz":"CET"}'],
    ]);
    const streamed = await collect(await client.chat.completions.create({ model: MODEL, messages: ASK, tools: TOOLS, stream: true }));
    expect(streamed.message.tool_calls!.map((c) => c.type === 'function' && c.function)).toEqual(
      message.tool_calls!.map((c) => c.type === 'function' && c.function),
    );
    expect(streamed.message.content).toBe('Checking.');

    script.next('Done.');
    await client.chat.completions.create({
      model: MODEL,
      tools: TOOLS,
      messages: [
        ...ASK,
        message as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam,
        { role: 'tool', tool_call_id: message.tool_calls![0]!.id, content: '21' },
      ],
    });
    const prompt = script.prompts.at(-1)!;
    expect(prompt).toContain(
      '<|im_start|>assistant\nChecking.<|tool_call_start|>[get_weather(city="Paris", days=2), get_time(tz="CET")]<|tool_call_end|><|im_end|>',
    );
    expect(prompt).toContain('<|im_start|>tool\n<|tool_response_start|>21<|tool_response_end|><|im_end|>');
  });
});
