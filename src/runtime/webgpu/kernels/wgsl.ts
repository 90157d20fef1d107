// WGSL sources live in .wgsl files beside their launchers and are embedded at build time
// (scripts/embed-wgsl.mjs -> wgsl-sources.generated.ts): no kernel is read from disk at run time. Every dtype is
// stored packed in array<u32>: 1, 2 or 4 elements a word.
import { DTYPE_INFO, lanesPerWord, type DType } from '../../../core/dtype.js';
import { DTypeError } from '../../../core/errors.js';
import { WGSL_SOURCES } from './wgsl-sources.generated.js';

/** The text of an embedded .wgsl file, by file name. */
export function wgslSource(file: string): string {
  const src = WGSL_SOURCES[file];
  if (src === undefined) throw new Error(`no embedded WGSL source ${file} (run \`npm run wgsl\` after adding a .wgsl file)`);
  return src;
}

/** Fills {{NAME}} placeholders; a placeholder left unfilled is a bug in the launcher, so it throws. */
export function fillTemplate(template: string, values: Record<string, string | number>): string {
  const out = template.replace(/\{\{(\w+)\}\}/g, (m, name: string) => {
    if (!(name in values)) throw new Error(`WGSL template placeholder ${m} has no value`);
    return String(values[name]);
  });
  return out;
}

/** Bit-exact dtype conversions (dtype-codecs.wgsl) and small helpers every generated kernel may call. */
export function commonWgsl(): string {
  return wgslSource('dtype-codecs.wgsl') + wgslSource('common.wgsl');
}

/** A workgroup tree reduction (workgroup-reduce.wgsl), instantiated by workgroupReduce. */
export interface WorkgroupReduce {
  /** The function `fn name(t: u32, v: type) -> type`; its scratch is `name_scratch`. */
  readonly name: string;
  /** The element type: f32, a vector (pairs) or a struct the kernel declares. */
  readonly type: string;
  /** WGSL expression of `a` (slot t) and `b` (slot t + stride) giving the new slot t: 'a + b', 'max(a, b)', ... */
  readonly combine: string;
  /** How the result leaves the scratch (default 'read'; see workgroup-reduce.wgsl). */
  readonly result?: 'read' | 'reusable' | 'uniform';
}

const REDUCE_ENDINGS = {
  read: (s: string) => `  return ${s}[0];`,
  reusable: (s: string) => `  let r = ${s}[0];\n  workgroupBarrier();\n  return r;`,
  uniform: (s: string) => `  return workgroupUniformLoad(&${s}[0]);`,
};

/**
 * The workgroup tree reduction written once in workgroup-reduce.wgsl, filled for one kernel: its scratch and
 * `fn NAME(t, v) -> T`, for a description's `functions` (needs the kernel's WG constant).
 */
export function workgroupReduce(r: WorkgroupReduce): string {
  const ending = REDUCE_ENDINGS[r.result ?? 'read'](`${r.name}_scratch`);
  // The file's opening comment documents the template; each instance carries only a line naming it.
  const template = wgslSource('workgroup-reduce.wgsl').replace(/^(\/\/[^\n]*\n)+\n/, '');
  const text = fillTemplate(template, { NAME: r.name, TYPE: r.type, COMBINE: r.combine, RESULT: ending });
  return `// ---- workgroup-reduce.wgsl as ${r.name} ----\n${text}`;
}

/** The arithmetic type a kernel computes in: f32 when any dtype involved is floating, else i32. */
export type ComputeType = 'f32' | 'i32';

export function computeTypeOf(...dtypes: DType[]): ComputeType {
  // A loop, not some(): every eager elementwise op calls this.
  for (let i = 0; i < dtypes.length; i++) if (DTYPE_INFO[dtypes[i]].isFloating) return 'f32';
  return 'i32';
}

/** `(code: u32) -> C`: a dtype's storage code to the compute type. */
export function decodeExpr(dtype: DType, code: string, c: ComputeType): string {
  const asF32 = (e: string) => (c === 'f32' ? e : `i32_from_f32(${e})`);
  const asI32 = (e: string) => (c === 'i32' ? e : `f32(${e})`);
  switch (dtype) {
    case 'float32':
      return asF32(`bitcast<f32>(${code})`);
    case 'float16':
      return asF32(`f16_to_f32(${code})`);
    case 'bfloat16':
      return asF32(`bf16_to_f32(${code})`);
    case 'float8_e4m3fn':
      return asF32(`e4m3_to_f32(${code})`);
    case 'float8_e5m2':
      return asF32(`e5m2_to_f32(${code})`);
    case 'int32':
      return asI32(`bitcast<i32>(${code})`);
    case 'uint8':
    case 'bool':
      return asI32(`i32(${code})`);
    case 'int64':
      throw new DTypeError(INT64_NO_PACKED);
  }
}

/** int64 is two words an element: it has its own kernels (kernels/int64/), never the packed-word helpers. */
const INT64_NO_PACKED = 'int64 has no packed-word kernel helpers (two words an element): this op does not support int64; cast first';

/** `fn NAME(code: u32) -> C`: decodes one storage code of dtype (codes already unpacked from their word). */
export function decodeFn(name: string, dtype: DType, c: ComputeType): string {
  return `fn ${name}(code: u32) -> ${c} {\n  return ${decodeExpr(dtype, 'code', c)};\n}\n`;
}

/**
 * `fn NAME(e: u32) -> C` reading element e (an element index into the buffer, not a word index) of `buffer`,
 * which holds dtype packed in u32 words.
 */
export function loadFn(name: string, buffer: string, dtype: DType, c: ComputeType, vec4Words = false): string {
  return `fn ${name}(e: u32) -> ${c} {\n  let code = ${codeExpr(buffer, dtype, vec4Words)};\n  return ${decodeExpr(dtype, 'code', c)};\n}\n`;
}

/** `fn NAME(e: u32) -> u32`: the raw storage code of element e (for table lookups and raw copies). */
export function codeFn(name: string, buffer: string, dtype: DType): string {
  return `fn ${name}(e: u32) -> u32 {\n  return ${codeExpr(buffer, dtype, false)};\n}\n`;
}

/** WGSL expression of element e's code in `buffer` (vec4Words: the buffer is array<vec4<u32>>). */
function codeExpr(buffer: string, dtype: DType, vec4Words: boolean): string {
  const lanes = lanesPerWord(dtype);
  const bits = 32 / lanes;
  const word = (i: string) => (vec4Words ? `${buffer}[(${i}) >> 2u][(${i}) & 3u]` : `${buffer}[${i}]`);
  return lanes === 1 ? word('e') : `(${word(`e >> ${Math.log2(lanes)}u`)} >> ((e & ${lanes - 1}u) * ${bits}u)) & ${(2 ** bits - 1) >>> 0}u`;
}

/** `fn NAME(v: C) -> u32` giving dtype's storage code for a computed value (saturate applies to fp8 only). */
export function encodeFn(name: string, dtype: DType, c: ComputeType, saturate = false): string {
  const f = c === 'f32' ? 'v' : 'f32(v)';
  const i = c === 'i32' ? 'v' : 'i32_from_f32(v)';
  const sat = saturate ? 'true' : 'false';
  if (dtype === 'int64') throw new DTypeError(INT64_NO_PACKED);
  const body: Record<Exclude<DType, 'int64'>, string> = {
    float32: `bitcast<u32>(${f})`,
    float16: `f32_to_f16(${f})`,
    bfloat16: `f32_to_bf16(${f})`,
    float8_e4m3fn: `f32_to_e4m3(${f}, ${sat})`,
    float8_e5m2: `f32_to_e5m2(${f}, ${sat})`,
    int32: `bitcast<u32>(${i})`,
    uint8: `u32(${i}) & 0xffu`,
    bool: c === 'f32' ? `select(0u, 1u, (bitcast<u32>(v) & 0x7fffffffu) != 0u)` : `select(0u, 1u, v != 0)`,
  };
  return `fn ${name}(v: ${c}) -> u32 {\n  return ${body[dtype]};\n}\n`;
}

/** Workgroup grid for `threads` invocations of `wgSize`, folded into y when x would pass the 65535 limit. */
export function grid1d(threads: number, wgSize: number): [number, number, number] {
  const groups = Math.max(1, Math.ceil(threads / wgSize));
  const x = Math.min(groups, 65535);
  return [x, Math.ceil(groups / x), 1];
}
