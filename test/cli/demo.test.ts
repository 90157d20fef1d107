import { describe, expect, it } from 'vitest';
import { runDemo } from '../../src/cli/demo.js';
import { isAvailable } from '../../src/index.js';

const gpuUsable = await isAvailable();
const required = process.env.TENSORGPU_REQUIRE_GPU === '1';

describe('tensorgpu demo', () => {
  it('runs on the CPU', async () => {
    const lines: string[] = [];
    expect(await runDemo({ device: 'cpu', size: 32, out: (l) => lines.push(l) })).toBe(0);
    expect(lines[0]).toBe('device: cpu');
    expect(lines.some((l) => /matmul 32x32 @ 32x32 float32: [\d.]+ ms/.test(l))).toBe(true);
  });

  it.skipIf(!gpuUsable && !required)('on WebGPU, checks its results against the CPU backend', async () => {
    const lines: string[] = [];
    expect(await runDemo({ device: 'webgpu', size: 67, out: (l) => lines.push(l) })).toBe(0);
    expect(lines[0]).toMatch(/^device: webgpu/);
    expect(lines.some((l) => l.startsWith('check vs CPU backend: matmul max rel error'))).toBe(true);
  });
});
