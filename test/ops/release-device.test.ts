// releaseDevice() destroys the WebGPU device: tensors still on it fail with a typed error (no hang, no crash), the
// default device returns to CPU, and initDevice('webgpu') afterwards gives a working new device. In its own file
// because it releases the device the other suites share per process.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

describe.skipIf(!gpu.available)(`use after releaseDevice() ${gpu.skipReason}`, () => {
  it('tensors on a released device are unusable, with an error that says why', async () => {
    const x = tg.randn([4, 4], { device: 'webgpu' });
    const view = x.T;
    const pending = x.mul(2); // queued, never read
    expect(tg.getDefaultDevice()).toBe('webgpu');
    tg.releaseDevice();
    expect(tg.getDefaultDevice()).toBe('cpu');
    await expect(x.toArray()).rejects.toThrow(tg.DisposedError);
    await expect(x.toArray()).rejects.toThrow(/released \(releaseDevice\(\)\)/);
    await expect(pending.toArray()).rejects.toThrow(tg.DisposedError);
    await expect(view.to('cpu')).rejects.toThrow(tg.DisposedError);
    expect(() => x.add(1)).toThrow(tg.DisposedError);
    expect(() => x.matmul(view)).toThrow(tg.DisposedError);
    expect(() => x.sum()).toThrow(tg.DisposedError);
    expect(() => x.reshape(16)).toThrow(tg.DisposedError);
    // Creating on the released device names the fix.
    expect(() => tg.zeros([2], { device: 'webgpu' })).toThrow(tg.DeviceUnavailableError);
    expect(() => tg.zeros([2], { device: 'webgpu' })).toThrow(/initDevice/);
    expect(() => tg.setDefaultDevice('webgpu')).toThrow(tg.DeviceUnavailableError);
    // Disposing after release is harmless; releasing twice too; stats read as zero.
    x.dispose();
    view.dispose();
    pending.dispose();
    tg.releaseDevice();
    expect(tg.memoryStats().liveBytes).toBe(0);
    await tg.synchronize();
    // CPU keeps working.
    expect(await tg.ones([2]).sum().item()).toBe(2);
  });

  it('initDevice after a release gives a working device; old tensors stay unusable', async () => {
    const old = tg.ones([3], { device: 'cpu' });
    const stale = await (async () => {
      await tg.initDevice('webgpu');
      const s = tg.ones([3], { device: 'webgpu' });
      tg.releaseDevice();
      return s;
    })();
    expect(await tg.initDevice('webgpu')).toBe('webgpu');
    const fresh = await old.to('webgpu');
    expect(Array.from(await fresh.add(1).toArray())).toEqual([2, 2, 2]);
    expect(() => stale.add(fresh)).toThrow(tg.DisposedError);
    await expect(stale.toArray()).rejects.toThrow(tg.DisposedError);
    expect(tg.memoryStats().liveBytes).toBeGreaterThan(0);
  });
});
