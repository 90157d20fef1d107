// Launcher of fusedMap (fused-map.wgsl): the chain's WGSL is generated from its description, one variant per chain
// shape (ops, dtypes, how each input is addressed); shapes, offsets, strides and numbers travel in the uniforms, so
// the same chain over other sizes reuses the pipeline.
import { DTYPE_INFO, lanesPerWord, type DType } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { coalesceViews, contiguousView, numel, type Shape } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { accessOf, castCompute, scalarCode, whereCompute, type GpuOperand, type MapCompute } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { ZERO_DIVISOR_WGSL } from '../../runtime/webgpu/kernels/device-error.js';
import { MAP_OPS, mapExpression, mapReports } from '../../runtime/webgpu/kernels/map-ops.js';
import { codeFn, computeTypeOf, decodeExpr, encodeFn, grid1d, wgslSource } from '../../runtime/webgpu/kernels/wgsl.js';
import type { ReduceOp } from '../../runtime/backend.js';
import {
  REDUCE_OPS,
  REDUCE_PARAMS,
  reduceBodyCode,
  reduceGeometry,
  reduceLayout,
  reduceResultType,
  reduceTypeAliases,
  reduceWorkgroupFunctions,
} from '../reduce/webgpu.js';
import type { FusedMapArgs, FusedNode, FusedRef } from './index.js';
import { FUSED_MAP_MAX_BUFFERS, FUSED_MAP_MAX_SCALARS, errorFlagBindings } from './limits.js';

const MAX_RANK = 8;
/** Stride slots in the uniforms: strided inputs take `rank` each. */
const MAX_STRIDES = 64;

/** 'vec4': linear, 32-bit, its first element a multiple of 4 and its buffer holding every vec4 the run touches. */
type Access = 'linear' | 'scalar' | 'strided' | 'vec4';

/** What the WGSL depends on, as the variant's one string field (the pipeline key). */
interface ChainSpec {
  /** Per input: dtype, access, and for a strided input its slot among the strided ones. */
  readonly inputs: readonly { dtype: DType; access: Access; strided: number }[];
  readonly nodes: readonly {
    kind: FusedNode['kind'];
    op: string;
    dtype: DType;
    compute: MapCompute;
    saturate: boolean;
    /** ['i', k] input k, ['v', m] node m, ['s', slot, dtype] a number in uniform slot `slot`, encoded in dtype. */
    args: readonly (readonly [string, number, DType?])[];
  }[];
  readonly outputs: readonly number[];
  /** Per output: written a vec4 of words at a time (32-bit, its buffer a whole number of vec4s). */
  readonly outVec4?: readonly boolean[];
  /** The last input is a reduction's result, handed to `epilogue(e, code)` rather than read from a buffer. */
  readonly reducedLast?: boolean;
}

/** The node's compute type as the one-op map kernels pick it (elementwise.ts), so fused and unfused round alike. */
function computeOf(node: FusedNode, dtypeOf: (r: FusedRef) => DType): MapCompute {
  switch (node.kind) {
    case 'where': {
      const side = (r: FusedRef) => ({ dtype: dtypeOf(r), number: 'scalar' in r });
      return whereCompute(side(node.args[1]), side(node.args[2]), node.dtype);
    }
    case 'cast':
      return castCompute(dtypeOf(node.args[0]), node.dtype, node.saturate);
    default:
      return computeTypeOf(...node.args.map(dtypeOf), node.dtype);
  }
}

const mapName = (node: FusedNode): string => (node.kind === 'unary' || node.kind === 'binary' ? node.op : node.kind);

/** Element k of a u32[N] uniform array (laid out as array<vec4<u32>>). */
const uniformAt = (array: string, k: number | string) => (typeof k === 'number' ? `p.${array}[${k >> 2}][${k & 3}]` : `p.${array}[(${k}) / 4u][(${k}) % 4u]`);

/** Whether a node of the chain reports to the device error flag (an integer division), so the kernel binds `err`. */
const chainReports = (spec: ChainSpec) => spec.nodes.some((n) => n.compute !== 'raw' && mapReports(n.op, n.compute));

function generate(spec: ChainSpec): { functions: string; stores: string; loads: string; element: string } {
  const parts: string[] = [];
  const files = new Set<string>();
  if (chainReports(spec)) parts.push(ZERO_DIVISOR_WGSL);
  if (spec.nodes.some((n) => n.compute === 'f32')) files.add('float-math.wgsl');
  for (const n of spec.nodes) for (const f of MAP_OPS[n.op]?.uses ?? []) files.add(f);
  for (const f of files) parts.push(wgslSource(f));
  parts.push(`struct Codes {\n${spec.outputs.map((_, o) => `  o${o}: u32,`).join('\n')}\n}\n`);
  const bound = spec.inputs.length - (spec.reducedLast ? 1 : 0);
  spec.inputs.forEach((x, k) => {
    if (x.access === 'vec4' || k >= bound) return;
    parts.push(codeFn(`code_in${k}`, `in${k}`, x.dtype));
    let at: string;
    if (x.access === 'linear') at = `  return ${uniformAt('offs', k)} + e;`;
    else if (x.access === 'scalar') at = `  return ${uniformAt('offs', k)};`;
    else
      at = [
        '  var rem = e;',
        `  var off = ${uniformAt('offs', k)};`,
        '  for (var d = i32(p.rank) - 1; d >= 0; d--) {',
        `    let size = ${uniformAt('shape', 'u32(d)')};`,
        `    off += (rem % size) * ${uniformAt('strides', `${x.strided}u * p.rank + u32(d)`)};`,
        '    rem /= size;',
        '  }',
        '  return off;',
      ].join('\n');
    parts.push(`fn at_in${k}(e: u32) -> u32 {\n${at}\n}\n`);
  });
  const names = ['x', 'y', 'z'];
  const body: string[] = [];
  spec.nodes.forEach((n, m) => {
    const code = (a: readonly [string, number, DType?]) => (a[0] === 'i' ? `i${a[1]}` : a[0] === 'v' ? `v${a[1]}` : uniformAt('scalars', a[1]));
    if (n.compute === 'raw') {
      // Codes move as they are: a copy, or where() of one dtype (its numbers already in that dtype's codes).
      const expr = mapExpression(n.op === 'cast' ? 'copy' : n.op, 'raw');
      parts.push(`fn op${m}(${n.args.map((_, k) => `${names[k]}: u32`).join(', ')}) -> u32 {\n  return ${expr};\n}\n`);
      body.push(`  let v${m} = op${m}(${n.args.map(code).join(', ')});`);
      return;
    }
    const c = n.compute;
    parts.push(`fn op${m}(${n.args.map((_, k) => `${names[k]}: ${c}`).join(', ')}) -> ${c} {\n  return ${mapExpression(n.op, c)};\n}\n`);
    parts.push(encodeFn(`enc${m}`, n.dtype, c, n.saturate));
    const decoded = n.args.map((a) => decodeExpr(a[2] ?? 'float32', code(a), c));
    body.push(`  let v${m} = enc${m}(op${m}(${decoded.join(', ')}));`);
  });
  body.push(`  return Codes(${spec.outputs.map((m) => `v${m}`).join(', ')});`);
  const codes = spec.inputs.map((_, k) => `i${k}: u32`).join(', ');
  parts.push(`fn compute(${codes}) -> Codes {\n${body.join('\n')}\n}\n`);
  // Element e with every input read where it lives (a reduction's loads; the map's main loads vec4 inputs itself).
  if (spec.inputs.every((x) => x.access !== 'vec4') && !spec.reducedLast)
    parts.push(`fn element(e: u32) -> Codes {\n  return compute(${spec.inputs.map((_, k) => `code_in${k}(at_in${k}(e))`).join(', ')});\n}\n`);
  // Output element e of a reduction whose result's code is r: the chain's one output (a reduction's epilogue).
  if (spec.reducedLast)
    parts.push(
      `fn epilogue(e: u32, r: u32) -> u32 {\n  return compute(${spec.inputs.map((_, k) => (k < bound ? `code_in${k}(at_in${k}(e))` : 'r')).join(', ')}).o0;\n}\n`,
    );

  const stores = spec.outputs.map((m, o) => {
    const lanes = lanesPerWord(spec.nodes[m].dtype);
    const bits = 32 / lanes;
    const mask = `${(2 ** bits - 1) >>> 0}u`;
    if (spec.outVec4?.[o]) return `  out${o}[first / 4u] = vec4<u32>(r[0].o${o}, r[1].o${o}, r[2].o${o}, r[3].o${o});`;
    if (lanes === 1) return [0, 1, 2, 3].map((j) => `  if (first + ${j}u < p.n) {\n    out${o}[first + ${j}u] = r[${j}].o${o};\n  }`).join('\n');
    const word = (j0: number) => Array.from({ length: lanes }, (_, l) => `((r[${j0 + l}].o${o} & ${mask}) << ${l * bits}u)`).join(' | ');
    if (lanes === 4) return `  out${o}[first / 4u] = ${word(0)};`;
    return `  out${o}[first / 2u] = ${word(0)};\n  if (first + 2u < p.n) {\n    out${o}[first / 2u + 1u] = ${word(2)};\n  }`;
  });
  const loads = spec.inputs.map((x, k) => (x.access === 'vec4' ? `  let q${k} = in${k}[${uniformAt('offs', k)} / 4u + first / 4u];` : '')).filter(Boolean);
  const element = `compute(${spec.inputs.map((x, k) => (x.access === 'vec4' ? `q${k}[j]` : `code_in${k}(at_in${k}(first + j))`)).join(', ')})`;
  return { functions: parts.join(''), stores: stores.join('\n'), loads: loads.join('\n'), element };
}

const parsed = new Map<string, ChainSpec>();
function specOf(text: string): ChainSpec {
  let s = parsed.get(text);
  if (!s) parsed.set(text, (s = JSON.parse(text) as ChainSpec));
  return s;
}

const slot = (k: number, count: (s: ChainSpec) => number, vec4: (s: ChainSpec) => boolean) => ({
  when: (v: { spec: string }) => count(specOf(v.spec)) > k,
  type: (v: { spec: string }) => (vec4(specOf(v.spec)) ? ('vec4<u32>' as const) : ('u32' as const)),
});
/** The device error flag: bound (after the outputs) when the chain reports. */
const ERR = { err: { type: 'atomic<u32>' as const, when: (v: { spec: string }) => chainReports(specOf(v.spec)) } };
/** The flag's buffer for a chain that reports, else nothing. */
const errBuffer = (ctx: GpuContext, spec: ChainSpec): { err?: GpuBuffer } => (chainReports(spec) ? { err: ctx.deviceErrorFlag() } : {});

const OUTPUTS = Object.fromEntries(
  Array.from({ length: FUSED_MAP_MAX_BUFFERS }, (_, k) => [
    `out${k}`,
    slot(
      k,
      (s) => s.outputs.length,
      (s) => !!s.outVec4?.[k],
    ),
  ]),
);
const INPUTS = Object.fromEntries(
  Array.from({ length: FUSED_MAP_MAX_BUFFERS }, (_, k) => [
    `in${k}`,
    slot(
      k,
      (s) => s.inputs.length - (s.reducedLast ? 1 : 0),
      (s) => s.inputs[k]?.access === 'vec4',
    ),
  ]),
);

const CHAIN_PARAMS = {
  n: 'u32',
  rank: 'u32',
  shape: `u32[${MAX_RANK}]`,
  offs: `u32[${FUSED_MAP_MAX_BUFFERS}]`,
  strides: `u32[${MAX_STRIDES}]`,
  scalars: `u32[${FUSED_MAP_MAX_SCALARS}]`,
} as const;

const fusedMap = defineKernel({
  name: 'fused-map',
  source: 'fused-map.wgsl',
  variant: { spec: 'string' },
  params: CHAIN_PARAMS,
  outputs: { ...OUTPUTS, ...ERR },
  inputs: INPUTS,
  grid: 'custom',
  functions: (v) => generate(specOf(v.spec)).functions,
  code: (v) => {
    const g = generate(specOf(v.spec));
    return { LOADS: g.loads, ELEMENT: g.element, STORES: g.stores };
  },
});

type GpuChain = Omit<FusedMapArgs<GpuBuffer>, 'inputs'> & { readonly inputs: readonly GpuOperand[] };

/** A chain made ready to run: its variant text, its uniforms and its input buffers (in0...). */
interface PreparedChain {
  readonly spec: ChainSpec;
  readonly params: { n: number; rank: number; shape: readonly number[]; offs: readonly number[]; strides: readonly number[]; scalars: readonly number[] };
  readonly inputs: Record<string, GpuBuffer>;
  /** Bytes its inputs take. */
  readonly inputBytes: number;
}

/** vec4: let linear 32-bit inputs be read a vec4 at a time where aligned (the map; a reduction reads elements). */
function prepareChain(args: GpuChain, vec4 = false): PreparedChain {
  const n = numel(args.shape);
  const dtypeOf = (r: FusedRef): DType => ('input' in r ? args.inputs[r.input].dtype : 'node' in r ? args.nodes[r.node].dtype : r.dtype);
  const views = coalesceViews([contiguousView(args.shape), ...args.inputs.map((x) => x.view)]);
  const iter: Shape = views[0].shape.length ? views[0].shape : [1];
  const rank = iter.length;
  if (rank > MAX_RANK) throw new ShapeError(`fusedMap indexes at most ${MAX_RANK} non-mergeable dims, got ${rank}`);
  const strides: number[] = [];
  const inputs = args.inputs.map((x, k) => {
    const view = views[k + 1];
    let access: Access = accessOf(view);
    const words = Math.ceil((view.offset + n) / 4) * 16;
    if (vec4 && access === 'linear' && lanesPerWord(x.dtype) === 1 && view.offset % 4 === 0 && x.buffer.size >= words) access = 'vec4';
    const strided = access === 'strided' ? strides.length / rank : -1;
    if (access === 'strided') strides.push(...Array.from({ length: rank }, (_, d) => view.strides[d] ?? 0));
    return { dtype: x.dtype, access, strided };
  });
  if (strides.length > MAX_STRIDES) throw new ShapeError(`fusedMap holds ${MAX_STRIDES} strides, got ${strides.length}`);
  const scalars: number[] = [];
  const nodes = args.nodes.map((node) => {
    const compute = computeOf(node, dtypeOf);
    const refs = node.args.map((r): readonly [string, number, DType?] => {
      if ('input' in r) return ['i', r.input, args.inputs[r.input].dtype];
      if ('node' in r) return ['v', r.node, args.nodes[r.node].dtype];
      // A number's code: in its own dtype, or for a raw op in the output's (as the one-op maps carry it).
      scalars.push(scalarCode(r, compute === 'raw' ? node.dtype : undefined));
      return ['s', scalars.length - 1, compute === 'raw' ? node.dtype : r.dtype];
    });
    return { kind: node.kind, op: mapName(node), dtype: node.dtype, compute, saturate: node.kind === 'cast' && node.saturate, args: refs };
  });
  if (scalars.length > FUSED_MAP_MAX_SCALARS) throw new ShapeError(`fusedMap carries at most ${FUSED_MAP_MAX_SCALARS} numbers, got ${scalars.length}`);
  const buffers: Record<string, GpuBuffer> = {};
  args.inputs.forEach((x, k) => (buffers[`in${k}`] = x.buffer));
  return {
    spec: { inputs, nodes, outputs: args.outputs },
    params: { n, rank, shape: iter, offs: views.slice(1).map((v) => v.offset), strides, scalars },
    inputs: buffers,
    inputBytes: args.inputs.reduce((s, x) => s + numel(x.view.shape) * DTYPE_INFO[x.dtype].itemBytes, 0),
  };
}

/** Runs the chain: one dispatch, one new contiguous buffer per output. */
export function fusedMapKernel(ctx: GpuContext, args: GpuChain): GpuBuffer[] {
  const n = numel(args.shape);
  // 32-bit outputs are given whole vec4s, so the map stores 4 words at once.
  const outs = args.outputs.map((m) => {
    const lanes = lanesPerWord(args.nodes[m].dtype);
    return ctx.alloc(lanes === 1 ? Math.max(16, Math.ceil(n / 4) * 16) : wordBytes(n, lanes));
  });
  if (n === 0) return outs;
  if (args.inputs.length + outs.length + errorFlagBindings(args.nodes) > FUSED_MAP_MAX_BUFFERS)
    throw new ShapeError(`fusedMap binds at most ${FUSED_MAP_MAX_BUFFERS} buffers, got ${args.inputs.length} inputs and ${outs.length} outputs`);
  const prepared = prepareChain(args, true);
  const chain = { ...prepared, spec: { ...prepared.spec, outVec4: args.outputs.map((m) => lanesPerWord(args.nodes[m].dtype) === 1) } };
  const buffers: Record<string, GpuBuffer> = { ...chain.inputs, ...errBuffer(ctx, chain.spec) };
  outs.forEach((b, k) => (buffers[`out${k}`] = b));
  const bytes = chain.inputBytes + args.outputs.reduce((s, m) => s + n * DTYPE_INFO[args.nodes[m].dtype].itemBytes, 0);
  fusedMap.run(ctx, { spec: JSON.stringify(chain.spec) }, chain.params, buffers as never, { threads: Math.ceil(n / 4), bytes });
  return outs;
}

// ---- A chain feeding a reduction ----

interface ReduceChainVariant {
  readonly spec: string;
  readonly op: ReduceOp;
  readonly dtype: DType;
  readonly outDtype: DType;
}

/** `load_x(e)`: the chain's one output at element e, decoded as the reduction reads its input. */
function chainLoad(v: ReduceChainVariant): string {
  const spec = specOf(v.spec);
  const c = computeTypeOf(v.dtype);
  return `${generate(spec).functions}fn load_x(e: u32) -> ${c} {
  return ${decodeExpr(v.dtype, 'element(e).o0', c)};
}
`;
}

const reduceChainRows = defineKernel({
  name: 'fused-reduce',
  source: 'reduce-rows.wgsl',
  variant: { spec: 'string', layout: ['rows'], op: REDUCE_OPS, dtype: 'dtype', outDtype: 'dtype' },
  params: { ...REDUCE_PARAMS, ...CHAIN_PARAMS },
  outputs: { out: { packed: 'outDtype', compute: reduceResultType }, ...ERR },
  inputs: INPUTS,
  grid: { words: 'n_out', element: 'reduce_at' },
  workgroupSize: 64,
  functions: (v) => reduceTypeAliases(v) + chainLoad(v),
  code: (v) => reduceBodyCode(v, { v: 'acc_v', i: 'acc_i' }),
});

const reduceChainWorkgroups = defineKernel({
  name: 'fused-reduce',
  source: 'reduce.wgsl',
  variant: { spec: 'string', layout: ['wg'], op: REDUCE_OPS, dtype: 'dtype', outDtype: 'dtype', wg: 'number' },
  params: { ...REDUCE_PARAMS, ...CHAIN_PARAMS },
  outputs: { out: { packed: 'outDtype', compute: reduceResultType }, ...ERR },
  inputs: INPUTS,
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: (v) => ({ LANES: lanesPerWord(v.outDtype), BITS: 32 / lanesPerWord(v.outDtype) }),
  functions: (v) => reduceTypeAliases(v) + reduceWorkgroupFunctions() + chainLoad(v),
  code: (v) => reduceBodyCode(v, { v: 'bitcast<C>(best.x)', i: 'best.y' }),
});

/**
 * reduce(op, the chain's output `args.outputs[0]`, dim): the chain evaluated where the reduction loads its input,
 * with the reduce kernel's own loop and order, so the result has the bits of the chain then the reduction.
 */
export function fusedReduceKernel(ctx: GpuContext, args: GpuChain, op: ReduceOp, dim: number, outDtype: DType): GpuBuffer {
  const { size, inner, nOut } = reduceGeometry(args.shape, dim);
  const lanes = lanesPerWord(outDtype);
  const out = ctx.alloc(wordBytes(nOut, lanes));
  if (nOut === 0) return out;
  if (args.inputs.length + 1 + errorFlagBindings(args.nodes) > FUSED_MAP_MAX_BUFFERS)
    throw new ShapeError(`fusedReduce binds at most ${FUSED_MAP_MAX_BUFFERS} buffers`);
  const chain = prepareChain(args);
  const dtype = args.nodes[args.outputs[0]].dtype;
  const params = { n_out: nOut, size, inner, offset: 0, ...chain.params };
  const buffers = { ...chain.inputs, ...errBuffer(ctx, chain.spec), out } as never;
  const spec = JSON.stringify(chain.spec);
  const layout = reduceLayout(size, nOut);
  if (layout.kind === 'rows') reduceChainRows.run(ctx, { spec, layout: 'rows', op, dtype, outDtype }, params, buffers, { bytes: chain.inputBytes });
  else
    reduceChainWorkgroups.run(ctx, { spec, layout: 'wg', op, dtype, outDtype, wg: layout.wg }, params, buffers, {
      workgroups: grid1d(Math.ceil(nOut / lanes), 1),
      bytes: chain.inputBytes,
    });
  return out;
}

// ---- A reduction feeding a chain ----

interface ReduceMapVariant extends ReduceChainVariant {
  /** The chain's output dtype: what the kernel stores. */
  readonly finalDtype: DType;
}

/** The reduction's result, encoded to its own dtype as the reduce kernel stores it, then the chain on it. */
function reduceMapFunctions(v: ReduceMapVariant): string {
  const r = reduceResultType(v);
  return `alias C = ${computeTypeOf(v.dtype)};\nalias R = ${computeTypeOf(v.finalDtype)};\n${generate(specOf(v.spec)).functions}${encodeFn('enc_reduced', v.outDtype, r)}`;
}

function reduceMapResult(v: ReduceMapVariant, acc: { v: string; i: string }): Record<string, string> {
  const body = reduceBodyCode(v, acc);
  return { ...body, RESULT: decodeExpr(v.finalDtype, `epilogue(o, enc_reduced(${body.RESULT}))`, computeTypeOf(v.finalDtype)) };
}

const reduceMapRows = defineKernel({
  name: 'reduce-map',
  source: 'reduce-rows.wgsl',
  variant: { spec: 'string', layout: ['rows'], op: REDUCE_OPS, dtype: 'dtype', outDtype: 'dtype', finalDtype: 'dtype' },
  params: { ...REDUCE_PARAMS, ...CHAIN_PARAMS },
  outputs: { out: { packed: 'finalDtype', compute: (v) => computeTypeOf(v.finalDtype) }, ...ERR },
  inputs: { x: { packed: 'dtype', compute: (v) => computeTypeOf(v.dtype) }, ...INPUTS },
  grid: { words: 'n_out', element: 'reduce_at' },
  workgroupSize: 64,
  functions: reduceMapFunctions,
  code: (v) => reduceMapResult(v, { v: 'acc_v', i: 'acc_i' }),
});

const reduceMapWorkgroups = defineKernel({
  name: 'reduce-map',
  source: 'reduce.wgsl',
  variant: { spec: 'string', layout: ['wg'], op: REDUCE_OPS, dtype: 'dtype', outDtype: 'dtype', finalDtype: 'dtype', wg: 'number' },
  params: { ...REDUCE_PARAMS, ...CHAIN_PARAMS },
  outputs: { out: { packed: 'finalDtype', compute: (v) => computeTypeOf(v.finalDtype) }, ...ERR },
  inputs: { x: { packed: 'dtype', compute: (v) => computeTypeOf(v.dtype) }, ...INPUTS },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: (v) => ({ LANES: lanesPerWord(v.finalDtype), BITS: 32 / lanesPerWord(v.finalDtype) }),
  functions: (v) => reduceMapFunctions(v) + reduceWorkgroupFunctions(),
  code: (v) => reduceMapResult(v, { v: 'bitcast<C>(best.x)', i: 'best.y' }),
});

/**
 * reduce(op, x, dim), then the chain over the result's shape with the result as its last input, storing the
 * chain's one output: the reduction's result is rounded to its dtype first, so the bits are the ops' one by one.
 * x's view is contiguous (any offset).
 */
export function reduceMapKernel(ctx: GpuContext, x: GpuOperand, op: ReduceOp, dim: number, outDtype: DType, args: GpuChain): GpuBuffer {
  const { size, inner, nOut } = reduceGeometry(x.view.shape, dim);
  const finalDtype = args.nodes[args.outputs[0]].dtype;
  const lanes = lanesPerWord(finalDtype);
  const out = ctx.alloc(wordBytes(nOut, lanes));
  if (nOut === 0) return out;
  if (args.inputs.length - 1 + 2 + errorFlagBindings(args.nodes) > FUSED_MAP_MAX_BUFFERS)
    throw new ShapeError(`reduceMap binds at most ${FUSED_MAP_MAX_BUFFERS} buffers`);
  if (numel(args.shape) !== nOut) throw new ShapeError(`reduceMap: a chain over ${numel(args.shape)} elements after a reduction to ${nOut}`);
  const prepared = prepareChain(args);
  const spec = JSON.stringify({ ...prepared.spec, reducedLast: true });
  const params = { n_out: nOut, size, inner, offset: x.view.offset, ...prepared.params };
  const { [`in${args.inputs.length - 1}`]: _reduced, ...inputs } = prepared.inputs;
  const buffers = { ...inputs, ...errBuffer(ctx, prepared.spec), x: x.buffer, out } as never;
  const v = { spec, op, dtype: x.dtype, outDtype, finalDtype };
  const bytes = numel(x.view.shape) * DTYPE_INFO[x.dtype].itemBytes + prepared.inputBytes;
  const layout = reduceLayout(size, nOut);
  if (layout.kind === 'rows') reduceMapRows.run(ctx, { ...v, layout: 'rows' }, params, buffers, { bytes });
  else reduceMapWorkgroups.run(ctx, { ...v, layout: 'wg', wg: layout.wg }, params, buffers, { workgroups: grid1d(Math.ceil(nOut / lanes), 1), bytes });
  return out;
}
