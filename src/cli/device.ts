// `--device auto` for every command: a hardware WebGPU adapter first, then the CPU backend, then a software adapter
// (SwiftShader, llvmpipe, lavapipe: WebGPU emulated on the CPU, slower than the CPU backend itself, which runs the
// same math without the emulation). The choice and its reason are printed in one line. `--device webgpu` takes
// whatever adapter there is, software ones included; `--device cpu` probes nothing.
import type { DeviceName } from '../runtime/backend.js';
import { initDevice, type DeviceRequest } from '../runtime/registry.js';
import { adapterName, diagnose, type AdapterSummary } from '../runtime/webgpu/diagnose.js';

/** Whether an adapter renders in software on the CPU (what doctor calls a fallback adapter). */
export function isSoftwareAdapter(a: AdapterSummary): boolean {
  return a.isFallbackAdapter === true || /swiftshader|llvmpipe|lavapipe|software/i.test(`${a.description} ${a.device} ${a.architecture}`);
}

/** What `auto` takes given a diagnosis: the device and the line that says why. */
export function autoDeviceChoice(d: { available: boolean; adapter?: AdapterSummary }): { device: DeviceName | 'auto'; reason?: string } {
  if (!d.available || !d.adapter) return { device: 'auto' }; // initDevice falls back to the CPU and says why
  if (isSoftwareAdapter(d.adapter)) {
    return {
      device: 'cpu',
      reason: `device: cpu (the only WebGPU adapter, ${adapterName(d.adapter)}, is a software renderer, slower than the CPU backend; --device webgpu uses it anyway)`,
    };
  }
  return { device: 'webgpu', reason: `device: webgpu (hardware adapter ${adapterName(d.adapter)})` };
}

/** Initializes the device `request` names, resolving `auto` as above; `log` gets the line saying which and why. */
export async function chooseDevice(request: DeviceRequest, log: (line: string) => void): Promise<DeviceName> {
  if (request !== 'auto') return initDevice(request, { onNotice: log });
  const choice = autoDeviceChoice(await diagnose());
  const device = await initDevice(choice.device === 'cpu' ? 'cpu' : 'auto', { onNotice: log });
  if (choice.reason && device === choice.device) log(choice.reason);
  return device;
}
