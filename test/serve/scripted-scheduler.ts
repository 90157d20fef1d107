// A Scheduler whose output is scripted: the routes, the chat template and the stream run as they do for a model,
// but each request's tokens are the tokenizer's encoding of the next scripted text (random weights write nothing a
// tool-call or reasoning parser could read). Tokens are decoded as generation decodes them (special tokens
// skipped), and the prompt each request rendered is kept for the test to read.
import type { GenerationStats } from '../../src/generate/generate.js';
import type { Scheduler, Sequence, SequenceRequest } from '../../src/serve/scheduler.js';
import { StreamingDecoder, type TextTokenizer } from '../../src/tokenizer/tokenizer.js';

export class ScriptedScheduler implements Scheduler {
  readonly prompts: string[] = [];
  private readonly script: string[] = [];
  private nextId = 1;
  readonly waiting = 0;
  readonly running = 0;

  constructor(private readonly tokenizer: TextTokenizer) {}

  /** The text the next request generates. */
  next(...texts: string[]): void {
    this.script.push(...texts);
  }

  submit(request: SequenceRequest): Sequence {
    this.prompts.push(this.tokenizer.decode(request.promptIds, false, { cleanUpSpaces: false }));
    const ids = this.tokenizer.encode(this.script.shift() ?? '');
    const max = request.options.maxNewTokens ?? ids.length;
    const decoder = new StreamingDecoder(this.tokenizer);
    const tokens = ids.slice(0, max).map((id, index) => ({ id, index, text: decoder.push(id) }));
    const stats: GenerationStats = {
      promptTokens: request.promptIds.length,
      generatedTokens: tokens.length,
      prefillMs: 0,
      decodeMs: 0,
      dispatchesPerToken: 0,
      stopReason: ids.length > max ? 'max-tokens' : 'eos',
    };
    return {
      id: this.nextId++,
      cancelled: undefined,
      result: Promise.resolve(stats),
      tokens: (async function* () {
        for (const t of tokens) {
          await new Promise((resolve) => setImmediate(resolve));
          yield t;
        }
      })(),
    };
  }

  cancel(): boolean {
    return true;
  }

  async drain(): Promise<void> {}
}
