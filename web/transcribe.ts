// The transcription page, the chat page's sibling: Whisper on WebGPU in the page (the built-in random-weight
// whisper-tiny preset generated here, or a Hugging Face Whisper folder by URL), audio from a picked file or recorded
// from the microphone (MediaRecorder), decoded by the browser's WebAudio at 16 kHz and mixed to mono, then
// tensorgpu's transcribe(): the log-mel spectrogram, 30 s windows, openai/whisper's decoding with timestamps and its
// temperature fallback (the compression ratio through the web platform's CompressionStream, so nothing needs Node).
// Segments are listed as each window is decoded; SRT / VTT / text downloads at the end.
// `tensorgpu web` serves it; dist/web is also a plain static folder. URL parameters (the tests use them):
// ?positions=N (encoder positions of the built-in model: 2N mel frames per window, N / 50 s), ?layers=N,
// ?tokens=N (tokens per window at most), ?temperature=T (one temperature, no fallback), ?device=cpu.
import * as tg from '../src/browser.js';

// The DOM and WebAudio pieces this page uses, declared loosely: the project compiles without lib.dom (whose WebGPU
// types clash with @webgpu/types).
/* eslint-disable @typescript-eslint/no-explicit-any */
type Element = any;
type HTMLInputElement = any;
type HTMLButtonElement = any;
type HTMLProgressElement = any;
type HTMLSelectElement = any;
declare const document: { getElementById(id: string): Element; querySelector(selector: string): Element; createElement(tag: string): Element; body: Element };
declare const location: { search: string };
declare const navigator: { mediaDevices?: { getUserMedia(constraints: { audio: boolean }): Promise<any> } };
declare const MediaRecorder: { new (stream: any): any } | undefined;
declare const OfflineAudioContext: { new (channels: number, length: number, sampleRate: number): any };

const $ = <T = Element>(id: string): T => document.getElementById(id) as T;
const status = (text: string) => ($('status').textContent = text);
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const setState = (state: string) => (document.body.dataset.state = state);

const params = new URLSearchParams(location.search);
const PRESET = tg.WHISPER_PRESETS['whisper-tiny']!;
const intParam = (name: string, fallback: number) => {
  const v = Number(params.get(name) ?? fallback);
  return Number.isInteger(v) && v > 0 ? v : fallback;
};
// The CLI's built-in preset (same seed, same weights); the tests shorten its windows and layers.
const BUILTIN: tg.WhisperConfig = {
  ...PRESET,
  maxSourcePositions: intParam('positions', PRESET.maxSourcePositions),
  encoderLayers: intParam('layers', PRESET.encoderLayers),
  decoderLayers: intParam('layers', PRESET.decoderLayers),
};
const DEVICE: tg.DeviceName = params.get('device') === 'cpu' ? 'cpu' : 'webgpu';
const SAMPLE_LEN = params.has('tokens') ? intParam('tokens', 224) : undefined;
const TEMPERATURE = params.has('temperature') ? Number(params.get('temperature')) : undefined;

interface Loaded {
  model: tg.WhisperModel;
  tokenizer: tg.WhisperTokenizer;
  name: string;
}

let loaded: Loaded | undefined;
let busy = false;

async function jsonAt(url: string): Promise<Record<string, unknown> | undefined> {
  const text = await tg.fetchText(url);
  return text === undefined ? undefined : (JSON.parse(text) as Record<string, unknown>);
}

async function load(): Promise<void> {
  const which = (document.querySelector('input[name=model]:checked') as HTMLInputElement).value;
  loaded?.model.dispose();
  loaded = undefined;
  setState('loading');
  const t0 = performance.now();
  if (which === 'builtin') {
    status('generating random weights…');
    const c = BUILTIN;
    const ck = await tg.randomCheckpointInMemory(tg.whisperWeightSpecs(c), tg.whisperToHfConfig(c), { seed: 1, dtype: 'float32' });
    const model = await tg.whisperFromCheckpoint(ck, { device: DEVICE });
    // The preset's stand-in tokenizer is built from Qwen3's, which sits next to the pages.
    const qwen3 = await tg.fetchText('./tokenizer/tokenizer.json');
    if (qwen3 === undefined) throw new Error('./tokenizer/tokenizer.json: HTTP 404');
    const files = tg.whisperTokenizerFilesFrom(qwen3);
    const text = new tg.TextTokenizer(JSON.parse(files['tokenizer.json']!), JSON.parse(files['tokenizer_config.json']!));
    const windowSeconds = (2 * c.maxSourcePositions * 160) / 16000;
    loaded = {
      model,
      tokenizer: new tg.WhisperTokenizer(text, true),
      name: `built-in random whisper-tiny (${c.encoderLayers}+${c.decoderLayers} layers, d_model ${c.dModel}, ${windowSeconds} s windows)`,
    };
  } else {
    const url = $<HTMLInputElement>('url').value.trim().replace(/\/$/, '');
    if (!url) throw new Error('type the URL of a Whisper folder first');
    status(`opening ${url}…`);
    const ck = await tg.Checkpoint.fromUrl(url);
    const model = await tg.whisperFromCheckpoint(ck, { device: DEVICE });
    const [json, config, generation] = await Promise.all([
      jsonAt(`${url}/tokenizer.json`),
      jsonAt(`${url}/tokenizer_config.json`),
      jsonAt(`${url}/generation_config.json`),
    ]);
    if (!json) {
      model.dispose();
      throw new Error(`${url}/tokenizer.json: HTTP 404 (a Whisper folder needs its tokenizer.json)`);
    }
    // As load.ts decides it: generation_config.json's is_multilingual, else openai's rule on the vocabulary size.
    const multilingual = typeof generation?.is_multilingual === 'boolean' ? generation.is_multilingual : model.config.vocabSize >= 51865;
    loaded = { model, tokenizer: new tg.WhisperTokenizer(new tg.TextTokenizer(json, config ?? {}), multilingual), name: url };
  }
  status(`${loaded.name}: loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s, ${mib(tg.memoryStats().liveBytes)} on the GPU; pick a file or record`);
  setState('loaded');
}

/** Any audio the browser can decode, at 16 kHz mono: decodeAudioData resamples to its context's rate. */
async function decodeAudio(bytes: ArrayBuffer): Promise<Float32Array> {
  const context = new OfflineAudioContext(1, 1, 16000);
  let buffer: any;
  try {
    buffer = await context.decodeAudioData(bytes);
  } catch (e) {
    throw new Error(`this browser cannot decode that audio (${(e as Error).message || e})`);
  }
  const mono = new Float32Array(buffer.length);
  const channels = buffer.numberOfChannels as number;
  // ffmpeg's -ac 1 (what openai/whisper's load_audio asks for): the channels' mean.
  for (let c = 0; c < channels; c++) {
    const data = buffer.getChannelData(c) as Float32Array;
    for (let i = 0; i < mono.length; i++) mono[i] += data[i]! / channels;
  }
  return mono;
}

function showSegment(s: tg.TranscriptSegment): void {
  const li = document.createElement('li');
  li.append(
    Object.assign(document.createElement('span'), { className: 'time', textContent: `[${tg.formatTimestamp(s.start)} --> ${tg.formatTimestamp(s.end)}]` }),
  );
  li.append(Object.assign(document.createElement('span'), { className: 'text', textContent: s.text.trim() || '(no text)' }));
  $('segments').append(li);
}

function downloads(t: tg.Transcript, name: string): void {
  const base = name.replace(/\.[^.]*$/, '') || 'transcript';
  const links = [
    ['srt', tg.toSrt(t.segments), 'application/x-subrip'],
    ['vtt', tg.toVtt(t.segments), 'text/vtt'],
    ['txt', tg.toText(t.segments), 'text/plain'],
  ].map(([ext, text, type]) =>
    Object.assign(document.createElement('a'), {
      href: URL.createObjectURL(new Blob([text!], { type })),
      download: `${base}.${ext}`,
      textContent: `${base}.${ext}`,
    }),
  );
  $('downloads').replaceChildren(...links);
}

async function run(bytes: ArrayBuffer, name: string): Promise<void> {
  if (busy) return;
  busy = true;
  try {
    if (!loaded) await load();
    const { model, tokenizer } = loaded!;
    setState('transcribing');
    $('segments').replaceChildren();
    $('downloads').replaceChildren();
    $('stats').textContent = '';
    status(`decoding ${name}…`);
    const samples = await decodeAudio(bytes);
    if (samples.length === 0) throw new Error(`${name} holds no audio samples`);
    const seconds = samples.length / 16000;
    const progress = $<HTMLProgressElement>('progress');
    progress.hidden = false;
    progress.value = 0;
    status(`transcribing ${name} (${seconds.toFixed(2)} s)…`);
    const language = $<HTMLSelectElement>('language').value || undefined;
    const t0 = performance.now();
    const transcript = await tg.transcribe(model, tokenizer, samples, {
      language,
      task: $<HTMLSelectElement>('task').value as tg.WhisperTask,
      temperature: TEMPERATURE,
      sampleLen: SAMPLE_LEN,
      onSegment: showSegment,
      onProgress: (done, total) => {
        progress.value = total > 0 ? done / total : 1;
        status(`transcribing ${name}: ${done.toFixed(1)} of ${total.toFixed(1)} s`);
      },
    });
    const elapsed = (performance.now() - t0) / 1000;
    progress.hidden = true;
    downloads(transcript, name);
    const s = transcript.stats;
    $('stats').textContent =
      `language ${transcript.language}; ${transcript.segments.length} segment(s) from ${s.windows} window(s); ${s.decodeSteps} decoder steps ` +
      `(${s.mode === 'replay' ? `captured step of ${s.capturedDispatches} dispatches, replayed` : 'eager'}); GPU memory ${mib(tg.memoryStats().liveBytes)}`;
    status(`done: ${seconds.toFixed(2)} s of audio in ${elapsed.toFixed(2)} s, realtime factor ${(elapsed / seconds).toFixed(3)}`);
    setState('done');
  } finally {
    busy = false;
  }
}

const fail = (e: unknown) => {
  $<HTMLProgressElement>('progress').hidden = true;
  status(`error: ${(e as Error).message}`);
  setState('error');
};

let recording: { recorder: any; stream: any; chunks: any[] } | undefined;

async function startRecording(): Promise<void> {
  if (!navigator.mediaDevices || MediaRecorder === undefined) throw new Error('this browser has no microphone recording (MediaRecorder)');
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const recorder = new MediaRecorder(stream);
  const chunks: any[] = [];
  recorder.addEventListener('dataavailable', (e: any) => chunks.push(e.data));
  recorder.start();
  recording = { recorder, stream, chunks };
  $<HTMLButtonElement>('record').disabled = true;
  $<HTMLButtonElement>('stop-recording').disabled = false;
  status('recording… press stop to transcribe');
  setState('recording');
}

function stopRecording(): void {
  const r = recording;
  if (!r) return;
  recording = undefined;
  r.recorder.addEventListener('stop', () => {
    for (const track of r.stream.getTracks()) track.stop();
    const blob = new Blob(r.chunks, { type: r.recorder.mimeType });
    void blob
      .arrayBuffer()
      .then((bytes) => run(bytes, 'recording'))
      .catch(fail);
  });
  r.recorder.stop();
  $<HTMLButtonElement>('record').disabled = false;
  $<HTMLButtonElement>('stop-recording').disabled = true;
}

async function main(): Promise<void> {
  const languages = $<HTMLSelectElement>('language');
  for (const [code, name] of Object.entries(tg.WHISPER_LANGUAGES))
    languages.append(Object.assign(document.createElement('option'), { value: code, textContent: `${name} (${code})` }));
  if (DEVICE === 'webgpu') {
    const d = await tg.diagnose();
    if (!d.available) {
      status(`WebGPU unavailable: ${d.reason}${d.hint ? ` (${d.hint})` : ''}`);
      setState('error');
      return;
    }
    await tg.initDevice('webgpu');
    status(`adapter ${d.adapter?.vendor}/${d.adapter?.architecture}; pick a file or record (the built-in model loads first)`);
  } else {
    await tg.initDevice('cpu');
    status('CPU backend; pick a file or record (the built-in model loads first)');
  }
  $('load').addEventListener('click', () => void load().catch(fail));
  $('url').addEventListener('input', () => ((document.querySelector('input[name=model][value="url"]') as HTMLInputElement).checked = true));
  $('file').addEventListener('change', () => {
    const file = $<HTMLInputElement>('file').files?.[0];
    if (file)
      void file
        .arrayBuffer()
        .then((bytes: ArrayBuffer) => run(bytes, file.name as string))
        .catch(fail);
  });
  $('record').addEventListener('click', () => void startRecording().catch(fail));
  $('stop-recording').addEventListener('click', stopRecording);
  try {
    if (params.get('autoload') === '1') await load();
    setState('ready');
  } catch (e) {
    fail(e);
  }
}

void main();

(globalThis as Record<string, unknown>).tensorgpuRelease = () => {
  loaded?.model.dispose();
  tg.releaseDevice();
};
