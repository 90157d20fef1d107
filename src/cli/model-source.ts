// Resolves `--model` for the model commands: a checkpoint directory of any supported family, a Hugging Face repo
// id (org/name[@revision][/subfolder], fetched into the shared cache with a progress bar), `builtin:<preset>`, or
// the built-in default, generated on demand.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { DeviceRequest } from '../runtime/registry.js';
import type { DeviceName } from '../runtime/backend.js';
import type { DType } from '../core/dtype.js';
import { CheckpointError } from '../core/errors.js';
import { loadModel, resolveModelSource, type LoadedModel } from '../models/load.js';
import { resolveModelPath } from '../hub/download.js';
import { byteProgress, downloadProgress } from './progress.js';
import { chooseDevice } from './device.js';

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
  /** The command needs tokenizer.json beside the weights: checked before any weight is read. */
  needsTokenizer?: string;
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

/** The local folder `--model` names (resolveModelSource), downloading a repo id with a progress bar. */
export async function modelFolder(spec: string | undefined, log: (line: string) => void): Promise<string> {
  const bar = downloadProgress(`downloading ${spec}`);
  try {
    return await resolveModelSource(spec, { hub: { onProgress: bar.onProgress }, onNotice: log });
  } finally {
    bar.stop();
  }
}

/** Throws when `dir` has no tokenizer.json, naming the command that needs it (before any weight is read). */
export function requireTokenizer(dir: string, command: string): void {
  if (existsSync(join(dir, 'tokenizer.json'))) return;
  throw new CheckpointError(
    `no tokenizer.json: ${command} needs the tokenizer files beside the weights (tokenizer.json, tokenizer_config.json; copy them from the model this checkpoint came from)`,
    { file: dir },
  );
}

export async function openModel(o: ModelSourceOptions): Promise<{ loaded: LoadedModel; device: DeviceName; dir: string; loadMs: number }> {
  const dir = await modelFolder(o.model, o.log);
  if (o.needsTokenizer) requireTokenizer(dir, o.needsTokenizer);
  const device = await chooseDevice(o.device, o.log);
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
