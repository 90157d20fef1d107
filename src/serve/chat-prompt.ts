// A chat request's prompt, rendered the way transformers' apply_chat_template renders it (tools, enable_thinking,
// chat_template_kwargs, reasoning_effort as template variables), and what reading the model's answer needs from it:
// whether the prompt left a `<think>` open, and which tool-call format to parse.
import type { ChatMessage, TextTokenizer } from '../tokenizer/tokenizer.js';
import type { ChatOutputOptions } from './chat-output/chat-output.js';
import { toolCallFormatOf } from './chat-output/tool-call-formats.js';
import { InvalidFieldError, UnsupportedFieldError } from './errors.js';
import type { CompletionRequest } from './request.js';

export interface ChatPrompt {
  text: string;
  output: ChatOutputOptions;
}

/** The template's prompt ends inside an opened think block (Qwen3.5 / Qwen3.6 with thinking on: `<think>\n`). */
const OPEN_THINK_AT_END = /<think>\s*$/;

export function renderChatPrompt(req: CompletionRequest & { prompt: ChatMessage[] }, tokenizer: TextTokenizer): ChatPrompt {
  const source = tokenizer.chatTemplateSource;
  const format = toolCallFormatOf(tokenizer);
  const fields = req.tools ?? { tools: [], toolChoice: { kind: 'none' as const }, parallelToolCalls: true };
  const choice = fields.toolChoice;
  // A named choice offers only that tool, so the model sees one function to call.
  const offered = choice.kind === 'none' ? [] : choice.kind === 'function' ? fields.tools.filter((t) => t.function.name === choice.name) : fields.tools;
  if (offered.length > 0) {
    if (!format)
      throw new UnsupportedFieldError(
        'tools',
        "this model's tokenizer has no tool-call format the server reads (Qwen's <tool_call>, LFM2's <|tool_call_start|>)",
      );
    if (!source.includes('tools')) throw new UnsupportedFieldError('tools', "this model's chat template does not render tools");
  }

  // Templates that do not render an assistant's tool_calls (LFM2's) get them in the content, as the model wrote them.
  const messages =
    format?.render && !source.includes('tool_calls')
      ? req.prompt.map(({ tool_calls, ...m }) =>
          tool_calls && tool_calls.length > 0
            ? { ...m, content: m.content + format.render!(tool_calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments }))) }
            : m,
        )
      : req.prompt;

  let enableThinking = req.enableThinking;
  const variables: Record<string, unknown> = { ...req.templateVariables };
  if (req.reasoningEffort !== undefined) {
    if (source.includes('reasoning_effort')) variables.reasoning_effort = req.reasoningEffort;
    else if (source.includes('enable_thinking')) enableThinking ??= req.reasoningEffort !== 'none';
    else
      throw new UnsupportedFieldError('reasoning_effort', "this model's chat template has no reasoning switch (neither reasoning_effort nor enable_thinking)");
  }

  let text: string;
  try {
    text = tokenizer.applyChatTemplate(messages, { enableThinking, tools: offered, variables });
  } catch (e) {
    throw new InvalidFieldError('messages', `the chat template cannot render these messages: ${(e as Error).message}`);
  }
  return {
    text,
    output: {
      startsInReasoning: OPEN_THINK_AT_END.test(text),
      toolCalls: offered.length > 0 ? format : undefined,
      tools: new Map(offered.map((t) => [t.function.name, { parameters: t.function.parameters }])),
      toolChoice: choice,
      parallelToolCalls: fields.parallelToolCalls,
    },
  };
}
