// Inputs for the numpy golden reference of the Wan VAE (tools/wan-vae-reference/wan_vae_reference.py): for each tiny preset a
// float32 random checkpoint (the same one test/models/wan-vae-reference.test.ts regenerates) and inputs.safetensors
// with the latents and video. Usage: npx tsx tools/wan-vae-reference/make-inputs.ts [outDir]  (default $TMPDIR/wan-vae-fixture)
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import '../../src/runtime/node-host.js'; // writing checkpoints needs the Node host (files)
import { Generator } from '../../src/core/random.js';
import type { Tensor } from '../../src/core/tensor.js';
import { writeSafetensors, tensorSource } from '../../src/formats/safetensors-writer.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';
import { rand, randn, tensor } from '../../src/ops/creation.js';

const root = process.argv[2] ?? join(tmpdir(), 'wan-vae-fixture');

/** enable_tiling(tile_sample_min_height, tile_sample_min_width, tile_sample_stride_height, tile_sample_stride_width). */
type Tiling = [number, number, number, number];

interface Inputs {
  latents: number[];
  tiledLatents: number[];
  video: number[];
  tiledVideo: number[];
  /** In diffusers' units (image pixels): square tiles, tiles of another height than width, and encode tiles. */
  tilingDecode: Tiling;
  tilingDecodeHw: Tiling;
  tilingEncode: Tiling;
}

const INPUTS: Record<string, Inputs> = {
  // 3 latent frames and 9 video frames (3 chunks each way): only a third chunk reads caches filled from a
  // multi-frame chunk (CACHE_T = 2, the upsampler's "Rep" zero frame), so 2 latent / 5 video frames would miss them.
  // Decode tiles of 3 x 3 latents every 2 (8 px blends), then 3 x 5 every 2 x 3; encode tiles of 32 x 48 px every
  // 16 x 32 (3 x 2 tiles, 2-latent blends).
  'wan2.1-tiny': {
    latents: [1, 16, 3, 4, 6],
    tiledLatents: [1, 16, 2, 6, 8],
    video: [1, 3, 9, 32, 48],
    tiledVideo: [1, 3, 5, 48, 64],
    tilingDecode: [24, 24, 16, 16],
    tilingDecodeHw: [24, 40, 16, 24],
    tilingEncode: [32, 48, 16, 32],
  },
  // Latents 2 rows high keep the file small; the tiled latents (4 x 4 > one 3 x 3 tile) blend both ways. With
  // patch size 2 (16 px per latent) diffusers' 48 / 32 px give 3-latent tiles every 2 latents, 8 decoder-px blends;
  // its encode tiles are 32 / 16 patchified px (64 / 32 image px): 2 x 2 tiles of the 64 x 64 video.
  'wan2.2-tiny': {
    latents: [1, 8, 3, 2, 5],
    tiledLatents: [1, 8, 2, 4, 4],
    video: [1, 3, 9, 32, 32],
    tiledVideo: [1, 3, 5, 64, 64],
    tilingDecode: [48, 48, 32, 32],
    tilingDecodeHw: [48, 64, 32, 32],
    tilingEncode: [32, 32, 16, 16],
  },
};

for (const [preset, shapes] of Object.entries(INPUTS)) {
  const dir = join(root, preset);
  mkdirSync(dir, { recursive: true });
  await writeRandomWanVae(dir, WAN_VAE_PRESETS[preset], { dtype: 'float32', seed: 1 });
  const generator = new Generator(1234);
  // Drawn in this order so that inputs added later leave the earlier ones (and their fixtures) unchanged.
  const tensors: [string, Tensor][] = [['latents', randn(shapes.latents, { device: 'cpu', generator })]];
  tensors.push(['tiled_latents', randn(shapes.tiledLatents, { device: 'cpu', generator })]);
  tensors.push(['video', rand(shapes.video, { device: 'cpu', generator }).mul(2).sub(1)]);
  tensors.push(['tiled_video', rand(shapes.tiledVideo, { device: 'cpu', generator }).mul(2).sub(1)]);
  for (const [name, t] of [
    ['tiling_decode', shapes.tilingDecode],
    ['tiling_decode_hw', shapes.tilingDecodeHw],
    ['tiling_encode', shapes.tilingEncode],
  ] as const) {
    tensors.push([name, tensor(new Float32Array(t), { device: 'cpu' })]);
  }
  await writeSafetensors(
    join(dir, 'inputs.safetensors'),
    tensors.map(([n, t]) => [n, tensorSource(t)] as const),
  );
  console.log(preset, dir);
}
