// One description per kernel: its name, variant fields (what specialises the WGSL), uniform params, bindings, grid
// and workgroup size. From it come the WGSL header (enable lines, `struct Params` laid out by WGSL's uniform rules,
// bindings in declaration order, constants, dtype load/encode helpers, the standard main loop), the uniform packer
// (params by name), the buffer order of a dispatch, the grid and the pipeline cache key. The key is the name plus
// every variant field, and the WGSL builders see only the variant, so a key cannot go stale.
// Body files stay plain WGSL beside their launchers; `{{NAME}}` remains only for code substituted per variant.
import { DTYPE_INFO, lanesPerWord, type DType } from '../../../core/dtype.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import { codeFn, commonWgsl, encodeFn, fillTemplate, loadFn, wgslSource, type ComputeType } from './wgsl.js';

/** Bytes of `elements` values of `dtype` (a launcher's traffic estimate for RunOptions.bytes). */
export function bytesOf(dtype: DType, elements: number): number {
  return elements * DTYPE_INFO[dtype].itemBytes;
}

// ---- Descriptions ----

/** A variant field's kind: the value types a launcher passes, each part of the cache key. */
export type VariantKind = 'dtype' | 'number' | 'boolean' | 'string' | readonly string[];
export type VariantSchema = Readonly<Record<string, VariantKind>>;
export type VariantOf<S extends VariantSchema> = {
  readonly [K in keyof S]: S[K] extends 'dtype'
    ? DType
    : S[K] extends 'number'
      ? number
      : S[K] extends 'boolean'
        ? boolean
        : S[K] extends readonly (infer U)[]
          ? U
          : string;
};

/** A uniform field: a 4-byte scalar, or `T[N]` laid out as array<vec4<T>, ceil(N/4)> (16-byte stride in uniforms). */
type Scalar = 'u32' | 'i32' | 'f32';
export type ParamType = Scalar | `${Scalar}[${number}]`;
export type ParamSchema = Readonly<Record<string, ParamType>>;
export type ParamsOf<P extends ParamSchema> = { readonly [K in keyof P]: P[K] extends `${string}[${number}]` ? readonly number[] : number };

/** Element type of a storage binding ('packed': dtype codes packed in u32 words, with generated helpers). */
export type StorageType = 'u32' | 'i32' | 'f32' | 'vec4<u32>' | 'vec4<f32>' | 'atomic<u32>';

export interface BindingSpec<V> {
  /** The array's element type (default 'u32'); may depend on the variant. */
  readonly type?: StorageType | ((v: V) => StorageType);
  /**
   * The dtype whose codes the binding holds packed in u32 words: a variant field name or a function. Inputs get
   * `load_NAME(e) -> C` and `code_NAME(e) -> u32` (element e, not word e); outputs get `encode_NAME(v: C) -> u32`.
   */
  readonly packed?: string | ((v: V) => DType);
  /** C, the type load/encode helpers compute in (default f32). */
  readonly compute?: ComputeType | ((v: V) => ComputeType);
  /** Outputs: fp8 encoders saturate instead of giving NaN out of range. */
  readonly saturate?: boolean | ((v: V) => boolean);
  /** Generate the load/code/encode helpers of a packed binding (default true; false: the dtype only sets LANES). */
  readonly helpers?: boolean | ((v: V) => boolean);
  /** Bound only when this holds (an optional bias, residual, scale...): later bindings renumber around it. */
  readonly when?: (v: V) => boolean;
}
export type Bindings<V> = Readonly<Record<string, StorageType | BindingSpec<V>>>;

/**
 * How the dispatch grid comes about:
 * - `{ words: N, element: F }`: the standard loop. One invocation per output word of `out` (packed), each lane
 *   `encode_out(F(e))` for element e < p.N; the grid follows from p.N. F is `fn F(e: u32) -> C` in the body.
 * - `{ threads: N, invoke: F }`: one invocation per i < p.N calling `F(i)` (a statement function).
 * - 'custom': the body has its own entry points; run() takes `workgroups` (or `threads`, folded over WG).
 */
export type GridSpec = { readonly words: string; readonly element: string } | { readonly threads: string; readonly invoke: string } | 'custom';

export interface KernelDescription<S extends VariantSchema, P extends ParamSchema, O extends Bindings<VariantOf<S>>, I extends Bindings<VariantOf<S>>> {
  /** Cache-key family and per-kernel dispatch counter name. */
  readonly name: string;
  /** The body file (plain WGSL beside the launcher, embedded at build time). */
  readonly source: string;
  readonly variant?: S;
  readonly params?: P;
  /** Storage written (read_write), bound after the uniform block, before the inputs. */
  readonly outputs: O;
  readonly inputs?: I;
  readonly grid: GridSpec;
  /** Invocations per workgroup (emitted as `const WG`); default 256. */
  readonly workgroupSize?: number | ((v: VariantOf<S>) => number);
  /** `enable` directives (e.g. 'subgroups'). */
  readonly enables?: (v: VariantOf<S>) => readonly string[];
  /** Numeric constants emitted as `const NAME = valueu;` (integers >= 0) or f32 otherwise. */
  readonly constants?: (v: VariantOf<S>) => Readonly<Record<string, number>>;
  /** Extra WGSL functions placed before the body (generated per variant). */
  readonly functions?: (v: VariantOf<S>) => string;
  /** Code for the body's `{{NAME}}` placeholders; every one must be filled and every value used. */
  readonly code?: (v: VariantOf<S>) => Readonly<Record<string, string>>;
}

type Optional<B> = { [K in keyof B]: B[K] extends { when: unknown } ? K : never }[keyof B];
type Required<B> = Exclude<keyof B, Optional<B>>;
/** Buffers of a dispatch by binding name; those with `when` may be left out. */
export type BuffersOf<B> = { readonly [K in Required<B>]: GpuBuffer } & { readonly [K in Optional<B>]?: GpuBuffer };

export interface RunOptions {
  /** Workgroups of a 'custom' grid. */
  readonly workgroups?: readonly [number, number, number];
  /** Invocations of a 'custom' grid (folded over WG like the standard grids). */
  readonly threads?: number;
  /** Entry point (default 'main'). */
  readonly entry?: string;
  /** Bytes the dispatch reads and writes, where the launcher knows them (`--profile` turns them into GB/s). */
  readonly bytes?: number;
}

// ---- Uniform layout ----

interface ParamField {
  readonly name: string;
  readonly scalar: Scalar;
  /** Array length (0: a scalar). */
  readonly length: number;
  readonly offset: number;
}

interface ParamLayout {
  readonly fields: readonly ParamField[];
  readonly names: ReadonlySet<string>;
  readonly bytes: number;
  readonly wgsl: string;
}

function layoutParams(schema: ParamSchema): ParamLayout {
  const fields: ParamField[] = [];
  let offset = 0;
  const lines: string[] = [];
  for (const [name, type] of Object.entries(schema)) {
    const m = /^(u32|i32|f32)(?:\[(\d+)\])?$/.exec(type);
    if (!m) throw new Error(`param ${name}: unknown type ${type}`);
    const scalar = m[1] as Scalar;
    const length = m[2] ? Number(m[2]) : 0;
    if (m[2] && length < 1) throw new Error(`param ${name}: an array needs a length >= 1`);
    // WGSL uniform rules: scalars align to 4; arrays in uniforms need a 16-byte element stride, so T[N] is
    // array<vec4<T>, ceil(N/4)>, aligned to 16.
    if (length) offset = Math.ceil(offset / 16) * 16;
    fields.push({ name, scalar, length, offset });
    lines.push(length ? `  ${name}: array<vec4<${scalar}>, ${Math.ceil(length / 4)}>,` : `  ${name}: ${scalar},`);
    offset += length ? Math.ceil(length / 4) * 16 : 4;
  }
  const bytes = Math.max(16, Math.ceil(offset / 16) * 16);
  return { fields, names: new Set(fields.map((f) => f.name)), bytes, wgsl: fields.length ? `struct Params {\n${lines.join('\n')}\n}\n\n` : '' };
}

/**
 * A kernel's uniform block, packed into `into` (zeroed first: array tails a launcher leaves out read as 0). run()
 * packs into one block per kernel, reused every dispatch (dispatch() copies it into the batch's arena), so an
 * eager op allocates no ArrayBuffer; pack() packs into a fresh one.
 */
function packParams(kernel: string, layout: ParamLayout, values: Readonly<Record<string, number | readonly number[]>>, into: UniformBlock): ArrayBuffer {
  const { u32, i32, f32 } = into;
  u32.fill(0);
  const fields = layout.fields;
  for (let j = 0; j < fields.length; j++) {
    const f = fields[j];
    const v = values[f.name];
    if (v === undefined) throw new Error(`${kernel}: param ${f.name} has no value`);
    const at = f.offset >> 2;
    if (typeof v === 'number') {
      if (f.length !== 0) throw new Error(`${kernel}: param ${f.name} is an array of ${f.length}`);
      if (f.scalar === 'f32') f32[at] = v;
      else if (f.scalar === 'i32') i32[at] = v;
      else u32[at] = v >>> 0;
    } else {
      if (f.length === 0) throw new Error(`${kernel}: param ${f.name} is a scalar`);
      if (v.length > f.length) throw new Error(`${kernel}: param ${f.name} holds ${f.length} values, got ${v.length}`);
      if (f.scalar === 'u32') for (let i = 0; i < v.length; i++) u32[at + i] = v[i] >>> 0;
      else {
        const target = f.scalar === 'f32' ? f32 : i32;
        for (let i = 0; i < v.length; i++) target[at + i] = v[i];
      }
    }
  }
  for (const name in values) if (!layout.names.has(name)) throw new Error(`${kernel}: unknown param ${name}`);
  return into.u32.buffer as ArrayBuffer;
}

/**
 * One uniform block's bytes with a view per scalar type. WebGPU reads uniforms little-endian, as every platform
 * a WebGPU implementation runs on stores typed arrays.
 */
interface UniformBlock {
  readonly u32: Uint32Array;
  readonly i32: Int32Array;
  readonly f32: Float32Array;
}

function uniformBlock(bytes: number): UniformBlock {
  const buffer = new ArrayBuffer(bytes);
  return { u32: new Uint32Array(buffer), i32: new Int32Array(buffer), f32: new Float32Array(buffer) };
}

// ---- The kernel ----

const NO_OPTIONS: RunOptions = Object.freeze({});

/** A variant as run() needs it: its cache key, bindings, workgroup size, output lanes and WGSL builder. */
interface ResolvedVariant {
  readonly key: string;
  readonly bindings: readonly ResolvedBinding[];
  readonly names: ReadonlySet<string>;
  readonly wg: number;
  readonly outLanes: number;
  readonly build: () => string;
}

interface ResolvedBinding {
  readonly name: string;
  readonly output: boolean;
  readonly type: StorageType;
  readonly dtype: DType | undefined;
  readonly compute: ComputeType;
  readonly saturate: boolean;
  readonly helpers: boolean;
}

export interface Kernel<S extends VariantSchema, P extends ParamSchema, O extends Bindings<VariantOf<S>>, I extends Bindings<VariantOf<S>>> {
  readonly name: string;
  /** Queues one dispatch of the variant: params and buffers by name. */
  run(ctx: GpuContext, variant: VariantOf<S>, params: ParamsOf<P>, buffers: BuffersOf<O> & BuffersOf<I>, options?: RunOptions): void;
  /** The pipeline cache key of a variant. */
  key(variant: VariantOf<S>): string;
  /** The full WGSL module of a variant. */
  wgsl(variant: VariantOf<S>): string;
  /** Invocations per workgroup of a variant. */
  workgroupSize(variant: VariantOf<S>): number;
  /** The uniform block of params, as run() writes it (null when the kernel has no params). */
  pack(params: ParamsOf<P>): ArrayBuffer | null;
}

const DEFAULT_WG = 256;

export function defineKernel<
  const S extends VariantSchema = Record<never, never>,
  const P extends ParamSchema = Record<never, never>,
  const O extends Bindings<VariantOf<S>> = Bindings<VariantOf<S>>,
  const I extends Bindings<VariantOf<S>> = Bindings<VariantOf<S>>,
>(desc: KernelDescription<S, P, O, I>): Kernel<S, P, O, I> {
  const schema: VariantSchema = desc.variant ?? {};
  const fieldNames = Object.keys(schema);
  const layout = layoutParams(desc.params ?? {});
  const grid = desc.grid;
  if (grid !== 'custom') {
    const count = 'words' in grid ? grid.words : grid.threads;
    if (!layout.fields.some((f) => f.name === count && f.length === 0 && f.scalar === 'u32'))
      throw new Error(`kernel ${desc.name}: its grid counts p.${count}, which must be a u32 param`);
    if ('words' in grid && !('out' in desc.outputs)) throw new Error(`kernel ${desc.name}: a words grid writes the output named out`);
  }
  type V = VariantOf<S>;
  const wgOf = (v: V) => (typeof desc.workgroupSize === 'function' ? desc.workgroupSize(v) : (desc.workgroupSize ?? DEFAULT_WG));

  const checkVariant = (v: V): void => {
    for (const f of fieldNames) {
      const kind = schema[f];
      const value = (v as Record<string, unknown>)[f];
      const ok =
        kind === 'dtype'
          ? typeof value === 'string' && value in DTYPE_INFO
          : kind === 'number'
            ? typeof value === 'number'
            : kind === 'boolean'
              ? typeof value === 'boolean'
              : kind === 'string'
                ? typeof value === 'string'
                : (kind as readonly string[]).includes(value as string);
      if (!ok) throw new Error(`kernel ${desc.name}: variant field ${f} = ${String(value)} is not a ${Array.isArray(kind) ? kind.join('|') : kind}`);
    }
    for (const f of Object.keys(v)) if (!(f in schema)) throw new Error(`kernel ${desc.name}: unknown variant field ${f}`);
  };

  const key = (v: V): string => [desc.name, ...fieldNames.map((f) => String((v as Record<string, unknown>)[f]))].join('|');
  /**
   * What follows from a variant, checked and resolved on its first dispatch, found again through one Map level per
   * variant field keyed by the field's value: a dispatch builds no key string and repeats no check.
   */
  const variants = new Map<unknown, unknown>();
  let fieldless: ResolvedVariant | undefined;
  const lookup = (v: V): ResolvedVariant | undefined => {
    if (fieldNames.length === 0) return fieldless;
    let node = variants;
    const last = fieldNames.length - 1;
    for (let i = 0; i < last; i++) {
      const next = node.get((v as Record<string, unknown>)[fieldNames[i]]) as Map<unknown, unknown> | undefined;
      if (next === undefined) return undefined;
      node = next;
    }
    return node.get((v as Record<string, unknown>)[fieldNames[last]]) as ResolvedVariant | undefined;
  };
  const insert = (v: V, resolved: ResolvedVariant): void => {
    if (fieldNames.length === 0) {
      fieldless = resolved;
      return;
    }
    let node = variants;
    const last = fieldNames.length - 1;
    for (let i = 0; i < last; i++) {
      const value = (v as Record<string, unknown>)[fieldNames[i]];
      let next = node.get(value) as Map<unknown, unknown> | undefined;
      if (next === undefined) node.set(value, (next = new Map()));
      node = next;
    }
    node.set((v as Record<string, unknown>)[fieldNames[last]], resolved);
  };
  /** The uniform block run() packs every dispatch into (dispatch copies it out before returning). */
  const block = layout.fields.length ? uniformBlock(layout.bytes) : undefined;
  const bufferList: GpuBuffer[] = [];
  const gridOf: [number, number, number] = [1, 1, 1];

  const resolve = (v: V): ResolvedBinding[] => {
    const out: ResolvedBinding[] = [];
    const add = (bindings: Bindings<V> | undefined, output: boolean) => {
      for (const [name, b] of Object.entries(bindings ?? {})) {
        const spec: BindingSpec<V> = typeof b === 'string' ? { type: b } : b;
        if (spec.when && !spec.when(v)) continue;
        const type = typeof spec.type === 'function' ? spec.type(v) : (spec.type ?? 'u32');
        const dtype =
          spec.packed === undefined ? undefined : typeof spec.packed === 'function' ? spec.packed(v) : ((v as Record<string, unknown>)[spec.packed] as DType);
        if (spec.packed !== undefined && !(dtype && dtype in DTYPE_INFO)) throw new Error(`kernel ${desc.name}: binding ${name} packs no known dtype`);
        const compute = typeof spec.compute === 'function' ? spec.compute(v) : (spec.compute ?? 'f32');
        const saturate = typeof spec.saturate === 'function' ? spec.saturate(v) : (spec.saturate ?? false);
        out.push({ name, output, type, dtype, compute, saturate, helpers: typeof spec.helpers === 'function' ? spec.helpers(v) : (spec.helpers ?? true) });
      }
    };
    add(desc.outputs as Bindings<V>, true);
    add(desc.inputs as Bindings<V> | undefined, false);
    return out;
  };

  const wgsl = (v: V): string => {
    const bindings = resolve(v);
    const wg = wgOf(v);
    const parts: string[] = [];
    const enables = desc.enables?.(v) ?? [];
    // Directives precede every declaration, the shared helpers included.
    for (const e of enables) parts.push(`enable ${e};\n`);
    parts.push(commonWgsl());
    parts.push(`// ---- generated from the description of kernel '${desc.name}' (${desc.source}) ----\n`);
    parts.push(layout.wgsl);
    const first = layout.fields.length ? 1 : 0;
    if (first) parts.push('@group(0) @binding(0) var<uniform> p: Params;\n');
    bindings.forEach((b, i) => {
      parts.push(`@group(0) @binding(${i + first}) var<storage, ${b.output ? 'read_write' : 'read'}> ${b.name}: array<${b.type}>;\n`);
    });
    const constants: Record<string, number> = { WG: wg };
    let outLanes = 1;
    if (grid !== 'custom' && 'words' in grid) {
      const out = bindings.find((b) => b.name === 'out');
      if (!out?.dtype) throw new Error(`kernel ${desc.name}: a words grid needs out packed with a dtype`);
      outLanes = lanesPerWord(out.dtype);
      constants.LANES = outLanes;
      constants.BITS = 32 / outLanes;
    }
    Object.assign(constants, desc.constants?.(v));
    parts.push('\n');
    for (const [name, value] of Object.entries(constants)) {
      parts.push(`const ${name} = ${Number.isInteger(value) && value >= 0 ? `${value}u` : `${value}${Number.isInteger(value) ? '.0' : ''}`};\n`);
    }
    parts.push('\n');
    for (const b of bindings) {
      if (!b.dtype || !b.helpers) continue;
      if (b.type !== 'u32' && b.type !== 'vec4<u32>' && !(b.output && b.type === 'atomic<u32>'))
        throw new Error(`kernel ${desc.name}: packed binding ${b.name} must hold u32 words`);
      if (b.output) parts.push(encodeFn(`encode_${b.name}`, b.dtype, b.compute, b.saturate));
      else if (b.type === 'u32' || b.type === 'vec4<u32>') {
        parts.push(loadFn(`load_${b.name}`, b.name, b.dtype, b.compute, b.type === 'vec4<u32>'));
        if (b.type === 'u32') parts.push(codeFn(`code_${b.name}`, b.name, b.dtype));
      }
    }
    if (desc.functions) parts.push(desc.functions(v));
    parts.push(`\n// ---- ${desc.source} ----\n`);
    const body = wgslSource(desc.source);
    const code = desc.code?.(v) ?? {};
    const inComment = /\/\/[^\n]*\{\{\w+\}\}/.exec(body);
    if (inComment) throw new Error(`kernel ${desc.name}: ${desc.source} has a placeholder in a comment (${inComment[0].trim()}): it would be filled there too`);
    for (const name of Object.keys(code))
      if (!body.includes(`{{${name}}}`)) throw new Error(`kernel ${desc.name}: ${desc.source} has no {{${name}}} placeholder`);
    parts.push(fillTemplate(body, code));
    if (grid !== 'custom') parts.push('\n' + mainLoop(grid));
    return parts.join('');
  };

  return {
    name: desc.name,
    key: (v) => {
      checkVariant(v);
      return key(v);
    },
    wgsl,
    workgroupSize: wgOf,
    pack: (params) =>
      layout.fields.length ? packParams(desc.name, layout, params as Readonly<Record<string, number | readonly number[]>>, uniformBlock(layout.bytes)) : null,
    run(ctx, variant, params, buffers, options = NO_OPTIONS) {
      // Host cost per dispatch matters (eager ops, decode): what follows from the variant is resolved once.
      let resolved = lookup(variant);
      if (!resolved) {
        checkVariant(variant);
        // A copy: a launcher may refill one variant object every dispatch, and build() runs again on a new device.
        const v = Object.freeze({ ...variant }) as V;
        const bindings = resolve(v);
        const out = bindings.find((b) => b.name === 'out');
        resolved = {
          key: key(v),
          bindings,
          names: new Set(bindings.map((b) => b.name)),
          wg: wgOf(v),
          outLanes: out?.dtype ? lanesPerWord(out.dtype) : 1,
          build: () => wgsl(v),
        };
        insert(v, resolved);
      }
      const named = buffers as Readonly<Record<string, GpuBuffer | undefined>>;
      // The buffer list and the grid are this kernel's, refilled every dispatch (dispatch() reads them during the
      // call only; a recording copies them).
      const list = bufferList;
      const bindings = resolved.bindings;
      list.length = bindings.length;
      for (let i = 0; i < bindings.length; i++) {
        const buf = named[bindings[i].name];
        if (!buf) {
          list.length = 0;
          throw new Error(`kernel ${desc.name}: no buffer for binding ${bindings[i].name}`);
        }
        list[i] = buf;
      }
      // Every binding has its buffer; as many buffers given means none is left over (no lookup per name).
      let given = 0;
      for (const name in named) if (named[name] !== undefined) given++;
      if (given !== bindings.length) {
        for (const name in named) {
          if (named[name] !== undefined && !resolved.names.has(name)) throw new Error(`kernel ${desc.name}: buffer ${name} is not bound by this variant`);
        }
      }
      const packed = block ? packParams(desc.name, layout, params as Readonly<Record<string, number | readonly number[]>>, block) : null;
      let workgroups: readonly [number, number, number];
      if (grid === 'custom') {
        if (options.workgroups) workgroups = options.workgroups;
        else if (options.threads !== undefined) workgroups = fold1d(options.threads, resolved.wg, gridOf);
        else throw new Error(`kernel ${desc.name}: a custom grid needs workgroups or threads`);
      } else {
        const p = params as Readonly<Record<string, number>>;
        workgroups = 'words' in grid ? fold1d(Math.ceil(p[grid.words] / resolved.outLanes), resolved.wg, gridOf) : fold1d(p[grid.threads], resolved.wg, gridOf);
      }
      // The context's cache finds the pipeline by the key made once per variant (its hash is computed once too); the
      // WGSL builder is made once per variant as well.
      const pipeline = ctx.pipeline(resolved.key, resolved.build, options.entry ?? 'main');
      ctx.dispatch(pipeline, packed, list, workgroups, options.bytes);
    },
  };
}

/** grid1d (wgsl.ts) written into `into`: the workgroups of `threads` invocations, folded into y past 65535 in x. */
function fold1d(threads: number, wgSize: number, into: [number, number, number]): [number, number, number] {
  const groups = Math.max(1, Math.ceil(threads / wgSize));
  const x = Math.min(groups, 65535);
  into[0] = x;
  into[1] = Math.ceil(groups / x);
  into[2] = 1;
  return into;
}

function mainLoop(grid: Exclude<GridSpec, 'custom'>): string {
  const header = '@compute @workgroup_size(WG)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n';
  if ('threads' in grid) {
    return `${header}  let i = linear_index(gid, nwg, WG);\n  if (i < p.${grid.threads}) {\n    ${grid.invoke}(i);\n  }\n}\n`;
  }
  return (
    header +
    '  let w = linear_index(gid, nwg, WG);\n' +
    '  let first = w * LANES;\n' +
    `  if (first >= p.${grid.words}) {\n    return;\n  }\n` +
    '  var word = 0u;\n' +
    '  for (var l = 0u; l < LANES; l++) {\n' +
    `    if (first + l < p.${grid.words}) {\n` +
    `      word |= encode_out(${grid.element}(first + l)) << (l * BITS);\n` +
    '    }\n  }\n  out[w] = word;\n}\n'
  );
}
