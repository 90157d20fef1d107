// Resolves `--model` for the model commands: a checkpoint directory of any supported family, a Hugging Face repo
// id (org/name[@revision][/subfolder], fetched into the shared cache with a progress bar), `builtin:<preset>`, or
// the built-in default, generated on demand.
import { initDevice, type DeviceRequest } from '../runtime/registry.js';
import type { DeviceName } from '../runtime/backend.js';
import type { DType } from '../core/dtype.js';
import { resolveModelDir } from '../models/builtin.js';
import { loadModel, type LoadedModel } from '../models/load.js';
import { resolveModelPath } from '../hub/download.js';
import { byteProgress, downloadProgress } from './progress.js';

/** `--kv-dtype`: the KV cache's dtype (fp8: e4m3 codes with a scale per position and kv head, core/kv-fp8.ts). */
export const KV_DTYPE_NAMES = ['fp8', 'bf16', 'f16', 'f32'] as const;
export type KvDTypeName = (typeof KV_DTYPE_NAMES)[number];
const KV_DTYPES: Readonly<Record<KvDTypeName, DType>> = { fp8: 'float8_e4m3fn', bf16: 'bfloat16', f16: 'float16', f32: 'float32' };

/**
 * `--dtype`: fp8 / int4 quantize float linear weights at load (FP8 128x128 blocks; int4 affine in groups of
 * `--group-size` along K), the float dtypes convert them.
 */
export type WeightDTypeName = 'fp8' | 'int4' | 'float32' | 'float16' | 'bfloat16';

export interface ModelSourceOptions {
  model?: string;
  device: DeviceRequest;
  dtype?: WeightDTypeName;
  /** int4 group size (32, 64 or 128; default 128). */
  groupSize?: number;
  /** The KV cache's dtype (default f32). */
  kvDtype?: KvDTypeName;
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
    groupSize: o.groupSize,
    kvDtype: o.kvDtype && KV_DTYPES[o.kvDtype],
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
