// decodeWav / encodeWav: round trips for every sample format, WAV files assembled byte by byte here (so the reader
// is checked against an independent header, not against its own writer), and every malformed-file case, which must
// be an AudioFormatError naming the byte it is about.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShapeError } from '../../src/core/errors.js';
import { AudioFormatError } from '../../src/media/audio-errors.js';
import { decodeWav, encodeWav, readWav, toMono, writeWav, type WavBitDepth } from '../../src/media/wav.js';

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tensorgpu-wav-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------------------------
// A hand-written WAV builder: little-endian fields at their spec offsets, nothing shared with src/media/wav.ts.

function ascii(s: string): number[] {
  return [...s].map((ch) => ch.charCodeAt(0));
}
function u16(v: number): number[] {
  return [v & 0xff, (v >>> 8) & 0xff];
}
function u32(v: number): number[] {
  return [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff];
}
function chunk(id: string, body: number[], declaredSize = body.length): number[] {
  const pad = body.length % 2 === 1 ? [0] : [];
  return [...ascii(id), ...u32(declaredSize), ...body, ...pad];
}
function riff(chunks: number[][]): Uint8Array {
  const body = chunks.flat();
  return new Uint8Array([...ascii('RIFF'), ...u32(4 + body.length), ...ascii('WAVE'), ...body]);
}

interface FmtFields {
  format?: number;
  channels?: number;
  rate?: number;
  bits?: number;
  blockAlign?: number;
}
function fmtBody(f: FmtFields = {}): number[] {
  const channels = f.channels ?? 1;
  const bits = f.bits ?? 16;
  const rate = f.rate ?? 8000;
  const align = f.blockAlign ?? (channels * bits) / 8;
  return [...u16(f.format ?? 1), ...u16(channels), ...u32(rate), ...u32(rate * align), ...u16(align), ...u16(bits)];
}
function int16s(values: number[]): number[] {
  return values.flatMap((v) => u16(v & 0xffff));
}

/** The standard layout: 'fmt ' at byte 12 (body at 20), 'data' at byte 36 (samples from 44). */
function simpleWav(f: FmtFields, samples: number[]): Uint8Array {
  return riff([chunk('fmt ', fmtBody(f)), chunk('data', samples)]);
}

function expectFormatError(bytes: Uint8Array, offset: number, pattern: RegExp): AudioFormatError {
  let caught: unknown;
  try {
    decodeWav(bytes, 'test.wav');
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(AudioFormatError);
  const err = caught as AudioFormatError;
  expect(err.offset).toBe(offset);
  expect(err.source).toBe('test.wav');
  expect(err.message).toContain(`test.wav, byte ${offset}: `);
  expect(err.message).toMatch(pattern);
  return err;
}

// ---------------------------------------------------------------------------------------------------------------

/** A test signal with both full-scale ends, silence, and values between the quantization steps. */
function signal(frames: number, phase: number): Float32Array {
  const s = new Float32Array(frames);
  for (let i = 0; i < frames; i++) s[i] = 0.9 * Math.sin(0.07 * i + phase) + 0.05 * Math.cos(1.3 * i);
  s.set([-1, 1, 0, 0.5, -0.5, 1e-7, -1e-7], 0);
  return s;
}

/** Largest decode error a format allows: one step of truncation, plus float32 rounding of the result. */
const TOLERANCE: Record<WavBitDepth, number> = {
  '8': 1 / 127,
  '16': 1 / 32767,
  '24': 1 / 8388607 + 6e-8,
  '32': 1 / 2147483647 + 6e-8,
  '32f': 0,
  '64f': 0,
};

describe('encodeWav / decodeWav round trips', () => {
  for (const bitDepth of ['8', '16', '24', '32', '32f', '64f'] as const) {
    for (const channelCount of [1, 2, 3]) {
      it(`${bitDepth}-bit, ${channelCount} channel(s)`, () => {
        const channels = Array.from({ length: channelCount }, (_, c) => signal(301, c));
        const bytes = encodeWav(channels, 22050, { bitDepth });
        const audio = decodeWav(bytes);
        expect(audio.sampleRate).toBe(22050);
        expect(audio.bitDepth).toBe(bitDepth);
        expect(audio.channels.length).toBe(channelCount);
        for (let c = 0; c < channelCount; c++) {
          const got = audio.channels[c];
          expect(got).toBeInstanceOf(Float32Array);
          expect(got.length).toBe(301);
          let worst = 0;
          for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - channels[c][i]));
          // A hair over one step for the float32 rounding of the scaled result.
          expect(worst).toBeLessThanOrEqual(TOLERANCE[bitDepth] * (1 + 1e-6));
          // Both full-scale ends come back exactly.
          expect(got[0]).toBe(-1);
          expect(got[1]).toBe(1);
          expect(got[2]).toBe(0);
        }
      });
    }
  }

  it('mono can be passed as one Float32Array, and 16-bit is the default', () => {
    const audio = decodeWav(encodeWav(signal(50, 0), 16000));
    expect(audio.bitDepth).toBe('16');
    expect(audio.channels.length).toBe(1);
  });

  it('empty audio round-trips to empty channels', () => {
    const audio = decodeWav(encodeWav([new Float32Array(0), new Float32Array(0)], 8000));
    expect(audio.channels.map((c) => c.length)).toEqual([0, 0]);
  });

  it('odd-length 8-bit mono (an odd data chunk) keeps its length', () => {
    const audio = decodeWav(encodeWav(signal(7, 0), 8000, { bitDepth: '8' }));
    expect(audio.channels[0].length).toBe(7);
  });
});

describe('encodeWav sample conversion', () => {
  it("clips PCM to [-1, 1] and truncates toward zero as wavefile's float-to-int does", () => {
    const bytes = encodeWav(new Float32Array([0.5, -0.5, 1.5, -2, 0.99999, -Infinity, Infinity]), 8000);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    expect(String.fromCharCode(...bytes.subarray(36, 40))).toBe('data');
    const ints = Array.from({ length: 7 }, (_, i) => view.getInt16(44 + 2 * i, true));
    expect(ints).toEqual([16383, -16384, 32767, -32768, Math.trunc(Math.fround(0.99999) * 32767), -32768, 32767]);
  });

  it("tiny values stay silent (wavefile's parseInt truncation would read 6.35e-7 as 6)", () => {
    const bytes = encodeWav(new Float32Array([5e-9, -5e-9, 2e-11]), 8000, { bitDepth: '8' });
    expect(Array.from(bytes.subarray(44, 47))).toEqual([128, 128, 128]);
    const view = new DataView(encodeWav(new Float32Array([2e-11]), 8000).buffer);
    expect(view.getInt16(44, true)).toBe(0);
  });

  it('8-bit PCM is unsigned with silence at 128', () => {
    const bytes = encodeWav(new Float32Array([0, -1, 1, 0.5]), 8000, { bitDepth: '8' });
    expect(Array.from(bytes.subarray(44, 48))).toEqual([128, 0, 255, 128 + 63]);
  });

  it('float formats keep headroom and NaN as stored values', () => {
    const audio = decodeWav(encodeWav(new Float32Array([1.5, -3, NaN]), 8000, { bitDepth: '32f' }));
    expect(Array.from(audio.channels[0])).toEqual([1.5, -3, NaN]);
  });

  it('refuses NaN for PCM, naming the channel and sample', () => {
    expect(() => encodeWav([new Float32Array([0, 0]), new Float32Array([0, NaN])], 8000)).toThrow(/channel 1 sample 1 is NaN/);
    expect(() => encodeWav(new Float32Array([NaN]), 8000)).toThrow(AudioFormatError);
  });

  it('rejects mismatched channels, no channels, bad rates and bit depths', () => {
    expect(() => encodeWav([new Float32Array(3), new Float32Array(4)], 8000)).toThrow(ShapeError);
    expect(() => encodeWav([], 8000)).toThrow(ShapeError);
    expect(() => encodeWav(new Float32Array(3), 0)).toThrow(AudioFormatError);
    expect(() => encodeWav(new Float32Array(3), 44100.5)).toThrow(/positive integer/);
    expect(() => encodeWav(new Float32Array(3), 8000, { bitDepth: '12' as WavBitDepth })).toThrow(/'12'/);
  });

  it("wraps wavefile's own exceptions (a byte rate past 32 bits) in AudioFormatError", () => {
    expect(() => encodeWav([new Float32Array(1), new Float32Array(1)], 0xffffffff)).toThrow(/wavefile could not encode.*Invalid sample rate/);
  });
});

describe('decodeWav on WAV files built byte by byte', () => {
  it('16-bit stereo, de-interleaved and scaled', () => {
    const bytes = simpleWav({ channels: 2, rate: 44100 }, int16s([0, 32767, -32768, 16384, -1, 1]));
    const audio = decodeWav(bytes);
    expect(audio).toEqual({
      sampleRate: 44100,
      bitDepth: '16',
      channels: [new Float32Array([0, -1, -1 / 32768]), new Float32Array([1, 16384 / 32767, 1 / 32767])],
    });
  });

  it('8-bit unsigned', () => {
    const audio = decodeWav(simpleWav({ bits: 8 }, [128, 0, 255, 192]));
    expect(Array.from(audio.channels[0])).toEqual([0, -1, 1, Math.fround(64 / 127)]);
  });

  it('24-bit signed', () => {
    const bytes = simpleWav({ bits: 24 }, [0xff, 0xff, 0x7f, 0x00, 0x00, 0x80, 0x00, 0x00, 0x40, 0xff, 0xff, 0xff]);
    const got = Array.from(decodeWav(bytes).channels[0]);
    expect(got).toEqual([1, -1, Math.fround(0x400000 / 0x7fffff), Math.fround(-1 / 0x800000)]);
  });

  it('32-bit signed', () => {
    const bytes = simpleWav({ bits: 32 }, [...u32(0x7fffffff), ...u32(0x80000000), ...u32(0xc0000000)]);
    expect(Array.from(decodeWav(bytes).channels[0])).toEqual([1, -1, -0.5]);
  });

  it('float32 and float64', () => {
    const f32 = new Uint8Array(new Float32Array([0.25, -0.75, 2]).buffer);
    expect(Array.from(decodeWav(simpleWav({ format: 3, bits: 32 }, [...f32])).channels[0])).toEqual([0.25, -0.75, 2]);
    const f64 = new Uint8Array(new Float64Array([0.125, -1]).buffer);
    const audio = decodeWav(simpleWav({ format: 3, bits: 64 }, [...f64]));
    expect(audio.bitDepth).toBe('64f');
    expect(Array.from(audio.channels[0])).toEqual([0.125, -1]);
  });

  it('skips other chunks (odd-sized with its pad byte, LIST) before and after the data', () => {
    const bytes = riff([
      chunk('junk', [1, 2, 3]),
      chunk('fmt ', fmtBody({ channels: 1 })),
      chunk('LIST', [...ascii('INFO'), ...chunk('INAM', ascii('tone\0'))]),
      chunk('data', int16s([16384, -16384])),
      chunk('id3 ', [9, 9, 9, 9, 9]),
    ]);
    expect(Array.from(decodeWav(bytes).channels[0])).toEqual([Math.fround(16384 / 32767), -0.5]);
  });

  it('WAVE_FORMAT_EXTENSIBLE with the PCM and float subformat GUIDs', () => {
    const guidTail = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];
    const ext = (sub: number, bits: number) => [
      ...fmtBody({ format: 0xfffe, channels: 2, bits }),
      ...u16(22),
      ...u16(bits),
      ...u32(0x3),
      ...u16(sub),
      ...guidTail,
    ];
    const pcm = riff([chunk('fmt ', ext(1, 16)), chunk('data', int16s([32767, -32768]))]);
    expect(decodeWav(pcm).channels).toEqual([new Float32Array([1]), new Float32Array([-1])]);
    const f32 = new Uint8Array(new Float32Array([0.5, 1.25]).buffer);
    const float = riff([chunk('fmt ', ext(3, 32)), chunk('data', [...f32])]);
    const audio = decodeWav(float);
    expect(audio.bitDepth).toBe('32f');
    expect(audio.channels).toEqual([new Float32Array([0.5]), new Float32Array([1.25])]);
    // A subformat GUID that is not KSDATAFORMAT_SUBTYPE_*: the GUID sits at byte 20 + 24.
    const odd = ext(1, 16);
    odd[odd.length - 1] ^= 0xff;
    expectFormatError(riff([chunk('fmt ', odd), chunk('data', int16s([0, 0]))]), 44, /subformat GUID/);
  });

  it('toMono averages the channels', () => {
    const audio = decodeWav(simpleWav({ channels: 2 }, int16s([16384, 0, -32768, 32767])));
    expect(Array.from(toMono(audio))).toEqual([Math.fround(16384 / 32767 / 2), 0]);
    const mono = { channels: [new Float32Array([0.5])] };
    expect(toMono(mono)).not.toBe(mono.channels[0]);
    expect(() => toMono({ channels: [new Float32Array(2), new Float32Array(3)] })).toThrow(ShapeError);
    expect(() => toMono({ channels: [] })).toThrow(ShapeError);
  });
});

describe('malformed WAV files are AudioFormatErrors naming the offset', () => {
  const good = () => simpleWav({ channels: 2 }, int16s([1, 2, 3, 4]));

  it('not RIFF at byte 0', () => {
    const bytes = good();
    bytes.set(ascii('RIFX'), 0);
    expectFormatError(bytes, 0, /expected 'RIFF', found 'RIFX'.*RIFX and RF64 are not supported/);
    expectFormatError(new Uint8Array(0), 0, /an empty file/);
    expectFormatError(new Uint8Array([0x49, 0x44, 0x33, 0x04]), 0, /found 'ID3\\x04'/);
  });

  it('not WAVE at byte 8', () => {
    const bytes = good();
    bytes.set(ascii('AVI '), 8);
    expectFormatError(bytes, 8, /expected form type 'WAVE', found 'AVI '/);
    expectFormatError(good().subarray(0, 6), 8, /the end of the file/);
  });

  it('a chunk running past the end of the file names the chunk and its offset', () => {
    const bytes = riff([chunk('fmt ', fmtBody()), chunk('data', int16s([1, 2]), 400)]);
    expectFormatError(bytes, 36, /'data' chunk declares 400 bytes but only 4 remain/);
    const list = riff([chunk('fmt ', fmtBody()), chunk('LIST', [1, 2, 3, 4], 0xfffffff0), chunk('data', [0, 0])]);
    expectFormatError(list, 36, /'LIST' chunk declares 4294967280 bytes/);
  });

  it('a chunk header cut short', () => {
    const bytes = good();
    const cut = new Uint8Array([...bytes, ...ascii('LIS')]);
    expectFormatError(cut, bytes.length, /chunk header cut short: 3 of its 8 bytes/);
  });

  it("a missing 'fmt ' or 'data' chunk", () => {
    const noFmt = riff([chunk('data', int16s([1, 2]))]);
    expectFormatError(noFmt, noFmt.length, /no 'fmt ' chunk.*'data' at byte 12/);
    const noData = riff([chunk('fmt ', fmtBody()), chunk('LIST', ascii('INFO'))]);
    expectFormatError(noData, noData.length, /no 'data' chunk.*'fmt ' at byte 12, 'LIST' at byte 36/);
    const nothing = riff([]);
    expectFormatError(nothing, 12, /no 'fmt ' chunk.*none/);
  });

  it("a 'fmt ' chunk shorter than 16 bytes", () => {
    expectFormatError(riff([chunk('fmt ', fmtBody().slice(0, 14)), chunk('data', [0, 0])]), 12, /is 14 bytes/);
  });

  it('an unsupported format code', () => {
    expectFormatError(simpleWav({ format: 2 }, [0, 0]), 20, /format code 0x0002 \(Microsoft ADPCM\)/);
    expectFormatError(simpleWav({ format: 0x1234 }, [0, 0]), 20, /format code 0x1234/);
    expectFormatError(riff([chunk('fmt ', fmtBody({ format: 0xfffe })), chunk('data', [0, 0])]), 12, /40-byte/);
  });

  it('an unsupported bit depth', () => {
    expectFormatError(simpleWav({ bits: 12, blockAlign: 2 }, [0, 0]), 34, /bit depth 12 for PCM/);
    expectFormatError(simpleWav({ format: 3, bits: 16 }, [0, 0]), 34, /bit depth 16 for IEEE float \(32 or 64\)/);
    expectFormatError(simpleWav({ bits: 0, blockAlign: 2 }, [0, 0]), 34, /bit depth 0/);
  });

  it('channels 0 and sample rate 0', () => {
    expectFormatError(simpleWav({ channels: 0, blockAlign: 2 }, [0, 0]), 22, /channel count is 0/);
    expectFormatError(simpleWav({ rate: 0 }, [0, 0]), 24, /sample rate is 0/);
  });

  it('a block align that does not match the channels and bit depth', () => {
    expectFormatError(simpleWav({ channels: 2, blockAlign: 2 }, [0, 0]), 32, /block align 2 does not match 2 channel/);
  });

  it('a data size that is not a multiple of the block align', () => {
    expectFormatError(simpleWav({ channels: 2 }, [1, 2, 3, 4, 5, 6]), 36, /size 6 is not a multiple of the block align 4/);
  });
});

describe('damaged files never throw anything but AudioFormatError', () => {
  const samples = Array.from({ length: 24 }, (_, i) => (i * 2731) & 0xffff);
  const full = riff([
    chunk('fmt ', fmtBody({ channels: 2 })),
    chunk('LIST', [...ascii('INFO'), ...chunk('ICMT', ascii('hi\0'))]),
    chunk('data', int16s(samples)),
    chunk('cue ', u32(0)),
  ]);
  const dataEnd = full.length - 12;

  it('truncated at every byte', () => {
    for (let cut = 0; cut < full.length; cut++) {
      const bytes = full.subarray(0, cut);
      if (cut === dataEnd) {
        // Cut exactly between chunks after the data: the audio is whole.
        expect(decodeWav(bytes).channels[0].length).toBe(12);
        continue;
      }
      expect(() => decodeWav(bytes), `cut at ${cut}`).toThrow(AudioFormatError);
    }
    expect(decodeWav(full).channels[1].length).toBe(12);
  });

  it('with any header byte overwritten', () => {
    const headerEnd = full.length - 12 - 48;
    for (let at = 0; at < headerEnd; at++) {
      for (const value of [0x00, 0x01, 0x7f, 0x80, 0xff]) {
        const bytes = full.slice();
        bytes[at] = value;
        try {
          const audio = decodeWav(bytes);
          // Whatever still decodes is consistent: equal-length channels of finite samples in [-1, 1].
          const frames = audio.channels[0].length;
          for (const c of audio.channels) {
            expect(c.length).toBe(frames);
            for (const v of c) expect(Math.abs(v)).toBeLessThanOrEqual(1);
          }
        } catch (e) {
          expect(e, `byte ${at} = ${value}`).toBeInstanceOf(AudioFormatError);
        }
      }
    }
  });
});

describe('readWav / writeWav', () => {
  it('round-trip a file, creating its directory', async () => {
    const path = join(dir, 'nested', 'tone.wav');
    const left = signal(100, 0);
    await writeWav(path, [left, signal(100, 1)], 48000, { bitDepth: '24' });
    const audio = await readWav(path);
    expect(audio.sampleRate).toBe(48000);
    expect(audio.bitDepth).toBe('24');
    expect(audio.channels[0][3]).toBeCloseTo(left[3], 6);
  });

  it('name the path in errors', async () => {
    const path = join(dir, 'bad.wav');
    await writeFile(path, new Uint8Array([1, 2, 3]));
    await expect(readWav(path)).rejects.toThrow(`${path}, byte 0: not a WAV file`);
  });
});
