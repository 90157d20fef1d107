// A soak of `tensorgpu serve` (issue 48: hostile input and load must never break the server for everyone): one child
// process serving the built-in model (qwen3-moe-tiny, random weights, the real Qwen3 tokenizer) on the CPU backend,
// --max-batch 16 --max-queue 16, taken through, in order:
//   streams     16 concurrent greedy streams, each text equal to the same request streamed alone first;
//   aborts      8 streams the client aborts mid-stream: their sequences end (running and queued back to 0) and far
//               fewer tokens are generated than were asked;
//   overload    6 requests of 16 choices at once against 16 running + 16 queued sequences: the rest shed with 429
//               + Retry-After, every accepted one completes;
//   malformed   46 malformed requests (test/serve/malformed-requests.ts twice, one after another then all at once):
//               each a 4xx in OpenAI's error shape, none a 5xx;
//   poisoning   an invalid tool schema under tool_choice "required", schemas nested 10^4, 100, 1000 and 3000 deep
//               (arrays and objects) and those that trapped XGrammar (arrays 70, objects 100 deep): each a 4xx;
//   structured  then structured output still works (json_schema on chat, guided_json streamed on completions);
//   sigterm     SIGTERM while 4 streams run: every stream ends (finished, or told shutting_down) and the process exits 0;
//   rss         the child's VmRSS after warm-up and after everything above (before SIGTERM).
// Every row says what held; a check that fails fails the case (the rows are logged first). Quick runs stream 8 tokens
// per request, full runs 24.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { DEFAULT_PRESET } from '../src/models/builtin.js';
import { errorShapeProblem, malformedRequests, sendMalformed } from '../test/serve/malformed-requests.js';
import type { BenchCase, BenchContext, RowInput } from './harness.js';

const MODEL = 'soak';
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAX_QUEUE = 16;
const MAX_BATCH = 16;

export function soakCases(quick: boolean): BenchCase[] {
  const tokens = quick ? 8 : 24;
  const shape = `${DEFAULT_PRESET} cpu, 16 streams x ${tokens} tokens`;
  return [{ benchmark: 'serve soak', shape, run: (ctx) => soak(ctx, shape, tokens) }];
}

/** One check's outcome: a row of the report. */
interface Check {
  name: string;
  ok: boolean;
  note: string;
  /** Wall time of the phase and the requests it made (no timing: the row shows the note instead). */
  ms?: number;
  requests?: number;
}

interface Served {
  child: ChildProcessWithoutNullStreams;
  base: string;
  exited: Promise<number | null>;
  stderr: () => string;
}

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`soak: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `p`, or 'hung' once `ms` pass first (the timer cleared either way, so it holds no process open). */
async function within<T>(p: Promise<T>, ms: number): Promise<T | 'hung'> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([p, new Promise<'hung'>((r) => (timer = setTimeout(() => r('hung'), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function startChild(ctx: BenchContext): Promise<Served> {
  const args = [
    ...['--import', 'tsx', 'src/cli/main.ts', 'serve', '--device', 'cpu', '--port', '0', '--served-model-name', MODEL],
    ...['--max-model-len', '512', '--max-batch', String(MAX_BATCH), '--max-queue', String(MAX_QUEUE), '--shutdown-timeout', '3'],
  ];
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const served = { child, base: '', exited, stderr: () => stderr };
  // The built-in model is generated on first use (seconds), then loaded.
  await until('the listening line', () => /listening on http:\/\/[\d.]+:\d+\/v1/.test(stdout) || child.exitCode !== null, 300_000);
  if (child.exitCode !== null) throw new Error(`soak: serve exited ${child.exitCode}: ${stderr.slice(-1000)}`);
  served.base = stdout.match(/(http:\/\/[\d.]+:\d+)\/v1/)![1]!;
  await until('/health 200', async () => (await fetch(`${served.base}/health`)).status === 200, 300_000);
  ctx.log(`  serve pid ${child.pid} at ${served.base}`);
  return served;
}

/** The child's resident set (MiB), from /proc (Linux); NaN elsewhere. */
function rssMiB(pid: number | undefined): number {
  try {
    const kb = Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)![1]);
    return kb / 1024;
  } catch {
    return Number.NaN;
  }
}

async function scrape(base: string, series: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

async function post(base: string, path: string, body: string, signal?: AbortSignal): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

interface StreamResult {
  status: number;
  text: string;
  /** Text chunks received. */
  chunks: number;
  finish: string | null;
  /** An error event's code (shutting_down, ...). */
  errorCode: string | null;
  done: boolean;
  /** The client aborted it, or the connection closed early. */
  cut: boolean;
}

/** A streamed completion; `abortAfter` text chunks, the client aborts it. */
async function stream(base: string, body: Record<string, unknown>, abortAfter?: number): Promise<StreamResult> {
  const abort = new AbortController();
  const out: StreamResult = { status: 0, text: '', chunks: 0, finish: null, errorCode: null, done: false, cut: false };
  try {
    const res = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, ...body, stream: true }),
      signal: abort.signal,
    });
    out.status = res.status;
    if (!res.ok || !res.body) {
      out.text = await res.text();
      return out;
    }
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const bytes of res.body) {
      buffered += decoder.decode(bytes as Uint8Array, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const data = buffered.slice(0, end).replace(/^data: /, '');
        buffered = buffered.slice(end + 2);
        if (data === '[DONE]') {
          out.done = true;
          continue;
        }
        if (!data.startsWith('{')) continue;
        const event = JSON.parse(data) as { choices?: { text: string; finish_reason: string | null }[]; error?: { code: string | null } };
        if (event.error) out.errorCode = event.error.code ?? 'unknown';
        const choice = event.choices?.[0];
        if (!choice) continue;
        out.finish = choice.finish_reason ?? out.finish;
        if (choice.text) {
          out.text += choice.text;
          if (++out.chunks === abortAfter) abort.abort();
        }
      }
    }
  } catch {
    out.cut = true;
  }
  return out;
}

/** Arrays of arrays / objects of objects `depth` deep, as JSON text (10^4 deep is past what JSON.stringify recurses). */
const nestedArrays = (depth: number) => '{"type":"array","items":'.repeat(depth) + '{"type":"integer"}' + '}'.repeat(depth);
const nestedObjects = (depth: number) => '{"type":"object","properties":{"a":'.repeat(depth) + '{"type":"integer"}' + '}}'.repeat(depth);

async function soak(ctx: BenchContext, shape: string, tokens: number): Promise<RowInput[]> {
  const checks: Check[] = [];
  const check = (c: Check) => {
    checks.push(c);
    ctx.log(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.note}`);
  };
  const served = await startChild(ctx);
  const { child, base } = served;
  try {
    await stream(base, { prompt: 'Warm up', max_tokens: 2, temperature: 0 });
    const rssBefore = rssMiB(child.pid);

    // streams: each prompt alone, then all 16 at once.
    const prompts = Array.from({ length: 16 }, (_, i) => `Story ${i}: ${'once upon a time '.repeat(1 + (i % 4))}`);
    const request = (prompt: string) => ({ prompt, max_tokens: tokens, temperature: 0 });
    const alone: StreamResult[] = [];
    for (const p of prompts) alone.push(await stream(base, request(p)));
    let t0 = performance.now();
    const together = await Promise.all(prompts.map((p) => stream(base, request(p))));
    let ms = performance.now() - t0;
    const equal = together.filter((r, i) => r.status === 200 && r.done && r.text === alone[i]!.text && alone[i]!.chunks > 0).length;
    const firstWrong = together.findIndex((r, i) => r.text !== alone[i]!.text);
    check({
      name: 'streams',
      ok: equal === 16,
      note: `${equal}/16 concurrent greedy streams equal to their run alone${firstWrong >= 0 ? ` (stream ${firstWrong}: ${JSON.stringify(together[firstWrong]!.text)} vs ${JSON.stringify(alone[firstWrong]!.text)})` : ''}; ${(ms / 1000).toFixed(1)} s for all 16`,
      ms,
      requests: 16,
    });

    // aborts: 8 long streams, each cut after 1 to 3 text chunks.
    const tokensBefore = await scrape(base, 'tensorgpu_completion_tokens_total');
    t0 = performance.now();
    const aborted = await Promise.all(
      Array.from({ length: 8 }, (_, i) => stream(base, { prompt: `Abort ${i}:`, max_tokens: 200, temperature: 0 }, 1 + (i % 3))),
    );
    let idle = true;
    await until(
      'the aborted sequences to end',
      async () => (await scrape(base, 'tensorgpu_running_sequences')) === 0 && (await scrape(base, 'tensorgpu_queue_depth')) === 0,
      120_000,
    ).catch(() => (idle = false));
    const generated = (await scrape(base, 'tensorgpu_completion_tokens_total')) - tokensBefore;
    const after = await stream(base, { prompt: 'After the aborts', max_tokens: 2, temperature: 0 });
    ms = performance.now() - t0;
    const cut = aborted.filter((r) => r.cut && !r.done).length;
    check({
      name: 'aborts',
      ok: cut === 8 && idle && generated < 8 * 200 * 0.5 && after.status === 200 && after.done,
      note: `${cut}/8 streams aborted mid-stream; ${idle ? 'no sequence left running or queued' : 'sequences still running'}; ${generated} of ${8 * 200} tokens asked were generated; the next request ${after.status}`,
      ms,
      requests: 9,
    });

    // overload: 6 requests of 16 choices each (96 sequences) against 16 running + 16 waiting. The queue counts
    // sequences, so the third request is refused even if the requests reach the scheduler a step apart (on the CPU a
    // step holds the event loop: requests sent together while it is busy were seen joining one a step).
    t0 = performance.now();
    const burst = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        post(base, '/v1/completions', JSON.stringify({ model: MODEL, prompt: `Burst ${i}`, n: 16, max_tokens: 2, temperature: 0 })),
      ),
    );
    ms = performance.now() - t0;
    const shed = burst.filter((r) => r.status === 429);
    const shedRight = shed.filter((r) => Number(r.headers.get('retry-after')) > 0 && r.text.includes('queue_full')).length;
    const completed = burst.filter((r) => {
      if (r.status !== 200) return false;
      const choices = (JSON.parse(r.text) as { choices: { finish_reason: string | null }[] }).choices;
      return choices.length === 16 && choices.every((c) => c.finish_reason === 'length' || c.finish_reason === 'stop');
    }).length;
    check({
      name: 'overload',
      ok: shed.length > 0 && shedRight === shed.length && completed + shed.length === burst.length,
      note: `${burst.length} requests x 16 choices at once (max-batch ${MAX_BATCH}, max-queue ${MAX_QUEUE}): ${shed.length} shed with 429 (${shedRight} with Retry-After and queue_full), ${completed} completed (all 16 choices), ${burst.length - completed - shed.length} other`,
      ms,
      requests: burst.length,
    });

    // malformed: the list one after another, then all at once.
    const malformed = malformedRequests(MODEL);
    t0 = performance.now();
    const answers = [];
    for (const r of malformed) answers.push(await sendMalformed(base, r));
    answers.push(...(await Promise.all(malformed.map((r) => sendMalformed(base, r)))));
    ms = performance.now() - t0;
    const problems = answers.flatMap((a) => a.problem ?? []);
    check({
      name: 'malformed',
      ok: problems.length === 0,
      note: `${answers.length - problems.length}/${answers.length} malformed requests a 4xx in OpenAI's error shape (${answers.filter((a) => a.status >= 500).length} 5xx)${problems.length > 0 ? `; first: ${problems[0]}` : ''}`,
      ms,
      requests: answers.length,
    });

    // poisoning: schemas that crashed or poisoned the grammar engine.
    const chat = (fields: string) => `{"model":"${MODEL}","messages":[{"role":"user","content":"JSON please"}],"max_tokens":8,${fields}}`;
    const jsonSchema = (schema: string) => chat(`"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${schema}}}`);
    const poison: [string, string][] = [
      [
        'invalid tool schema, tool_choice required',
        chat('"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"no-such-type"}}}],"tool_choice":"required"'),
      ],
      ...[10_000, 100, 1000, 3000].flatMap((d): [string, string][] => [
        [`arrays ${d} deep`, jsonSchema(nestedArrays(d))],
        [`objects ${d} deep`, jsonSchema(nestedObjects(d))],
      ]),
      ['arrays 70 deep', jsonSchema(nestedArrays(70))],
      ['objects 100 deep', jsonSchema(nestedObjects(100))],
    ];
    t0 = performance.now();
    const refused: string[] = [];
    const wrong: string[] = [];
    for (const [name, body] of poison) {
      const r = await post(base, '/v1/chat/completions', body);
      if (r.status >= 400 && r.status < 500 && !errorShapeProblem(r.text)) refused.push(name);
      else wrong.push(`${name}: ${r.status} ${r.text.slice(0, 120)}`);
    }
    ms = performance.now() - t0;
    check({
      name: 'poisoning',
      ok: wrong.length === 0,
      note: `${refused.length}/${poison.length} refused with a 4xx${wrong.length > 0 ? `; ${wrong[0]}` : ''}`,
      ms,
      requests: poison.length,
    });

    // structured: a new schema on each route after all of the above.
    const pickSchema = (colors: string[]) => ({
      type: 'object',
      properties: { pick: { enum: colors }, n: { type: 'integer', minimum: 0, maximum: 9 } },
      required: ['pick', 'n'],
      additionalProperties: false,
    });
    const ajv = new Ajv({ strict: false });
    const valid = (schema: object, text: string) => {
      try {
        return ajv.validate(schema, JSON.parse(text));
      } catch {
        return false;
      }
    };
    t0 = performance.now();
    const chatSchema = pickSchema(['red', 'blue']);
    const structured = await post(
      base,
      '/v1/chat/completions',
      JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'JSON please' }],
        max_tokens: 40,
        seed: 1,
        response_format: { type: 'json_schema', json_schema: { name: 'pick', strict: true, schema: chatSchema } },
      }),
    );
    const chatText =
      structured.status === 200 ? ((JSON.parse(structured.text) as { choices: { message: { content: string } }[] }).choices[0]?.message.content ?? '') : '';
    const chatOk = valid(chatSchema, chatText);
    const guidedSchema = pickSchema(['green', 'grey']);
    const guided = await stream(base, { prompt: 'JSON:', max_tokens: 40, seed: 2, guided_json: guidedSchema });
    const guidedOk = guided.status === 200 && guided.finish === 'stop' && valid(guidedSchema, guided.text);
    ms = performance.now() - t0;
    const shown = (ok: boolean, text: string) => (ok ? `valid ${text}` : `INVALID ${JSON.stringify(text.slice(0, 160))}`);
    check({
      name: 'structured',
      ok: chatOk && guidedOk,
      note: `after it all: json_schema (chat) ${structured.status} ${shown(chatOk, chatText || structured.text)}, guided_json (completions, streamed) ${guided.status} ${shown(guidedOk, guided.text)}`,
      ms,
      requests: 2,
    });

    const rssAfter = rssMiB(child.pid);
    check({
      name: 'rss',
      ok: true,
      note: `serve's VmRSS ${rssBefore.toFixed(1)} MiB after warm-up, ${rssAfter.toFixed(1)} MiB after the soak (${rssAfter - rssBefore >= 0 ? '+' : ''}${(rssAfter - rssBefore).toFixed(1)} MiB)`,
    });

    // sigterm: while 4 streams run.
    const running = Array.from({ length: 4 }, (_, i) => stream(base, { prompt: `Last ${i}:`, max_tokens: 64, temperature: 0 }));
    await until('the last streams to start', async () => (await scrape(base, 'tensorgpu_running_sequences')) > 0, 120_000);
    t0 = performance.now();
    child.kill('SIGTERM');
    const code = await within(served.exited, 120_000);
    ms = performance.now() - t0;
    const ends = await within(Promise.all(running), 10_000);
    const endings =
      ends === 'hung'
        ? []
        : ends.map((r) => (r.done && r.finish ? 'finished' : r.errorCode === 'shutting_down' ? 'shutting_down' : r.cut ? 'cut' : `HTTP ${r.status}`));
    const endedWell = endings.filter((e) => e === 'finished' || e === 'shutting_down').length;
    check({
      name: 'sigterm',
      ok: code === 0 && endedWell === 4,
      note: `SIGTERM with 4 streams running: exit ${code} after ${(ms / 1000).toFixed(1)} s (--shutdown-timeout 3); streams ${ends === 'hung' ? 'still open' : endings.join(', ')}`,
      ms,
      requests: 4,
    });
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }

  const failed = checks.filter((c) => !c.ok);
  if (failed.length > 0) {
    ctx.log(served.stderr().split('\n').slice(-20).join('\n'));
    throw new Error(`soak: ${failed.length} of ${checks.length} checks failed: ${failed.map((c) => `${c.name} (${c.note})`).join('; ')}`);
  }
  return checks.map(
    (c): RowInput => ({
      benchmark: `soak ${c.name}`,
      shape,
      backend: 'cpu',
      ...(c.ms !== undefined ? { timing: { medianMs: c.ms, minMs: c.ms, runs: c.requests ?? 1, dispatchesPerRun: 0 } } : {}),
      note: `${c.ok ? 'pass' : 'FAIL'}: ${c.note}`,
    }),
  );
}
