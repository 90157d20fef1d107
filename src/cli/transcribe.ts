// `tensorgpu transcribe FILE`: speech to text with Whisper, decoded as openai/whisper's transcribe() does
// (src/transcribe/): the default model is the built-in random-weight whisper-tiny preset (gibberish text, nothing to
// download); --model takes a folder or a Hub id such as openai/whisper-tiny. Output as text, SRT, VTT or JSON with
// segments; a progress bar over the audio's duration on a terminal, and the realtime factor at the end.
import { writeFile } from 'node:fs/promises';
import { SingleBar } from 'cli-progress';
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { chooseDevice } from './device.js';
import { DEFAULT_WHISPER_MODEL, loadWhisper } from '../models/whisper/load.js';
import type { WhisperTask } from '../models/whisper/tokenizer.js';
import { loadAudioFile } from '../transcribe/audio-input.js';
import { toSrt, toText, toVtt } from '../transcribe/segments.js';
import { transcribe, type Transcript } from '../transcribe/transcribe.js';

export type TranscriptFormat = 'text' | 'srt' | 'vtt' | 'json';

export interface TranscribeCliOptions {
  input: string;
  model?: string;
  device: DeviceRequest;
  language?: string;
  task?: WhisperTask;
  outputFormat?: TranscriptFormat;
  /** Write the transcript here instead of stdout. */
  out?: string;
  /** One temperature or a comma-separated list (default 0,0.2,...,1). */
  temperature?: string;
  initialPrompt?: string;
  withoutTimestamps?: boolean;
  /** Tokens sampled per 30 s window at most (default 224). */
  maxTokens?: number;
  /** Windows per batched encoder forward (default 4 with withoutTimestamps, else 1). */
  batchWindows?: number;
  noCapture?: boolean;
  /** Quantize the projections at load: FP8 128x128 blocks, or packed 4 bits in groups of groupSize along K. */
  dtype?: 'fp8' | 'int4';
  /** int4 group size (32, 64 or 128; default 128). */
  groupSize?: number;
}

export function formatTranscript(t: Transcript, format: TranscriptFormat): string {
  switch (format) {
    case 'text':
      return toText(t.segments);
    case 'srt':
      return toSrt(t.segments);
    case 'vtt':
      return toVtt(t.segments);
    case 'json':
      return `${JSON.stringify({ text: t.text, segments: t.segments, language: t.language }, null, 2)}\n`;
  }
}

export async function runTranscribe(
  o: TranscribeCliOptions,
  out: (text: string) => void = (t) => process.stdout.write(t),
  log: (line: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<number> {
  const format = o.outputFormat ?? 'text';
  if (!['text', 'srt', 'vtt', 'json'].includes(format)) throw new RangeError(`--output-format must be text, srt, vtt or json, got '${format}'`);
  const temperature = o.temperature?.split(',').map((t) => {
    const v = Number(t);
    if (!(v >= 0)) throw new RangeError(`--temperature takes numbers >= 0, got '${t}'`);
    return v;
  });
  if (o.groupSize !== undefined && o.dtype !== 'int4') throw new RangeError('--group-size applies to --dtype int4 only');
  try {
    const device = await chooseDevice(o.device, log);
    // A bad or undecodable file fails before the model loads.
    const audio = await loadAudioFile(o.input, device);
    if (audio.samples.length === 0) throw new RangeError(`${o.input}: the audio holds no samples`);
    const seconds = audio.samples.length / 16000;
    const tLoad = performance.now();
    const { model, tokenizer } = await loadWhisper(o.model ?? DEFAULT_WHISPER_MODEL, { device, dtype: o.dtype, groupSize: o.groupSize, onNotice: log });
    log(
      `model: ${o.model ?? DEFAULT_WHISPER_MODEL} (${model.config.encoderLayers}+${model.config.decoderLayers} layers, d_model ${model.config.dModel}${o.dtype ? `, ${o.dtype} projections` : ''}) on ${device}, loaded in ${((performance.now() - tLoad) / 1000).toFixed(1)} s`,
    );
    log(`input: ${audio.description}, ${seconds.toFixed(2)} s`);
    const bar = process.stderr.isTTY
      ? new SingleBar({
          format: 'transcribing [{bar}] {percentage}% | {value}/{total} s of audio | {duration_formatted} | ETA {eta_formatted}',
          stream: process.stderr,
          hideCursor: true,
        })
      : undefined;
    bar?.start(Number(seconds.toFixed(1)), 0);
    const t0 = performance.now();
    let transcript: Transcript;
    try {
      transcript = await transcribe(model, tokenizer, audio.samples, {
        language: o.language,
        task: o.task,
        temperature,
        initialPrompt: o.initialPrompt,
        withoutTimestamps: o.withoutTimestamps,
        sampleLen: o.maxTokens,
        batchWindows: o.batchWindows,
        capture: !o.noCapture,
        onProgress: (done) => bar?.update(Number(done.toFixed(1))),
      });
    } finally {
      bar?.stop();
      model.dispose();
    }
    const elapsed = (performance.now() - t0) / 1000;
    const text = formatTranscript(transcript, format);
    if (o.out) await writeFile(o.out, text);
    else out(text);
    const s = transcript.stats;
    log(
      `language: ${transcript.language}; ${transcript.segments.length} segment(s) from ${s.windows} window(s) (${s.encoderPasses} encoder pass(es)), ${s.decodeSteps} decoder steps (${s.mode === 'replay' ? `captured step of ${s.capturedDispatches} dispatches, replayed` : 'eager'})`,
    );
    log(`realtime factor: ${(elapsed / seconds).toFixed(3)} (${elapsed.toFixed(2)} s for ${seconds.toFixed(2)} s of audio; below 1 is faster than realtime)`);
    if (o.out) log(`wrote ${o.out}`);
    return 0;
  } finally {
    releaseDevice();
  }
}
