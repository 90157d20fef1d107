// What the 'auto' device takes, in order: a hardware WebGPU adapter, then the CPU backend, then a software adapter
// (SwiftShader, llvmpipe/lavapipe, WARP, a browser's fallback adapter). A software adapter emulates WebGPU on the
// CPU and runs slower than the CPU backend itself, which does the same math without the emulation (the Quick start
// took 227 s on SwiftShader against 47 s on the CPU backend, issue 40); so 'auto' takes one only when asked to.
// Explicitly asking for 'webgpu' takes whatever adapter there is. Pure: initDevice (registry.ts) runs the probe,
// the CLI and the browser entry reach this rule through it, and tests feed it recorded diagnoses.
import type { DeviceName } from './backend.js';
import { adapterName, fallbackNotice, isSoftwareAdapter, type Diagnosis } from './webgpu/diagnose.js';

export interface AutoDeviceOptions {
  /** Let 'auto' take a software WebGPU adapter over the CPU backend (benchmarks of the WebGPU path on CI do). */
  allowSoftwareAdapter?: boolean;
}

export interface AutoDeviceChoice {
  device: DeviceName;
  /** One line: which device and why ("device: cpu (the only WebGPU adapter, ... is a software renderer ...)"). */
  reason: string;
}

/** Which device 'auto' takes given a diagnosis, and the line that says why. */
export function autoDeviceChoice(d: Diagnosis, options: AutoDeviceOptions = {}): AutoDeviceChoice {
  if (!d.available) return { device: 'cpu', reason: fallbackNotice(d) };
  if (!d.adapter) return { device: 'webgpu', reason: 'device: webgpu' };
  const name = adapterName(d.adapter);
  if (!isSoftwareAdapter(d.adapter)) return { device: 'webgpu', reason: `device: webgpu (hardware adapter ${name})` };
  if (options.allowSoftwareAdapter) {
    return { device: 'webgpu', reason: `device: webgpu (software adapter ${name}, taken because allowSoftwareAdapter is set: expect CPU speeds)` };
  }
  return {
    device: 'cpu',
    reason: `device: cpu (the only WebGPU adapter, ${name}, is a software renderer, slower than the CPU backend; ask for webgpu (--device webgpu, initDevice('webgpu')) to use it anyway)`,
  };
}
