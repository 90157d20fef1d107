// The built-in default video VAE: the narrow 'wan2.1-tiny' AutoencoderKLWan with random weights in diffusers'
// layout, generated once into the temp directory. `tensorgpu vae-decode` uses it when no --model is given, so it
// runs on a fresh machine with nothing to download.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureGeneratedDir } from '../../formats/generated-dir.js';
import { WAN_VAE_PRESETS, writeRandomWanVae, type RandomVaeOptions } from './random-checkpoint.js';

export const DEFAULT_VAE_PRESET = 'wan2.1-tiny';
/** Bumped whenever the generator or preset changes what is written. */
const LAYOUT_VERSION = 1;

/** The directory of the default VAE, generating it first if needed (well under a second, once). */
export async function ensureDefaultVae(
  options: { preset?: string; dtype?: RandomVaeOptions['dtype']; seed?: number; onNotice?: (line: string) => void } = {},
): Promise<string> {
  const preset = options.preset ?? DEFAULT_VAE_PRESET;
  const dtype = options.dtype ?? 'bfloat16';
  const seed = options.seed ?? 1;
  const config = WAN_VAE_PRESETS[preset];
  if (!config) throw new RangeError(`unknown VAE preset '${preset}' (presets: ${Object.keys(WAN_VAE_PRESETS).join(', ')})`);
  const dir = join(tmpdir(), `tensorgpu-vae-${preset}-${dtype}-seed${seed}-v${LAYOUT_VERSION}`);
  return ensureGeneratedDir(
    dir,
    (staging) => writeRandomWanVae(staging, config, { dtype, seed }),
    () => options.onNotice?.(`generating the built-in ${preset} video VAE (random ${dtype} weights) in ${dir}`),
  );
}
