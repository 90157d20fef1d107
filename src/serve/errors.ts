// Errors the server answers with, in OpenAI's JSON shape `{ error: { message, type, param, code } }`: each names the
// HTTP status it maps to, and the offending field where there is one.
import { TensorGpuError } from '../core/errors.js';

export type ApiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'server_error'
  | 'service_unavailable'
  | 'model_error';

export interface ApiErrorBody {
  error: { message: string; type: ApiErrorType; param: string | null; code: string | null };
}

export class ApiError extends TensorGpuError {
  constructor(
    readonly status: number,
    message: string,
    readonly type: ApiErrorType,
    readonly param: string | null = null,
    readonly code: string | null = null,
    /** Response headers to add (Retry-After on 429). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }

  toBody(): ApiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** A request field with a bad value: 400, naming the field. */
export class InvalidFieldError extends ApiError {
  constructor(param: string, message: string, code: string | null = 'invalid_value') {
    super(400, `${param}: ${message}`, 'invalid_request_error', param, code);
  }
}

/** A field the server understands but cannot honour yet (logprobs, n > 1): 400. */
export class UnsupportedFieldError extends ApiError {
  constructor(param: string, message: string) {
    super(400, `${param}: ${message}`, 'invalid_request_error', param, 'unsupported_parameter');
  }
}

export class ModelNotFoundError extends ApiError {
  constructor(model: string, served: string) {
    super(404, `The model '${model}' does not exist; this server serves '${served}'`, 'not_found_error', 'model', 'model_not_found');
  }
}

export class ContextLengthError extends ApiError {
  constructor(promptTokens: number, maxTokens: number, contextLength: number) {
    super(
      400,
      `This model's maximum context length is ${contextLength} tokens; the request asks for ${promptTokens + maxTokens} (${promptTokens} in the prompt, ${maxTokens} to generate)`,
      'invalid_request_error',
      'max_tokens',
      'context_length_exceeded',
    );
  }
}

export class QueueFullError extends ApiError {
  constructor(maxQueue: number, retryAfterSeconds: number) {
    super(429, `The request queue is full (${maxQueue} waiting); retry after ${retryAfterSeconds} s`, 'rate_limit_error', null, 'queue_full', {
      'retry-after': String(retryAfterSeconds),
    });
  }
}

export class UnavailableError extends ApiError {
  constructor(message: string, code: string) {
    super(503, message, 'service_unavailable', null, code);
  }
}

export class UnauthorizedError extends ApiError {
  constructor() {
    super(401, 'Missing or wrong API key: send Authorization: Bearer <key>', 'authentication_error', null, 'invalid_api_key');
  }
}

/**
 * The model wrote what the request cannot be answered with (a tool call that does not parse, no call where
 * tool_choice requires one): 500 with type model_error, as OpenAI answers "The model produced invalid content".
 */
export class ModelOutputApiError extends ApiError {
  constructor(message: string, code: string) {
    super(500, message, 'model_error', null, code);
  }
}
