// Which files of a repo a model needs. An allowlist, not a blocklist: repos often carry the same weights several
// times (pytorch_model.bin, ONNX, GGUF, fp16 variants, original/ checkpoints) and fetching them would cost
// gigabytes for nothing. Everything here works on repo-relative paths as the Hub's tree listing gives them.
import { HubError } from './hub-errors.js';

/** Small files a model, its tokenizer and its chat template read; fetched when the repo has them. */
const METADATA_FILES = [
  'config.json',
  'generation_config.json',
  'model_index.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'added_tokens.json',
  'chat_template.jinja',
  'chat_template.json',
  'vocab.json',
  'vocab.txt',
  'merges.txt',
  'tokenizer.model',
];

/** transformers' and diffusers' names for a sharded checkpoint's index and for a single-file checkpoint. */
export const WEIGHT_INDEX_FILES = ['model.safetensors.index.json', 'diffusion_pytorch_model.safetensors.index.json'];
const SINGLE_WEIGHT_FILES = ['model.safetensors', 'diffusion_pytorch_model.safetensors'];

/** Formats and folders never fetched, even if an index named them. */
const NEVER = [/\.bin$/, /\.pt$/, /\.pth$/, /\.gguf$/, /\.onnx(_data)?$/, /\.msgpack$/, /\.h5$/, /(^|\/)onnx\//, /(^|\/)original\//];

export function isNeverFetched(path: string): boolean {
  return NEVER.some((re) => re.test(path));
}

const prefixOf = (subfolder?: string): string => (subfolder ? `${subfolder}/` : '');

/** Files directly in the (sub)folder, by their name inside it. */
function namesInFolder(paths: readonly string[], subfolder?: string): Set<string> {
  const prefix = prefixOf(subfolder);
  const names = new Set<string>();
  for (const p of paths) {
    if (!p.startsWith(prefix)) continue;
    const name = p.slice(prefix.length);
    if (name !== '' && !name.includes('/')) names.add(name);
  }
  return names;
}

/** The metadata files and weight indexes the folder has: fetched first, since the index decides the shards. */
export function metadataFiles(paths: readonly string[], subfolder?: string): string[] {
  const names = namesInFolder(paths, subfolder);
  return [...METADATA_FILES, ...WEIGHT_INDEX_FILES].filter((n) => names.has(n)).map((n) => prefixOf(subfolder) + n);
}

/** The weight indexes present in the folder (repo-relative). */
export function weightIndexFiles(paths: readonly string[], subfolder?: string): string[] {
  const names = namesInFolder(paths, subfolder);
  return WEIGHT_INDEX_FILES.filter((n) => names.has(n)).map((n) => prefixOf(subfolder) + n);
}

/** The shard names an index's weight_map points at, checked to be plain names inside the folder. */
export function shardsOfIndex(indexJson: unknown, indexPath: string, repo = ''): string[] {
  const fail = (why: string): HubError => new HubError(`${repo ? `${repo}: ` : ''}${indexPath} ${why}`, { repo });
  const map = (indexJson as { weight_map?: unknown } | null)?.weight_map;
  if (map === null || typeof map !== 'object') throw fail('has no weight_map object');
  const shards = new Set<string>();
  for (const [tensor, file] of Object.entries(map as Record<string, unknown>)) {
    if (typeof file !== 'string' || file === '' || file.startsWith('/') || file.split(/[\\/]/).includes('..')) {
      throw fail(`maps tensor '${tensor}' to ${JSON.stringify(file)}, not a file in its folder`);
    }
    if (!file.endsWith('.safetensors') || isNeverFetched(file)) {
      throw fail(`maps tensor '${tensor}' to '${file}', which is not a .safetensors file`);
    }
    shards.add(file);
  }
  return [...shards].sort();
}

/**
 * The weight files: every shard the indexes name, or without an index the canonical single file, or failing
 * that every *.safetensors at the folder's root. `shardsByIndex` maps each index path to its shard names.
 */
export function weightFiles(paths: readonly string[], subfolder: string | undefined, shardsByIndex: ReadonlyMap<string, readonly string[]>): string[] {
  const prefix = prefixOf(subfolder);
  if (shardsByIndex.size > 0) {
    const all = new Set<string>();
    for (const shards of shardsByIndex.values()) for (const s of shards) all.add(prefix + s);
    return [...all].sort();
  }
  const names = namesInFolder(paths, subfolder);
  const canonical = SINGLE_WEIGHT_FILES.filter((n) => names.has(n));
  const chosen = canonical.length > 0 ? canonical : [...names].filter((n) => n.endsWith('.safetensors')).sort();
  return chosen.map((n) => prefix + n);
}
