// `tensorgpu vae-encode` on the CPU with the built-in random-weight wan2.1-tiny VAE, as the inverse of vae-decode:
// latents -> vae-decode -> PNG frames -> vae-encode (a %04d pattern) -> latents of the same shape, equal to the
// model's own encode of those frames, with pixels read back within half a grey level of what was decoded;
// --normalize undone by vae-decode --denormalize; tiling reported in diffusers' units; frames past 1 + 4k dropped
// with a notice (as diffusers does); and bad input failing with a message naming the problem.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runVaeDecode } from '../../src/cli/vae-decode.js';
import { runVaeEncode } from '../../src/cli/vae-encode.js';
import { Generator, randn } from '../../src/index.js';
import { readLatents, writeLatents } from '../../src/formats/latents-file.js';
import { expandFramePattern, framePath, isFramePattern, readVideoPng } from '../../src/media/png-frames.js';
import { encodeFramePng } from '../../src/media/png-writer.js';
import { extractVideoFrames } from '../../src/media/video-frames.js';
import { hasFfmpeg } from '../../src/media/video-preview.js';
import { ensureDefaultVae } from '../../src/models/wan-vae/default-model.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import type { WanVae } from '../../src/models/wan-vae/model.js';

let dir = '';
let vae: WanVae;
const none = () => {};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tensorgpu-vae-encode-'));
  vae = await loadWanVae(await ensureDefaultVae(), { device: 'cpu' });
});
afterAll(async () => {
  vae?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function values(t: { toArray(): Promise<ArrayLike<number>>; dispose(): void }): Promise<Float32Array> {
  const v = Float32Array.from(await t.toArray());
  t.dispose();
  return v;
}

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
};

/** A w x h RGB PNG of smooth gradients that change with frame i, at path. */
async function writeFrame(path: string, w: number, h: number, i: number): Promise<void> {
  const planes = new Float32Array(3 * w * h);
  for (let c = 0; c < 3; c++)
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) planes[(c * h + y) * w + x] = Math.sin(0.3 * x + 0.2 * y * (c + 1) + 0.5 * i);
  await writeFile(path, encodeFramePng(planes, 3, h, w));
}

describe('PNG frame patterns', () => {
  it('expand like ffmpeg image2: the first index in 0..4, then up to the first gap; %% is a literal %', () => {
    const files = new Set(['f-0001.png', 'f-0002.png', 'f-0003.png', 'f-0005.png', 'a%1.png']);
    const exists = (p: string) => files.has(p);
    expect(expandFramePattern('f-%04d.png', exists)).toEqual(['f-0001.png', 'f-0002.png', 'f-0003.png']);
    expect(expandFramePattern('a%%%d.png', exists)).toEqual(['a%1.png']);
    expect(isFramePattern('a%%d.png')).toBe(false);
    expect(expandFramePattern('one.png', exists)).toEqual(['one.png']);
    expect(framePath('x-%d.png', 12)).toBe('x-12.png');
    expect(() => expandFramePattern('g-%03d.png', exists)).toThrow('g-%03d.png: no frame found (looked for g-000.png ... g-004.png)');
  });
});

describe('tensorgpu vae-encode on the CPU', () => {
  it('is the inverse of vae-decode: latents -> PNG frames -> latents of the same shape', async () => {
    const z0 = randn([1, 16, 2, 2, 3], { device: 'cpu', generator: new Generator(8) });
    const latents = join(dir, 'z0.safetensors');
    await writeLatents(latents, z0);
    z0.dispose();
    expect(await runVaeDecode({ latents, out: join(dir, 'rt.png'), device: 'cpu', preview: false }, none, none)).toBe(0);

    const lines: string[] = [];
    const logs: string[] = [];
    const out = join(dir, 'rt.safetensors');
    expect(
      await runVaeEncode(
        { input: join(dir, 'rt-%04d.png'), out, device: 'cpu' },
        (l) => lines.push(l),
        (l) => logs.push(l),
      ),
    ).toBe(0);
    expect(logs.some((l) => l.startsWith('no --model given: using the built-in wan2.1-tiny video VAE'))).toBe(true);
    expect(lines[0]).toMatch(/^model: .*tensorgpu-vae-wan2\.1-tiny-bfloat16-seed1-v\d+ \(AutoencoderKLWan, z_dim 16, base_dim 8\) on cpu$/);
    expect(lines[1]).toBe(`input: ${join(dir, 'rt-%04d.png')} (5 frames of 24x16: ${join(dir, 'rt-0000.png')} ... ${join(dir, 'rt-0004.png')})`);
    expect(lines[2]).toBe(`latents: [1, 16, 2, 2, 3] written to ${out} (tensor 'latents')`);
    expect(lines[3]).toMatch(/^encode: [\d.]+ s \(one tile\)$/);
    expect(lines).toHaveLength(4);

    // Pixels come back as diffusers reads them (b / 255 * 2 - 1): within half a grey level of the decoded video.
    const paths = expandFramePattern(join(dir, 'rt-%04d.png'));
    const x = await readVideoPng(paths, { device: 'cpu' });
    const zIn = await readLatents(latents, { device: 'cpu' });
    const decoded = await values(vae.decode(zIn));
    zIn.dispose();
    expect(maxAbsDiff(await x.toArray(), decoded)).toBeLessThan(0.5 / 127.5 + 1e-6);
    const want = await values(vae.encode(x));
    x.dispose();
    const got = await values(await readLatents(out, { device: 'cpu' }));
    expect(maxAbsDiff(got, want)).toBe(0);
  }, 120_000);

  it.skipIf(!hasFfmpeg())(
    'reads a video file through ffmpeg: a lossless .mkv gives the latents of its PNG frames',
    async () => {
      for (let i = 0; i < 5; i++) await writeFrame(framePath(join(dir, 'vid-%04d.png'), i), 24, 16, i);
      const video = join(dir, 'clip.mkv');
      await promisify(execFile)('ffmpeg', [
        '-v',
        'error',
        '-y',
        '-framerate',
        '16',
        '-i',
        join(dir, 'vid-%04d.png'),
        '-c:v',
        'ffv1',
        '-pix_fmt',
        'bgr0',
        video,
      ]);
      const fromPng = join(dir, 'vid-png.safetensors');
      const fromVideo = join(dir, 'vid-mkv.safetensors');
      expect(await runVaeEncode({ input: join(dir, 'vid-%04d.png'), out: fromPng, device: 'cpu' }, none, none)).toBe(0);
      const lines: string[] = [];
      expect(await runVaeEncode({ input: video, out: fromVideo, device: 'cpu' }, (l) => lines.push(l), none)).toBe(0);
      expect(lines[1]).toBe(`input: ${video} (5 frames of 24x16: 5 frames decoded by ffmpeg)`);
      const a = await values(await readLatents(fromPng, { device: 'cpu' }));
      const b = await values(await readLatents(fromVideo, { device: 'cpu' }));
      expect(maxAbsDiff(a, b)).toBe(0);
    },
    120_000,
  );

  it('a video without ffmpeg is an error that says what to do', () => {
    expect(() => extractVideoFrames(join(dir, 'clip.mp4'), 'ffmpeg-not-installed-here')).toThrow(
      /reading video needs ffmpeg on PATH \(not found\); or pass the frames as PNGs/,
    );
  });

  it('--normalize writes (z - mean) / std, which vae-decode --denormalize undoes', async () => {
    for (let i = 0; i < 5; i++) await writeFrame(join(dir, `g-${i}.png`), 32, 24, i);
    const [plain, normalized] = [join(dir, 'plain.safetensors'), join(dir, 'norm.safetensors')];
    expect(await runVaeEncode({ input: join(dir, 'g-%d.png'), out: plain, device: 'cpu' }, none, none)).toBe(0);
    const lines: string[] = [];
    expect(await runVaeEncode({ input: join(dir, 'g-%d.png'), out: normalized, device: 'cpu', normalize: true }, (l) => lines.push(l), none)).toBe(0);
    expect(lines[2]).toBe(`latents: [1, 16, 2, 3, 4] written to ${normalized} (tensor 'latents', normalized with latents_mean / latents_std)`);
    const z = await values(await readLatents(plain, { device: 'cpu' }));
    const zn = await values(await readLatents(normalized, { device: 'cpu' }));
    const { latentsMean: mean, latentsStd: std } = vae.config;
    const plane = 2 * 3 * 4;
    const undone = zn.map((v, i) => v * std![Math.floor(i / plane)] + mean![Math.floor(i / plane)]);
    expect(maxAbsDiff(undone, z)).toBeLessThan(1e-5);
    // Not the identity: the statistics moved the values.
    expect(maxAbsDiff(zn, z)).toBeGreaterThan(0.1);

    const [a, b] = [join(dir, 'from-plain.png'), join(dir, 'from-norm.png')];
    expect(await runVaeDecode({ latents: plain, out: a, device: 'cpu', preview: false }, none, none)).toBe(0);
    expect(await runVaeDecode({ latents: normalized, out: b, device: 'cpu', preview: false, denormalize: true }, none, none)).toBe(0);
    const [va, vb] = [
      await readVideoPng(expandFramePattern(join(dir, 'from-plain-%04d.png')), { device: 'cpu' }),
      await readVideoPng(expandFramePattern(join(dir, 'from-norm-%04d.png')), { device: 'cpu' }),
    ];
    // Equal up to a rounding tie of one grey level.
    expect(maxAbsDiff(await values(va), await values(vb))).toBeLessThanOrEqual(1 / 127.5 + 1e-6);
  }, 120_000);

  it('tiles in diffusers units, drops frames past 1 + 4k with a notice, and runs through the command line', async () => {
    for (let i = 0; i < 7; i++) await writeFrame(join(dir, `t-${String(i).padStart(3, '0')}.png`), 24, 16, i);
    const run = promisify(execFile);
    const tsx = join(process.cwd(), 'node_modules', '.bin', 'tsx');
    const main = join(process.cwd(), 'src', 'cli', 'main.ts');
    const out = join(dir, 't.safetensors');
    const { stdout, stderr } = await run(tsx, [
      main,
      'vae-encode',
      '--device',
      'cpu',
      '--input',
      join(dir, 't-%03d.png'),
      '--out',
      out,
      '--tile',
      '16',
      '--tile-stride',
      '8',
    ]);
    expect(stderr).toContain(`${join(dir, 't-%03d.png')}: 7 frames; the encoder takes 1 + 4k, so the last 2 are left out`);
    expect(stdout).toContain('(5 frames of 24x16');
    // 16 px tiles every 8 on 24 x 16 frames: only the width exceeds a tile, so diffusers tiles; 2 x 3 tiles.
    expect(stdout).toContain('encode: ');
    expect(stdout).toContain('(tiled: 2 x 3 tiles of 16x16 px, stride 8x8)');
    const z = await readLatents(out, { device: 'cpu' });
    expect(z.shape).toEqual([1, 16, 2, 2, 3]);
    const x = await readVideoPng(expandFramePattern(join(dir, 't-%03d.png')).slice(0, 5), { device: 'cpu' });
    const tiling = { tileSampleMinHeight: 16, tileSampleMinWidth: 16, tileSampleStrideHeight: 8, tileSampleStrideWidth: 8 };
    expect(maxAbsDiff(await values(z), await values(vae.encode(x, { tiling })))).toBe(0);
    x.dispose();
  }, 120_000);

  it('fails with a message naming the problem', async () => {
    await writeFrame(join(dir, 'odd.png'), 20, 12, 0);
    await expect(runVaeEncode({ input: join(dir, 'odd.png'), out: join(dir, 'o.safetensors'), device: 'cpu' }, none, none)).rejects.toThrow(
      `${join(dir, 'odd.png')}: frames are 20x12; this VAE needs width and height multiples of 8 (crop or resize to e.g. 16x8)`,
    );
    await writeFrame(join(dir, 'm-0.png'), 16, 16, 0);
    await writeFrame(join(dir, 'm-1.png'), 24, 16, 1);
    await expect(runVaeEncode({ input: join(dir, 'm-%d.png'), out: join(dir, 'o.safetensors'), device: 'cpu' }, none, none)).rejects.toThrow(
      `${join(dir, 'm-1.png')}: frame is 24x16, but ${join(dir, 'm-0.png')} is 16x16`,
    );
    await expect(runVaeEncode({ input: join(dir, 'nothing-%04d.png'), out: join(dir, 'o.safetensors'), device: 'cpu' }, none, none)).rejects.toThrow(
      /nothing-%04d\.png: no frame found/,
    );
    await expect(runVaeEncode({ input: join(dir, 'missing.png'), out: join(dir, 'o.safetensors'), device: 'cpu' }, none, none)).rejects.toThrow(
      /missing\.png: cannot read: ENOENT/,
    );
    await writeFile(join(dir, 'junk.png'), 'not a png');
    await expect(runVaeEncode({ input: join(dir, 'junk.png'), out: join(dir, 'o.safetensors'), device: 'cpu' }, none, none)).rejects.toThrow(
      /junk\.png: not a readable PNG/,
    );
    await expect(runVaeEncode({ input: join(dir, 'odd.png'), out: join(dir, 'o.npy'), device: 'cpu' }, none, none)).rejects.toThrow(
      /--out .*o\.npy: latents are written as \.safetensors/,
    );
  }, 60_000);
});
