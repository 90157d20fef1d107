// openai/whisper's transcribe() (whisper/transcribe.py) on tensorgpu: the log-mel of the whole audio (30 s of zeros
// appended), language detection on the first window when no language is given, then 30 s windows from `seek`:
// each decoded with temperature fallback (a result too repetitive by compression ratio, or too unlikely by average
// log-probability, is decoded again at the next temperature, unless no-speech says it is silence), skipped when
// no-speech is likely, cut into segments at its timestamp pairs, and seek moved to the last timestamp (segments.ts).
// The previous windows' text is the next window's prompt (condition_on_previous_text), reset after a window decoded
// above temperature 0.5; `initialPrompt` comes first. Word timestamps, clip_timestamps and the hallucination-silence
// heuristic are not ported. With batchWindows > 1 the encoder runs over several windows at once, ahead of the
// seeking (window-batches.ts): a batched window is used only where seeking lands on its start.
import { logMelSpectrogram, WHISPER_HOP_LENGTH, WHISPER_SAMPLE_RATE } from '../audio/whisper.js';
import { tidy } from '../core/scope.js';
import { tensor } from '../ops/creation.js';
import { pad } from '../ops/pad.js';
import { cat, contiguous, narrow, unsqueeze } from '../ops/shape-ops.js';
import type { WhisperModel } from '../models/whisper/model.js';
import { WhisperSession } from '../models/whisper/session.js';
import { languageCode, type WhisperTask, type WhisperTokenizer } from '../models/whisper/tokenizer.js';
import { decodeWindow, detectLanguage, type WindowResult } from './decoding.js';
import { windowSegments } from './segments.js';
import { WindowBatches } from './window-batches.js';

export interface TranscribeOptions {
  /** A language code or name; detected from the first window when absent (multilingual models), else 'en'. */
  language?: string;
  task?: WhisperTask;
  /** Temperatures tried in turn (default openai's 0, 0.2, ..., 1.0). */
  temperature?: number | readonly number[];
  compressionRatioThreshold?: number | null;
  logprobThreshold?: number | null;
  noSpeechThreshold?: number | null;
  conditionOnPreviousText?: boolean;
  initialPrompt?: string;
  withoutTimestamps?: boolean;
  /**
   * Windows encoded in one batched encoder forward (default 4 without timestamps, 1 with). The windows of a batch
   * start at fixed 30 s strides from the current seek; one is used only when seeking lands exactly on its start,
   * which it always does without timestamps (every window advances a whole window) and with timestamps only when a
   * window ends without a partial segment or is skipped as silence: otherwise the rest of the batch is dropped and a
   * new one starts at the new seek (encoder work wasted, never a different transcript).
   */
  batchWindows?: number;
  /** Tokens sampled per window at most (default 224). */
  sampleLen?: number;
  /** Seed of the sampling draws above temperature 0. */
  seed?: number;
  /** Capture the decode step on WebGPU (default true). */
  capture?: boolean;
  /** Called after each window: seconds of audio done, and in all. */
  onProgress?: (doneSeconds: number, totalSeconds: number) => void;
  /** Called with each segment as its window is decoded (before the next window starts). */
  onSegment?: (segment: TranscriptSegment) => void;
}

export interface TranscriptSegment {
  id: number;
  seek: number;
  start: number;
  end: number;
  text: string;
  tokens: number[];
  temperature: number;
  avg_logprob: number;
  compression_ratio: number;
  no_speech_prob: number;
}

export interface Transcript {
  text: string;
  segments: TranscriptSegment[];
  language: string;
  /** Seconds of audio. */
  duration: number;
  /** hostMs: host time of the decode steps (the logits read back excluded). */
  stats: {
    windows: number;
    /** Encoder forwards (one per batch of windows). */
    encoderPasses: number;
    decodeSteps: number;
    capturedDispatches: number;
    mode: 'eager' | 'replay';
    hostMs: number;
  };
}

/** mulberry32: a small seeded generator for the sampling draws. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Transcribes 16 kHz mono samples. */
export async function transcribe(model: WhisperModel, tokenizer: WhisperTokenizer, audio: Float32Array, options: TranscribeOptions = {}): Promise<Transcript> {
  const nFrames = model.inputFrames;
  const nMels = model.config.numMelBins;
  const inputStride = nFrames / model.config.maxSourcePositions;
  const timePrecision = (inputStride * WHISPER_HOP_LENGTH) / WHISPER_SAMPLE_RATE;
  const temperatures =
    options.temperature === undefined ? [0, 0.2, 0.4, 0.6, 0.8, 1] : typeof options.temperature === 'number' ? [options.temperature] : [...options.temperature];
  const compressionThreshold = options.compressionRatioThreshold === undefined ? 2.4 : options.compressionRatioThreshold;
  const logprobThreshold = options.logprobThreshold === undefined ? -1 : options.logprobThreshold;
  const noSpeechThreshold = options.noSpeechThreshold === undefined ? 0.6 : options.noSpeechThreshold;
  const conditionOnPrevious = options.conditionOnPreviousText ?? true;
  const task = options.task ?? 'transcribe';
  const random = seeded(options.seed ?? 0);
  const duration = audio.length / WHISPER_SAMPLE_RATE;
  const batchWindows = options.batchWindows ?? (options.withoutTimestamps ? 4 : 1);
  if (!Number.isInteger(batchWindows) || batchWindows < 1) throw new RangeError(`batchWindows must be an integer >= 1, got ${batchWindows}`);

  const samples = tensor(audio, { device: model.device });
  // openai pads N_SAMPLES (one 30 s window) of zeros; a model with shorter windows gets one of its own windows, so
  // the content ends where the audio does.
  const mel = logMelSpectrogram(samples, { nMels, padding: nFrames * WHISPER_HOP_LENGTH });
  samples.dispose();
  const contentFrames = mel.shape[1] - nFrames;
  const session = new WhisperSession(model, { capture: options.capture });
  const features = (seek: number, size: number) =>
    tidy(() => {
      const slice = contiguous(narrow(mel, 1, seek, size));
      return size < nFrames ? pad(slice, [0, nFrames - size]) : slice;
    });
  const windowAt = (seek: number, size: number) => {
    const f = features(seek, size);
    try {
      session.setFeatures(f);
    } finally {
      f.dispose();
    }
  };
  const batches = new WindowBatches(
    (seeks) => {
      session.countEncoderPass();
      return tidy(() => {
        const windows = seeks.map((at) => unsqueeze(features(at, Math.min(nFrames, contentFrames - at)), 0));
        return model.encodeWindows(windows.length === 1 ? windows[0] : cat(windows));
      });
    },
    batchWindows,
    nFrames,
    contentFrames,
  );
  /** Sets the window at `seek` (its content frames, at most one window), from a batch of windows when batching. */
  const contentWindowAt = (seek: number) => {
    if (batchWindows === 1) return windowAt(seek, Math.min(nFrames, contentFrames - seek));
    const encoded = batches.at(seek);
    try {
      session.setEncoded(encoded);
    } finally {
      encoded.dispose();
    }
  };
  try {
    let language: string;
    if (options.language !== undefined) {
      const code = languageCode(options.language);
      if (!code) throw new RangeError(`unknown language '${options.language}'`);
      language = code;
    } else if (!tokenizer.multilingual) {
      language = 'en';
    } else {
      // openai detects on mel[:, :3000], which past the content holds the padding's log-mel, not zeros: the same
      // window as the first content window only when the content fills it.
      if (contentFrames >= nFrames) contentWindowAt(0);
      else windowAt(0, Math.min(nFrames, mel.shape[1]));
      language = (await detectLanguage(session, tokenizer)).language;
    }

    const allTokens: number[] = [];
    const allSegments: TranscriptSegment[] = [];
    let promptResetSince = 0;
    let initialPromptTokens: number[] = [];
    if (options.initialPrompt !== undefined) {
      initialPromptTokens = tokenizer.encode(` ${options.initialPrompt.trim()}`);
      allTokens.push(...initialPromptTokens);
    }
    let steps = 0;
    const decodeWithFallback = async (): Promise<WindowResult> => {
      let result: WindowResult | undefined;
      for (const t of temperatures) {
        result = await decodeWindow(session, tokenizer, {
          task,
          language,
          temperature: t,
          sampleLen: options.sampleLen,
          withoutTimestamps: options.withoutTimestamps,
          prompt: allTokens.slice(promptResetSince),
          random,
        });
        steps += result.tokens.length + 1;
        let needsFallback = false;
        if (compressionThreshold !== null && result.compressionRatio > compressionThreshold) needsFallback = true;
        if (logprobThreshold !== null && result.avgLogprob < logprobThreshold) needsFallback = true;
        if (noSpeechThreshold !== null && result.noSpeechProb > noSpeechThreshold && logprobThreshold !== null && result.avgLogprob < logprobThreshold)
          needsFallback = false;
        if (!needsFallback) break;
      }
      return result!;
    };

    let seek = 0;
    while (seek < contentFrames) {
      const timeOffset = (seek * WHISPER_HOP_LENGTH) / WHISPER_SAMPLE_RATE;
      const segmentSize = Math.min(nFrames, contentFrames - seek);
      const segmentDuration = (segmentSize * WHISPER_HOP_LENGTH) / WHISPER_SAMPLE_RATE;
      contentWindowAt(seek);
      const result = await decodeWithFallback();
      if (noSpeechThreshold !== null) {
        let skip = result.noSpeechProb > noSpeechThreshold;
        if (logprobThreshold !== null && result.avgLogprob > logprobThreshold) skip = false;
        if (skip) {
          seek += segmentSize;
          options.onProgress?.(Math.min(duration, (seek * WHISPER_HOP_LENGTH) / WHISPER_SAMPLE_RATE), duration);
          continue;
        }
      }
      const { segments, seekAdvance } = windowSegments(result.tokens, {
        timestampBegin: tokenizer.timestampBegin,
        timeOffset,
        segmentSize,
        segmentDuration,
        inputStride,
        timePrecision,
      });
      // A window whose only timestamp is <|0.00|> would not move; openai's rules make that impossible (a segment has
      // a nonzero length), so this only guards against a model that ends right after one.
      seek += Math.max(seekAdvance, 1);
      const current = segments.map((s) => {
        const text = tokenizer.decodeText(s.tokens);
        const empty = s.start === s.end || text.trim() === '';
        return {
          seek: seek - Math.max(seekAdvance, 1),
          start: s.start,
          end: s.end,
          text: empty ? '' : text,
          tokens: empty ? [] : s.tokens,
          temperature: result.temperature,
          avg_logprob: result.avgLogprob,
          compression_ratio: result.compressionRatio,
          no_speech_prob: result.noSpeechProb,
        };
      });
      for (const s of current) {
        const segment = { id: allSegments.length, ...s };
        allSegments.push(segment);
        options.onSegment?.(segment);
      }
      for (const s of current) allTokens.push(...s.tokens);
      if (!conditionOnPrevious || result.temperature > 0.5) promptResetSince = allTokens.length;
      options.onProgress?.(Math.min(duration, (seek * WHISPER_HOP_LENGTH) / WHISPER_SAMPLE_RATE), duration);
    }
    return {
      text: tokenizer.decodeText(allTokens.slice(initialPromptTokens.length)),
      segments: allSegments,
      language,
      duration,
      stats: {
        windows: session.stats.windows,
        encoderPasses: session.stats.encoderPasses,
        decodeSteps: steps,
        capturedDispatches: session.stats.capturedDispatches,
        mode: session.stats.mode,
        hostMs: session.stats.hostMs,
      },
    };
  } finally {
    batches.dispose();
    session.dispose();
    mel.dispose();
  }
}
