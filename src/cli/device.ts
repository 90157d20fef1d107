// `--device` for every command. `auto` follows the library's rule (runtime/device-choice.ts, through initDevice):
// a hardware WebGPU adapter first, then the CPU backend, then a software adapter; the choice and its reason are
// printed in one line. `--device webgpu` takes whatever adapter there is, software ones included; `--device cpu`
// probes nothing.
import type { DeviceName } from '../runtime/backend.js';
import { initDevice, type DeviceRequest } from '../runtime/registry.js';

export { isSoftwareAdapter } from '../runtime/webgpu/diagnose.js';

/** Initializes the device `request` names; `log` gets the line saying which device `auto` took and why. */
export function chooseDevice(request: DeviceRequest, log: (line: string) => void): Promise<DeviceName> {
  return initDevice(request, { onNotice: log });
}
