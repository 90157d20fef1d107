// What happens to each sampled id of a sequence, shared by generate() and the batching server: a stop id ends it
// (emitting nothing), otherwise the id's text is decoded incrementally, and a stop string in the text so far ends it
// with the text cut before the stop string.
import { StreamingDecoder, type TextTokenizer } from '../tokenizer/text-tokenizer.js';

export interface TokenOutcome {
  /** Text this token adds (empty while a multi-byte character is incomplete, or when it is cut). */
  text: string;
  /** Whether the token is emitted (a stop id is not; a stop string's token is when text is left before it). */
  emit: boolean;
  /** The sequence ends with this token. */
  stop?: 'eos' | 'stop-string';
}

export class SequenceOutput {
  private readonly decoder: StreamingDecoder;

  constructor(
    tokenizer: TextTokenizer,
    private readonly stopIds: ReadonlySet<number>,
    private readonly stopStrings: readonly string[] = [],
  ) {
    this.decoder = new StreamingDecoder(tokenizer);
  }

  push(id: number): TokenOutcome {
    if (this.stopIds.has(id)) return { text: '', emit: false, stop: 'eos' };
    let text = this.decoder.push(id);
    const all = this.decoder.text;
    const stop = this.stopStrings.find((s) => all.includes(s));
    if (!stop) return { text, emit: true };
    const cut = all.indexOf(stop);
    text = text.slice(0, Math.max(0, text.length - (all.length - cut)));
    return { text, emit: text.length > 0, stop: 'stop-string' };
  }
}
