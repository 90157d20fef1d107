// The Wan VAE (CPU backend) against an independent golden reference: test/fixtures/wan-vae/<preset>.safetensors hold
// inputs and the outputs of a literal float64 numpy port of diffusers' AutoencoderKLWan
// (tools/wan-vae-reference/wan_vae_reference.py) run on the float32 random checkpoint that writeRandomWanVae produces for the same
// preset and seed. Regenerate with:
//   npx tsx tools/wan-vae-reference/make-inputs.ts && python3 tools/wan-vae-reference/wan_vae_reference.py
// Covered: chunked decode with the feature cache (3 latent frames: first chunk, the "Rep" upsampler start, then a
// full 2-frame cache), diffusers' tiled_decode with its in-place blending (enable_tiling sizes in image pixels, read
// from the fixture: square tiles, and tiles of another height than width), chunked encode (9 frames: chunks of 1,
// 4, 4) to the posterior mean, and diffusers' tiled_encode (5 frames, 2 x 2 or 3 x 2 tiles), for Wan2.1 (up blocks)
// and Wan2.2 (residual blocks, AvgDown3D / DupUp3D, patchify: 16 image px per latent, where diffusers' encode tiles
// count patchified pixels). Also: a Qwen-Image config decodes tiles without the final clamp, as diffusers does.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tensor } from '../../src/core/tensor.js';
import { Generator } from '../../src/core/random.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { randn } from '../../src/ops/creation.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import { decodeTilePlan, encodeTilePlan, type TilingOptions, type WanVae } from '../../src/models/wan-vae/model.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'wan-vae');

/**
 * float32 on the CPU against float64: measured max abs errors are ~1e-6 (see the report in each assertion's
 * message). 2e-5 leaves an order of magnitude of margin, while a misplaced cache frame, a wrong permute or a
 * wrong blend changes outputs by 1e-2 or more.
 */
const MAX_ABS = 2e-5;

/** Decode and tiled decode take 5-10 s each on the CPU backend; the default 60 s is tight on a slow runner. */
const SLOW = { timeout: 180_000 };

const CASES = [{ preset: 'wan2.1-tiny' }, { preset: 'wan2.2-tiny' }];

interface Errors {
  maxAbs: number;
  /** max |got - want| / max |want|. */
  maxRel: number;
  /** RMS of the difference over RMS of want. */
  rmsRel: number;
}

function errors(got: Float32Array, want: Float32Array): Errors {
  let maxAbs = 0;
  let scale = 0;
  let diff2 = 0;
  let want2 = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= maxAbs)) maxAbs = Number.isNaN(d) ? Infinity : d;
    scale = Math.max(scale, Math.abs(want[i]));
    diff2 += d * d;
    want2 += want[i] * want[i];
  }
  return { maxAbs, maxRel: maxAbs / scale, rmsRel: Math.sqrt(diff2 / want2) };
}

const describeErrors = (e: Errors) => `max abs ${e.maxAbs.toExponential(2)}, max rel ${e.maxRel.toExponential(2)}, rms rel ${e.rmsRel.toExponential(2)}`;

describe.each(CASES)('Wan VAE $preset vs the diffusers numpy reference', ({ preset }) => {
  let dir: string;
  let vae: WanVae;
  let fixture: SafetensorsFile;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), `tensorgpu-wan-vae-ref-${preset}-`));
    await writeRandomWanVae(dir, WAN_VAE_PRESETS[preset], { dtype: 'float32', seed: 1 });
    vae = await loadWanVae(dir, { device: 'cpu' });
    fixture = await SafetensorsFile.open(join(FIXTURES, `${preset}.safetensors`));
  });

  afterAll(async () => {
    vae?.dispose();
    await fixture?.[Symbol.asyncDispose]();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const input = (name: string) => fixture.load(name, { device: 'cpu' });

  async function check(what: string, run: () => Tensor, expectedName: string): Promise<void> {
    const out = run();
    const want = await input(expectedName);
    try {
      expect(out.shape, `${what} shape`).toEqual(want.shape);
      const e = errors((await out.toArray()) as Float32Array, (await want.toArray()) as Float32Array);
      const report = `${preset} ${what}: ${describeErrors(e)}`;
      console.log(report);
      expect(e.maxAbs, report).toBeLessThan(MAX_ABS);
    } finally {
      out.dispose();
      want.dispose();
    }
  }

  it('decode (3 latent frames: chunked, feature cache) matches', SLOW, async () => {
    const z = await input('latents');
    await check('decode', () => vae.decode(z), 'decoded');
    z.dispose();
  });

  /** enable_tiling()'s four arguments, as make-inputs.ts stored them. */
  async function tilingOf(name: string): Promise<TilingOptions> {
    const t = await input(name);
    const [h, w, sh, sw] = Array.from(await t.toArray());
    t.dispose();
    return { tileSampleMinHeight: h, tileSampleMinWidth: w, tileSampleStrideHeight: sh, tileSampleStrideWidth: sw };
  }

  it.each([
    ['tiling_decode', 'tiled_decoded'],
    ['tiling_decode_hw', 'tiled_decoded_hw'],
  ])('tiled decode with %s (diffusers units) matches diffusers tiled_decode', SLOW, async (tilingName, expected) => {
    const tiling = await tilingOf(tilingName);
    const z = await input('tiled_latents');
    const plan = decodeTilePlan(vae.config, z.shape[3], z.shape[4], tiling);
    // Several tiles both ways, so blend_v and blend_h both run.
    expect(plan && [plan.rows.origins.length > 1, plan.cols.origins.length > 1]).toEqual([true, true]);
    await check(`tiled decode ${JSON.stringify(Object.values(tiling))}`, () => vae.decode(z, { tiling }), expected);
    z.dispose();
  });

  it('encode (9 frames: chunks of 1, 4, 4) matches the posterior mean', SLOW, async () => {
    const x = await input('video');
    await check('encode', () => vae.encode(x), 'encoded_mean');
    x.dispose();
  });

  it('tiled encode (diffusers tiled_encode: 5 frames, tiles both ways) matches the posterior mean', SLOW, async () => {
    const tiling = await tilingOf('tiling_encode');
    const x = await input('tiled_video');
    const plan = encodeTilePlan(vae.config, x.shape[3], x.shape[4], tiling);
    expect(plan && [plan.rows.origins.length > 1, plan.cols.origins.length > 1]).toEqual([true, true]);
    await check(`tiled encode ${JSON.stringify(Object.values(tiling))}`, () => vae.encode(x, { tiling }), 'tiled_encoded_mean');
    x.dispose();
  });
});

describe('Qwen-Image VAE tiled decode', () => {
  it('blends tiles without the final clamp (diffusers AutoencoderKLQwenImage.tiled_decode), clamps untiled', SLOW, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen-image-tiles-'));
    try {
      await writeRandomWanVae(dir, WAN_VAE_PRESETS['wan2.1-tiny'], { dtype: 'float32', seed: 1 });
      const wanConfig = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
      const wan = await loadWanVae(dir, { device: 'cpu', parts: 'decoder' });
      // The same weights under the Qwen-Image class (its config keys: input_channels, no patch_size or scale factors).
      const { base_dim, z_dim, dim_mult, num_res_blocks, attn_scales, temperal_downsample, latents_mean, latents_std } = wanConfig;
      writeFileSync(
        join(dir, 'config.json'),
        JSON.stringify({
          _class_name: 'AutoencoderKLQwenImage',
          base_dim,
          z_dim,
          dim_mult,
          num_res_blocks,
          attn_scales,
          temperal_downsample,
          input_channels: 3,
          latents_mean,
          latents_std,
        }),
      );
      const qwen = await loadWanVae(dir, { device: 'cpu', parts: 'decoder' });
      // One latent frame of 4 x 4: 2 x 2 tiles of 3 latents, blended both ways.
      const z = randn([1, 16, 1, 4, 4], { device: 'cpu', generator: new Generator(21) });
      const tiling = { tileSampleMinHeight: 24, tileSampleMinWidth: 24, tileSampleStrideHeight: 16, tileSampleStrideWidth: 16 };
      const [w, q, qu] = await Promise.all(
        [wan.decode(z, { tiling }), qwen.decode(z, { tiling }), qwen.decode(z)].map(async (t) => {
          const v = (await t.toArray()) as Float32Array;
          t.dispose();
          return v;
        }),
      );
      z.dispose();
      wan.dispose();
      qwen.dispose();
      const outside = q.filter((v) => Math.abs(v) > 1).length;
      expect(outside, 'the random decoder overshoots [-1, 1] somewhere').toBeGreaterThan(20);
      expect(
        qu.reduce((m, v) => Math.max(m, Math.abs(v)), 0),
        'untiled Qwen-Image decode still clamps',
      ).toBeLessThanOrEqual(1);
      let worst = 0;
      for (let i = 0; i < q.length; i++) worst = Math.max(worst, Math.abs(Math.min(1, Math.max(-1, q[i])) - w[i]));
      expect(worst, 'clamp(Qwen-Image tiles) = Wan tiles').toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
