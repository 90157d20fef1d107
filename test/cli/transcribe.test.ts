// `tensorgpu transcribe` end to end on the CPU: a generated WAV through a small random-weight Whisper with the
// built-in stand-in tokenizer (2 s windows, so a 5 s file takes several windows and seeks between them), SRT / VTT /
// JSON well-formed and consistent, an mp3 through ffmpeg, a clear error when ffmpeg is absent, and the default
// built-in preset (30 s windows) on a short file.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTranscribe, type TranscribeCliOptions } from '../../src/cli/transcribe.js';
import { encodeWav, setDefaultDevice, syntheticSignal } from '../../src/index.js';
import { WHISPER_PRESETS } from '../../src/models/whisper/presets.js';
import { writeRandomWhisperCheckpoint } from '../../src/models/whisper/random-checkpoint.js';
import { whisperTokenizerFiles } from '../../src/models/whisper/tokenizer-files.js';

setDefaultDevice('cpu');

const hasFfmpeg = (() => {
  try {
    execFileSync('ffmpeg', ['-version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('tensorgpu transcribe', () => {
  let work = '';
  let model = '';
  let wav = '';
  const run = async (o: Partial<TranscribeCliOptions>) => {
    let out = '';
    const log: string[] = [];
    const code = await runTranscribe(
      { input: wav, model, device: 'cpu', language: 'en', temperature: '0', maxTokens: 10, ...o },
      (t) => (out += t),
      (l) => log.push(l),
    );
    return { code, out, log: log.join('\n') };
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'tensorgpu-transcribe-cli-'));
    model = join(work, 'whisper-small-windows');
    // The preset's vocabulary and tokenizer, with 100 encoder positions: 200-frame (2 s) windows.
    await writeRandomWhisperCheckpoint(
      model,
      { ...WHISPER_PRESETS['whisper-tiny'], maxSourcePositions: 100, encoderLayers: 1, decoderLayers: 1 },
      {
        seed: 3,
        extraFiles: await whisperTokenizerFiles(),
      },
    );
    wav = join(work, 'speech.wav');
    writeFileSync(wav, encodeWav([syntheticSignal(5, 16000)], 16000, { bitDepth: '16' }));
  }, 60_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('SRT: numbered cues with HH:MM:SS,mmm times in order within the audio; the realtime factor is printed', async () => {
    const { code, out, log } = await run({ outputFormat: 'srt' });
    expect(code).toBe(0);
    // openai's WriteSRT: 'N\nHH:MM:SS,mmm --> HH:MM:SS,mmm\ntext\n\n' per segment (an empty segment keeps its cue;
    // random weights' text may hold newlines)
    const cue = /(\d+)\n(\d\d):(\d\d):(\d\d),(\d\d\d) --> (\d\d):(\d\d):(\d\d),(\d\d\d)\n([\s\S]*?)\n\n(?=\d+\n\d\d:|$)/y;
    const sec = (h: string, mi: string, s: string, ms: string) => Number(h) * 3600 + Number(mi) * 60 + Number(s) + Number(ms) / 1000;
    let count = 0;
    let last = 0;
    while (cue.lastIndex < out.length) {
      const at = cue.lastIndex;
      const m = cue.exec(out);
      expect(m, `a cue at offset ${at}: ${JSON.stringify(out.slice(at, at + 80))}`).not.toBeNull();
      expect(Number(m![1])).toBe(++count);
      const start = sec(m![2], m![3], m![4], m![5]);
      const end = sec(m![6], m![7], m![8], m![9]);
      expect(start).toBeGreaterThanOrEqual(last - 1e-9);
      expect(end).toBeGreaterThanOrEqual(start);
      // the rules let a window's timestamps run to 30 s whatever its length (random weights use that)
      expect(end).toBeLessThanOrEqual(5 + 30);
      last = start;
    }
    expect(count).toBeGreaterThan(0);
    expect(log).toMatch(/realtime factor: \d+\.\d+/);
    expect(log).toMatch(/language: en; \d+ segment\(s\) from \d+ window\(s\)/);
  }, 120_000);

  it('JSON segments cover the file window by window (seek advances; several 2 s windows for 5 s), VTT matches them', async () => {
    const json = await run({ outputFormat: 'json', maxTokens: 6 });
    const t = JSON.parse(json.out) as { text: string; language: string; segments: { id: number; seek: number; start: number; end: number; text: string }[] };
    expect(t.language).toBe('en');
    const windows = Number(/from (\d+) window/.exec(json.log)![1]);
    expect(windows).toBeGreaterThanOrEqual(3);
    const seeks = t.segments.map((s) => s.seek);
    expect([...seeks].sort((a, b) => a - b)).toEqual(seeks);
    t.segments.forEach((s, i) => expect(s.id).toBe(i));
    const vtt = await run({ outputFormat: 'vtt', maxTokens: 6 });
    expect(vtt.out.startsWith('WEBVTT\n\n')).toBe(true);
    expect(vtt.out.split('\n').filter((l) => l.includes(' --> ')).length).toBe(t.segments.length);
  }, 120_000);

  it('--batch-windows: the 3 windows of 5 s without timestamps in one encoder pass, the same text as one at a time', async () => {
    const batched = await run({ withoutTimestamps: true, batchWindows: 3, maxTokens: 3 });
    const single = await run({ withoutTimestamps: true, batchWindows: 1, maxTokens: 3 });
    expect(batched.log).toMatch(/from 3 window\(s\) \(1 encoder pass\(es\)\)/);
    expect(single.log).toMatch(/from 3 window\(s\) \(3 encoder pass\(es\)\)/);
    expect(batched.out).toBe(single.out);
  }, 120_000);

  it.skipIf(!hasFfmpeg)(
    'an mp3 is decoded through ffmpeg',
    async () => {
      const mp3 = join(work, 'speech.mp3');
      execFileSync('ffmpeg', ['-loglevel', 'error', '-y', '-i', wav, mp3]);
      const { code, log } = await run({ input: mp3, outputFormat: 'text', maxTokens: 4 });
      expect(code).toBe(0);
      expect(log).toMatch(/decoded by ffmpeg to 16 kHz mono/);
    },
    120_000,
  );

  it('without ffmpeg, a non-WAV file is a clear error naming it', async () => {
    const m4a = join(work, 'voice.m4a');
    writeFileSync(m4a, 'not audio');
    const saved = process.env.TENSORGPU_FFMPEG;
    process.env.TENSORGPU_FFMPEG = join(work, 'no-such-ffmpeg');
    try {
      await expect(run({ input: m4a })).rejects.toThrow(/voice\.m4a.*needs ffmpeg, which was not found/);
    } finally {
      if (saved === undefined) delete process.env.TENSORGPU_FFMPEG;
      else process.env.TENSORGPU_FFMPEG = saved;
    }
  });

  it('the default model is the built-in whisper-tiny preset (30 s windows), text output', async () => {
    const short = join(work, 'short.wav');
    writeFileSync(short, encodeWav([syntheticSignal(1, 16000)], 16000, { bitDepth: '16' }));
    const { code, log } = await run({ input: short, model: undefined, maxTokens: 3 });
    expect(code).toBe(0);
    expect(log).toMatch(/builtin:whisper-tiny \(2\+2 layers, d_model 64\)/);
    expect(log).toMatch(/from 1 window\(s\)/);
    expect(readFileSync(short).length).toBeGreaterThan(0);
  }, 120_000);
});
