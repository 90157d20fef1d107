// The chat prompt with tools and thinking through the real Qwen3 and the Qwen3.6-shaped templates: which tools are
// offered, whether the answer starts inside <think>, which call format is read.
import { beforeAll, describe, expect, it } from 'vitest';
import { qwen3_5TokenizerFiles } from '../../src/models/qwen3_5/tokenizer-files.js';
import { renderChatPrompt } from '../../src/serve/chat-prompt.js';
import { parseChatRequest } from '../../src/serve/request.js';
import { TextTokenizer, qwen3TokenizerDir } from '../../src/tokenizer/tokenizer.js';

const TOOLS = [{ type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } } }];
const chat = (extra: object) => {
  const req = parseChatRequest({ model: 'm', messages: [{ role: 'user', content: 'Time?' }], ...extra });
  return req as typeof req & { prompt: never };
};

describe('renderChatPrompt', () => {
  let qwen35: TextTokenizer;
  let qwen3: TextTokenizer;
  beforeAll(async () => {
    const files = await qwen3_5TokenizerFiles();
    qwen35 = new TextTokenizer(JSON.parse(files['tokenizer.json']!), JSON.parse(files['tokenizer_config.json']!));
    qwen3 = TextTokenizer.fromDirectory(qwen3TokenizerDir());
  });

  it("Qwen3.6's template: tools with the XML call format, and thinking opened by the prompt", () => {
    const on = renderChatPrompt(chat({ tools: TOOLS, chat_template_kwargs: { enable_thinking: true } }), qwen35);
    expect(on.text).toContain('<tools>\n{"type": "function", "function": {"name": "get_time"');
    expect(on.text).toContain('<function=example_function_name>');
    expect(on.text.endsWith('<|im_start|>assistant\n<think>\n')).toBe(true);
    expect(on.output).toMatchObject({ startsInReasoning: true, toolChoice: { kind: 'auto' }, parallelToolCalls: true });
    expect(on.output.toolCalls?.name).toBe('qwen');
    const off = renderChatPrompt(chat({ tools: TOOLS }), qwen35);
    expect(off.output.startsInReasoning).toBe(false);
    expect(renderChatPrompt(chat({ tools: TOOLS, tool_choice: 'none' }), qwen35).output.toolCalls).toBeUndefined();
  });

  it("Qwen3's template: thinking is the model's to open, chat_template_kwargs reach the template", () => {
    const on = renderChatPrompt(chat({ chat_template_kwargs: { enable_thinking: true } }), qwen3);
    expect(on.output.startsInReasoning).toBe(false);
    expect(on.text.endsWith('<|im_start|>assistant\n')).toBe(true);
    const messages = [
      { role: 'assistant', content: 'x', reasoning_content: 'because' },
      { role: 'user', content: 'y' },
    ];
    expect(renderChatPrompt(chat({ messages }), qwen3).text).toContain('<|im_start|>assistant\nx<|im_end|>');
  });
});
