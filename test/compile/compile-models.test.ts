// compile() on model code: a decoder prefill (the built-in Qwen3-MoE and LFM2-MoE layouts, smaller) and a Wan VAE
// decode give the eager values bit for bit (the same kernels run), recorded once and replayed.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { compile, setDefaultDevice, type Tensor } from '../../src/index.js';
import { Generator } from '../../src/core/random.js';
import { decoderForward, type DecoderBlocks } from '../../src/models/layers/decoder-blocks.js';
import { LFM2_PRESETS } from '../../src/models/lfm2/presets.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { QWEN3_PRESETS } from '../../src/models/qwen3/presets.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

async function codes(t: Tensor): Promise<number[]> {
  const a = await t.toArray();
  return Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
}

describe.skipIf(!gpu.available)(`compile() on model code ${gpu.skipReason}`, () => {
  it.each(['qwen3-moe-tiny', 'lfm2-moe-tiny'])(
    '%s layout prefill: recorded, replayed, the eager logits bit for bit',
    async (preset) => {
      // The preset's layer kinds, fewer of them, with a 512-token vocabulary (the real one makes every head 150k rows).
      const dir = mkdtempSync(join(tmpdir(), `tensorgpu-compile-${preset}-`));
      const lfm2 = LFM2_PRESETS[preset];
      if (preset.startsWith('qwen3'))
        await writeRandomQwen3Checkpoint(
          dir,
          { ...QWEN3_PRESETS[preset], vocabSize: 512, bosTokenId: 0, eosTokenIds: [1], numHiddenLayers: 2 },
          { dtype: 'bfloat16', seed: 3 },
        );
      else
        await writeRandomLfm2Checkpoint(
          dir,
          {
            ...lfm2,
            vocabSize: 512,
            bosTokenId: 0,
            eosTokenIds: [1],
            numHiddenLayers: 3,
            layerTypes: ['conv', 'full_attention', 'conv'],
            moe: { ...lfm2.moe!, numDenseLayers: 1 },
          },
          { dtype: 'float32', seed: 3 },
        );
      const { model } = await tg.loadModel(dir, { device: 'webgpu', maxSequence: 16 });
      const m = model as unknown as { blocks: DecoderBlocks<unknown>; newCache(): { dispose(): void } };
      // The cache is an argument (its identity is part of the signature); the start row a number (so is it).
      const prefill = compile((tokens: Tensor, start: number, cache: unknown) => decoderForward(m.blocks, tokens, cache, { start }, false).logits);
      const cache = m.newCache();
      const eagerCache = m.newCache();
      try {
        for (let call = 0; call < 3; call++) {
          const ids = tg.tensor([5 + call, 17, 300, 42], { dtype: 'int32', device: 'webgpu' });
          const want = decoderForward(m.blocks, ids, eagerCache, { start: 0 }, false).logits;
          const got = prefill(ids, 0, cache);
          expect(await codes(got)).toEqual(await codes(want));
          for (const t of [ids, want, got]) t.dispose();
        }
        const s = prefill.stats().signatures[0];
        expect(s.mode).toBe('recorded');
        expect(s.dispatches).toBe(s.eagerDispatches);
      } finally {
        cache.dispose();
        eagerCache.dispose();
        model.dispose();
      }
    },
    120_000,
  );

  it('the audio front end (Whisper log-mel, a mel spectrogram in dB): recorded, replayed, the eager values bit for bit', async () => {
    const front = (audio: Tensor) => [tg.logMelSpectrogram(audio), tg.amplitudeToDb(tg.melSpectrogram(audio, { sampleRate: 16000, nFft: 400, nMels: 40 }))];
    const compiled = compile(front);
    const g = new Generator(9);
    for (let call = 0; call < 3; call++) {
      const audio = tg.tensor(
        Float32Array.from({ length: 8000 }, () => 0.3 * g.normal()),
        { device: 'webgpu' },
      );
      const want = front(audio);
      const got = compiled(audio);
      for (let k = 0; k < 2; k++) expect(await codes(got[k])).toEqual(await codes(want[k]));
      for (const t of [audio, ...want, ...got]) t.dispose();
    }
    const s = compiled.stats().signatures[0];
    expect(s.reason).toBeUndefined();
    expect(s.mode).toBe('recorded');
  });

  it('Wan VAE decode: recorded, replayed, the eager frames bit for bit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-compile-vae-'));
    await writeRandomWanVae(dir, WAN_VAE_PRESETS['wan2.1-tiny'], { dtype: 'float32', seed: 3 });
    const vae = await loadWanVae(dir, { device: 'webgpu' });
    const decode = compile((z: Tensor) => vae.decode(z));
    const g = new Generator(5);
    for (let call = 0; call < 3; call++) {
      const z = tg
        .tensor(
          Float32Array.from({ length: 16 * 2 * 4 * 6 }, () => g.normal()),
          { device: 'webgpu' },
        )
        .reshape([1, 16, 2, 4, 6]);
      const want = vae.decode(z);
      const got = decode(z);
      expect(got.shape).toEqual(want.shape);
      expect(await codes(got)).toEqual(await codes(want));
      for (const t of [z, want, got]) t.dispose();
    }
    const s = decode.stats().signatures[0];
    expect(s.reason).toBeUndefined();
    expect(s.mode).toBe('recorded');
    expect(s.dispatches).toBeLessThanOrEqual(s.eagerDispatches);
    vae.dispose();
  }, 120_000);
});
