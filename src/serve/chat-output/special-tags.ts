// Tags the output parsers read that some tokenizers mark special (LFM2's `<|tool_call_start|>`): decoding with
// special tokens skipped, as generated text is decoded, drops them, so the routes put their text back by token id.
import type { TextTokenizer } from '../../tokenizer/tokenizer.js';
import { LFM2_TOOL_CALLS, QWEN_TOOL_CALLS } from './tool-call-formats.js';

const TAGS = ['<think>', '</think>', QWEN_TOOL_CALLS.open, QWEN_TOOL_CALLS.close, LFM2_TOOL_CALLS.open, LFM2_TOOL_CALLS.close];

/** Token id -> tag text, for each tag that is one token and decodes to nothing with special tokens skipped. */
export function droppedTagTexts(tokenizer: TextTokenizer): ReadonlyMap<number, string> {
  const tags = new Map<number, string>();
  for (const tag of TAGS) {
    const ids = tokenizer.encode(tag);
    if (ids.length === 1 && tokenizer.decode(ids, true) === '') tags.set(ids[0]!, tag);
  }
  return tags;
}
