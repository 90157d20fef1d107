// Which backend serves each device name, and the default device for new tensors.
import { DeviceUnavailableError } from '../core/errors.js';
import type { Backend, DeviceName } from './backend.js';
import { CpuBackend } from './cpu/cpu-backend.js';
import { autoDeviceChoice, type AutoDeviceOptions } from './device-choice.js';
import { diagnose, fallbackNotice } from './webgpu/diagnose.js';
import { WebGpuBackend } from './webgpu/webgpu-backend.js';

export type DeviceRequest = DeviceName | 'auto';

const cpu = new CpuBackend();
let webgpu: WebGpuBackend | undefined;
let webgpuStarting: Promise<WebGpuBackend> | undefined;
let defaultDevice: DeviceName = 'cpu';

export function backendFor(device: DeviceName): Backend {
  if (device === 'cpu') return cpu;
  if (!webgpu || webgpu.released) {
    throw new DeviceUnavailableError('the WebGPU device is not initialised', "call `await initDevice('webgpu')` (or 'auto') before creating WebGPU tensors");
  }
  return webgpu as Backend;
}

/** The live WebGPU backend, if one is initialised (for stats and tests). */
export function webgpuBackend(): WebGpuBackend | undefined {
  return webgpu && !webgpu.released ? webgpu : undefined;
}

export function getDefaultDevice(): DeviceName {
  return defaultDevice;
}

export function setDefaultDevice(device: DeviceName): void {
  backendFor(device);
  defaultDevice = device;
}

export interface InitDeviceOptions extends AutoDeviceOptions {
  /**
   * Receives the line saying which device 'auto' took and why (device-choice.ts). Without it, the lines where
   * 'auto' settles for the CPU go to stderr (console.warn in a browser) and a WebGPU choice prints nothing.
   */
  onNotice?: (line: string) => void;
}

/**
 * Gets a device ready and makes it the default. 'webgpu' takes any adapter, software ones included, and throws
 * DeviceUnavailableError with the diagnosis when there is none. 'auto' takes a hardware adapter, else the CPU; a
 * software adapter (SwiftShader, llvmpipe, WARP) only with `allowSoftwareAdapter`, then ahead of the CPU. It says
 * which and why (device-choice.ts). An 'auto' call while a WebGPU device is already up keeps it.
 */
export async function initDevice(request: DeviceRequest = 'auto', options: InitDeviceOptions = {}): Promise<DeviceName> {
  if (request === 'cpu') {
    defaultDevice = 'cpu';
    return 'cpu';
  }
  const warn = (line: string) => (globalThis.process?.stderr ? process.stderr.write(line + '\n') : console.warn(line));
  const notify = options.onNotice ?? warn;
  let chosen: string | undefined;
  if (request === 'auto' && !webgpuBackend()) {
    // Probe out of process first: a missing driver then costs no native noise on our stderr, and a driver that
    // crashes takes down the probe, not the caller.
    const choice = autoDeviceChoice(await diagnose(), options);
    if (choice.device === 'cpu') {
      notify(choice.reason);
      defaultDevice = 'cpu';
      return 'cpu';
    }
    chosen = choice.reason;
  }
  try {
    await startWebGpu();
    defaultDevice = 'webgpu';
    if (chosen) options.onNotice?.(chosen);
    return 'webgpu';
  } catch (err) {
    if (request === 'webgpu') throw err;
    const notice =
      err instanceof DeviceUnavailableError && err.diagnosed
        ? fallbackNotice(err.diagnosed)
        : `tensorgpu: WebGPU unavailable (${(err as Error).message.split('\n')[0]}); using CPU.`;
    notify(notice);
    defaultDevice = 'cpu';
    return 'cpu';
  }
}

async function startWebGpu(): Promise<WebGpuBackend> {
  if (webgpu && !webgpu.released) return webgpu;
  webgpuStarting ??= WebGpuBackend.create().then(
    (b) => (webgpu = b),
    async (err: unknown) => {
      // Dawn reports the real cause on native stderr: ask the out-of-process probe why.
      const d = await diagnose();
      const e = new DeviceUnavailableError(d.reason ?? (err as Error).message, d.hint);
      e.diagnosed = d;
      throw e;
    },
  );
  try {
    return await webgpuStarting;
  } finally {
    webgpuStarting = undefined;
  }
}

/**
 * Destroys the WebGPU device (Dawn keeps Node alive while it exists). Tensors still on it become unusable;
 * the default device returns to CPU.
 */
export function releaseDevice(): void {
  webgpu?.destroy();
  webgpu = undefined;
  if (defaultDevice === 'webgpu') defaultDevice = 'cpu';
}
