// The Wan VAE (CPU backend) against an independent golden reference: test/fixtures/wan-vae/<preset>.safetensors hold
// inputs and the outputs of a literal float64 numpy port of diffusers' AutoencoderKLWan
// (tools/wan-vae-reference/wan_vae_reference.py) run on the float32 random checkpoint that writeRandomWanVae produces for the same
// preset and seed. Regenerate with:
//   npx tsx tools/wan-vae-reference/make-inputs.ts && python3 tools/wan-vae-reference/wan_vae_reference.py
// Covered: chunked decode with the feature cache (3 latent frames: first chunk, the "Rep" upsampler start, then a
// full 2-frame cache), diffusers' tiled_decode with its in-place blending (tile 24, stride 16 decoder pixels, tiles
// in both directions), and chunked encode (9 frames: chunks of 1, 4, 4) to the posterior mean, for Wan2.1 (up
// blocks) and Wan2.2 (residual blocks, AvgDown3D / DupUp3D, patchify).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tensor } from '../../src/core/tensor.js';
import { SafetensorsFile } from '../../src/io/safetensors-reader.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import type { WanVae } from '../../src/models/wan-vae/model.js';
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

  it('tiled decode (tile 24, stride 16: blends both ways) matches diffusers tiled_decode', SLOW, async () => {
    const z = await input('tiled_latents');
    await check('tiled decode', () => vae.decode(z, { tiling: { tileSize: 24, stride: 16 } }), 'tiled_decoded');
    z.dispose();
  });

  it('encode (9 frames: chunks of 1, 4, 4) matches the posterior mean', SLOW, async () => {
    const x = await input('video');
    await check('encode', () => vae.encode(x), 'encoded_mean');
    x.dispose();
  });
});
