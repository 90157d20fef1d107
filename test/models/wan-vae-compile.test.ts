// WanVae.decode(z, { compile: true }): each chunk's decoder runs through compile() with the feature cache passed in
// and out as plain data, so the steady-state chunks of a video share one signature and replay; the frames are the
// eager ones bit for bit, on the CPU and on WebGPU.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStats, randn, setDefaultDevice, type Tensor } from '../../src/index.js';
import { Generator } from '../../src/core/random.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

let dir = '';
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tensorgpu-vae-compile-'));
  await writeRandomWanVae(dir, WAN_VAE_PRESETS['wan2.1-tiny'], { dtype: 'float32', seed: 3 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function codes(t: Tensor): Promise<number[]> {
  const a = await t.toArray();
  return Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
}

describe(`Wan VAE decode through compile() ${gpu.skipReason}`, () => {
  it.each(devices)(
    '%s: 5 latent frames, twice: the steady-state chunks replayed, the eager frames bit for bit',
    async (device) => {
      const vae = await loadWanVae(dir, { device });
      try {
        for (let call = 0; call < 2; call++) {
          const z = randn([1, 16, 5, 2, 3], { device, generator: new Generator(7 + call) });
          const want = vae.decode(z);
          const got = vae.decode(z, { compile: true });
          expect(got.shape).toEqual(want.shape);
          expect(await codes(got)).toEqual(await codes(want));
          for (const t of [z, want, got]) t.dispose();
        }
        // Chunk 0 (no cache), 1 (one frame per conv), 2 (two, but one frame after the second temporal upsampler),
        // then 3 and 4 of each call share the steady state's signature: traced, recorded, replayed twice.
        const explained = vae.explainCompiled()!;
        expect(explained).toContain('4 signature(s), 4 trace(s)');
        expect(explained).not.toContain('eager because');
        expect(explained).toContain(device === 'webgpu' ? ': recorded, 4 call(s)' : ': program, 4 call(s)');
      } finally {
        vae.dispose();
      }
      if (device === 'webgpu') expect(memoryStats().liveBytes).toBe(0);
    },
    120_000,
  );
});
