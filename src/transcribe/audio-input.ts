// Audio files for transcription (Node): WAV read directly (mixed to mono, resampled to 16 kHz with torchaudio's
// resampler on the device), anything else (mp3, m4a, flac, ogg, video) decoded by ffmpeg exactly as openai/whisper's
// load_audio calls it (mono, 16 kHz, 16-bit PCM on stdout). Without ffmpeg a non-WAV file is a clear error.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { resample } from '../audio/resample.js';
import { WHISPER_SAMPLE_RATE } from '../audio/whisper.js';
import { AudioFormatError } from '../media/audio-errors.js';
import { decodeWav, readWav, toMono } from '../media/wav.js';
import { tensor } from '../ops/creation.js';
import type { DeviceName } from '../runtime/backend.js';

export interface LoadedAudio {
  /** 16 kHz mono. */
  samples: Float32Array;
  /** One line: the file, its format and what was done to it. */
  description: string;
}

/** ffmpeg's output as 16 kHz mono float samples, or an AudioFormatError (ffmpeg missing, or failing). */
export async function decodeWithFfmpeg(path: string, ffmpeg = process.env.TENSORGPU_FFMPEG ?? 'ffmpeg'): Promise<Float32Array> {
  const args = ['-nostdin', '-threads', '0', '-i', path, '-f', 's16le', '-ac', '1', '-acodec', 'pcm_s16le', '-ar', String(WHISPER_SAMPLE_RATE), '-'];
  const chunks: Buffer[] = [];
  let stderr = '';
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(ffmpeg, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString()).slice(-2000);
    });
    child.on('error', (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'ENOENT'
          ? new AudioFormatError(
              `decoding ${extname(path) || 'this format'} needs ffmpeg, which was not found on PATH (install ffmpeg, set TENSORGPU_FFMPEG, or convert the file to WAV)`,
              { source: path },
            )
          : e,
      ),
    );
    child.on('close', (c) => resolve(c ?? 1));
  });
  if (code !== 0) throw new AudioFormatError(`ffmpeg could not decode it (exit ${code}): ${stderr.trim().split('\n').slice(-3).join(' / ')}`, { source: path });
  const bytes = Buffer.concat(chunks);
  const pcm = new Int16Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.length / 2));
  return Float32Array.from(pcm, (v) => v / 32768);
}

/** A WAV file natively, anything else through ffmpeg: 16 kHz mono samples. */
export async function loadAudioFile(path: string, device: DeviceName): Promise<LoadedAudio> {
  if (extname(path).toLowerCase() === '.wav') {
    const wav = await readWav(path);
    const mono = toMono(wav);
    const channels = wav.channels.length;
    const what = `${channels} channel${channels === 1 ? '' : 's'}${channels > 1 ? ' mixed to mono' : ''}, ${wav.bitDepth}-bit, ${wav.sampleRate} Hz`;
    if (wav.sampleRate === WHISPER_SAMPLE_RATE) return { samples: mono, description: `${path} (WAV, ${what})` };
    const x = tensor(mono, { device });
    const y = resample(x, wav.sampleRate, WHISPER_SAMPLE_RATE);
    const samples = (await y.toArray()) as Float32Array;
    x.dispose();
    y.dispose();
    return { samples, description: `${path} (WAV, ${what}, resampled to 16 kHz)` };
  }
  return { samples: await decodeWithFfmpeg(path), description: `${path} (decoded by ffmpeg to 16 kHz mono)` };
}

const ffmpegChecks = new Map<string, Promise<boolean>>();

/** Whether `ffmpeg -version` runs (checked once per binary). */
export function hasFfmpeg(ffmpeg = process.env.TENSORGPU_FFMPEG ?? 'ffmpeg'): Promise<boolean> {
  let check = ffmpegChecks.get(ffmpeg);
  if (!check) {
    check = new Promise<boolean>((resolve) => {
      const child = spawn(ffmpeg, ['-version'], { stdio: 'ignore' });
      child.on('error', () => resolve(false));
      child.on('close', (code) => resolve(code === 0));
    });
    ffmpegChecks.set(ffmpeg, check);
  }
  return check;
}

/** Whether the bytes are a RIFF WAVE file (by its header, whatever the name says). */
export function isWav(bytes: Uint8Array): boolean {
  const tag = (at: number) => String.fromCharCode(...bytes.subarray(at, at + 4));
  return bytes.length >= 12 && tag(0) === 'RIFF' && tag(8) === 'WAVE';
}

/**
 * Audio bytes (an upload) as 16 kHz mono: a WAV decoded here (any rate, resampled on `device`), anything else written
 * to a temporary file for ffmpeg (which needs to seek in mp4 / m4a). `name` labels errors.
 */
export async function loadAudioBytes(bytes: Uint8Array, name: string, device: DeviceName): Promise<LoadedAudio> {
  if (isWav(bytes)) {
    const wav = decodeWav(bytes, name);
    const mono = toMono(wav);
    const what = `WAV, ${wav.channels.length} channel(s), ${wav.bitDepth}-bit, ${wav.sampleRate} Hz`;
    if (wav.sampleRate === WHISPER_SAMPLE_RATE) return { samples: mono, description: `${name} (${what})` };
    const x = tensor(mono, { device });
    const y = resample(x, wav.sampleRate, WHISPER_SAMPLE_RATE);
    try {
      return { samples: (await y.toArray()) as Float32Array, description: `${name} (${what}, resampled to 16 kHz)` };
    } finally {
      x.dispose();
      y.dispose();
    }
  }
  const dir = await mkdtemp(join(tmpdir(), 'tensorgpu-audio-'));
  try {
    // The extension only helps ffmpeg guess; it probes the content either way.
    const file = join(dir, `upload${/^\.[A-Za-z0-9]{1,8}$/.test(extname(name)) ? extname(name) : ''}`);
    await writeFile(file, bytes);
    let samples: Float32Array;
    try {
      samples = await decodeWithFfmpeg(file);
    } catch (e) {
      // The temporary file means nothing to whoever sent the bytes: name the upload instead.
      if (e instanceof AudioFormatError) throw new AudioFormatError(e.message.replaceAll(file, name));
      throw e;
    }
    return { samples, description: `${name} (decoded by ffmpeg to 16 kHz mono)` };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
