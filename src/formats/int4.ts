// 4-bit weight checkpoints as the Hub publishes them (GPTQ, AWQ GEMM, compressed-tensors pack-quantized), turned at
// load into tensorgpu's one int4 layout (see Int4Params in checkpoint.ts):
//
//   data  int32 [.., N, K/8]: word w of row n holds the codes of columns 8w..8w+7, column 8w+j in bits 4j..4j+3
//   scale [.., N, K/g] in the checkpoint's float dtype (f16 for GPTQ/AWQ, f16/bf16/f32 for compressed-tensors)
//   zero  uint8 [.., N, K/g], 0..16 (GPTQ v1's "+1" convention can reach 16)
//   perm  int32 [K], only for act-order: stored column j multiplies activation column perm[j]
//   w[n, perm[j]] = (code[n, j] - zero[n, j / g]) * scale[n, j / g]
//
// Rows along N with K contiguous is the layout of the decode GEMV (16-byte loads of one row, 32 codes each, one
// group per load since g is a multiple of 32). Act-order (GPTQ desc_act, compressed-tensors actorder) is resolved at
// load by sorting the columns by group, so every group is again g consecutive columns and the kernels read one scale
// per group; the activations are read through perm instead (one u32 load per column, no extra dispatch). The
// conversions below are exact integer moves: the dequantized weight equals each format's own rule bit for bit.
import { CheckpointError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import type { Checkpoint, Weight } from './checkpoint.js';
import { Fields, type Json } from './config-fields.js';
import type { TensorLoadOptions } from './safetensors-reader.js';

export type Int4Method = 'gptq' | 'awq' | 'compressed-tensors';

/** quantization_config of a 4-bit checkpoint, every field checked. */
export interface Int4QuantizationConfig {
  readonly method: Int4Method;
  readonly bits: 4;
  /** Columns of K per scale; undefined: one group over all of K (GPTQ group_size -1, strategy 'channel'). */
  readonly groupSize?: number;
  readonly symmetric: boolean;
  /** GPTQ checkpoint_format 'gptq' (v1): stored zeros are zero - 1 (auto-gptq's convention), read back with + 1. */
  readonly zeroPlusOne: boolean;
  /** GPTQ desc_act / compressed-tensors actorder: a g_idx tensor permutes the groups. */
  readonly actOrder: boolean;
  /** Module names or patterns left unquantized (GPTQ/AWQ modules_to_not_convert, compressed-tensors ignore). */
  readonly ignore: readonly string[];
  /** GPTQModel's per-module rules (GPTQ `dynamic`), in order: the first whose pattern matches a module decides. */
  readonly dynamic: readonly Int4DynamicRule[];
}

/**
 * One GPTQModel `dynamic` rule: its key is a Python regex matched (re.match: anchored at the start) against the
 * module's full name, `-:` skipping the module (left unquantized), `+:` or no prefix overriding the base scheme.
 */
export interface Int4DynamicRule {
  /** The key as written (errors name it). */
  readonly key: string;
  readonly skip: boolean;
  readonly pattern: RegExp;
  /** The overrides of the fields that change how the weight is stored (bits is checked when a module matches). */
  readonly overrides: { readonly bits?: number; readonly groupSize?: number | null; readonly symmetric?: boolean; readonly actOrder?: boolean };
}

const INT4_METHODS: readonly string[] = ['gptq', 'awq', 'compressed-tensors'];

export function isInt4Method(method: string): method is Int4Method {
  return INT4_METHODS.includes(method);
}

/** Parses quantization_config of a GPTQ, AWQ or compressed-tensors checkpoint; anything not 4-bit is an error naming the field. */
export function parseInt4Quantization(f: Fields, file: string): Int4QuantizationConfig {
  const method = f.string('quant_method');
  if (!isInt4Method(method)) throw new CheckpointError(`quantization_config.quant_method '${method}' is not a 4-bit method`, { file });
  const strings = (key: string): string[] => {
    const v = f.raw()[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) f.fail(key, 'a list of strings');
    return v as string[];
  };
  const groupOf = (g: Fields, key: string): number | undefined => {
    const v = g.raw()[key];
    if (v === -1) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 32 || v % 32 !== 0) g.fail(key, '-1 or a multiple of 32 (32, 64, 128, ...)');
    return v;
  };
  const four = (g: Fields, key: string) => {
    if (g.int(key) !== 4) g.fail(key, '4 (only 4-bit weights are supported)');
  };
  if (method === 'gptq') {
    four(f, 'bits');
    const format = f.string('checkpoint_format', 'gptq');
    if (format !== 'gptq' && format !== 'gptq_v2') f.fail('checkpoint_format', "'gptq' or 'gptq_v2'");
    if (f.string('pack_dtype', 'int32') !== 'int32') f.fail('pack_dtype', "'int32' (qweight / qzeros packed in int32 words)");
    return {
      method,
      bits: 4,
      groupSize: groupOf(f, 'group_size'),
      symmetric: f.bool('sym', true),
      zeroPlusOne: format === 'gptq',
      actOrder: f.bool('desc_act', false),
      ignore: strings('modules_to_not_convert'),
      dynamic: dynamicRules(f, format, groupOf),
    };
  }
  if (method === 'awq') {
    four(f, f.has('bits') ? 'bits' : 'w_bit');
    const version = f.string('version', 'gemm').toLowerCase();
    if (version !== 'gemm') f.fail('version', "'gemm' (the GEMV and Marlin packings are not supported)");
    if (!f.bool('zero_point', true)) f.fail('zero_point', 'true (AWQ GEMM checkpoints carry zeros)');
    return {
      method,
      bits: 4,
      groupSize: groupOf(f, f.has('group_size') ? 'group_size' : 'q_group_size'),
      symmetric: false,
      zeroPlusOne: false,
      actOrder: false,
      ignore: strings('modules_to_not_convert'),
      dynamic: [],
    };
  }
  const format = f.string('format');
  if (format !== 'pack-quantized') f.fail('format', "'pack-quantized'");
  const groups = f.object('config_groups');
  if (!groups) f.fail('config_groups', 'an object of quantization groups');
  const parsed = Object.keys(groups.raw()).map((name) => {
    const g = groups.object(name);
    if (!g) return groups.fail(name, 'an object');
    const w = g.object('weights');
    if (!w) return g.fail('weights', 'an object');
    const inputs = g.raw().input_activations;
    if (inputs !== undefined && inputs !== null) g.fail('input_activations', 'null (weight-only 4-bit; quantized activations are not supported)');
    if (g.has('format') && g.string('format') !== 'pack-quantized') g.fail('format', "'pack-quantized'");
    four(w, 'num_bits');
    if (w.string('type', 'int') !== 'int') w.fail('type', "'int'");
    const strategy = w.string('strategy');
    if (strategy !== 'group' && strategy !== 'channel') w.fail('strategy', "'group' or 'channel'");
    if (w.bool('dynamic', false)) w.fail('dynamic', 'false');
    const actorder = w.raw().actorder;
    if (actorder !== undefined && actorder !== null && actorder !== 'group' && actorder !== 'weight' && actorder !== false && actorder !== true)
      w.fail('actorder', "null, 'group' or 'weight'");
    return {
      groupSize: strategy === 'channel' ? undefined : groupOf(w, 'group_size'),
      symmetric: w.bool('symmetric', true),
      actOrder: actorder === 'group' || actorder === true,
    };
  });
  if (parsed.length === 0) f.fail('config_groups', 'at least one group');
  if (!parsed.every((p) => p.groupSize === parsed[0].groupSize && p.symmetric === parsed[0].symmetric && p.actOrder === parsed[0].actOrder))
    f.fail('config_groups', 'groups of one scheme (mixed group sizes or symmetry are not supported)');
  const ignore = strings('ignore');
  for (const e of ignore) {
    if (!e.startsWith('re:')) continue;
    try {
      new RegExp(e.slice(3));
    } catch {
      f.fail('ignore', `a list of module names and 're:' regular expressions ('${e}' is not one)`);
    }
  }
  return { method, bits: 4, ...parsed[0], zeroPlusOne: false, ignore, dynamic: [] };
}

/**
 * GPTQModel's `dynamic`: every rule's key compiled, every override that changes how weights are stored checked
 * (bits, group_size, sym, desc_act, the packing); the others (damp_percent, mse, ...) only steered calibration.
 */
function dynamicRules(f: Fields, format: string, groupOf: (g: Fields, key: string) => number | undefined): Int4DynamicRule[] {
  const d = f.object('dynamic');
  if (!d) return [];
  return Object.keys(d.raw()).map((key): Int4DynamicRule => {
    const rule = d.object(key) ?? d.fail(key, 'an object of overrides');
    const skip = key.startsWith('-:');
    const source = key.replace(/^[-+]:/, '');
    let pattern: RegExp;
    try {
      pattern = new RegExp(`^(?:${source})`);
    } catch {
      return d.fail(key, 'a regular expression (as key)');
    }
    const raw = rule.raw();
    if (raw.format !== undefined && raw.format !== format) rule.fail('format', `'${format}' (one packing for the whole checkpoint)`);
    if (raw.checkpoint_format !== undefined && raw.checkpoint_format !== format)
      rule.fail('checkpoint_format', `'${format}' (one packing for the whole checkpoint)`);
    if (raw.pack_dtype !== undefined && raw.pack_dtype !== 'int32') rule.fail('pack_dtype', "'int32'");
    if (raw.quant_method !== undefined && raw.quant_method !== 'gptq') rule.fail('quant_method', "'gptq'");
    const overrides = {
      ...(rule.has('bits') && { bits: rule.int('bits') }),
      ...(rule.has('group_size') && { groupSize: groupOf(rule, 'group_size') ?? null }),
      ...(rule.has('sym') && { symmetric: rule.bool('sym', true) }),
      ...(rule.has('desc_act') && { actOrder: rule.bool('desc_act', false) }),
    };
    return { key, skip, pattern, overrides };
  });
}

/** Whether `module` is named by a modules_to_not_convert entry: the name itself or a run of its dotted parts. */
function namedBy(module: string, entry: string): boolean {
  return module === entry || module.endsWith(`.${entry}`) || module.startsWith(`${entry}.`) || module.includes(`.${entry}.`);
}

/**
 * The scheme of one module of the checkpoint (its full name, `${prefix}` of `${prefix}.qweight`): the base one with
 * its GPTQModel `dynamic` overrides, and `excludedBy` when the config leaves the module unquantized (a `-:` rule,
 * modules_to_not_convert, compressed-tensors `ignore`: exact names and `re:` regexes, re.match). A module the config
 * stores in other than 4 bits is an error naming it and the field.
 */
export function int4SchemeOf(q: Int4QuantizationConfig, module: string, file: string): { config: Int4QuantizationConfig; excludedBy?: string } {
  if (q.method === 'compressed-tensors') {
    const hit = q.ignore.find((e) => (e.startsWith('re:') ? new RegExp(`^(?:${e.slice(3)})`).test(module) : e === module));
    return hit === undefined ? { config: q } : { config: q, excludedBy: `ignore entry '${hit}'` };
  }
  const named = q.ignore.find((e) => namedBy(module, e));
  if (named !== undefined) return { config: q, excludedBy: `modules_to_not_convert entry '${named}'` };
  const rule = q.dynamic.find((r) => r.pattern.test(module));
  if (!rule) return { config: q };
  if (rule.skip) return { config: q, excludedBy: `dynamic rule '${rule.key}'` };
  const o = rule.overrides;
  if (o.bits !== undefined && o.bits !== 4)
    throw new CheckpointError(`quantization_config.dynamic['${rule.key}'].bits is ${o.bits}: only 4-bit weights are supported`, { file, tensor: module });
  return {
    config: {
      ...q,
      ...(o.groupSize !== undefined && { groupSize: o.groupSize ?? undefined }),
      ...(o.symmetric !== undefined && { symmetric: o.symmetric }),
      ...(o.actOrder !== undefined && { actOrder: o.actOrder }),
    },
  };
}

/** The int4 config of a checkpoint's config.json (top level or a vision-language text_config), when it has one. */
export function int4QuantizationOf(config: unknown, file: string): Int4QuantizationConfig | undefined {
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return undefined;
  const top = new Fields(config as Json, file);
  const q = top.object('quantization_config') ?? top.object('text_config')?.object('quantization_config');
  if (!q?.has('quant_method') || !isInt4Method(q.string('quant_method'))) return undefined;
  return parseInt4Quantization(q, file);
}

// ---- Host conversions into the internal layout (pure functions over the stored integers) ----

/** The internal layout on the host: words [N * K/8], zeros [N * G], perm [K] or undefined. */
export interface Int4Host {
  readonly n: number;
  readonly k: number;
  readonly groupSize: number;
  readonly words: Int32Array;
  readonly zeros: Uint8Array;
  readonly perm?: Int32Array;
}

const nibble = (word: number, j: number) => (word >>> (4 * j)) & 15;
/** AWQ packs the 8 columns of a word in this order: nibble i holds column AWQ_ORDER[i]. */
export const AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7] as const;

/** Where columns 8w..8w+7 of row n land: one int32 per 8 codes along K. */
function packRows(n: number, k: number, code: (row: number, col: number) => number): Int32Array {
  const kw = k / 8;
  const out = new Int32Array(n * kw);
  for (let r = 0; r < n; r++) {
    for (let w = 0; w < kw; w++) {
      let word = 0;
      for (let j = 0; j < 8; j++) word |= code(r, 8 * w + j) << (4 * j);
      out[r * kw + w] = word;
    }
  }
  return out;
}

/**
 * Act-order: a stable sort of the columns by group, checked to give groups of exactly groupSize columns each (what
 * auto-gptq's g_idx = perm-of(i // group_size) always is), or undefined when g_idx is the plain i // groupSize.
 */
export function actOrderPermutation(gIdx: Int32Array, groupSize: number, groups: number, where: { file: string; tensor: string }): Int32Array | undefined {
  const k = gIdx.length;
  let plain = true;
  for (let i = 0; i < k; i++) {
    if (gIdx[i] < 0 || gIdx[i] >= groups) throw new CheckpointError(`g_idx[${i}] = ${gIdx[i]} is outside 0..${groups - 1}`, where);
    if (gIdx[i] !== Math.floor(i / groupSize)) plain = false;
  }
  if (plain) return undefined;
  const perm = Int32Array.from({ length: k }, (_, i) => i).sort((a, b) => gIdx[a] - gIdx[b] || a - b);
  for (let j = 0; j < k; j++) {
    if (gIdx[perm[j]] !== Math.floor(j / groupSize))
      throw new CheckpointError(`g_idx does not give every group exactly ${groupSize} columns (group ${Math.floor(j / groupSize)} differs)`, where);
  }
  return perm;
}

/**
 * GPTQ: qweight [K/8, N] packs K (nibble j of row r = column 8r + j), qzeros [G, ceil(N/8)] packs N, g_idx [K];
 * v1 zeros are stored minus one (auto-gptq), so zero = stored + 1.
 */
export function gptqToInt4(
  qweight: Int32Array,
  qzeros: Int32Array,
  gIdx: Int32Array | undefined,
  n: number,
  k: number,
  groupSize: number,
  zeroPlusOne: boolean,
  where: { file: string; tensor: string },
): Int4Host {
  const groups = k / groupSize;
  const perm = gIdx ? actOrderPermutation(gIdx, groupSize, groups, where) : undefined;
  const zeros = gptqZeros(qzeros, n, groups, zeroPlusOne);
  const src = (col: number) => (perm ? perm[col] : col);
  const words = packRows(n, k, (r, col) => {
    const kk = src(col);
    return nibble(qweight[(kk >> 3) * n + r], kk & 7);
  });
  return { n, k, groupSize, words, zeros, perm };
}

/** GPTQ qzeros [G, ceil(N/8)] (N packed, low nibble first) as uint8 [N, G], plus one for v1 checkpoints. */
export function gptqZeros(qzeros: Int32Array, n: number, groups: number, zeroPlusOne: boolean): Uint8Array {
  const zw = qzeros.length / groups;
  const zeros = new Uint8Array(n * groups);
  for (let g = 0; g < groups; g++) {
    for (let c = 0; c < n; c++) zeros[c * groups + g] = nibble(qzeros[g * zw + (c >> 3)], c & 7) + (zeroPlusOne ? 1 : 0);
  }
  return zeros;
}

/** AWQ GEMM: qweight [K, N/8] and qzeros [G, N/8] pack N in AWQ_ORDER; no zero offset. */
export function awqToInt4(qweight: Int32Array, qzeros: Int32Array, n: number, k: number, groupSize: number): Int4Host {
  const groups = k / groupSize;
  const nw = n / 8;
  const slot = new Int32Array(8);
  AWQ_ORDER.forEach((col, i) => {
    slot[col] = i;
  });
  const at = (packed: Int32Array, row: number, col: number) => nibble(packed[row * nw + (col >> 3)], slot[col & 7]);
  const zeros = new Uint8Array(n * groups);
  for (let g = 0; g < groups; g++) for (let c = 0; c < n; c++) zeros[c * groups + g] = at(qzeros, g, c);
  const words = packRows(n, k, (r, col) => at(qweight, col, r));
  return { n, k, groupSize, words, zeros };
}

/**
 * compressed-tensors pack-quantized: weight_packed [N, ceil(K/8)] packs K as signed codes + 8 (so the stored nibble
 * is already an unsigned code); weight_zero_point [ceil(N/8), G] packs N the same way (absent when symmetric: zero
 * 0, stored 8); weight_g_idx [K] for actorder.
 */
export function compressedToInt4(
  packed: Int32Array,
  zeroPoint: Int32Array | undefined,
  gIdx: Int32Array | undefined,
  n: number,
  k: number,
  groupSize: number,
  where: { file: string; tensor: string },
): Int4Host {
  const groups = k / groupSize;
  const perm = gIdx ? actOrderPermutation(gIdx, groupSize, groups, where) : undefined;
  const zeros = new Uint8Array(n * groups);
  for (let r = 0; r < n; r++) for (let g = 0; g < groups; g++) zeros[r * groups + g] = zeroPoint ? nibble(zeroPoint[(r >> 3) * groups + g], r & 7) : 8;
  const kw = Math.ceil(k / 8);
  const words = perm ? packRows(n, k, (r, col) => nibble(packed[r * kw + (perm[col] >> 3)], perm[col] & 7)) : packed.slice();
  return { n, k, groupSize, words, zeros, perm };
}

/** Columns of each group, row n's stored column j multiplying activation perm[j]: the weight as [N, K] float64. */
export function dequantizeInt4Host(h: Int4Host, scales: ArrayLike<number>): Float64Array {
  const { n, k, groupSize } = h;
  const groups = k / groupSize;
  const kw = k / 8;
  const out = new Float64Array(n * k);
  for (let r = 0; r < n; r++) {
    for (let j = 0; j < k; j++) {
      const g = r * groups + Math.floor(j / groupSize);
      const col = h.perm ? h.perm[j] : j;
      out[r * k + col] = (nibble(h.words[r * kw + (j >> 3)], j & 7) - h.zeros[g]) * scales[g];
    }
  }
  return out;
}

// ---- Loading ----

/** The tensors of one 4-bit linear layer as the checkpoint names them. */
function partNames(method: Int4Method, prefix: string) {
  return method === 'compressed-tensors'
    ? {
        packed: `${prefix}.weight_packed`,
        scale: `${prefix}.weight_scale`,
        zero: `${prefix}.weight_zero_point`,
        gIdx: `${prefix}.weight_g_idx`,
        shape: `${prefix}.weight_shape`,
      }
    : { packed: `${prefix}.qweight`, scale: `${prefix}.scales`, zero: `${prefix}.qzeros`, gIdx: `${prefix}.g_idx`, shape: undefined };
}

/** The 4-bit tensors a checkpoint may hold instead of `${prefix}.weight`. */
export function hasInt4Weight(ck: Pick<Checkpoint, 'has'>, prefix: string): boolean {
  return ck.has(`${prefix}.qweight`) || ck.has(`${prefix}.weight_packed`);
}

/** [N, K] of a 4-bit weight from its packed tensor's header (no data read). */
export function int4WeightShape(ck: Pick<Checkpoint, 'has' | 'entry'>, prefix: string): [number, number] | undefined {
  if (ck.has(`${prefix}.qweight`)) {
    const s = ck.entry(`${prefix}.qweight`).shape;
    // GPTQ [K/8, N]; AWQ [K, N/8]: told apart by the scales' width, N in both.
    const scales = ck.has(`${prefix}.scales`) ? ck.entry(`${prefix}.scales`).shape : undefined;
    if (s.length !== 2 || !scales || scales.length !== 2) return undefined;
    const n = scales[1];
    return s[1] === n ? [n, s[0] * 8] : [n, s[0]];
  }
  if (ck.has(`${prefix}.weight_packed`)) {
    const s = ck.entry(`${prefix}.weight_packed`).shape;
    return s.length === 2 ? [s[0], s[1] * 8] : undefined;
  }
  return undefined;
}

async function hostInts(ck: Checkpoint, name: string): Promise<Int32Array> {
  const t = await ck.load(name, { device: 'cpu' });
  try {
    const a = await t.toArray();
    return a instanceof Int32Array ? a : Int32Array.from(a);
  } finally {
    t.dispose();
  }
}

/**
 * Reads a GPTQ / AWQ / compressed-tensors 4-bit linear weight into the internal layout, checking every tensor's
 * dtype and shape against the config (an error names the tensor and the field).
 */
export async function loadInt4Weight(ck: Checkpoint, prefix: string, q: Int4QuantizationConfig, options: TensorLoadOptions): Promise<Weight> {
  const names = partNames(q.method, prefix);
  const need = (name: string, dtypes: readonly string[], shape?: readonly number[]) => {
    if (!ck.has(name)) throw new CheckpointError(`${q.method} checkpoint has no tensor '${name}'`, { file: ck.dir, tensor: name });
    const e = ck.entry(name);
    if (!e.dtype || !dtypes.includes(e.dtype)) throw new CheckpointError(`dtype ${e.format} is not ${dtypes.join(' or ')}`, { file: e.file, tensor: name });
    if (shape && e.shape.join() !== shape.join())
      throw new CheckpointError(`shape [${e.shape.join(', ')}] is not the expected [${shape.join(', ')}]`, { file: e.file, tensor: name });
    return e;
  };
  const packedEntry = need(names.packed, ['int32']);
  const nk = int4WeightShape(ck, prefix);
  if (!nk || packedEntry.shape.length !== 2)
    throw new CheckpointError(`cannot tell [N, K] from shape [${packedEntry.shape.join(', ')}]`, { file: packedEntry.file, tensor: names.packed });
  const [n, k] = nk;
  if (names.shape && ck.has(names.shape)) {
    const shape = Array.from(await hostInts(ck, names.shape));
    if (shape.join() !== `${n},${k}`)
      throw new CheckpointError(`weight_shape [${shape.join(', ')}] does not match the packed [${n}, ${k}]`, {
        file: ck.entry(names.shape).file,
        tensor: names.shape,
      });
  }
  const groupSize = q.groupSize ?? k;
  const where = { file: packedEntry.file, tensor: names.packed };
  if (k % groupSize !== 0 || groupSize % 32 !== 0)
    throw new CheckpointError(`group_size ${groupSize} does not divide K = ${k} into groups of a multiple of 32 columns`, where);
  const groups = k / groupSize;
  const floats = ['float16', 'bfloat16', 'float32'];
  const gptq = q.method === 'gptq';
  const ct = q.method === 'compressed-tensors';
  if (q.method === 'awq') need(names.packed, ['int32'], [k, n / 8]);
  if (gptq) need(names.packed, ['int32'], [k / 8, n]);
  if (q.method === 'awq' && n % 8 !== 0) throw new CheckpointError(`AWQ packs N = ${n} by 8 columns, which does not divide it`, where);
  need(names.scale, floats, ct ? [n, groups] : [groups, n]);
  const hasZero = ck.has(names.zero);
  if (!hasZero && (!q.symmetric || !ct))
    throw new CheckpointError(`asymmetric ${q.method} weight has no zero points ('${names.zero}')`, { file: ck.dir, tensor: names.zero });
  if (hasZero) need(names.zero, ['int32'], ct ? [Math.ceil(n / 8), groups] : [groups, Math.ceil(n / 8)]);
  const hasGIdx = ck.has(names.gIdx);
  if (hasGIdx) need(names.gIdx, ['int32'], [k]);
  else if (q.actOrder) throw new CheckpointError(`act-order ${q.method} weight has no '${names.gIdx}'`, { file: ck.dir, tensor: names.gIdx });
  const gIdx = hasGIdx ? await hostInts(ck, names.gIdx) : undefined;
  const zeros = hasZero ? await hostInts(ck, names.zero) : undefined;
  const device = options.device;
  let host: Int4Host;
  let data: Tensor | undefined;
  if (gptq) {
    const perm = gIdx ? actOrderPermutation(gIdx, groupSize, groups, where) : undefined;
    if (!perm) {
      // Without act-order the words only change places: [K/8, N] -> [N, K/8] on the device.
      const stored = await ck.load(names.packed, { device, onBytes: options.onBytes });
      data = stored.transpose(0, 1).contiguous();
      stored.dispose();
      host = { n, k, groupSize, words: new Int32Array(0), zeros: gptqZeros(zeros!, n, groups, q.zeroPlusOne) };
    } else host = gptqToInt4(await hostInts(ck, names.packed), zeros!, gIdx, n, k, groupSize, q.zeroPlusOne, where);
  } else if (q.method === 'awq') host = awqToInt4(await hostInts(ck, names.packed), zeros!, n, k, groupSize);
  else host = compressedToInt4(await hostInts(ck, names.packed), zeros, gIdx, n, k, groupSize, where);
  data ??= tensor(host.words, { shape: [n, k / 8], device });
  const rawScale = await ck.load(names.scale, { device, onBytes: options.onBytes });
  const scale = ct ? rawScale : rawScale.transpose(0, 1).contiguous();
  if (!ct) rawScale.dispose();
  const zero = tensor(host.zeros, { shape: [n, groups], device });
  const perm = host.perm && tensor(host.perm, { shape: [k], device });
  return { data, scale, int4: { groupSize, zero, ...(perm ? { perm } : {}) } };
}
