// WAV files <-> float32 channels in [-1, 1]. wavefile packs and unpacks the samples and writes the headers; before
// any bytes reach it we walk the RIFF chunk list ourselves, because wavefile trusts what it reads (a chunk size past
// the end of the buffer just yields fewer samples) and its errors name no offset. wavefile is then handed a
// canonical 44-byte-header copy holding only the validated 'fmt ' and 'data', so metadata chunks it would also parse
// (LIST, cue, smpl, bext) can neither trip it nor change the samples.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
// wavefile is CommonJS (a UMD bundle) whose named export Node cannot detect, so only the default import works in ESM.
import wavefile from 'wavefile';
import { ShapeError } from '../core/errors.js';
import { AudioFormatError } from './audio-errors.js';

/** The sample formats read and written: PCM 8-bit (unsigned), 16/24/32-bit (signed), IEEE float 32/64. */
export type WavBitDepth = '8' | '16' | '24' | '32' | '32f' | '64f';

export interface WavAudio {
  sampleRate: number;
  /** One array per channel, de-interleaved. PCM is scaled to [-1, 1]; float files keep their stored values. */
  channels: Float32Array[];
  /** The stored sample format. */
  bitDepth: WavBitDepth;
}

export interface EncodeWavOptions {
  /** Sample format to store (default '16'). */
  bitDepth?: WavBitDepth;
}

const BIT_DEPTHS: readonly WavBitDepth[] = ['8', '16', '24', '32', '32f', '64f'];

const FORMAT_PCM = 1;
const FORMAT_FLOAT = 3;
const FORMAT_EXTENSIBLE = 0xfffe;

/** Names for format codes met in the wild, so an unsupported one is recognisable in the message. */
const FORMAT_NAMES: Record<number, string> = {
  0x0002: 'Microsoft ADPCM',
  0x0006: 'A-law',
  0x0007: 'mu-law',
  0x0011: 'IMA ADPCM',
  0x0031: 'GSM 6.10',
  0x0050: 'MPEG',
  0x0055: 'MPEG layer 3',
};

/** Bytes 2..15 of every KSDATAFORMAT_SUBTYPE GUID; bytes 0..1 hold the format code. */
const SUBFORMAT_GUID_TAIL = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];

/** What the chunk walk established: everything needed to decode, with offsets already checked against the file. */
interface WavLayout {
  readonly formatCode: typeof FORMAT_PCM | typeof FORMAT_FLOAT;
  readonly channels: number;
  readonly sampleRate: number;
  readonly bitsPerSample: number;
  readonly blockAlign: number;
  readonly dataStart: number;
  readonly dataSize: number;
  readonly bitDepth: WavBitDepth;
}

interface Chunk {
  readonly id: string;
  /** Byte offset of the chunk header (its id) in the file. */
  readonly offset: number;
  readonly size: number;
}

// ---------------------------------------------------------------------------------------------------------------
// The RIFF walk

/** A four-character code as text, with bytes that are not printable ASCII escaped so a message stays readable. */
function fourCc(bytes: Uint8Array, at: number): string {
  let s = '';
  for (let i = at; i < at + 4 && i < bytes.length; i++) {
    const b = bytes[i];
    s += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`;
  }
  return s;
}

/**
 * Lists the chunks after the 12-byte RIFF header, checking each fits in the file. The RIFF size field is not
 * trusted: streaming writers leave a placeholder there and others miscount, while a truncated file is already caught
 * by the chunk that runs past the end.
 */
function listChunks(bytes: Uint8Array, view: DataView, source: string): Chunk[] {
  const chunks: Chunk[] = [];
  let at = 12;
  while (at < bytes.length) {
    if (bytes.length - at < 8) {
      throw new AudioFormatError(`chunk header cut short: ${bytes.length - at} of its 8 bytes present (file truncated?)`, { source, offset: at });
    }
    const id = fourCc(bytes, at);
    const size = view.getUint32(at + 4, true);
    const available = bytes.length - (at + 8);
    if (size > available) {
      throw new AudioFormatError(`'${id}' chunk declares ${size} bytes but only ${available} remain (file truncated?)`, { source, offset: at });
    }
    chunks.push({ id, offset: at, size });
    // Chunks are word aligned: an odd-sized chunk is followed by a pad byte (which a last chunk may lack).
    at += 8 + size + (size & 1);
  }
  return chunks;
}

function requireChunk(chunks: Chunk[], id: string, fileSize: number, source: string): Chunk {
  const chunk = chunks.find((c) => c.id === id);
  if (chunk) return chunk;
  const found = chunks.length > 0 ? chunks.map((c) => `'${c.id}' at byte ${c.offset}`).join(', ') : 'none';
  throw new AudioFormatError(`no '${id}' chunk in the file (chunks found: ${found})`, { source, offset: fileSize });
}

function formatName(code: number): string {
  const hex = `0x${code.toString(16).padStart(4, '0')}`;
  return FORMAT_NAMES[code] ? `${hex} (${FORMAT_NAMES[code]})` : hex;
}

/** The format code the samples are stored in, looking through WAVE_FORMAT_EXTENSIBLE to its subformat GUID. */
function sampleFormat(bytes: Uint8Array, view: DataView, fmt: Chunk, source: string): number {
  const body = fmt.offset + 8;
  const code = view.getUint16(body, true);
  if (code !== FORMAT_EXTENSIBLE) return code;
  if (fmt.size < 40) {
    throw new AudioFormatError(`WAVE_FORMAT_EXTENSIBLE needs a 40-byte 'fmt ' chunk, this one has ${fmt.size}`, {
      source,
      offset: fmt.offset,
    });
  }
  const guid = body + 24;
  const standard = SUBFORMAT_GUID_TAIL.every((b, i) => bytes[guid + 2 + i] === b);
  if (!standard) {
    throw new AudioFormatError('unsupported WAVE_FORMAT_EXTENSIBLE subformat GUID', { source, offset: guid });
  }
  return view.getUint16(guid, true);
}

function bitDepthOf(formatCode: number, bits: number): WavBitDepth | undefined {
  if (formatCode === FORMAT_PCM && (bits === 8 || bits === 16 || bits === 24 || bits === 32)) {
    return String(bits) as WavBitDepth;
  }
  if (formatCode === FORMAT_FLOAT && (bits === 32 || bits === 64)) return bits === 32 ? '32f' : '64f';
  return undefined;
}

/** Validates the container and the 'fmt ' and 'data' chunks; every failure names the byte it is about. */
function readLayout(bytes: Uint8Array, source: string): WavLayout {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 4 || fourCc(bytes, 0) !== 'RIFF') {
    const found = bytes.length === 0 ? 'an empty file' : `'${fourCc(bytes, 0)}'`;
    const hint = bytes.length >= 4 && (fourCc(bytes, 0) === 'RIFX' || fourCc(bytes, 0) === 'RF64') ? ' (big-endian RIFX and RF64 are not supported)' : '';
    throw new AudioFormatError(`not a WAV file: expected 'RIFF', found ${found}${hint}`, { source, offset: 0 });
  }
  if (bytes.length < 12 || fourCc(bytes, 8) !== 'WAVE') {
    const found = bytes.length <= 8 ? 'the end of the file' : `'${fourCc(bytes, 8)}'`;
    throw new AudioFormatError(`not a WAV file: expected form type 'WAVE', found ${found}`, { source, offset: 8 });
  }
  const chunks = listChunks(bytes, view, source);
  const fmt = requireChunk(chunks, 'fmt ', bytes.length, source);
  const data = requireChunk(chunks, 'data', bytes.length, source);

  if (fmt.size < 16) {
    throw new AudioFormatError(`'fmt ' chunk is ${fmt.size} bytes, needs at least 16`, { source, offset: fmt.offset });
  }
  const body = fmt.offset + 8;
  const formatCode = sampleFormat(bytes, view, fmt, source);
  const channels = view.getUint16(body + 2, true);
  const sampleRate = view.getUint32(body + 4, true);
  const blockAlign = view.getUint16(body + 12, true);
  const bitsPerSample = view.getUint16(body + 14, true);
  if (formatCode !== FORMAT_PCM && formatCode !== FORMAT_FLOAT) {
    throw new AudioFormatError(`unsupported format code ${formatName(formatCode)}: only PCM (1) and IEEE float (3)`, {
      source,
      offset: body,
    });
  }
  if (channels === 0) throw new AudioFormatError('channel count is 0', { source, offset: body + 2 });
  if (sampleRate === 0) throw new AudioFormatError('sample rate is 0', { source, offset: body + 4 });
  const bitDepth = bitDepthOf(formatCode, bitsPerSample);
  if (bitDepth === undefined) {
    const allowed = formatCode === FORMAT_PCM ? '8, 16, 24 or 32' : '32 or 64';
    throw new AudioFormatError(`unsupported bit depth ${bitsPerSample} for ${formatCode === FORMAT_PCM ? 'PCM' : 'IEEE float'} (${allowed})`, {
      source,
      offset: body + 14,
    });
  }
  const expectedAlign = channels * (bitsPerSample / 8);
  if (blockAlign !== expectedAlign) {
    throw new AudioFormatError(`block align ${blockAlign} does not match ${channels} channel(s) of ${bitsPerSample}-bit samples (${expectedAlign})`, {
      source,
      offset: body + 12,
    });
  }
  if (data.size % blockAlign !== 0) {
    throw new AudioFormatError(`'data' chunk size ${data.size} is not a multiple of the block align ${blockAlign} (a partial frame)`, {
      source,
      offset: data.offset,
    });
  }
  return {
    formatCode,
    channels,
    sampleRate,
    bitsPerSample,
    blockAlign,
    dataStart: data.offset + 8,
    dataSize: data.size,
    bitDepth,
  };
}

/** A minimal WAV holding only the validated format and samples: the one shape wavefile is given to parse. */
function canonicalWav(bytes: Uint8Array, layout: WavLayout): Uint8Array {
  const out = new Uint8Array(44 + layout.dataSize);
  const view = new DataView(out.buffer);
  const ascii = (at: number, s: string) => {
    for (let i = 0; i < 4; i++) out[at + i] = s.charCodeAt(i);
  };
  ascii(0, 'RIFF');
  view.setUint32(4, 36 + layout.dataSize, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  view.setUint32(16, 16, true);
  view.setUint16(20, layout.formatCode, true);
  view.setUint16(22, layout.channels, true);
  view.setUint32(24, layout.sampleRate, true);
  view.setUint32(28, layout.sampleRate * layout.blockAlign, true);
  view.setUint16(32, layout.blockAlign, true);
  view.setUint16(34, layout.bitsPerSample, true);
  ascii(36, 'data');
  view.setUint32(40, layout.dataSize, true);
  out.set(bytes.subarray(layout.dataStart, layout.dataStart + layout.dataSize), 44);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding

/** wavefile's code for each depth: it calls float64 '64'. */
function wavefileDepth(bitDepth: WavBitDepth): string {
  return bitDepth === '64f' ? '64' : bitDepth;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Decodes a WAV file's bytes. `source` names the bytes in error messages (readWav passes the path). Throws
 * AudioFormatError, naming the byte offset, for anything that is not a well-formed PCM or IEEE float WAV.
 */
export function decodeWav(bytes: Uint8Array, source = 'WAV data'): WavAudio {
  const layout = readLayout(bytes, source);
  const frames = layout.dataSize / layout.blockAlign;
  // Integers up to 24 bits and float32 are exact in float32; wider samples are unpacked to float64 and scaled there.
  const exactInF32 = layout.bitDepth === '32f' || layout.bitsPerSample <= 24;
  let interleaved: ArrayLike<number>;
  try {
    const wav = new wavefile.WaveFile(canonicalWav(bytes, layout));
    if (wav.bitDepth !== wavefileDepth(layout.bitDepth)) {
      throw new Error(`read the format as bit depth '${wav.bitDepth}', expected '${wavefileDepth(layout.bitDepth)}'`);
    }
    interleaved = wav.getSamples(true, exactInF32 ? Float32Array : Float64Array);
  } catch (e) {
    throw new AudioFormatError(`wavefile could not decode the samples: ${message(e)}`, {
      source,
      offset: layout.dataStart,
    });
  }
  const expected = frames * layout.channels;
  if (interleaved.length < expected) {
    throw new AudioFormatError(`decoded ${interleaved.length} samples, expected ${expected}`, {
      source,
      offset: layout.dataStart,
    });
  }
  return {
    sampleRate: layout.sampleRate,
    channels: deinterleaveScaled(interleaved, layout, frames),
    bitDepth: layout.bitDepth,
  };
}

/**
 * Splits interleaved samples into channels and scales PCM to [-1, 1] as wavefile's own int-to-float conversion does:
 * positive values over 2^(n-1) - 1 and negative ones over 2^(n-1), so both full-scale ends map to exactly +-1.
 * 8-bit PCM is unsigned with 128 as silence.
 */
function deinterleaveScaled(interleaved: ArrayLike<number>, layout: WavLayout, frames: number): Float32Array[] {
  const float = layout.formatCode === FORMAT_FLOAT;
  const bias = layout.bitsPerSample === 8 ? 128 : 0;
  const negScale = 2 ** (layout.bitsPerSample - 1);
  const posScale = negScale - 1;
  const out: Float32Array[] = [];
  for (let c = 0; c < layout.channels; c++) {
    const channel = new Float32Array(frames);
    for (let f = 0, i = c; f < frames; f++, i += layout.channels) {
      const s = interleaved[i];
      if (float) channel[f] = s;
      else {
        const v = s - bias;
        channel[f] = v > 0 ? v / posScale : v / negScale;
      }
    }
    out.push(channel);
  }
  return out;
}

/** Reads and decodes a WAV file; errors name the path. */
export async function readWav(path: string): Promise<WavAudio> {
  return decodeWav(await readFile(path), path);
}

/** The mean of the channels, sample by sample (a new array, also for mono). */
export function toMono(audio: Pick<WavAudio, 'channels'>): Float32Array {
  const { channels } = audio;
  if (channels.length === 0) throw new ShapeError('toMono: audio has no channels');
  const frames = channels[0].length;
  for (let c = 1; c < channels.length; c++) {
    if (channels[c].length !== frames) {
      throw new ShapeError(`toMono: channel ${c} has ${channels[c].length} samples, channel 0 has ${frames}`);
    }
  }
  const mono = new Float32Array(frames);
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let c = 0; c < channels.length; c++) sum += channels[c][f];
    mono[f] = sum / channels.length;
  }
  return mono;
}

// ---------------------------------------------------------------------------------------------------------------
// Encoding

/**
 * wavefile's float-to-int rule: clip to [-1, 1], scale positive values by 2^(n-1) - 1 and negative ones by 2^(n-1),
 * truncate toward zero; 8-bit is then offset to unsigned. It is applied here rather than through wavefile's
 * toBitDepth because that truncates with parseInt, which reads a tiny product such as 6.35e-7 as 6 (5e-9 would
 * become 6 steps above silence in 8-bit).
 */
function toPcmInt(v: number, bits: number): number {
  const negScale = 2 ** (bits - 1);
  const clipped = v > 1 ? 1 : v < -1 ? -1 : v;
  const q = Math.trunc(clipped > 0 ? clipped * (negScale - 1) : clipped * negScale);
  return bits === 8 ? q + 128 : q;
}

/**
 * Interleaves the channels into the values wavefile stores: PCM integers, or floats as given (headroom and NaN
 * included). NaN has no PCM value, so it is refused for PCM rather than written as silence.
 */
function interleaveForEncoding(channels: Float32Array[], bitDepth: WavBitDepth): Int32Array | Float32Array | Float64Array {
  const frames = channels[0].length;
  const n = channels.length;
  const bits = bitDepth === '32f' || bitDepth === '64f' ? 0 : Number(bitDepth);
  const size = frames * n;
  const out = bits > 0 ? new Int32Array(size) : bitDepth === '64f' ? new Float64Array(size) : new Float32Array(size);
  for (let c = 0; c < n; c++) {
    const channel = channels[c];
    for (let f = 0, i = c; f < frames; f++, i += n) {
      const v = channel[f];
      if (bits === 0) out[i] = v;
      else if (Number.isNaN(v)) {
        throw new AudioFormatError(`channel ${c} sample ${f} is NaN, which PCM cannot store`, { source: 'encodeWav' });
      } else out[i] = toPcmInt(v, bits);
    }
  }
  return out;
}

/**
 * Encodes channels (one Float32Array per channel, or one array for mono) as a WAV file's bytes. PCM samples are
 * clipped to [-1, 1] and converted by wavefile's float-to-int rule (see toPcmInt); float formats store the values
 * unchanged.
 */
export function encodeWav(channels: Float32Array[] | Float32Array, sampleRate: number, options: EncodeWavOptions = {}): Uint8Array {
  const bitDepth = options.bitDepth ?? '16';
  const list = channels instanceof Float32Array ? [channels] : channels;
  if (!BIT_DEPTHS.includes(bitDepth)) {
    throw new AudioFormatError(`unsupported bit depth '${String(bitDepth)}' (one of ${BIT_DEPTHS.join(', ')})`, {
      source: 'encodeWav',
    });
  }
  if (list.length === 0) throw new ShapeError('encodeWav: no channels given');
  if (list.length > 0xffff) throw new ShapeError(`encodeWav: ${list.length} channels, a WAV holds at most 65535`);
  for (let c = 1; c < list.length; c++) {
    if (list[c].length !== list[0].length) {
      throw new ShapeError(`encodeWav: channel ${c} has ${list[c].length} samples, channel 0 has ${list[0].length}`);
    }
  }
  if (!Number.isInteger(sampleRate) || sampleRate < 1 || sampleRate > 0xffffffff) {
    throw new AudioFormatError(`sample rate must be a positive integer, got ${sampleRate}`, { source: 'encodeWav' });
  }
  const samples = interleaveForEncoding(list, bitDepth);
  try {
    const wav = new wavefile.WaveFile();
    wav.fromScratch(list.length, sampleRate, wavefileDepth(bitDepth), samples);
    return wav.toBuffer();
  } catch (e) {
    throw new AudioFormatError(`wavefile could not encode ${list.length} channel(s) at ${sampleRate} Hz as '${bitDepth}': ${message(e)}`, {
      source: 'encodeWav',
    });
  }
}

/** Encodes as encodeWav does and writes the file, creating its parent directory. */
export async function writeWav(path: string, channels: Float32Array[] | Float32Array, sampleRate: number, options: EncodeWavOptions = {}): Promise<void> {
  const bytes = encodeWav(channels, sampleRate, options);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, bytes);
}
