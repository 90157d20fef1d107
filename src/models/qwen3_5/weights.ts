// Qwen3.5 / Qwen3.5-MoE weights on a device, arranged for the forward: each Gated DeltaNet's four input projections
// stacked into one [qkv | z | b | a] weight (one GEMV per token), each gated attention's q_proj rows regrouped from
// per-head [query | gate] into all queries then all gates and stacked with k and v as [q | k | v | gate], the
// zero-centred norms stored as their effective weight 1 + w (float32), and each MoE layer's experts as stacked
// [E, 2I, H] / [E, H, I] tensors (the release's fused 3-D tensors as they are, or experts stored one by one). When
// the shared expert has the routed experts' width it becomes expert E of those stacks and its gate row E of the
// router, so the fused MoE block serves it in the same dispatches.
import type { Tensor } from '../../core/tensor.js';
import { quantizeWeightInt4, type Checkpoint, type Weight } from '../../formats/checkpoint.js';
import { isFp8 } from '../../core/dtype.js';
import { CheckpointError } from '../../core/errors.js';
import { cast } from '../../ops/convert.js';
import { add } from '../../ops/elementwise.js';
import { quantize as quantizeTensor } from '../../ops/quantize.js';
import { cat, contiguous, narrow, permute, reshape, unsqueeze } from '../../ops/shape-ops.js';
import { tidy } from '../../core/scope.js';
import {
  canFuseRows,
  checkLayout,
  concatWeights,
  weightParts,
  WeightLoader,
  type DenseMlpWeights,
  type MoeWeights,
  type WeightLoadingOptions,
} from '../layers/weights.js';
import { MTP_PREFIX, qwen35CheckpointLayout, qwen35CheckpointSpecs, TEXT_PREFIX } from './layout.js';
import type { WeightSpec } from '../random-weights.js';
import type { Qwen35Config } from './config.js';

export interface DeltaNetWeights {
  readonly kind: 'linear_attention';
  /** [qkv | z | b | a] stacked into one weight, or the four apart (stored FP8 blocks that would straddle a seam). */
  readonly inProj: Weight | readonly Weight[];
  /** conv1d taps [C, K]. */
  readonly conv: Tensor;
  /** float32 [Hv]. */
  readonly aLog: Tensor;
  readonly dtBias: Tensor;
  /** The gated norm's weight [dv] (plain w). */
  readonly norm: Tensor;
  readonly outProj: Weight;
}

export interface GatedAttentionWeights {
  readonly kind: 'full_attention';
  /** [q (Hq D) | k | v | gate (Hq D)] rows, or the four apart. */
  readonly qkvg: Weight | readonly Weight[];
  readonly o: Weight;
  /** 1 + q_norm / k_norm, float32 [D]. */
  readonly qNorm: Tensor;
  readonly kNorm: Tensor;
}

export interface Qwen35MoeWeights extends MoeWeights {
  /** Whether expert E of the stacks (and router row E) is the shared expert (else it is `shared`, run beside). */
  readonly sharedInStack: boolean;
}

export interface Qwen35LayerWeights {
  /** 1 + input_layernorm / post_attention_layernorm, float32. */
  readonly inputNorm: Tensor;
  readonly postNorm: Tensor;
  readonly mixer: DeltaNetWeights | GatedAttentionWeights;
  readonly mlp: DenseMlpWeights | Qwen35MoeWeights;
}

export interface Qwen35Weights {
  readonly embedTokens: Tensor;
  readonly layers: readonly Qwen35LayerWeights[];
  readonly norm: Tensor;
  readonly lmHead: Weight;
  /** The multi-token-prediction layer, when the checkpoint has one (not in qwen35WeightTensors: the drafter's alone). */
  readonly mtp?: Qwen35MtpWeights;
}

/** `mtp.*`: the speculative drafter of the release (the embedding and lm_head are the text model's). */
export interface Qwen35MtpWeights {
  /** 1 + pre_fc_norm_embedding / pre_fc_norm_hidden / norm, float32 [H]. */
  readonly preFcNormEmbedding: Tensor;
  readonly preFcNormHidden: Tensor;
  /** [H, 2H] over concat(normed embedding, normed hidden). */
  readonly fc: Weight;
  /** Full attention decoder layers. */
  readonly layers: readonly Qwen35LayerWeights[];
  readonly norm: Tensor;
}

const parts = (w: Weight | readonly Weight[]): Weight[] => ('data' in w ? [w as Weight] : [...(w as readonly Weight[])]);

export function qwen35WeightTensors(w: Qwen35Weights): Tensor[] {
  const out: Tensor[] = [w.embedTokens, w.norm, ...(w.lmHead.data === w.embedTokens ? [] : weightParts(w.lmHead))];
  for (const l of w.layers) out.push(...layerTensors(l));
  return out;
}

function layerTensors(l: Qwen35LayerWeights): Tensor[] {
  const out: Tensor[] = [l.inputNorm, l.postNorm];
  const m = l.mixer;
  if (m.kind === 'linear_attention') out.push(...parts(m.inProj).flatMap(weightParts), m.conv, m.aLog, m.dtBias, m.norm, ...weightParts(m.outProj));
  else out.push(...parts(m.qkvg).flatMap(weightParts), ...weightParts(m.o), m.qNorm, m.kNorm);
  const f = l.mlp;
  out.push(...weightParts(f.gateUp), ...weightParts(f.down));
  if (f.kind === 'moe') {
    out.push(...weightParts(f.router));
    if (f.shared) out.push(...weightParts(f.shared.mlp.gateUp), ...weightParts(f.shared.mlp.down), ...weightParts(f.shared.gate));
  }
  return out;
}

export function qwen35MtpWeightTensors(w: Qwen35MtpWeights): Tensor[] {
  const out = [w.preFcNormEmbedding, w.preFcNormHidden, ...weightParts(w.fc), w.norm];
  for (const l of w.layers) out.push(...layerTensors(l));
  return out;
}

/** The layout check: every text tensor with its shape; the experts fused or stored one by one. */
function checkQwen35Layout(ck: Checkpoint, c: Qwen35Config): void {
  checkLayout(ck, qwen35CheckpointLayout(ck, c));
}

/** 1 + w in float32: the zero-centred RMSNorm's effective weight. */
function centred(load: WeightLoader, w: Tensor): Tensor {
  const out = load.adopt(tidy(() => add(cast(w, 'float32'), 1)));
  w.dispose();
  return out;
}

/**
 * Weights stacked by rows when they can be (one dtype; FP8 blocks on the seams), else apart. With quantization at
 * load the parts come in unquantized and the stack is quantized whole: FP8's 128-row blocks need not line up with
 * the seams (the DeltaNet's b and a are one row per value head), and int4's groups run along K within a row, so the
 * stack quantizes as its parts would one by one.
 */
async function stackRows(ws: Weight[], name: string, options: WeightLoadingOptions): Promise<Weight | Weight[]> {
  const { quantize } = options;
  if (quantize && ws.every((w) => !w.scale && !w.int4 && !isFp8(w.data.dtype))) {
    const plain = concatWeights(ws, 0);
    if (quantize === 'int4') {
      const q = await quantizeWeightInt4(plain.data, name, options);
      if (!q) return plain;
      plain.data.dispose();
      return q;
    }
    const q = quantizeTensor(plain.data, { dtype: quantize, granularity: 'block128' });
    plain.data.dispose();
    return { data: q.data, scale: q.scale, recipe: 'block' };
  }
  const aligned = ws.every((w, i) => i === ws.length - 1 || canFuseRows(w, w.data.shape[0]));
  return oneKind(ws) && aligned ? concatWeights(ws, 0) : ws;
}

/**
 * Whether weights can share one tensor: one dtype, scales (or none) of one recipe, one int4 group size. Act-order
 * 4-bit weights stay apart: a stack keeps one column permutation and theirs may differ.
 */
const oneKind = (ws: readonly Weight[]): boolean =>
  ws.every(
    (w) =>
      w.data.dtype === ws[0].data.dtype &&
      !!w.scale === !!ws[0].scale &&
      w.recipe === ws[0].recipe &&
      w.int4?.groupSize === ws[0].int4?.groupSize &&
      !w.int4?.perm,
  );

/**
 * q_proj [Hq * 2D, H], per head [query | gate] -> [all queries; all gates] (its block scales likewise when whole
 * 128-row blocks move, D % 128 == 0).
 */
function regroupQueryGate(w: Weight, heads: number, d: number): Weight {
  const h = w.data.shape[1];
  const regroup = (t: Tensor, rows: number, cols: number) =>
    tidy(() => reshape(contiguous(permute(reshape(t, [heads, 2, rows, cols]), [1, 0, 2, 3])), [2 * heads * rows, cols]));
  if (w.scale && w.recipe === 'block' && d % 128 !== 0)
    throw new CheckpointError(`q_proj: FP8 128-row blocks need head_dim (${d}) to be a multiple of 128 to regroup queries and gates`, {});
  if (w.int4) {
    // Packed 4 bits: data, group scales and zero points are all [rows, ..]; the column order (perm) is untouched.
    const rowsOf = (t: Tensor) => regroup(t, d, t.shape[1]);
    const out: Weight = { data: rowsOf(w.data), scale: rowsOf(w.scale!), int4: { ...w.int4, zero: rowsOf(w.int4.zero) } };
    for (const t of [w.data, w.scale!, w.int4.zero]) t.dispose();
    return out;
  }
  const data = regroup(w.data, d, h);
  if (w.scale && w.recipe !== 'block' && w.recipe !== 'row') throw new CheckpointError('q_proj: a per-tensor FP8 scale cannot be regrouped per head', {});
  const scale =
    w.scale &&
    tidy(() =>
      w.recipe === 'block' ? regroup(w.scale!, d / 128, w.scale!.shape[1]) : reshape(regroup(reshape(w.scale!, [w.scale!.numel, 1]), d, 1), [w.scale!.numel]),
    );
  const out: Weight = { data, scale, recipe: w.recipe };
  w.data.dispose();
  w.scale?.dispose();
  return out;
}

export async function loadQwen35Weights(ck: Checkpoint, c: Qwen35Config, options: WeightLoadingOptions = {}): Promise<Qwen35Weights> {
  checkQwen35Layout(ck, c);
  const withMtp = c.mtpLayers > 0 && ck.has(`${MTP_PREFIX}fc.weight`);
  if (withMtp) checkLayout(ck, mtpLayout(ck, c));
  const load = new WeightLoader(ck, options);
  const p = TEXT_PREFIX;
  try {
    const embedTokens = await load.plain(`${p}embed_tokens.weight`);
    const layers: Qwen35LayerWeights[] = [];
    for (let i = 0; i < c.numHiddenLayers; i++) layers.push(await loadLayer(load, ck, c, `${p}layers.${i}`, c.layerTypes[i], options));
    const norm = centred(load, await load.plain(`${p}norm.weight`, 'float32'));
    const lmHead = c.tieWordEmbeddings ? { data: embedTokens } : await load.linear('lm_head', false);
    const mtp = withMtp ? await loadMtp(load, ck, c, options) : undefined;
    return { embedTokens, layers, norm, lmHead, ...(mtp && { mtp }) };
  } catch (e) {
    load.release();
    throw e;
  }
}

/** The MTP's tensors, its experts stored one by one when its first layer has no fused tensor (as the text model's). */
function mtpLayout(ck: Checkpoint, c: Qwen35Config): WeightSpec[] {
  const oneByOne = c.moe !== undefined && !ck.has(`${MTP_PREFIX}layers.0.mlp.experts.gate_up_proj`);
  return qwen35CheckpointSpecs(c, oneByOne, { mtp: true }).filter((s) => s.name.startsWith(MTP_PREFIX));
}

async function loadMtp(load: WeightLoader, ck: Checkpoint, c: Qwen35Config, options: WeightLoadingOptions): Promise<Qwen35MtpWeights> {
  const p = MTP_PREFIX;
  const preFcNormEmbedding = centred(load, await load.plain(`${p}pre_fc_norm_embedding.weight`, 'float32'));
  const preFcNormHidden = centred(load, await load.plain(`${p}pre_fc_norm_hidden.weight`, 'float32'));
  const fc = await load.linear(`${p}fc`);
  const layers: Qwen35LayerWeights[] = [];
  for (let i = 0; i < c.mtpLayers; i++) layers.push(await loadLayer(load, ck, c, `${p}layers.${i}`, 'full_attention', options));
  const norm = centred(load, await load.plain(`${p}norm.weight`, 'float32'));
  return { preFcNormEmbedding, preFcNormHidden, fc, layers, norm };
}

/** One decoder layer under `l` (the text model's `...layers.N`, or the MTP's `mtp.layers.N`). */
async function loadLayer(
  load: WeightLoader,
  ck: Checkpoint,
  c: Qwen35Config,
  l: string,
  type: Qwen35Config['layerTypes'][number],
  options: WeightLoadingOptions,
): Promise<Qwen35LayerWeights> {
  // A projection that joins a stack: unquantized when quantizing at load (the stack is quantized whole).
  const part = (prefix: string) => load.linear(prefix, !options.quantize);
  const inputNorm = centred(load, await load.plain(`${l}.input_layernorm.weight`, 'float32'));
  let mixer: DeltaNetWeights | GatedAttentionWeights;
  if (type === 'linear_attention') {
    const a = `${l}.linear_attn`;
    const projs = [await part(`${a}.in_proj_qkv`), await part(`${a}.in_proj_z`), await part(`${a}.in_proj_b`), await part(`${a}.in_proj_a`)];
    const stored = await load.plain(`${a}.conv1d.weight`);
    const conv = load.adopt(reshape(stored, [stored.shape[0], stored.shape[2]]));
    stored.dispose();
    // A_log, dt_bias and the gated norm's weight in one float32 buffer: the kernel binds it once.
    const head = [await load.plain(`${a}.A_log`, 'float32'), await load.plain(`${a}.dt_bias`, 'float32'), await load.plain(`${a}.norm.weight`, 'float32')];
    const params = load.adopt(cat(head, 0));
    for (const t of head) t.dispose();
    const hv = c.linear.numValueHeads;
    mixer = {
      kind: 'linear_attention',
      inProj: track(load, await stackRows(projs, `${a}.in_proj_qkv|z|b|a`, options)),
      conv,
      aLog: load.adopt(narrow(params, 0, 0, hv)),
      dtBias: load.adopt(narrow(params, 0, hv, hv)),
      norm: load.adopt(narrow(params, 0, 2 * hv, c.linear.valueHeadDim)),
      outProj: await load.linear(`${a}.out_proj`),
    };
    params.dispose(); // the three views hold its storage
  } else {
    const a = `${l}.self_attn`;
    const q = regroupQueryGate(await part(`${a}.q_proj`), c.numAttentionHeads, c.headDim);
    const k = await part(`${a}.k_proj`);
    const v = await part(`${a}.v_proj`);
    // The gate rows are the second half of the regrouped q: split so k and v sit between queries and gates.
    const half = c.numAttentionHeads * c.headDim;
    const [queries, gates] = splitRows(q, half);
    mixer = {
      kind: 'full_attention',
      qkvg: track(load, await stackRows([queries, k, v, gates], `${a}.q|k|v|gate`, options)),
      o: await load.linear(`${a}.o_proj`),
      qNorm: centred(load, await load.plain(`${a}.q_norm.weight`, 'float32')),
      kNorm: centred(load, await load.plain(`${a}.k_norm.weight`, 'float32')),
    };
  }
  const postNorm = centred(load, await load.plain(`${l}.post_attention_layernorm.weight`, 'float32'));
  const m = `${l}.mlp`;
  const mlp = c.moe ? await loadMoe(load, ck, c, m, options) : await load.denseMlp(`${m}.gate_proj`, `${m}.up_proj`, `${m}.down_proj`);
  return { inputNorm, postNorm, mixer, mlp };
}

function track<W extends Weight | Weight[]>(load: WeightLoader, w: W): W {
  for (const x of parts(w)) for (const t of weightParts(x)) load.adopt(t);
  return w;
}

/**
 * Rows [0, n) and [n, end) of a weight (block scales split on the 128-row block edge, row scales per row; packed
 * 4-bit group scales and zero points per row, each half with its own copy of the column permutation).
 */
function splitRows(w: Weight, n: number): [Weight, Weight] {
  const rows = w.data.shape[0];
  const piece = (t: Tensor, from: number, len: number) => tidy(() => contiguous(narrow(t, 0, from, len)));
  if (w.int4) {
    const q = w.int4;
    const half = (from: number, len: number): Weight => ({
      data: piece(w.data, from, len),
      scale: piece(w.scale!, from, len),
      int4: { groupSize: q.groupSize, zero: piece(q.zero, from, len), ...(q.perm ? { perm: piece(q.perm, 0, q.perm.shape[0]) } : {}) },
    });
    const out: [Weight, Weight] = [half(0, n), half(n, rows - n)];
    for (const t of weightParts(w)) t.dispose();
    return out;
  }
  const scaleAt = w.recipe === 'block' ? n / 128 : n;
  const part = (from: number, len: number, scaleFrom: number, scaleLen: number): Weight => ({
    data: piece(w.data, from, len),
    scale: w.scale && piece(w.scale, scaleFrom, scaleLen),
    recipe: w.recipe,
  });
  const out: [Weight, Weight] = [part(0, n, 0, scaleAt), part(n, rows - n, scaleAt, (w.scale?.shape[0] ?? 0) - scaleAt)];
  w.data.dispose();
  w.scale?.dispose();
  return out;
}

/**
 * Fused 3-D experts as stored, quantized at load on request: FP8 when whole 128-row blocks fit each expert, int4 in
 * the packed layout of experts stored one by one (stackWeights): data [E, N, K/8], scales and zero points
 * [E, N, K/g]. int4 groups run along K within a row, so quantizing the [E * N, K] rows at once is expert by expert.
 */
async function loadFusedExperts(load: WeightLoader, name: string, options: WeightLoadingOptions): Promise<Weight> {
  const { quantize } = options;
  const data = await load.plain(name);
  const [e, n, k] = data.shape;
  if (quantize === 'int4' && !isFp8(data.dtype)) {
    const rows = reshape(data, [e * n, k]);
    const q = await quantizeWeightInt4(rows, name, options);
    rows.dispose();
    if (!q) return { data };
    data.dispose();
    const lift = (t: Tensor) => {
      const out = load.adopt(reshape(t, [e, n, t.shape[1]]));
      t.dispose();
      return out;
    };
    return { data: lift(q.data), scale: lift(q.scale!), int4: { groupSize: q.int4!.groupSize, zero: lift(q.int4!.zero) } };
  }
  if (quantize !== 'float8_e4m3fn' || isFp8(data.dtype) || n % 128 !== 0) return { data };
  const q = tidy(() => quantizeTensor(reshape(data, [e * n, k]), { dtype: quantize, granularity: 'block128' }));
  data.dispose();
  const out: Weight = { data: load.adopt(reshape(q.data, [e, n, k])), scale: load.adopt(reshape(q.scale, [e, n / 128, q.scale.shape[1]])), recipe: 'block' };
  q.data.dispose();
  q.scale.dispose();
  return out;
}

async function loadMoe(load: WeightLoader, ck: Checkpoint, c: Qwen35Config, m: string, options: WeightLoadingOptions): Promise<Qwen35MoeWeights> {
  const moe = c.moe!;
  const router = await load.linear(`${m}.gate`, false);
  let experts: Pick<MoeWeights, 'gateUp' | 'down'>;
  if (ck.has(`${m}.experts.gate_up_proj`)) {
    experts = {
      gateUp: await loadFusedExperts(load, `${m}.experts.gate_up_proj`, options),
      down: await loadFusedExperts(load, `${m}.experts.down_proj`, options),
    };
  } else {
    experts = await load.experts(moe.numExperts, (e) => ({
      gate: `${m}.experts.${e}.gate_proj`,
      up: `${m}.experts.${e}.up_proj`,
      down: `${m}.experts.${e}.down_proj`,
    }));
  }
  const shared = await load.denseMlp(`${m}.shared_expert.gate_proj`, `${m}.shared_expert.up_proj`, `${m}.shared_expert.down_proj`);
  const gate = await load.linear(`${m}.shared_expert_gate`, false);
  const joins =
    moe.sharedExpertIntermediateSize === moe.moeIntermediateSize &&
    oneKind([shared.gateUp, experts.gateUp]) &&
    oneKind([shared.down, experts.down]) &&
    router.data.dtype === gate.data.dtype &&
    !router.scale &&
    !gate.scale;
  if (!joins) return { kind: 'moe', router, ...experts, sharedInStack: false, shared: { mlp: shared, gate } };
  const stack = (stacked: Weight, one: Weight): Weight =>
    track(
      load,
      concatWeights(
        [
          stacked,
          {
            data: unsqueeze(one.data, 0),
            scale: one.scale && unsqueeze(one.scale, 0),
            recipe: one.recipe,
            ...(one.int4 ? { int4: { groupSize: one.int4.groupSize, zero: unsqueeze(one.int4.zero, 0) } } : {}),
          },
        ],
        0,
      ),
    );
  const gateUp = stack(experts.gateUp, shared.gateUp);
  const down = stack(experts.down, shared.down);
  for (const t of [...weightParts(shared.gateUp), ...weightParts(shared.down)]) t.dispose();
  const routerWithGate = track(load, { data: cat([router.data, gate.data], 0) });
  router.data.dispose();
  gate.data.dispose();
  return { kind: 'moe', router: routerWithGate, gateUp, down, sharedInStack: true };
}
