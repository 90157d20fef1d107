// Inputs for the numpy golden reference of the Wan VAE (tools/wan-vae-reference/wan_vae_reference.py): for each tiny preset a
// float32 random checkpoint (the same one test/models/wan-vae-reference.test.ts regenerates) and inputs.safetensors
// with the latents and video. Usage: npx tsx tools/wan-vae-reference/make-inputs.ts [outDir]  (default $TMPDIR/wan-vae-fixture)
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Generator } from '../../src/core/random.js';
import type { Tensor } from '../../src/core/tensor.js';
import { writeSafetensors, tensorSource } from '../../src/io/safetensors-writer.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';
import { rand, randn } from '../../src/ops/creation.js';

const root = process.argv[2] ?? join(tmpdir(), 'wan-vae-fixture');

interface Inputs {
  latents: number[];
  tiledLatents?: number[];
  video: number[];
}

const INPUTS: Record<string, Inputs> = {
  // 3 latent frames and 9 video frames (3 chunks each way): only a third chunk reads caches filled from a
  // multi-frame chunk (CACHE_T = 2, the upsampler's "Rep" zero frame), so 2 latent / 5 video frames would miss them.
  'wan2.1-tiny': { latents: [1, 16, 3, 4, 6], tiledLatents: [1, 16, 2, 6, 8], video: [1, 3, 9, 32, 48] },
  // Latents 2 rows high keep the file small; the tiled latents (4 x 4 > one 3 x 3 tile) blend both ways.
  'wan2.2-tiny': { latents: [1, 8, 3, 2, 5], tiledLatents: [1, 8, 2, 4, 4], video: [1, 3, 9, 32, 32] },
};

for (const [preset, shapes] of Object.entries(INPUTS)) {
  const dir = join(root, preset);
  mkdirSync(dir, { recursive: true });
  await writeRandomWanVae(dir, WAN_VAE_PRESETS[preset], { dtype: 'float32', seed: 1 });
  const generator = new Generator(1234);
  const tensors: [string, Tensor][] = [['latents', randn(shapes.latents, { device: 'cpu', generator })]];
  if (shapes.tiledLatents) tensors.push(['tiled_latents', randn(shapes.tiledLatents, { device: 'cpu', generator })]);
  const u = rand(shapes.video, { device: 'cpu', generator });
  tensors.push(['video', u.mul(2).sub(1)]);
  await writeSafetensors(join(dir, 'inputs.safetensors'), tensors.map(([n, t]) => [n, tensorSource(t)] as const));
  console.log(preset, dir);
}
