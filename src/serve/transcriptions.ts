// OpenAI's audio routes over a Whisper model (`tensorgpu serve --transcribe-model ...`): POST /v1/audio/transcriptions
// and /v1/audio/translations, multipart/form-data (multipart.ts) with `file`, `model`, `language` (transcriptions),
// `prompt`, `response_format` (json, text, srt, verbose_json, vtt) and `temperature`, answered as OpenAI answers
// whisper-1. The audio is decoded here (WAV in-process, anything else through ffmpeg where it is installed) and
// transcribed by openai/whisper's decoding (src/transcribe/), one request at a time: a Whisper session holds the
// decoder cache and the captured step.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { WhisperModel } from '../models/whisper/model.js';
import { languageCode, WHISPER_LANGUAGES, type WhisperTask, type WhisperTokenizer } from '../models/whisper/tokenizer.js';
import { AudioFormatError } from '../media/audio-errors.js';
import { hasFfmpeg, isWav, loadAudioBytes } from '../transcribe/audio-input.js';
import { toSrt, toVtt } from '../transcribe/segments.js';
import { transcribe, type Transcript } from '../transcribe/transcribe.js';
import { ApiError, InvalidFieldError, ModelNotFoundError, QueueFullError, UnavailableError, UnsupportedFieldError } from './errors.js';
import { parseMultipart, type MultipartForm } from './multipart.js';

export interface TranscriptionServeOptions {
  /** The Whisper model and its tokenizer, or their loading (the routes answer 503 until it resolves). */
  whisper: { model: WhisperModel; tokenizer: WhisperTokenizer } | Promise<{ model: WhisperModel; tokenizer: WhisperTokenizer }>;
  /** The name clients pass as `model`; OpenAI's 'whisper-1' is accepted too, so clients written for it work unchanged. */
  servedModelName: string;
  /** Largest audio upload in bytes before 413 (default 25 MiB, OpenAI's limit). */
  maxAudioBytes?: number;
  /** Requests waiting behind the running one before 429 (default 64). */
  maxQueue?: number;
  /** Tokens sampled per 30 s window at most (default 224, openai's sample_len). */
  sampleLen?: number;
  /** Capture the decoder step on WebGPU (default true). */
  capture?: boolean;
}

export const OPENAI_WHISPER_MODEL = 'whisper-1';
const RESPONSE_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const;
type ResponseFormat = (typeof RESPONSE_FORMATS)[number];

interface AudioRequest {
  file: { filename: string; data: Uint8Array };
  task: WhisperTask;
  language?: string;
  prompt?: string;
  responseFormat: ResponseFormat;
  /** undefined: openai/whisper's fallback 0, 0.2, ..., 1 (what OpenAI does for 0); above 0: that one temperature. */
  temperature?: number;
}

/** The one value of a text field, or undefined; a field sent twice is an error. */
function single(form: MultipartForm, name: string): string | undefined {
  const values = form.fields.get(name);
  if (!values) return undefined;
  if (values.length > 1) throw new InvalidFieldError(name, `given ${values.length} times`);
  return values[0];
}

function parseAudioRequest(form: MultipartForm, task: WhisperTask, servedModelName: string): AudioRequest {
  const files = form.files.filter((f) => f.name === 'file');
  if (files.length === 0) {
    const hint = form.fields.has('file') ? ' (a text field named file was sent: the part needs a filename in its Content-Disposition)' : '';
    throw new InvalidFieldError('file', `the audio file is missing${hint}`, 'missing_required_parameter');
  }
  if (files.length > 1) throw new InvalidFieldError('file', `one audio file per request, got ${files.length}`);
  const other = form.files.find((f) => f.name !== 'file');
  if (other) throw new InvalidFieldError(other.name, `unexpected file part '${other.filename}' (only 'file' takes a file)`);
  if (files[0]!.data.length === 0) throw new InvalidFieldError('file', `'${files[0]!.filename}' is empty`, 'invalid_audio');
  const model = single(form, 'model');
  if (model === undefined || model.trim() === '') throw new InvalidFieldError('model', 'required', 'missing_required_parameter');
  if (model !== servedModelName && model !== OPENAI_WHISPER_MODEL) throw new ModelNotFoundError(model, servedModelName);

  const format = single(form, 'response_format') ?? 'json';
  if (!(RESPONSE_FORMATS as readonly string[]).includes(format))
    throw new InvalidFieldError('response_format', `must be one of ${RESPONSE_FORMATS.join(', ')}, got '${format}'`);
  const t = single(form, 'temperature');
  let temperature: number | undefined;
  if (t !== undefined && t.trim() !== '') {
    const v = Number(t);
    if (!Number.isFinite(v) || v < 0 || v > 1) throw new InvalidFieldError('temperature', `must be a number from 0 to 1, got '${t}'`);
    temperature = v > 0 ? v : undefined;
  }
  let language: string | undefined;
  const lang = single(form, 'language');
  if (lang !== undefined && lang.trim() !== '') {
    if (task === 'translate') throw new UnsupportedFieldError('language', 'translations take no language: the audio is translated into English');
    language = languageCode(lang.trim());
    if (!language) throw new InvalidFieldError('language', `unknown language '${lang}' (an ISO-639-1 code such as en, de, fr)`);
  }
  const stream = single(form, 'stream');
  if (stream !== undefined && stream !== 'false')
    throw new UnsupportedFieldError('stream', 'streamed transcriptions are not supported; send stream=false or leave it out');
  for (const granularity of form.fields.get('timestamp_granularities[]') ?? form.fields.get('timestamp_granularities') ?? []) {
    if (granularity === 'word') throw new UnsupportedFieldError('timestamp_granularities', 'word timestamps are not supported (segment timestamps are)');
    if (granularity !== 'segment') throw new InvalidFieldError('timestamp_granularities', `must be segment or word, got '${granularity}'`);
  }
  const prompt = single(form, 'prompt');
  return {
    file: files[0]!,
    task,
    language,
    prompt: prompt !== undefined && prompt.trim() !== '' ? prompt : undefined,
    responseFormat: format as ResponseFormat,
    temperature,
  };
}

/** OpenAI's answer for each response_format. */
function respond(reply: FastifyReply, t: Transcript, req: AudioRequest): FastifyReply {
  const text = t.text.trim();
  const seconds = Math.ceil(t.duration);
  switch (req.responseFormat) {
    case 'json':
      return reply.send({ text, usage: { type: 'duration', seconds } });
    case 'verbose_json':
      return reply.send({
        task: req.task,
        language: WHISPER_LANGUAGES[t.language] ?? t.language,
        duration: t.duration,
        text,
        segments: t.segments,
        usage: { type: 'duration', seconds },
      });
    case 'text':
      return reply.type('text/plain; charset=utf-8').send(`${text}\n`);
    case 'srt':
      return reply.type('text/plain; charset=utf-8').send(toSrt(t.segments));
    case 'vtt':
      return reply.type('text/vtt; charset=utf-8').send(toVtt(t.segments));
  }
}

/** Registers the audio routes in their own fastify scope (the multipart body parser stays there). */
export function registerTranscriptionRoutes(app: FastifyInstance, options: TranscriptionServeOptions, log: (line: string) => void = () => undefined): void {
  const maxAudioBytes = options.maxAudioBytes ?? 25 << 20;
  const maxQueue = options.maxQueue ?? 64;
  let whisper: { model: WhisperModel; tokenizer: WhisperTokenizer } | undefined;
  let loadError: Error | undefined;
  Promise.resolve(options.whisper).then(
    (w) => {
      whisper = w;
      log(
        `transcription: ${options.servedModelName} (Whisper, ${w.model.config.encoderLayers}+${w.model.config.decoderLayers} layers) at /v1/audio/transcriptions`,
      );
    },
    (err: unknown) => {
      loadError = err as Error;
      log(`tensorgpu serve: the Whisper model failed to load: ${loadError.message}`);
    },
  );
  // One transcription at a time: each runs to its end before the next starts.
  let tail: Promise<unknown> = Promise.resolve();
  let waiting = 0;

  const handle = async (request: FastifyRequest, reply: FastifyReply, task: WhisperTask) => {
    if (!(request.body instanceof Uint8Array))
      throw new ApiError(400, 'The audio routes take multipart/form-data (file, model, ...)', 'invalid_request_error', null, 'invalid_content_type');
    const form = parseMultipart(request.body, request.headers['content-type']);
    const req = parseAudioRequest(form, task, options.servedModelName);
    if (loadError) throw new ApiError(500, `The transcription model failed to load: ${loadError.message}`, 'server_error', null, 'model_load_failed');
    if (!whisper) throw new UnavailableError('The transcription model is loading', 'model_loading');
    if (!isWav(req.file.data) && !(await hasFfmpeg()))
      throw new ApiError(
        415,
        `file: '${req.file.filename}' is not a WAV file, and other formats need ffmpeg, which this server does not have (send WAV, or install ffmpeg)`,
        'invalid_request_error',
        'file',
        'unsupported_audio_format',
      );
    if (waiting >= maxQueue) throw new QueueFullError(maxQueue, 1);
    waiting++;
    const { model, tokenizer } = whisper;
    const run = tail.then(async () => {
      waiting--;
      let samples: Float32Array;
      try {
        samples = (await loadAudioBytes(req.file.data, req.file.filename, model.device)).samples;
      } catch (err) {
        if (err instanceof AudioFormatError)
          throw new ApiError(400, `file: not audio this server can decode: ${err.message}`, 'invalid_request_error', 'file', 'invalid_audio');
        throw err;
      }
      if (samples.length === 0) throw new InvalidFieldError('file', `'${req.file.filename}' holds no audio samples`, 'invalid_audio');
      return transcribe(model, tokenizer, samples, {
        task: req.task,
        language: req.language,
        temperature: req.temperature,
        initialPrompt: req.prompt,
        sampleLen: options.sampleLen,
        capture: options.capture,
      });
    });
    tail = run.catch(() => undefined);
    return respond(reply, await run, req);
  };

  void app.register(async (scope) => {
    // The whole body in one buffer, bounded by the audio limit (plus room for the other fields).
    scope.addContentTypeParser('multipart/form-data', { parseAs: 'buffer', bodyLimit: maxAudioBytes + (64 << 10) }, (_request, body, done) => done(null, body));
    scope.post('/v1/audio/transcriptions', async (request, reply) => handle(request, reply, 'transcribe'));
    scope.post('/v1/audio/translations', async (request, reply) => handle(request, reply, 'translate'));
  });
}
