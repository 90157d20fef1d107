// Splits a chat model's output, as it streams, into reasoning (`<think>...</think>`), content and tool calls. Fed
// text in whatever pieces the tokens make, it gives the same parts as when fed the whole text at once: a piece that
// may be the start of a tag, or whitespace a following tag would trim, waits for the next piece.
//
// Reasoning: the output opens with `<think>` (after whitespace), or it starts inside the block because the prompt
// already opened it (Qwen3.5 / Qwen3.6 and Qwen3-Thinking templates end the prompt with `<think>\n`), like vLLM's
// qwen3 reasoning parser. Output without `</think>` that started inside the block is all reasoning (a length cut).
// Whitespace next to the tags is trimmed (as the Qwen templates trim it when the turn is rendered again).
import type { ParsedCall } from './python-calls.js';
import { ToolCallSyntaxError } from './errors.js';
import type { ToolCallFormat, ToolSchemas } from './tool-call-formats.js';

export type OutputPart = { kind: 'reasoning'; text: string } | { kind: 'content'; text: string } | { kind: 'tool_call'; index: number; call: ParsedCall };

export interface OutputSplitterOptions {
  /** The prompt ends inside an open `<think>`: the output starts as reasoning. */
  startsInReasoning?: boolean;
  /** Parse tool calls in this format (undefined: tool tags are plain content). */
  toolCalls?: ToolCallFormat;
  /** The offered tools (typing Qwen3.5's XML parameters). */
  tools?: ToolSchemas;
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';

/** Length of the longest end of `text` that is a proper start of `tag` (text that may become the tag). */
function partialTag(text: string, tag: string): number {
  for (let k = Math.min(text.length, tag.length - 1); k > 0; k--) if (tag.startsWith(text.slice(text.length - k))) return k;
  return 0;
}

/** Length of the whitespace `text` ends with. */
function trailingSpace(text: string): number {
  return text.length - text.trimEnd().length;
}

export class OutputSplitter {
  private mode: 'start' | 'reasoning' | 'content' | 'call';
  private pending = '';
  /** Drop whitespace until the next other character (just after a tag). */
  private skipSpace = false;
  private calls = 0;

  constructor(private readonly options: OutputSplitterOptions = {}) {
    this.mode = options.startsInReasoning ? 'reasoning' : 'start';
    this.skipSpace = options.startsInReasoning === true;
  }

  /** The parts this piece of text completes; throws ToolCallSyntaxError for a call that does not parse. */
  push(text: string): OutputPart[] {
    this.pending += text;
    const parts: OutputPart[] = [];
    while (this.step(parts, false));
    return parts;
  }

  /** The parts left when the output has ended; throws ToolCallSyntaxError for a call left open. */
  finish(): OutputPart[] {
    const parts: OutputPart[] = [];
    while (this.step(parts, true));
    if (this.mode === 'call')
      throw new ToolCallSyntaxError(`the output ended inside a tool call (no ${this.options.toolCalls!.close})`, this.options.toolCalls!.open + this.pending);
    const rest = this.mode === 'reasoning' ? this.pending.trimEnd() : this.pending;
    this.pending = '';
    this.emit(parts, this.mode === 'reasoning' ? 'reasoning' : 'content', rest);
    return parts;
  }

  private emit(parts: OutputPart[], kind: 'reasoning' | 'content', text: string): void {
    if (this.skipSpace) {
      text = text.trimStart();
      if (text === '') return;
      this.skipSpace = false;
    }
    if (text === '') return;
    const last = parts.at(-1);
    if (last && last.kind === kind) last.text += text;
    else parts.push({ kind, text });
  }

  /** One move of the state machine; false when it needs more text (or, at the end, has nothing more to do). */
  private step(parts: OutputPart[], ended: boolean): boolean {
    const p = this.pending;
    switch (this.mode) {
      case 'start': {
        const t = p.trimStart();
        if (t.startsWith(THINK_OPEN)) {
          this.pending = t.slice(THINK_OPEN.length);
          this.mode = 'reasoning';
          this.skipSpace = true;
          return true;
        }
        if (!ended && THINK_OPEN.startsWith(t)) return false;
        this.mode = 'content';
        return true;
      }
      case 'reasoning': {
        const at = p.indexOf(THINK_CLOSE);
        if (at >= 0) {
          this.emit(parts, 'reasoning', p.slice(0, at).trimEnd());
          this.pending = p.slice(at + THINK_CLOSE.length);
          this.mode = 'content';
          this.skipSpace = true;
          return true;
        }
        if (ended) return false;
        this.release(parts, 'reasoning', THINK_CLOSE);
        return false;
      }
      case 'content': {
        const open = this.options.toolCalls?.open;
        const at = open === undefined ? -1 : p.indexOf(open);
        if (at >= 0) {
          this.emit(parts, 'content', p.slice(0, at).trimEnd());
          this.pending = p.slice(at + open!.length);
          this.mode = 'call';
          return true;
        }
        if (ended) return false;
        if (open === undefined) {
          this.pending = '';
          this.emit(parts, 'content', p);
        } else this.release(parts, 'content', open);
        return false;
      }
      case 'call': {
        const format = this.options.toolCalls!;
        const at = p.indexOf(format.close);
        if (at < 0) return false;
        for (const call of format.parse(p.slice(0, at), this.options.tools ?? new Map())) parts.push({ kind: 'tool_call', index: this.calls++, call });
        this.pending = p.slice(at + format.close.length);
        this.mode = 'content';
        this.skipSpace = true;
        return true;
      }
    }
  }

  /** Emits what cannot be part of `tag` nor whitespace before it; keeps the rest pending. */
  private release(parts: OutputPart[], kind: 'reasoning' | 'content', tag: string): void {
    const p = this.pending;
    const held = partialTag(p, tag);
    const keep = held > 0 ? held + trailingSpace(p.slice(0, p.length - held)) : trailingSpace(p);
    this.pending = p.slice(p.length - keep);
    this.emit(parts, kind, p.slice(0, p.length - keep));
  }
}
