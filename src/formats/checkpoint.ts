// A Hugging Face checkpoint directory: config.json plus model.safetensors, or shards listed by
// model.safetensors.index.json. Opening reads only headers (every shard validated, the index checked against
// them); tensors are streamed to the device one at a time. FP8 weights come with their dequantization scales.
import type { ScaleRecipe } from '../runtime/backend.js';
import { isFp8, type DType } from '../core/dtype.js';
import { CheckpointError } from '../core/errors.js';
import { nodeHost } from '../runtime/host.js';
import type { Tensor } from '../core/tensor.js';
import { cast } from '../ops/convert.js';
import { quantize } from '../ops/quantize.js';
import { dequantizeInt4, quantizeInt4 } from '../ops/int4.js';
import type { SafetensorsEntry } from './safetensors-header.js';
import { directoryFolder, pickedFolder, urlFolder, type CheckpointFolder, type PickedFile } from './checkpoint-folders.js';
import { SafetensorsFile, type TensorLoadOptions } from './safetensors-reader.js';
import type { CachedUrlOptions } from './weight-cache.js';
import { hasInt4Weight, int4QuantizationOf, int4SchemeOf, loadInt4Weight } from './int4.js';

/** Weight file names tried in a directory, in order: transformers' then diffusers'. */
const SINGLE_FILES = ['model.safetensors', 'diffusion_pytorch_model.safetensors'];
const INDEX_FILES = SINGLE_FILES.map((f) => `${f}.index.json`);

/**
 * A linear weight [out, in] as stored, with its dequantization scale when FP8 (w ~= data * scale), or packed 4-bit
 * with `int4` (GPTQ / AWQ / compressed-tensors read into one layout, or quantized at load; see formats/int4.ts):
 * data int32 [.., N, K/8] (column 8w + j of a row in bits 4j..4j+3 of its word w), scale [.., N, K/g] in a float
 * dtype, and w[n, perm[j]] = (code[n, j] - zero[n, j / g]) * scale[n, j / g].
 */
export interface Weight {
  readonly data: Tensor;
  /** FP8: float32 [1] tensor, [out] row, or [ceil(out/128), ceil(in/128)] block scales. int4: [.., N, K/g] group scales. */
  readonly scale?: Tensor;
  readonly recipe?: ScaleRecipe;
  readonly int4?: Int4Params;
}

/** The rest of a packed 4-bit weight (data and scale are in Weight). */
export interface Int4Params {
  /** Columns of K per scale: a multiple of 32 dividing K. */
  readonly groupSize: number;
  /** uint8 [.., N, K/g]: the zero point of each group, 0..16 (symmetric weights: 8). */
  readonly zero: Tensor;
  /** int32 [K], act-order only: the activation column stored column j multiplies (groups are contiguous in j). */
  readonly perm?: Tensor;
}

export interface WeightLoadOptions extends TensorLoadOptions {
  /**
   * Quantize a float weight after upload: to FP8 with 128x128 block scales (`--dtype fp8`, half of bf16's bytes), or
   * to packed 4 bits, affine per group of `groupSize` columns along K (`--dtype int4`, about a quarter).
   */
  quantize?: 'float8_e4m3fn' | 'int4';
  /** int4 group size: 32, 64 or 128 (default); a K it does not divide takes the largest of 128/64/32 that does. */
  groupSize?: number;
  /** int4: called with each weight's relative error ||W - dequant(Q(W))|| / ||W|| (costs a read back). */
  onQuantError?: (prefix: string, relError: number) => void;
}

/** The int4 group size for K: the requested one when it divides K, else the largest of 128/64/32 that does. */
export function int4GroupFor(k: number, requested = 128): number | undefined {
  return [requested, 128, 64, 32].find((g) => g % 32 === 0 && k % g === 0);
}

/** A float [N, K] weight quantized to packed 4 bits (the device does it: one dispatch plus the zero points' cast). */
export async function quantizeWeightInt4(
  raw: Tensor,
  prefix: string,
  options: Pick<WeightLoadOptions, 'groupSize' | 'onQuantError'>,
): Promise<Weight | undefined> {
  const g = int4GroupFor(raw.shape[1], options.groupSize);
  if (g === undefined) return undefined;
  const q = quantizeInt4(raw, g);
  const w: Weight = { data: q.data, scale: q.scale, int4: { groupSize: g, zero: q.zero } };
  if (options.onQuantError) {
    const d = dequantizeInt4({ ...q });
    const diff = d.sub(raw.to('float32'));
    const num = await diff.mul(diff).sum().item();
    const rf = raw.to('float32');
    const den = await rf.mul(rf).sum().item();
    for (const t of [d, diff, rf]) t.dispose();
    options.onQuantError(prefix, Math.sqrt(num / Math.max(den, 1e-30)));
  }
  return w;
}

export class Checkpoint implements AsyncDisposable {
  private constructor(
    /** The checkpoint directory. */
    readonly dir: string,
    /** config.json as parsed JSON, when the directory has one (validate with e.g. parseQwen3Config). */
    readonly config: unknown,
    private readonly files: readonly SafetensorsFile[],
    private readonly where: ReadonlyMap<string, SafetensorsFile>,
  ) {}

  /** Opens a checkpoint directory (or one .safetensors file), validating every header and the shard index. */
  static async open(path: string): Promise<Checkpoint> {
    const host = nodeHost('Checkpoint.open');
    const kind = await host.pathKind(path);
    if (kind === 'file') return Checkpoint.fromFiles(host.dirname(path), undefined, [await SafetensorsFile.open(path)]);
    if (kind !== 'directory') throw new CheckpointError('not a checkpoint directory or file', { file: path });
    return Checkpoint.openFolder(await directoryFolder(path));
  }

  /**
   * A checkpoint folder at a URL (a Hugging Face `resolve/main/` URL, or any static server that answers Range
   * requests): config.json, then the shard index or the single weight file, every header validated as on disk;
   * tensors stream with Range requests when loaded. With `cache` (browsers), every file is kept in the browser's
   * weight cache and a second open reads no network (see weight-cache.ts).
   */
  static async fromUrl(url: string, options: CachedUrlOptions = {}): Promise<Checkpoint> {
    return Checkpoint.openFolder(urlFolder(url, options));
  }

  /**
   * A checkpoint folder picked in a page (`<input type=file webkitdirectory>`'s files, or config.json and the
   * weight files picked together), opened and validated like a directory on disk; tensors are read by Blob slices.
   */
  static async fromFileList(files: Iterable<PickedFile>): Promise<Checkpoint> {
    return Checkpoint.openFolder(pickedFolder(files));
  }

  /** A checkpoint of already opened files (in memory, picked by the user, ...); `dir` labels errors. */
  static fromFiles(dir: string, config: unknown, files: readonly SafetensorsFile[]): Checkpoint {
    const where = new Map<string, SafetensorsFile>();
    for (const f of files) {
      for (const name of f.names) {
        const other = where.get(name);
        if (other) throw new CheckpointError(`tensor is in two shards, ${baseName(other.path)} and ${baseName(f.path)}`, { file: f.path, tensor: name });
        where.set(name, f);
      }
    }
    return new Checkpoint(dir, config, files, where);
  }

  private static async openFolder(folder: CheckpointFolder): Promise<Checkpoint> {
    const config = await readJson(folder, 'config.json', true);
    const files: SafetensorsFile[] = [];
    try {
      let index: string | undefined;
      for (const f of INDEX_FILES) if (index === undefined && (await folder.exists(f))) index = f;
      if (index) await openShards(folder, index, files);
      else {
        let single: string | undefined;
        for (const f of SINGLE_FILES) if (single === undefined && (await folder.exists(f))) single = f;
        if (!single) throw new CheckpointError(`no ${SINGLE_FILES.join(' or ')} and no shard index (${INDEX_FILES.join(', ')})`, { file: folder.label });
        files.push(await folder.open(single));
      }
      return Checkpoint.fromFiles(folder.label, config, files);
    } catch (e) {
      await Promise.all(files.map((f) => f.close()));
      throw e;
    }
  }

  get names(): string[] {
    return [...this.where.keys()];
  }

  has(name: string): boolean {
    return this.where.has(name);
  }

  /** The header entry of a tensor, with the file holding it. */
  entry(name: string): SafetensorsEntry & { readonly file: string } {
    return { ...this.fileOf(name).entry(name), file: this.fileOf(name).path };
  }

  /** Bytes of tensor data over all shards (what a full load reads). */
  get totalBytes(): number {
    let n = 0;
    for (const f of this.files) for (const e of f.header.entries.values()) n += e.end - e.begin;
    return n;
  }

  /** Async throughout: an unknown name rejects like every other load failure instead of throwing synchronously. */
  async load(name: string, options: TensorLoadOptions = {}): Promise<Tensor> {
    return this.fileOf(name).load(name, options);
  }

  /**
   * The linear weight `${prefix}.weight` with its scale: `weight_scale_inv` 128x128 block scales (the
   * Qwen3-FP8 / DeepSeek layout; despite the name, multiplied in) or a per-tensor/per-channel `weight_scale`
   * (compressed-tensors). `dtype` converts unquantized weights; `quantize` turns them into FP8 block weights.
   */
  async loadWeight(prefix: string, options: WeightLoadOptions = {}): Promise<Weight> {
    const name = `${prefix}.weight`;
    if (!this.has(name) && hasInt4Weight(this, prefix)) {
      const q = int4QuantizationOf(this.config, `${this.dir}/config.json`);
      if (!q)
        throw new CheckpointError('4-bit tensors but no GPTQ / AWQ / compressed-tensors quantization_config in config.json', {
          file: this.dir,
          tensor: prefix,
        });
      const scheme = int4SchemeOf(q, prefix, `${this.dir}/config.json`);
      if (scheme.excludedBy)
        throw new CheckpointError(`stored in 4 bits, but quantization_config's ${scheme.excludedBy} leaves this module unquantized`, {
          file: this.dir,
          tensor: prefix,
        });
      return loadInt4Weight(this, prefix, scheme.config, options);
    }
    const entry = this.entry(name);
    const stored = entry.dtype;
    if (stored && isFp8(stored)) {
      const data = await this.load(name, { ...options, dtype: undefined });
      try {
        return { data, ...(await this.loadScale(prefix, entry.shape, options)) };
      } catch (e) {
        data.dispose();
        throw e;
      }
    }
    if (options.quantize === 'int4') {
      if (entry.shape.length !== 2)
        throw new CheckpointError(`only 2-D weights can be quantized, this one is [${entry.shape.join(', ')}]`, { file: entry.file, tensor: name });
      const raw = await this.load(name, { ...options, dtype: undefined });
      const w = await quantizeWeightInt4(raw, prefix, options);
      if (w) {
        raw.dispose();
        return w;
      }
      if (!options.dtype || raw.dtype === options.dtype) return { data: raw };
      const data = cast(raw, options.dtype);
      raw.dispose();
      return { data };
    }
    if (options.quantize) {
      if (entry.shape.length !== 2)
        throw new CheckpointError(`only 2-D weights can be quantized, this one is [${entry.shape.join(', ')}]`, { file: entry.file, tensor: name });
      const raw = await this.load(name, { ...options, dtype: undefined });
      const q = quantize(raw, { dtype: options.quantize, granularity: 'block128' });
      raw.dispose();
      return { data: q.data, scale: q.scale, recipe: 'block' };
    }
    return { data: await this.load(name, options) };
  }

  async close(): Promise<void> {
    await Promise.all(this.files.map((f) => f.close()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private fileOf(name: string): SafetensorsFile {
    const f = this.where.get(name);
    if (!f) throw new CheckpointError(`checkpoint has no tensor '${name}'`, { file: this.dir, tensor: name });
    return f;
  }

  private async loadScale(prefix: string, shape: readonly number[], options: TensorLoadOptions): Promise<Omit<Weight, 'data'>> {
    const [n, k] = shape;
    const opts = { ...options, dtype: 'float32' as DType };
    const block = `${prefix}.weight_scale_inv`;
    const plain = `${prefix}.weight_scale`;
    if (this.has(block)) {
      const e = this.entry(block);
      const want = [Math.ceil(n / 128), Math.ceil(k / 128)];
      if (shape.length !== 2 || e.shape.join() !== want.join()) {
        throw new CheckpointError(`block scales are [${e.shape.join(', ')}]; a [${shape.join(', ')}] weight in 128x128 blocks needs [${want.join(', ')}]`, {
          file: e.file,
          tensor: block,
          offset: e.begin,
        });
      }
      return { scale: await this.load(block, opts), recipe: 'block' };
    }
    if (this.has(plain)) {
      const e = this.entry(plain);
      const count = e.shape.reduce((a, b) => a * b, 1);
      if (count === 1) return { scale: reshaped(await this.load(plain, opts), [1]), recipe: 'tensor' };
      if (count === n && (e.shape.length === 1 || (e.shape.length === 2 && e.shape[1] === 1))) {
        return { scale: reshaped(await this.load(plain, opts), [n]), recipe: 'row' };
      }
      throw new CheckpointError(`scale shape [${e.shape.join(', ')}] is neither per-tensor nor per-channel for a [${shape.join(', ')}] weight`, {
        file: e.file,
        tensor: plain,
        offset: e.begin,
      });
    }
    throw new CheckpointError(`FP8 weight has neither ${prefix}.weight_scale_inv nor ${prefix}.weight_scale`, {
      file: this.entry(`${prefix}.weight`).file,
      tensor: `${prefix}.weight`,
    });
  }
}

/** Casts a loaded weight's data (not its scale) to dtype when it is not FP8. */
export function castWeight(w: Weight, dtype: DType): Weight {
  if (w.scale || w.data.dtype === dtype) return w;
  const data = cast(w.data, dtype);
  w.data.dispose();
  return { data };
}

function reshaped(t: Tensor, shape: number[]): Tensor {
  const r = t.reshape(shape);
  t.dispose();
  return r;
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

async function readJson(folder: CheckpointFolder, name: string, optional: boolean): Promise<unknown> {
  const text = await folder.readText(name);
  if (text === undefined) {
    if (optional) return undefined;
    throw new CheckpointError('cannot read: no such file', { file: folder.path(name) });
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(`not valid JSON: ${(e as Error).message}`, { file: folder.path(name) });
  }
}

/** Opens the shards an index names, checking each mapping: plain file names only, and the tensor in its shard. */
async function openShards(folder: CheckpointFolder, indexName: string, files: SafetensorsFile[]): Promise<void> {
  const index = folder.path(indexName);
  const json = await readJson(folder, indexName, false);
  const map = (json as { weight_map?: unknown } | null)?.weight_map;
  if (typeof map !== 'object' || map === null || Array.isArray(map)) throw new CheckpointError('index has no weight_map object', { file: index });
  const shards = new Map<string, string[]>();
  for (const [tensor, file] of Object.entries(map)) {
    // A shard name is a file in this folder, never a path: an index must not point outside the checkpoint.
    if (typeof file !== 'string' || file !== baseName(file) || file === '..' || file === '.' || file.includes('\\') || !file.endsWith('.safetensors')) {
      throw new CheckpointError(`weight_map entry ${JSON.stringify(file)} is not a .safetensors file name in the checkpoint directory`, {
        file: index,
        tensor,
      });
    }
    shards.set(file, [...(shards.get(file) ?? []), tensor]);
  }
  for (const [file, tensors] of shards) {
    const shard = await folder.open(file);
    files.push(shard);
    const missing = tensors.find((t) => !shard.has(t));
    if (missing !== undefined) throw new CheckpointError(`the index maps this tensor to ${file}, which does not hold it`, { file: index, tensor: missing });
  }
}
