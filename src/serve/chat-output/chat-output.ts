// A chat completion's output in OpenAI's shapes: the stream's deltas (`reasoning_content`, `content`, `tool_calls`)
// and the whole message, built from the same deltas so a stream always adds up to the non-streamed answer. It also
// holds the request to its tool_choice and parallel_tool_calls: a forced call in Qwen3's JSON format is decoded under
// a grammar (serve/response-format.ts), the other formats are checked here after the fact.
import { randomBytes } from 'node:crypto';
import { ToolChoiceError } from './errors.js';
import { OutputSplitter, type OutputPart, type OutputSplitterOptions } from './output-splitter.js';
import type { ParsedCall } from './python-calls.js';

export type ToolChoice = { kind: 'auto' } | { kind: 'none' } | { kind: 'required' } | { kind: 'function'; name: string };

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

export interface ChatDelta {
  reasoning_content?: string;
  content?: string;
  tool_calls?: ToolCallDelta[];
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessageOut {
  role: 'assistant';
  content: string | null;
  reasoning_content?: string;
  tool_calls?: ToolCall[];
}

export interface ChatOutputOptions extends OutputSplitterOptions {
  toolChoice?: ToolChoice;
  /** false: at most one call (default true). */
  parallelToolCalls?: boolean;
}

/** OpenAI's call ids: `call_` and 24 random characters. */
const callId = (): string => `call_${randomBytes(18).toString('base64url').slice(0, 24)}`;

export class ChatOutput {
  private readonly splitter: OutputSplitter;
  private content = '';
  private reasoning = '';
  private readonly calls: ToolCall[] = [];

  constructor(private readonly options: ChatOutputOptions = {}) {
    this.splitter = new OutputSplitter(options);
  }

  /** The deltas this text completes; throws a ModelOutputError for a call that does not parse or is not allowed. */
  push(text: string): ChatDelta[] {
    return this.deltas(this.splitter.push(text));
  }

  /** The last deltas once the output has ended; throws a ModelOutputError (a required call missing, a call left open). */
  finish(): ChatDelta[] {
    const deltas = this.deltas(this.splitter.finish());
    const choice = this.options.toolChoice;
    if (this.calls.length === 0 && (choice?.kind === 'required' || choice?.kind === 'function'))
      throw new ToolChoiceError(
        `tool_choice asked for ${choice.kind === 'required' ? 'a tool call' : `a call of '${choice.name}'`} and the model answered without one`,
      );
    return deltas;
  }

  get hasToolCalls(): boolean {
    return this.calls.length > 0;
  }

  /** The whole message, after finish(). */
  message(): ChatMessageOut {
    return {
      role: 'assistant',
      content: this.content === '' && this.calls.length > 0 ? null : this.content,
      ...(this.reasoning !== '' ? { reasoning_content: this.reasoning } : {}),
      ...(this.calls.length > 0 ? { tool_calls: this.calls } : {}),
    };
  }

  private deltas(parts: OutputPart[]): ChatDelta[] {
    const out: ChatDelta[] = [];
    for (const part of parts) {
      if (part.kind === 'reasoning') {
        this.reasoning += part.text;
        out.push({ reasoning_content: part.text });
      } else if (part.kind === 'content') {
        this.content += part.text;
        out.push({ content: part.text });
      } else {
        const call = this.admit(part.index, part.call);
        // As OpenAI streams a call: the id, type and name first with empty arguments, then the arguments.
        out.push({ tool_calls: [{ index: part.index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] });
        out.push({ tool_calls: [{ index: part.index, function: { arguments: call.function.arguments } }] });
      }
    }
    return out;
  }

  private admit(index: number, parsed: ParsedCall): ToolCall {
    const { toolChoice, tools, parallelToolCalls } = this.options;
    if (toolChoice?.kind === 'function' && parsed.name !== toolChoice.name)
      throw new ToolChoiceError(`tool_choice asked for a call of '${toolChoice.name}' and the model called '${parsed.name}'`);
    if (tools && !tools.has(parsed.name))
      throw new ToolChoiceError(`the model called '${parsed.name}', which is not among the offered tools (${[...tools.keys()].join(', ')})`);
    if (parallelToolCalls === false && index > 0) throw new ToolChoiceError('the model made more than one tool call and parallel_tool_calls is false');
    const call: ToolCall = { id: callId(), type: 'function', function: { name: parsed.name, arguments: JSON.stringify(parsed.arguments) } };
    this.calls.push(call);
    return call;
  }
}
