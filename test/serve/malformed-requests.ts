// Malformed requests to the completion routes, one of each kind (a body that is not JSON or not an object, a wrong
// type or range for every main field, an unknown model, a missing required field, a wrong content type), and the
// check of their answers: a 4xx in OpenAI's error shape, never a 5xx. Shared by test/serve/faults.test.ts and the
// soak bench (bench/soak.bench.ts), so it imports nothing from vitest.

export interface MalformedRequest {
  /** What is wrong with it. */
  name: string;
  path: '/v1/chat/completions' | '/v1/completions';
  /** The raw body, sent as is. */
  body: string;
  /** Default application/json. */
  contentType?: string;
}

const CHAT = '/v1/chat/completions';
const TEXT = '/v1/completions';

/** One request of each malformed kind, for a server serving `model`. */
export function malformedRequests(model: string): MalformedRequest[] {
  const messages = [{ role: 'user', content: 'Hi' }];
  const chat = (name: string, patch: Record<string, unknown>, drop: string[] = []): MalformedRequest => {
    const body: Record<string, unknown> = { model, messages, max_tokens: 2, ...patch };
    for (const key of drop) delete body[key];
    return { name, path: CHAT, body: JSON.stringify(body) };
  };
  const text = (name: string, patch: Record<string, unknown>, drop: string[] = []): MalformedRequest => {
    const body: Record<string, unknown> = { model, prompt: 'Hi', max_tokens: 2, ...patch };
    for (const key of drop) delete body[key];
    return { name, path: TEXT, body: JSON.stringify(body) };
  };
  return [
    { name: 'not JSON', path: CHAT, body: '{"model": ' },
    { name: 'a JSON array body', path: CHAT, body: JSON.stringify([{ model, messages }]) },
    { name: 'a JSON string body', path: TEXT, body: '"hello"' },
    { name: 'an empty body', path: TEXT, body: '' },
    { name: 'text/plain content type', path: CHAT, body: JSON.stringify({ model, messages }), contentType: 'text/plain' },
    chat('model missing', {}, ['model']),
    chat('model a number', { model: 42 }),
    chat('unknown model', { model: 'no-such-model' }),
    chat('messages missing', {}, ['messages']),
    chat('messages a string', { messages: 'Hi' }),
    chat('a message not an object', { messages: ['Hi'] }),
    chat('an unknown role', { messages: [{ role: 'wizard', content: 'Hi' }] }),
    chat('content a number', { messages: [{ role: 'user', content: 7 }] }),
    chat('negative max_tokens', { max_tokens: -5 }),
    chat('max_tokens a string', { max_tokens: 'ten' }),
    chat('temperature 5', { temperature: 5 }),
    chat('top_p 2', { top_p: 2 }),
    chat('stream a string', { stream: 'yes' }),
    chat('stop a number', { stop: 42 }),
    chat('response_format a string', { response_format: 'json' }),
    chat('tools not an array', { tools: 'get_weather' }),
    text('prompt missing', {}, ['prompt']),
    text('prompt a number', { prompt: 3.5 }),
  ];
}

export interface MalformedAnswer {
  status: number;
  /** What is wrong with the answer (not a 4xx, not OpenAI's error shape); undefined when it is right. */
  problem?: string;
}

/** Sends `r` to the server at `baseUrl` (no /v1) and checks the answer is a 4xx with an OpenAI-shaped error body. */
export async function sendMalformed(baseUrl: string, r: MalformedRequest): Promise<MalformedAnswer> {
  const res = await fetch(`${baseUrl}${r.path}`, { method: 'POST', headers: { 'content-type': r.contentType ?? 'application/json' }, body: r.body });
  const text = await res.text();
  if (res.status < 400 || res.status >= 500) return { status: res.status, problem: `${r.name}: HTTP ${res.status}: ${text.slice(0, 200)}` };
  const problem = errorShapeProblem(text);
  return { status: res.status, problem: problem && `${r.name}: ${problem}` };
}

/** Why `text` is not `{"error": {"message": string, "type": string, "param": string | null, "code": string | null}}`. */
export function errorShapeProblem(text: string): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `the body is not JSON: ${text.slice(0, 200)}`;
  }
  const error = (body as { error?: Record<string, unknown> } | null)?.error;
  if (typeof error !== 'object' || error === null) return `no error object: ${text.slice(0, 200)}`;
  const nullableString = (v: unknown) => v === null || typeof v === 'string';
  if (
    typeof error.message !== 'string' ||
    error.message === '' ||
    typeof error.type !== 'string' ||
    !nullableString(error.param) ||
    !nullableString(error.code)
  )
    return `not OpenAI's error shape: ${text.slice(0, 200)}`;
  return undefined;
}
