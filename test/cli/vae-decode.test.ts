// `tensorgpu vae-decode` on the CPU with the built-in random-weight wan2.1-tiny VAE: a latent file [1, 16, 2, 2, 3]
// decodes to a 5-frame PNG sequence of 24x16 RGB frames plus an animated GIF preview (read back with omggif, an
// independent decoder: 5 frames of 24x16 close to the PNGs), the default random latents to one 128x128 PNG, tiling
// (diffusers' units, height and width apart) and --denormalize are reported, and bad input fails with a message
// naming the problem. Runs go through the real command line (commander, exit code, stdout).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { GifReader } from 'omggif';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runVaeDecode } from '../../src/cli/vae-decode.js';
import { hasFfmpeg } from '../../src/media/video-preview.js';
import { Generator, randn } from '../../src/index.js';
import { writeLatents } from '../../src/formats/latents-file.js';
import { ensureDefaultVae } from '../../src/models/wan-vae/default-model.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';

let dir = '';
let latents = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tensorgpu-vae-decode-'));
  await ensureDefaultVae();
  latents = join(dir, 'z.safetensors');
  const z = randn([1, 16, 2, 2, 3], { device: 'cpu', generator: new Generator(5) });
  await writeLatents(latents, z);
  z.dispose();
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function readPng(path: string): Promise<PNG> {
  return PNG.sync.read(await readFile(path));
}

/** A GIF's frames as RGBA (each frame drawn over the previous, as a player shows them). */
async function readGif(path: string): Promise<{ width: number; height: number; frames: Uint8Array[]; delays: number[] }> {
  const gif = new GifReader(new Uint8Array(await readFile(path)));
  const frames: Uint8Array[] = [];
  const delays: number[] = [];
  const canvas = new Uint8Array(gif.width * gif.height * 4);
  for (let i = 0; i < gif.numFrames(); i++) {
    gif.decodeAndBlitFrameRGBA(i, canvas);
    frames.push(canvas.slice());
    delays.push(gif.frameInfo(i).delay);
  }
  return { width: gif.width, height: gif.height, frames, delays };
}

describe('tensorgpu vae-decode on the CPU', () => {
  it('decodes [1, 16, 2, 2, 3] latents to 5 PNG frames of 24x16 and a 5-frame GIF preview', async () => {
    const lines: string[] = [];
    const logs: string[] = [];
    const out = join(dir, 'video.png');
    const code = await runVaeDecode(
      { latents, out, device: 'cpu' },
      (l) => lines.push(l),
      (l) => logs.push(l),
    );
    expect(code).toBe(0);
    const frames = [0, 1, 2, 3, 4].map((i) => join(dir, `video-000${i}.png`));
    for (const f of frames) {
      const png = await readPng(f);
      expect([png.width, png.height]).toEqual([24, 16]);
    }
    expect(existsSync(out)).toBe(false);
    expect(logs.some((l) => l.startsWith('no --model given: using the built-in wan2.1-tiny video VAE'))).toBe(true);
    expect(lines[0]).toMatch(/^model: .*tensorgpu-vae-wan2\.1-tiny-bfloat16-seed1-v\d+ \(AutoencoderKLWan, z_dim 16, base_dim 8\) on cpu$/);
    expect(lines[1]).toBe(`latents: [1, 16, 2, 2, 3] (${latents})`);
    expect(lines[2]).toBe('output: [1, 3, 5, 16, 24] (5 frames of 24x16, RGB; 2 latent frames)');
    expect(lines[3]).toBe(`frames written: ${frames.join(', ')}`);
    const gifPath = join(dir, 'video.gif');
    expect(lines[4]).toBe(`preview: ${gifPath} (5 frames at 16 fps, animated GIF)`);
    expect(lines[5]).toMatch(/^decode: [\d.]+ s \(one tile\), PNG \+ preview write [\d.]+ s$/);
    expect(lines).toHaveLength(6);
    // A random decoder still gives an image, not a constant.
    const first = (await readPng(frames[0])).data;
    expect(new Set(first).size).toBeGreaterThan(10);

    const gif = await readGif(gifPath);
    expect([gif.width, gif.height, gif.frames.length]).toEqual([24, 16, 5]);
    // 1000 / 16 ms is stored as 6 centiseconds.
    expect(gif.delays).toEqual([6, 6, 6, 6, 6]);
    // Each GIF frame shows its PNG frame (256 colours for at most 384 pixels: nearly exact), and frames differ.
    for (let i = 0; i < 5; i++) {
      const png = (await readPng(frames[i])).data;
      let diff = 0;
      for (let p = 0; p < 24 * 16; p++) for (let c = 0; c < 3; c++) diff += Math.abs(png[4 * p + c] - gif.frames[i][4 * p + c]);
      expect(diff / (24 * 16 * 3), `frame ${i}: mean abs difference from the PNG`).toBeLessThan(4);
    }
    expect(Buffer.compare(Buffer.from(gif.frames[0]), Buffer.from(gif.frames[4]))).not.toBe(0);
  });

  it('--compile: the same PNG frames as eager, and a line on the chunk signatures', async () => {
    // 5 latent frames: chunks 0..2 trace one signature each, chunks 3 and 4 share one (traced, then run).
    const z = join(dir, 'z5.safetensors');
    const t = randn([16, 5, 2, 3], { device: 'cpu', generator: new Generator(8) });
    await writeLatents(z, t);
    t.dispose();
    const decode = async (name: string, compile: boolean) => {
      const lines: string[] = [];
      const out = join(dir, `${name}.png`);
      expect(
        await runVaeDecode(
          { latents: z, out, device: 'cpu', preview: false, compile },
          (l) => lines.push(l),
          () => {},
        ),
      ).toBe(0);
      return { lines, frames: await Promise.all(Array.from({ length: 17 }, (_, i) => readPng(join(dir, `${name}-${String(i).padStart(4, '0')}.png`)))) };
    };
    const eager = await decode('eager5', false);
    const compiled = await decode('compiled5', true);
    for (let i = 0; i < 17; i++) expect(Buffer.compare(compiled.frames[i].data, eager.frames[i].data), `frame ${i}`).toBe(0);
    expect(compiled.lines.at(-1)).toMatch(/^compile: 4 chunk signature\(s\): traced x1, traced x1, traced x1, program x2 /);
    expect(eager.lines.some((l) => l.startsWith('compile:'))).toBe(false);
  });

  it('decodes the default random latents to one 128x128 PNG', async () => {
    const lines: string[] = [];
    const out = join(dir, 'default.png');
    expect(
      await runVaeDecode(
        { out, device: 'cpu', seed: 3 },
        (l) => lines.push(l),
        () => {},
      ),
    ).toBe(0);
    const png = await readPng(out);
    expect([png.width, png.height]).toEqual([128, 128]);
    expect(lines[1]).toBe('latents: [1, 16, 1, 16, 16] (random normal, seed 3)');
    expect(lines[3]).toBe(`frames written: ${out}`);
    // One frame: no preview.
    expect(lines[4]).toMatch(/^decode: .*, PNG write/);
    expect(existsSync(join(dir, 'default.gif'))).toBe(false);
  });

  it('tiles when the image is larger than a tile, and denormalizes with the config statistics', async () => {
    const lines: string[] = [];
    const out = join(dir, 'tiled.png');
    const z = join(dir, 'z3.safetensors');
    const t = randn([16, 1, 3, 3], { device: 'cpu', generator: new Generator(6) });
    await writeLatents(z, t);
    t.dispose();
    expect(
      await runVaeDecode(
        { latents: z, out, device: 'cpu', tile: 16, tileStride: 8, denormalize: true },
        (l) => lines.push(l),
        () => {},
      ),
    ).toBe(0);
    expect(lines[1]).toBe(`latents: [1, 16, 1, 3, 3] (${z}, denormalized with latents_mean / latents_std)`);
    // 16 px tiles every 8 px: 2-latent tiles every latent, so 3 x 3 of them.
    expect(lines[4]).toMatch(/^decode: [\d.]+ s \(tiled: 3 x 3 tiles of 16x16 px, stride 8x8\)/);
    const png = await readPng(out);
    expect([png.width, png.height]).toEqual([24, 24]);
  });

  it('fails with a message naming the problem: channel count, --denormalize without statistics, bad tiles', async () => {
    const z8 = join(dir, 'z8.safetensors');
    const t = randn([1, 8, 1, 2, 2], { device: 'cpu', generator: new Generator(7) });
    await writeLatents(z8, t);
    t.dispose();
    const none = () => {};
    await expect(runVaeDecode({ latents: z8, out: join(dir, 'x.png'), device: 'cpu' }, none, none)).rejects.toThrow(
      `${z8}: latents have 8 channels (shape [1, 8, 1, 2, 2]), the model's z_dim is 16`,
    );
    const wan22 = join(dir, 'wan2.2-tiny');
    await writeRandomWanVae(wan22, WAN_VAE_PRESETS['wan2.2-tiny']);
    await expect(runVaeDecode({ model: wan22, latents: z8, out: join(dir, 'x.png'), device: 'cpu', denormalize: true }, none, none)).rejects.toThrow(
      `--denormalize: ${wan22}/config.json has no latents_mean / latents_std`,
    );
    await expect(runVaeDecode({ latents, out: join(dir, 'x.png'), device: 'cpu', tile: 100 }, none, none)).rejects.toThrow(
      'tiling: tileSampleMinHeight 100 and tileSampleStrideHeight 192 must be positive multiples of 8 (image pixels per latent) with stride <= tile',
    );
    await expect(runVaeDecode({ latents, out: join(dir, 'x.png'), device: 'cpu', preview: join(dir, 'x.avi') }, none, none)).rejects.toThrow(
      /unsupported extension '.avi' \(use .gif, or .mp4 \/ .webm with ffmpeg on PATH\)/,
    );
    expect(existsSync(join(dir, 'x.png'))).toBe(false);
    expect(existsSync(join(dir, 'x-0000.png'))).toBe(false);
  });

  it('runs through the command line: exit code 0 and the report on stdout; 1 and one line on stderr for a bad file', async () => {
    const run = promisify(execFile);
    const tsx = join(process.cwd(), 'node_modules', '.bin', 'tsx');
    const main = join(process.cwd(), 'src', 'cli', 'main.ts');
    const out = join(dir, 'cli.png');
    const { stdout } = await run(tsx, [main, 'vae-decode', '--device', 'cpu', '--latents', latents, '--out', out, '--no-tiling', '--no-preview']);
    expect(stdout).toContain('output: [1, 3, 5, 16, 24]');
    expect(stdout).toContain('(one tile)');
    expect(existsSync(join(dir, 'cli-0004.png'))).toBe(true);
    expect(existsSync(join(dir, 'cli.gif'))).toBe(false);
    // --tile sets both sides, --tile-width one: 8 px = 1-latent rows, 16 px = 2-latent columns, every latent.
    const tiled = await run(tsx, [
      main,
      'vae-decode',
      '--device',
      'cpu',
      '--latents',
      latents,
      '--out',
      join(dir, 'cli2.png'),
      '--tile',
      '8',
      '--tile-width',
      '16',
      '--tile-stride',
      '8',
      '--preview',
      join(dir, 'anim.gif'),
      '--fps',
      '10',
    ]);
    expect(tiled.stdout).toContain('(tiled: 2 x 3 tiles of 16x8 px, stride 8x8)');
    expect(tiled.stdout).toContain(`preview: ${join(dir, 'anim.gif')} (5 frames at 10 fps, animated GIF)`);
    expect((await readGif(join(dir, 'anim.gif'))).delays).toEqual([10, 10, 10, 10, 10]);
    const bad = join(dir, 'bad.npy');
    const failed = await run(tsx, [main, 'vae-decode', '--device', 'cpu', '--latents', bad]).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr.trim().split('\n').at(-1)).toBe(`tensorgpu: ${bad}: cannot read: ENOENT: no such file or directory, open '${bad}'`);
  });

  it.runIf(hasFfmpeg())('writes an MP4 preview through ffmpeg when asked (and ffmpeg is on PATH)', async () => {
    const lines: string[] = [];
    const mp4 = join(dir, 'video.mp4');
    expect(
      await runVaeDecode(
        { latents, out: join(dir, 'mp4.png'), device: 'cpu', preview: mp4 },
        (l) => lines.push(l),
        () => {},
      ),
    ).toBe(0);
    expect(lines[4]).toBe(`preview: ${mp4} (5 frames at 16 fps, MP4 through ffmpeg)`);
    const probe = await promisify(execFile)('ffprobe', [
      '-v',
      'error',
      '-count_frames',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=width,height,nb_read_frames',
      '-of',
      'csv=p=0',
      mp4,
    ]);
    expect(probe.stdout.trim()).toBe('24,16,5');
  });

  it('an MP4 preview without ffmpeg on PATH fails before decoding, saying why', async () => {
    const none = () => {};
    // An empty PATH hides an installed ffmpeg, so this runs on every machine.
    const path = process.env.PATH;
    process.env.PATH = '';
    try {
      expect(hasFfmpeg()).toBe(false);
      await expect(runVaeDecode({ latents, out: join(dir, 'y.png'), device: 'cpu', preview: join(dir, 'y.mp4') }, none, none)).rejects.toThrow(
        /--preview .*y\.mp4: writing \.mp4 needs ffmpeg on PATH, and none was found/,
      );
    } finally {
      process.env.PATH = path;
    }
    expect(existsSync(join(dir, 'y-0000.png'))).toBe(false);
  });
});
