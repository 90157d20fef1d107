// The host work of a replayed decode step (issue 37): for a tiny Qwen3-MoE, LFM2-MoE and Qwen3.6-MoE, bf16 and int4
// quantized at load, every replayed step does exactly the same host-side work: two scalar writes (draw, position),
// no upload, no bind group, buffer or pipeline created, one submit and the one token read; the session stays in
// replay mode. (The MoE bench's int4 host µs for LFM2 and Qwen3.6 were scheduler preemption on a loaded 2-core
// machine, not work: this pins the work so a per-token upload, read or rebuild would show as a count.)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { gpuCounters, setDefaultDevice } from '../../src/index.js';
import { DecodeSession } from '../../src/generate/decode-session.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { loadModel } from '../../src/models/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import type { Qwen35Config } from '../../src/models/qwen3_5/config.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { webgpuBackend } from '../../src/runtime/registry.js';
import { LFM2_REFERENCE_CASES } from '../../tools/lfm2-reference/presets.js';
import { QWEN3_5_REFERENCE_CASES } from '../../tools/qwen3_5-reference/presets.js';
import { SMALL_QWEN3_MOE } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const QWEN36_REF = QWEN3_5_REFERENCE_CASES['qwen3.6-moe-ref'].config;
const QWEN36_MOE: Qwen35Config = {
  ...QWEN36_REF,
  linear: { ...QWEN36_REF.linear, valueHeadDim: 16 },
  numHiddenLayers: 2,
  layerTypes: ['linear_attention', 'full_attention'],
  moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 32, sharedExpertIntermediateSize: 32 },
};

const WRITERS: [string, (dir: string) => Promise<unknown>][] = [
  ['Qwen3-MoE', (dir) => writeRandomQwen3Checkpoint(dir, SMALL_QWEN3_MOE, { seed: 3 })],
  ['LFM2-MoE', (dir) => writeRandomLfm2Checkpoint(dir, LFM2_REFERENCE_CASES['lfm2-moe-ref'].config, { seed: 3 })],
  ['Qwen3.6-MoE', (dir) => writeRandomQwen35Checkpoint(dir, QWEN36_MOE, { seed: 3 })],
];

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Host-side calls during each of `steps` replayed decode steps (after the recorded one). */
async function replayedStepWork(dir: string, dtype: 'int4' | undefined, steps: number) {
  const { model } = await loadModel(dir, { device: 'webgpu', dtype, groupSize: 32, maxSequence: 32 });
  const backend = webgpuBackend()!;
  const device = backend.gpuDevice;
  const spies = {
    upload: vi.spyOn(backend, 'upload'),
    write: vi.spyOn(backend, 'writeBytes'),
    read: vi.spyOn(backend, 'read'),
    bindGroup: vi.spyOn(device, 'createBindGroup'),
    buffer: vi.spyOn(device, 'createBuffer'),
  };
  const session = new DecodeSession(model, { sampling: { temperature: 0 } });
  try {
    await session.prefill([3, 17, 250, 9], 0);
    await session.next(0); // recorded
    const work: Record<string, number>[] = [];
    for (let s = 0; s < steps; s++) {
      for (const spy of Object.values(spies)) spy.mockClear();
      const before = gpuCounters();
      await session.next(0);
      const after = gpuCounters();
      work.push({
        ...Object.fromEntries(Object.entries(spies).map(([k, spy]) => [k, spy.mock.calls.length])),
        submits: after.submits - before.submits,
        replays: after.replays - before.replays,
        pipelines: after.pipelinesCompiled - before.pipelinesCompiled,
        dispatches: after.dispatches - before.dispatches,
      });
    }
    expect(session.stats).toMatchObject({ mode: 'replay', recordedSteps: 1, replayedSteps: steps, eagerSteps: 0 });
    return work;
  } finally {
    for (const spy of Object.values(spies)) spy.mockRestore();
    session.dispose();
    model.dispose();
  }
}

describe(`the host work of a replayed MoE decode step, bf16 and int4 at load ${gpu.skipReason}`, () => {
  it.runIf(gpu.available).each(WRITERS)(
    '%s: int4 replays with the same host work as bf16 (no upload, rebuild or extra read)',
    async (_, write) => {
      const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-host-work-'));
      dirs.push(dir);
      await write(dir);
      const bf16 = await replayedStepWork(dir, undefined, 2);
      const int4 = await replayedStepWork(dir, 'int4', 2);
      const dispatches = bf16[0].dispatches;
      const each = { upload: 0, write: 2, read: 1, bindGroup: 0, buffer: 0, submits: 1, replays: 1, pipelines: 0, dispatches };
      expect(bf16).toEqual([each, each]);
      expect(int4).toEqual([each, each]);
    },
    180_000,
  );
});
