// `tensorgpu transcribe` on real speech: a sentence spoken by espeak-ng (Debian's package, which .ci/run installs),
// a 22050 Hz WAV resampled to 16 kHz, through a small random-weight Whisper in the exact layout on the CPU and on
// WebGPU, to well-formed SRT. Random weights give gibberish text; the file handling, windows and cues are real.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTranscribe } from '../../src/cli/transcribe.js';
import { readWav } from '../../src/index.js';
import { WHISPER_PRESETS } from '../../src/models/whisper/presets.js';
import { writeRandomWhisperCheckpoint } from '../../src/models/whisper/random-checkpoint.js';
import { whisperTokenizerFiles } from '../../src/models/whisper/tokenizer-files.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

// CI installs espeak-ng and sets TENSORGPU_REQUIRE_GPU=1: there a missing espeak-ng fails instead of skipping.
const hasEspeak = (() => {
  try {
    execFileSync('espeak-ng', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    if (process.env.TENSORGPU_REQUIRE_GPU === '1') throw new Error('espeak-ng is not installed (.ci/run installs it: apt-get install espeak-ng)');
    return false;
  }
})();

const SENTENCE = 'The quick brown fox jumps over the lazy dog, and then it runs home.';

/** SRT cues as openai's WriteSRT writes them: 'N\nHH:MM:SS,mmm --> HH:MM:SS,mmm\ntext\n\n'. */
function parseSrt(out: string): { index: number; start: number; end: number }[] {
  const cue = /(\d+)\n(\d\d):(\d\d):(\d\d),(\d\d\d) --> (\d\d):(\d\d):(\d\d),(\d\d\d)\n([\s\S]*?)\n\n(?=\d+\n\d\d:|$)/y;
  const sec = (m: RegExpExecArray, i: number) => Number(m[i]) * 3600 + Number(m[i + 1]) * 60 + Number(m[i + 2]) + Number(m[i + 3]) / 1000;
  const cues = [];
  while (cue.lastIndex < out.length) {
    const at = cue.lastIndex;
    const m = cue.exec(out);
    if (!m) throw new Error(`no SRT cue at offset ${at}: ${JSON.stringify(out.slice(at, at + 80))}`);
    cues.push({ index: Number(m[1]), start: sec(m, 2), end: sec(m, 6) });
  }
  return cues;
}

describe.skipIf(!hasEspeak)('tensorgpu transcribe on espeak-ng speech', () => {
  let work = '';
  let model = '';
  let wav = '';
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'tensorgpu-espeak-'));
    wav = join(work, 'speech.wav');
    execFileSync('espeak-ng', ['-w', wav, SENTENCE]);
    model = join(work, 'whisper');
    // whisper-tiny's vocabulary and tokenizer, one layer each way and 4 s windows: seconds on SwiftShader.
    await writeRandomWhisperCheckpoint(
      model,
      { ...WHISPER_PRESETS['whisper-tiny'], maxSourcePositions: 200, encoderLayers: 1, decoderLayers: 1 },
      { seed: 5, extraFiles: await whisperTokenizerFiles() },
    );
  }, 60_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('espeak-ng wrote speech: a 22050 Hz mono WAV of a few seconds with signal in it', async () => {
    const w = await readWav(wav);
    expect(w.sampleRate).toBe(22050);
    expect(w.channels.length).toBe(1);
    const seconds = w.channels[0]!.length / w.sampleRate;
    expect(seconds).toBeGreaterThan(2);
    expect(seconds).toBeLessThan(15);
    expect(Math.max(...w.channels[0]!.map(Math.abs))).toBeGreaterThan(0.05);
    expect(readFileSync(wav).subarray(0, 4).toString()).toBe('RIFF');
  });

  for (const device of ['cpu', 'webgpu'] as const) {
    it.skipIf(device === 'webgpu' && !gpu.available)(
      `SRT on ${device}: numbered cues in order, inside the windows; resampled to 16 kHz`,
      async () => {
        let out = '';
        const log: string[] = [];
        const code = await runTranscribe(
          { input: wav, model, device, language: 'en', temperature: '0', maxTokens: 8, outputFormat: 'srt' },
          (t) => (out += t),
          (l) => log.push(l),
        );
        expect(code, log.join('\n')).toBe(0);
        const cues = parseSrt(out);
        expect(cues.length).toBeGreaterThan(0);
        cues.forEach((c, i) => {
          expect(c.index).toBe(i + 1);
          expect(c.end).toBeGreaterThanOrEqual(c.start);
          if (i > 0) expect(c.start).toBeGreaterThanOrEqual(cues[i - 1]!.start);
        });
        expect(log.join('\n')).toMatch(/22050 Hz, resampled to 16 kHz/);
        expect(log.join('\n')).toMatch(/realtime factor: \d+\.\d+/);
      },
      120_000,
    );
  }
});
