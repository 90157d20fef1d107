// Resolves `--model` for the model commands: a checkpoint directory of any supported family, a Hugging Face repo
// id (org/name[@revision][/subfolder], fetched into the shared cache with a progress bar), `builtin:<preset>`, or
// the built-in default, generated on demand.
import { initDevice, type DeviceRequest } from '../runtime/registry.js';
import type { DeviceName } from '../runtime/backend.js';
import { resolveModelDir } from '../models/builtin.js';
import { loadModel, type LoadedModel } from '../models/load.js';
import { resolveModelPath } from '../hub/download.js';
import { byteProgress, downloadProgress } from './progress.js';

export interface ModelSourceOptions {
  model?: string;
  device: DeviceRequest;
  dtype?: 'fp8' | 'float32' | 'float16' | 'bfloat16';
  maxSequence?: number;
  log: (line: string) => void;
}

/** A local folder for `spec`: a path as is, or a repo id downloaded (what is missing of it) into the Hub cache. */
export async function localModelPath(spec: string): Promise<string> {
  const bar = downloadProgress(`downloading ${spec}`);
  try {
    return await resolveModelPath(spec, { onProgress: bar.onProgress });
  } finally {
    bar.stop();
  }
}

export async function openModel(o: ModelSourceOptions): Promise<{ loaded: LoadedModel; device: DeviceName; dir: string; loadMs: number }> {
  const device = await initDevice(o.device, { onNotice: o.log });
  const dir = await localModelPath(await resolveModelDir(o.model, o.log));
  let bar: ReturnType<typeof byteProgress> | undefined;
  let last = 0;
  const t0 = performance.now();
  const loaded = await loadModel(dir, {
    device,
    dtype: o.dtype,
    maxSequence: o.maxSequence,
    onProgress: (done, total) => {
      bar ??= byteProgress('loading', total);
      bar.add(done - last);
      last = done;
    },
  });
  bar?.stop();
  return { loaded, device, dir, loadMs: performance.now() - t0 };
}
