// Whisper (transformers' WhisperForConditionalGeneration) built from ops: the encoder (conv1 + GELU, conv2 stride 2
// + GELU, stored positions, pre-LN self-attention blocks, a final LayerNorm), and the decoder (token + learned
// positions, pre-LN blocks of causal self-attention, cross-attention over the encoder output and a GELU MLP, a final
// LayerNorm, proj_out tied to embed_tokens). For generation the decoder keeps a KV cache per layer: self-attention
// rows grow with each token (written in place by attentionInputs, whose RoPE is the identity here: cos 1, sin 0),
// and the cross-attention's K / V are projected once per audio window into fixed buffers, so one decode step is the
// same dispatches at every position and every window and can be captured and replayed (session.ts).
import type { DeviceName, EpilogueUnary } from '../../runtime/backend.js';
import { ShapeError } from '../../core/errors.js';
import type { DType } from '../../core/dtype.js';
import { keep, tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { attentionInputs } from '../../ops/attention-inputs.js';
import { conv1d } from '../../ops/conv.js';
import { cast } from '../../ops/convert.js';
import { ones, tensor, zeros } from '../../ops/creation.js';
import { add, gelu } from '../../ops/elementwise.js';
import { indexSelect } from '../../ops/index-select.js';
import { linear } from '../../ops/matmul.js';
import { attention } from '../../ops/nn.js';
import { contiguous, copyInto, narrow, permute, reshape, transpose, unsqueeze } from '../../ops/shape-ops.js';
import { groupNorm } from '../../ops/vae-ops.js';
import { decoderHeadDim, encoderHeadDim, inputFrames, type WhisperConfig } from './config.js';
import { whisperWeightTensors, type LayerNormWeights, type LinearWeights, type WhisperWeights } from './weights.js';

/** nn.LayerNorm's default eps (Whisper's norms take no eps from the config). */
const LAYER_NORM_EPS = 1e-5;

/** LayerNorm over the last dim of x [S, d]: group norm with one group over [N = S, C = d] is exactly that. */
function layerNorm(x: Tensor, w: LayerNormWeights): Tensor {
  return groupNorm(x, 1, w.weight, w.bias, LAYER_NORM_EPS);
}

function project(x: Tensor, l: LinearWeights, residual?: Tensor): Tensor {
  return linear(x, l.weight, l.bias, { ...l.quant, ...(residual ? { residual } : {}) });
}

/** transformers' ACT2FN name as the matmul epilogue's activation (one dispatch for fc1 and its activation). */
const EPILOGUE_ACTIVATION: Record<WhisperConfig['activationFunction'], EpilogueUnary> = {
  gelu: 'gelu',
  gelu_new: 'gelu_tanh',
  gelu_pytorch_tanh: 'gelu_tanh',
  relu: 'relu',
  silu: 'silu',
  swish: 'silu',
};

/** fc2(act(fc1(x))) + residual: the activation in fc1's epilogue, the residual in fc2's. */
function feedForward(x: Tensor, fc1: LinearWeights, fc2: LinearWeights, fn: WhisperConfig['activationFunction'], residual: Tensor): Tensor {
  const h = linear(x, fc1.weight, fc1.bias, { ...fc1.quant, activation: EPILOGUE_ACTIVATION[fn] });
  return project(h, fc2, residual);
}

/** The decoder's caches: self-attention rows [maxTarget, H, Dh] and cross-attention K / V [maxSource, H, Dh]. */
export class WhisperCache {
  readonly selfKeys: Tensor[];
  readonly selfValues: Tensor[];
  readonly crossKeys: Tensor[];
  readonly crossValues: Tensor[];
  /** Decoder positions written. */
  length = 0;
  /** Whether the cross-attention buffers hold an audio window's K / V. */
  hasAudio = false;

  constructor(
    config: WhisperConfig,
    readonly capacity: number,
    dtype: DType,
    device: DeviceName,
  ) {
    const h = config.decoderAttentionHeads;
    const dh = decoderHeadDim(config);
    const make = (rows: number) => Array.from({ length: config.decoderLayers }, () => keep(zeros([rows, h, dh], { dtype, device })));
    this.selfKeys = make(capacity);
    this.selfValues = make(capacity);
    this.crossKeys = make(config.maxSourcePositions);
    this.crossValues = make(config.maxSourcePositions);
  }

  dispose(): void {
    for (const t of [...this.selfKeys, ...this.selfValues, ...this.crossKeys, ...this.crossValues]) t.dispose();
  }
}

export interface WhisperModelOptions {
  /** Decoder positions the cache holds (default: max_target_positions). */
  maxSequence?: number;
  /** Cache dtype (default float32). */
  kvDtype?: DType;
}

export interface DecodeOptions {
  /** Cache row of the first token (default cache.length); the cache's length becomes start + S. */
  start?: number;
  /**
   * int32 [1] device scalar holding the row of a single token: the step reads its position on the device and attends
   * over the whole cache (the causal mask hides rows not yet written), so it can be captured. The caller advances
   * cache.length.
   */
  position?: Tensor;
  /** Logits of these rows only (default: every row). */
  rows?: readonly number[];
}

export class WhisperModel {
  readonly device: DeviceName;
  readonly maxSequence: number;
  /** Identity RoPE tables [maxSequence, 1]: attentionInputs then only writes k / v rows into the cache. */
  private readonly identityRope: { cos: Tensor; sin: Tensor };

  constructor(
    readonly config: WhisperConfig,
    readonly weights: WhisperWeights,
    readonly options: WhisperModelOptions = {},
  ) {
    this.device = weights.embedTokens.device;
    this.maxSequence = options.maxSequence ?? config.maxTargetPositions;
    if (this.maxSequence > config.maxTargetPositions)
      throw new RangeError(`maxSequence ${this.maxSequence} exceeds max_target_positions (${config.maxTargetPositions})`);
    this.identityRope = {
      cos: keep(ones([this.maxSequence, 1], { device: this.device })),
      sin: keep(zeros([this.maxSequence, 1], { device: this.device })),
    };
  }

  /** Mel frames the encoder takes (3000 for every release: 30 s). */
  get inputFrames(): number {
    return inputFrames(this.config);
  }

  newCache(): WhisperCache {
    return new WhisperCache(this.config, this.maxSequence, this.options.kvDtype ?? 'float32', this.device);
  }

  /** The encoder: log-mel features [nMels, frames] or [1, nMels, frames] -> hidden states float32 [maxSource, d]. */
  encode(inputFeatures: Tensor): Tensor {
    const c = this.config;
    const frames = inputFrames(c);
    const shape = inputFeatures.ndim === 2 ? [1, ...inputFeatures.shape] : inputFeatures.shape;
    if (shape.length !== 3 || shape[0] !== 1 || shape[1] !== c.numMelBins || shape[2] !== frames) {
      throw new ShapeError(
        `Whisper expects input features [1, ${c.numMelBins}, ${frames}] (num_mel_bins, 2 x max_source_positions), got ${inputFeatures.describe()}`,
      );
    }
    return tidy(() => reshape(this.encodeBatch(reshape(inputFeatures, shape)), [c.maxSourcePositions, c.dModel]));
  }

  /**
   * The encoder over several windows in one forward: features [B, nMels, frames] -> float32 [B, maxSource, d], each
   * window's rows those encode() gives it alone. Every op runs once over all B * 1500 rows (B times fewer dispatches,
   * larger GEMMs), the self-attention included: the rows are held position-major ([S, B, d]), so a layer's q, k and v
   * are [S, B * heads, dh] as they are, and the windows are just more heads of one attention dispatch.
   */
  encodeWindows(features: Tensor): Tensor {
    const c = this.config;
    const frames = inputFrames(c);
    if (features.ndim !== 3 || features.shape[0] < 1 || features.shape[1] !== c.numMelBins || features.shape[2] !== frames) {
      throw new ShapeError(`encodeWindows expects input features [B, ${c.numMelBins}, ${frames}], got ${features.describe()}`);
    }
    return this.encodeBatch(features);
  }

  private encodeBatch(features: Tensor): Tensor {
    const c = this.config;
    const w = this.weights;
    const heads = c.encoderAttentionHeads;
    const dh = encoderHeadDim(c);
    const s = c.maxSourcePositions;
    const b = features.shape[0];
    const rows = b * s;
    return tidy(() => {
      const x = features.dtype === 'float32' ? features : cast(features, 'float32');
      let h = gelu(conv1d(x, w.conv1.weight, w.conv1.bias, { padding: 1 }));
      h = gelu(conv1d(h, w.conv2.weight, w.conv2.bias, { stride: 2, padding: 1 }));
      // Row p * B + i is position p of window i (for B = 1 the usual order): every op but attention is row by row,
      // and attention over [S, B * heads, dh] keeps each window's heads to its own rows.
      h = reshape(add(permute(h, [2, 0, 1]), unsqueeze(w.encoderPositions, 1)), [rows, c.dModel]);
      for (const l of w.encoderLayers) {
        const y = layerNorm(h, l.selfAttnLayerNorm);
        const q = reshape(project(y, l.q), [s, b * heads, dh]);
        const k = reshape(project(y, l.k), [s, b * heads, dh]);
        const v = reshape(project(y, l.v), [s, b * heads, dh]);
        h = project(reshape(attention(q, k, v), [rows, c.dModel]), l.out, h);
        h = feedForward(layerNorm(h, l.finalLayerNorm), l.fc1, l.fc2, c.activationFunction, h);
      }
      const out = reshape(layerNorm(h, w.encoderLayerNorm), [s, b, c.dModel]);
      return b === 1 ? reshape(out, [1, s, c.dModel]) : contiguous(transpose(out, 0, 1));
    });
  }

  /** Projects the encoder output [maxSource, d] into every layer's cross-attention K / V (once per audio window). */
  setAudio(cache: WhisperCache, encoderOutput: Tensor): void {
    const c = this.config;
    const s = c.maxSourcePositions;
    if (encoderOutput.shape.join() !== [s, c.dModel].join())
      throw new ShapeError(`setAudio: the encoder output must be [${s}, ${c.dModel}], got ${encoderOutput.describe()}`);
    const shape = [s, c.decoderAttentionHeads, decoderHeadDim(c)];
    tidy(() => {
      this.weights.decoderLayers.forEach((l, i) => {
        const kv = project(encoderOutput, l.crossKv);
        copyInto(cache.crossKeys[i], reshape(contiguous(narrow(kv, 1, 0, c.dModel)), shape));
        copyInto(cache.crossValues[i], reshape(contiguous(narrow(kv, 1, c.dModel, c.dModel)), shape));
      });
    });
    cache.hasAudio = true;
  }

  /** The decoder over ids (int32 [S]) at the cache's position: logits float32 [S or rows.length, vocab]. */
  decode(ids: Tensor, cache: WhisperCache, options: DecodeOptions = {}): Tensor {
    const c = this.config;
    if (!cache.hasAudio) throw new RangeError('decode: the cache has no audio yet (call setAudio with an encoder output first)');
    if (ids.ndim !== 1 || ids.dtype !== 'int32') throw new ShapeError(`decode: ids must be int32 [S], got ${ids.describe()}`);
    const n = ids.shape[0];
    const position = options.position;
    if (position && n !== 1) throw new ShapeError(`decode: a device position takes one token, got ${n}`);
    const start = options.start ?? cache.length;
    if (!position && start + n > cache.capacity)
      throw new RangeError(`decode: ${start + n} positions exceed the cache's ${cache.capacity} (max_target_positions ${c.maxTargetPositions})`);
    const w = this.weights;
    const heads = c.decoderAttentionHeads;
    const dh = decoderHeadDim(c);
    const logits = tidy(() => {
      const token = indexSelect(w.embedTokens, 0, ids);
      const pos = position ? indexSelect(w.decoderPositions, 0, position) : narrow(w.decoderPositions, 0, start, n);
      let x = add(token.dtype === 'float32' ? token : cast(token, 'float32'), pos);
      w.decoderLayers.forEach((l, i) => {
        const keys = cache.selfKeys[i];
        const values = cache.selfValues[i];
        const qkv = project(layerNorm(x, l.selfAttnLayerNorm), l.qkv);
        const q = attentionInputs(qkv, { heads, kvHeads: heads, headDim: dh, ...this.identityRope, keys, values, position: position ?? start });
        const attn = position
          ? attention(q, keys, values, { causal: true, queryOffset: position })
          : attention(q, narrow(keys, 0, 0, start + n), narrow(values, 0, 0, start + n), { causal: true, queryOffset: start });
        x = project(reshape(attn, [n, c.dModel]), l.selfOut, x);
        const cq = reshape(project(layerNorm(x, l.encoderAttnLayerNorm), l.crossQ), [n, heads, dh]);
        x = project(reshape(attention(cq, cache.crossKeys[i], cache.crossValues[i]), [n, c.dModel]), l.crossOut, x);
        x = feedForward(layerNorm(x, l.finalLayerNorm), l.fc1, l.fc2, c.activationFunction, x);
      });
      if (options.rows) x = indexSelect(x, 0, tensor([...options.rows], { dtype: 'int32', device: this.device }));
      return linear(layerNorm(x, w.decoderLayerNorm), w.projOut);
    });
    if (!position) cache.length = start + n;
    return logits;
  }

  /**
   * transformers' WhisperForConditionalGeneration(input_features, decoder_input_ids).logits: the encoder, then the
   * decoder over every id (a fresh cache), float32 [S, vocab].
   */
  forward(inputFeatures: Tensor, decoderInputIds: Tensor | readonly number[]): Tensor {
    const cache = this.newCache();
    const ids = Array.isArray(decoderInputIds) ? tensor([...decoderInputIds], { dtype: 'int32', device: this.device }) : (decoderInputIds as Tensor);
    try {
      const encoded = this.encode(inputFeatures);
      this.setAudio(cache, encoded);
      encoded.dispose();
      return this.decode(ids.ndim === 2 ? reshape(ids, [ids.shape[1]]) : ids, cache, { start: 0 });
    } finally {
      cache.dispose();
      if (ids !== decoderInputIds) ids.dispose();
    }
  }

  weightTensors(): Tensor[] {
    return whisperWeightTensors(this.weights);
  }

  dispose(): void {
    for (const t of this.weightTensors()) if (!t.isDisposed) t.dispose();
    this.identityRope.cos.dispose();
    this.identityRope.sin.dispose();
  }
}
