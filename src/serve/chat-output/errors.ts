// Output a model wrote that the server cannot turn into what the request asked for. Typed, so the routes answer
// them as the model's failure (OpenAI's `model_error`), never by dropping the text.
import { TensorGpuError } from '../../core/errors.js';

export abstract class ModelOutputError extends TensorGpuError {
  /** The error code clients see. */
  abstract readonly code: string;
}

/** A tool call the model wrote that cannot be read as one; `text` is the block as written. */
export class ToolCallSyntaxError extends ModelOutputError {
  readonly code = 'invalid_tool_call';

  constructor(
    readonly reason: string,
    readonly text: string,
  ) {
    super(`the model wrote a tool call that does not parse: ${reason}; the call as written: ${JSON.stringify(text)}`);
  }
}

/** Output that breaks the request's tool_choice / parallel_tool_calls / tools (no call where one is required). */
export class ToolChoiceError extends ModelOutputError {
  readonly code = 'tool_choice_not_followed';
}
