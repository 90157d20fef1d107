// OpenAI's audio routes through the official `openai` client: a served tiny Qwen3 with a small random-weight Whisper
// beside it (the built-in preset's tokenizer and vocabulary, 2 s windows, on the CPU), every response_format on a
// generated WAV, translations, an mp3 through ffmpeg, and bad requests answered 4xx with the server still serving.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeWav, syntheticSignal } from '../../src/index.js';
import type { LoadedModel } from '../../src/models/load.js';
import { loadWhisper, type LoadedWhisper } from '../../src/models/whisper/load.js';
import { WHISPER_PRESETS } from '../../src/models/whisper/presets.js';
import { writeRandomWhisperCheckpoint } from '../../src/models/whisper/random-checkpoint.js';
import { whisperTokenizerFiles } from '../../src/models/whisper/tokenizer-files.js';
import type { RunningServer } from '../../src/serve/server.js';
import { loadTinyModel, serve } from './helpers.js';

const WHISPER = 'tiny-whisper';
const MAX_AUDIO = 200_000;

const hasFfmpeg = (() => {
  try {
    execFileSync('ffmpeg', ['-version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

let work = '';
let loaded: LoadedModel;
let whisper: LoadedWhisper;
let server: RunningServer;
let client: OpenAI;
let wav: Uint8Array;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'tensorgpu-serve-audio-'));
  const dir = join(work, 'whisper');
  // The preset's vocabulary and tokenizer with 100 encoder positions: 200-frame (2 s) windows, so the CPU is quick.
  await writeRandomWhisperCheckpoint(
    dir,
    { ...WHISPER_PRESETS['whisper-tiny']!, maxSourcePositions: 100, encoderLayers: 1, decoderLayers: 1 },
    { seed: 5, extraFiles: await whisperTokenizerFiles() },
  );
  loaded = await loadTinyModel();
  whisper = await loadWhisper(dir, { device: 'cpu' });
  ({ server, client } = await serve(loaded, {
    transcription: { whisper, servedModelName: WHISPER, sampleLen: 8, maxAudioBytes: MAX_AUDIO },
  }));
  wav = encodeWav([syntheticSignal(1, 16000)], 16000, { bitDepth: '16' });
}, 60_000);

afterAll(async () => {
  await server?.close();
  loaded?.model.dispose();
  whisper?.model.dispose();
  if (work) rmSync(work, { recursive: true, force: true });
});

const speech = () => toFile(wav, 'speech.wav', { type: 'audio/wav' });

/** A raw multipart request: the status and the parsed OpenAI error. */
async function post(body: string | FormData, headers: Record<string, string> = {}, route = 'transcriptions') {
  const res = await fetch(`${server.url}/v1/audio/${route}`, { method: 'POST', body, headers });
  const text = await res.text();
  let error: { message: string; param: string | null; code: string | null } | undefined;
  try {
    error = (JSON.parse(text) as { error?: typeof error }).error;
  } catch {
    // not JSON
  }
  return { status: res.status, error, text };
}

function form(fields: Record<string, string>, file?: { bytes: Uint8Array; name: string; field?: string }): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  if (file) f.append(file.field ?? 'file', new Blob([file.bytes]), file.name);
  return f;
}

describe('serve: /v1/audio/transcriptions', () => {
  it('json (the default): { text } with the duration as usage, by the served name or whisper-1', async () => {
    const t0 = performance.now();
    const json = await client.audio.transcriptions.create({ file: await speech(), model: WHISPER, language: 'en' });
    expect(typeof json.text).toBe('string');
    expect(json.usage).toEqual({ type: 'duration', seconds: 1 });
    const again = await client.audio.transcriptions.create({ file: await speech(), model: 'whisper-1', language: 'en', response_format: 'json' });
    // greedy first, then openai's temperature fallback seeded the same way: the same audio gives the same text
    expect(again.text).toBe(json.text);
    expect(performance.now() - t0).toBeLessThan(30_000);
  }, 60_000);

  it('verbose_json: language name, duration and openai segments; text, srt and vtt agree with them', async () => {
    const verbose = await client.audio.transcriptions.create({
      file: await speech(),
      model: WHISPER,
      language: 'de',
      response_format: 'verbose_json',
      timestamp_granularities: ['segment'],
    });
    expect(verbose.language).toBe('german');
    expect(verbose.duration).toBeCloseTo(1, 5);
    expect((verbose as unknown as { task: string }).task).toBe('transcribe');
    const segments = verbose.segments!;
    expect(segments.length).toBeGreaterThan(0);
    // 1 s of audio is one 2 s window (the content ends where the audio does, not 30 s later)
    expect(segments.every((s) => s.seek === 0)).toBe(true);
    for (const [i, s] of segments.entries()) {
      expect(s.id).toBe(i);
      expect(s.end).toBeGreaterThanOrEqual(s.start);
      expect(Object.keys(s).sort()).toEqual(
        ['avg_logprob', 'compression_ratio', 'end', 'id', 'no_speech_prob', 'seek', 'start', 'temperature', 'text', 'tokens'].sort(),
      );
    }
    const text = await client.audio.transcriptions.create({ file: await speech(), model: WHISPER, language: 'de', response_format: 'text' });
    expect(text).toBe(`${verbose.text}\n`);
    const srt = await client.audio.transcriptions.create({ file: await speech(), model: WHISPER, language: 'de', response_format: 'srt' });
    expect(srt).toMatch(/^1\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\n/);
    expect((srt as string).match(/ --> /g)!.length).toBe(segments.length);
    const vtt = await client.audio.transcriptions.create({ file: await speech(), model: WHISPER, language: 'de', response_format: 'vtt' });
    expect((vtt as string).startsWith('WEBVTT\n\n')).toBe(true);
    expect((vtt as string).match(/ --> /g)!.length).toBe(segments.length);
  }, 90_000);

  it('translations: task translate, no language field', async () => {
    const out = await client.audio.translations.create({ file: await speech(), model: WHISPER, response_format: 'verbose_json', temperature: 0.3 });
    expect((out as unknown as { task: string }).task).toBe('translate');
    expect((out as unknown as { segments: { temperature: number }[] }).segments.every((s) => s.temperature === 0.3)).toBe(true);
    const bad = await post(form({ model: WHISPER, language: 'en' }, { bytes: wav, name: 'a.wav' }), {}, 'translations');
    expect(bad.status).toBe(400);
    expect(bad.error?.param).toBe('language');
  }, 60_000);

  it.skipIf(!hasFfmpeg)(
    'an mp3 upload is decoded through ffmpeg',
    async () => {
      const wavPath = join(work, 'speech.wav');
      const mp3Path = join(work, 'speech.mp3');
      writeFileSync(wavPath, wav);
      execFileSync('ffmpeg', ['-loglevel', 'error', '-y', '-i', wavPath, mp3Path]);
      const out = await client.audio.transcriptions.create({
        file: await toFile(readFileSync(mp3Path), 'speech.mp3', { type: 'audio/mpeg' }),
        model: WHISPER,
        language: 'en',
        response_format: 'verbose_json',
      });
      // mp3 pads a frame or so
      expect(out.duration).toBeGreaterThan(0.9);
      expect(out.duration).toBeLessThan(1.2);
    },
    60_000,
  );

  it('bad requests get clear 4xx errors, and the server keeps serving', async () => {
    // not audio
    const notAudio = await client.audio.transcriptions
      .create({ file: await toFile(Buffer.from('hello, this is not audio'), 'notes.wav'), model: WHISPER })
      .catch((e: unknown) => e);
    expect(notAudio).toBeInstanceOf(OpenAI.APIError);
    const status = (notAudio as InstanceType<typeof OpenAI.APIError>).status;
    expect(hasFfmpeg ? status === 400 : status === 415).toBe(true);
    expect((notAudio as Error).message).toMatch(hasFfmpeg ? /not audio this server can decode.*ffmpeg/ : /not a WAV file.*ffmpeg/);
    // a WAV header over garbage
    const broken = new Uint8Array(wav.slice(0, 60));
    new DataView(broken.buffer).setUint32(40, 1_000_000, true);
    const badWav = await post(form({ model: WHISPER }, { bytes: broken, name: 'cut.wav' }));
    expect(badWav.status).toBe(400);
    expect(badWav.error?.code).toBe('invalid_audio');
    // missing file; a file sent as a text field
    const missing = await post(form({ model: WHISPER }));
    expect(missing).toMatchObject({ status: 400, error: { param: 'file', code: 'missing_required_parameter' } });
    const asText = await post(form({ model: WHISPER, file: 'speech.wav' }));
    expect(asText.error?.message).toMatch(/needs a filename/);
    // fields
    expect((await post(form({ model: WHISPER, response_format: 'mp3' }, { bytes: wav, name: 'a.wav' }))).error?.param).toBe('response_format');
    expect((await post(form({ model: WHISPER, temperature: '2' }, { bytes: wav, name: 'a.wav' }))).error?.param).toBe('temperature');
    expect((await post(form({ model: WHISPER, language: 'klingon' }, { bytes: wav, name: 'a.wav' }))).error?.param).toBe('language');
    expect((await post(form({ model: WHISPER, timestamp_granularities: 'word' }, { bytes: wav, name: 'a.wav' }))).error?.code).toBe('unsupported_parameter');
    expect((await post(form({}, { bytes: wav, name: 'a.wav' }))).error?.param).toBe('model');
    const wrongModel = await post(form({ model: 'gpt-4o-transcribe' }, { bytes: wav, name: 'a.wav' }));
    expect(wrongModel).toMatchObject({ status: 404, error: { code: 'model_not_found' } });
    // not multipart; malformed multipart
    const json = await post(JSON.stringify({ model: WHISPER }), { 'content-type': 'application/json' });
    expect(json).toMatchObject({ status: 400, error: { code: 'invalid_content_type' } });
    const noBoundary = await post('x', { 'content-type': 'multipart/form-data' });
    expect(noBoundary.status).toBe(400);
    expect(noBoundary.error?.message).toMatch(/no boundary/);
    const cut = await post('--b\r\nContent-Disposition: form-data; name="model"\r\n\r\ntiny', { 'content-type': 'multipart/form-data; boundary=b' });
    expect(cut.status).toBe(400);
    expect(cut.error?.message).toMatch(/part 1 is not followed by a '--b' delimiter/);
    const noDisposition = await post('--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n', { 'content-type': 'multipart/form-data; boundary=b' });
    expect(noDisposition.error?.message).toMatch(/no Content-Disposition/);
    // too large
    const big = await post(form({ model: WHISPER }, { bytes: new Uint8Array(MAX_AUDIO + 100_000), name: 'big.wav' }));
    expect(big).toMatchObject({ status: 413, error: { code: 'request_too_large' } });

    const after = await client.audio.transcriptions.create({ file: await speech(), model: WHISPER, language: 'en', response_format: 'text' });
    expect(typeof after).toBe('string');
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    const chat = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    expect(chat.choices[0]!.message.role).toBe('assistant');
  }, 90_000);
});
