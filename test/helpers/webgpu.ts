// Test setup for WebGPU suites: starts the device once per file and says why when it cannot.
// With TENSORGPU_REQUIRE_GPU=1 (set by CI, which installs SwiftShader) a missing adapter fails instead of skipping.
import { afterAll } from 'vitest';
import { diagnose, gpuCounters, initDevice, releaseDevice, synchronize, type Tensor } from '../../src/index.js';

export interface GpuSuite {
  available: boolean;
  /** Why WebGPU tests are skipped (for the describe name), or '' when they run. */
  skipReason: string;
}

export async function setupWebGpu(): Promise<GpuSuite> {
  const required = process.env.TENSORGPU_REQUIRE_GPU === '1';
  try {
    await initDevice('webgpu');
    afterAll(() => releaseDevice());
    return { available: true, skipReason: '' };
  } catch (err) {
    const d = await diagnose();
    const why = `${d.reason ?? (err as Error).message}${d.hint ? ` (hint: ${d.hint})` : ''}`;
    if (required) throw new Error(`TENSORGPU_REQUIRE_GPU=1 but WebGPU is unavailable: ${why}`);
    return { available: false, skipReason: `skipped: WebGPU unavailable: ${why}` };
  }
}

/**
 * Copies inputs to WebGPU, runs fn once to compile its pipelines, then returns how many dispatches a second run
 * issued (results and copies are disposed).
 */
export async function dispatchesOf(inputs: Tensor[], fn: (...xs: Tensor[]) => Tensor): Promise<number> {
  const g = await Promise.all(inputs.map((t) => t.to('webgpu')));
  try {
    fn(...g).dispose();
    await synchronize();
    const before = gpuCounters();
    const r = fn(...g);
    const after = gpuCounters();
    r.dispose();
    return after.dispatches - before.dispatches;
  } finally {
    g.forEach((t) => t.dispose());
  }
}
