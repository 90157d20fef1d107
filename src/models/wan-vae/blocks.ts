// Forward passes of the AutoencoderKLWan layers (diffusers semantics), built from ops only. Video is processed in
// causal chunks (one latent frame at a time when decoding); a FeatureCache carries each causal convolution's last
// input frames to the next chunk, where the conv kernel reads them in place of its front zero padding.
import type { Tensor } from '../../core/tensor.js';
import { conv3d, type ConvOptions } from '../../ops/conv.js';
import { attention } from '../../ops/nn.js';
import { pad } from '../../ops/pad.js';
import { cat } from '../../ops/shape-ops.js';
import { keep, tidy } from '../../core/scope.js';
import { channelRmsNorm, upsample } from '../../ops/vae-ops.js';
import type {
  AttentionSpec,
  ConvSpec,
  DecoderSpec,
  EncoderSpec,
  MidBlockSpec,
  ResampleSpec,
  ResBlockSpec,
  ResidualStageSpec,
  ShuffleSpec,
  UpStageSpec,
} from './architecture.js';

/** Named weights of a loaded model. */
export type WeightLookup = (name: string) => Tensor;

/** F.normalize(x, dim=1) * sqrt(C) is an RMS norm whose eps only matters for all-zero columns. */
const NORM_EPS = 1e-12;

/** Frames a causal 3x3x3 conv keeps from one chunk for the next (diffusers' CACHE_T). */
const CACHE_FRAMES = 2;

/**
 * Per-layer state carried between chunks: the last input frames of each causal conv, and which temporal upsamplers
 * have seen their first chunk. Owns its tensors; dispose() (or clear()) releases them.
 */
export class FeatureCache {
  private readonly frames = new Map<string, Tensor>();
  private readonly started = new Set<string>();
  /** Frames the cache was handed and does not own (a compiled chunk's inputs): replaced, never disposed. */
  private readonly borrowed = new Set<Tensor>();

  /** A cache over state as plain data (a compiled chunk's arguments), the frames borrowed. */
  static borrowing(state: FeatureState): FeatureCache {
    const cache = new FeatureCache();
    for (const [name, t] of Object.entries(state.frames)) {
      cache.frames.set(name, t);
      cache.borrowed.add(t);
    }
    for (const name of state.started) cache.started.add(name);
    return cache;
  }

  /** The state as plain data: what a compiled chunk takes and returns (the tensors are still the cache's). */
  state(): FeatureState {
    return { frames: Object.fromEntries(this.frames), started: [...this.started] };
  }

  /** Takes over state (a compiled chunk's results, now owned), releasing the frames held before. */
  adopt(state: FeatureState): void {
    const next = new Set(Object.values(state.frames));
    for (const t of this.frames.values()) if (!next.has(t) && !this.borrowed.has(t)) t.dispose();
    this.frames.clear();
    this.borrowed.clear();
    this.started.clear();
    for (const [name, t] of Object.entries(state.frames)) this.frames.set(name, keep(t));
    for (const name of state.started) this.started.add(name);
  }

  get(name: string): Tensor | undefined {
    return this.frames.get(name);
  }

  /** Replaces name's frames, releasing the previous ones (the cache owns t: no tidy scope disposes it). */
  set(name: string, t: Tensor): void {
    const previous = this.frames.get(name);
    if (previous && !this.borrowed.delete(previous)) previous.dispose();
    this.frames.set(name, keep(t));
  }

  /** True the first time name is asked about (a temporal upsampler's first chunk passes through unchanged). */
  firstVisit(name: string): boolean {
    if (this.started.has(name)) return false;
    this.started.add(name);
    return true;
  }

  clear(): void {
    for (const t of this.frames.values()) if (!this.borrowed.has(t)) t.dispose();
    this.borrowed.clear();
    this.frames.clear();
    this.started.clear();
  }

  dispose(): void {
    this.clear();
  }
}

/** A FeatureCache as plain data: each causal conv's last frames by layer name, the temporal upsamplers started. */
export interface FeatureState {
  readonly frames: Readonly<Record<string, Tensor>>;
  readonly started: readonly string[];
}

/** A copy of part of t along dim (the view it is cut from is released, so t's storage is not kept alive). */
export function narrowCopy(t: Tensor, dim: number, start: number, length: number): Tensor {
  return tidy(() => t.narrow(dim, start, length).clone());
}

/** The last `count` frames of cat(prev, x) (a view of x when that is all of x). */
function lastFrames(prev: Tensor | undefined, x: Tensor, count: number): Tensor {
  const t = x.shape[2];
  if (t >= count || !prev) return t > count ? narrowCopy(x, 2, t - count, count) : x.narrow(2, 0, t);
  const need = Math.min(count - t, prev.shape[2]);
  return tidy(() => cat([prev.narrow(2, prev.shape[2] - need, need), x], 2));
}

/** A second handle on t's storage: what a scope returns when its result may be its own input. */
function alias(t: Tensor): Tensor {
  return t.narrow(0, 0, t.shape[0]);
}

export class WanVaeLayers {
  constructor(private readonly w: WeightLookup) {}

  /** A conv of the spec: 2-D kernels run per frame (as [O, C, 1, kh, kw]). */
  conv(x: Tensor, s: ConvSpec, options: ConvOptions = {}): Tensor {
    const weight = this.w(`${s.name}.weight`);
    return tidy(() => conv3d(x, s.kernel.length === 2 ? weight.unsqueeze(2) : weight, this.w(`${s.name}.bias`), options));
  }

  /**
   * WanCausalConv3d over one chunk: all kt - 1 temporal zeros in front, spatial padding (k - 1) / 2 each side. The
   * previous chunk's last frames stand in for the front zeros inside the kernel (no cat, no pad pass).
   */
  causalConv(x: Tensor, s: ConvSpec, cache: FeatureCache): Tensor {
    const [kt, kh, kw] = s.kernel;
    const padding: [number, number][] = [
      [kt - 1, 0],
      [(kh - 1) / 2, (kh - 1) / 2],
      [(kw - 1) / 2, (kw - 1) / 2],
    ];
    if (kt === 1) return this.conv(x, s, { padding });
    const prev = cache.get(s.name);
    const y = this.conv(x, s, { padding, previous: prev });
    cache.set(s.name, lastFrames(prev, x, CACHE_FRAMES));
    return y;
  }

  normSilu(x: Tensor, gammaName: string): Tensor {
    return tidy(() => channelRmsNorm(x, this.w(gammaName).reshape([x.shape[1]]), NORM_EPS, { activation: 'silu' }));
  }

  resBlock(x: Tensor, r: ResBlockSpec, cache: FeatureCache): Tensor {
    return tidy(() => {
      const h = r.shortcut ? this.conv(x, r.shortcut) : x;
      const a = this.causalConv(this.normSilu(x, r.norm1), r.conv1, cache);
      const b = this.causalConv(this.normSilu(a, r.norm2), r.conv2, cache);
      return b.add(h);
    });
  }

  /** One head of attention over each frame's H*W positions, with a residual. */
  attention(x: Tensor, a: AttentionSpec): Tensor {
    const [n, c, t, h, wd] = x.shape;
    return tidy(() => {
      const normed = channelRmsNorm(x, this.w(a.norm).reshape([c]), NORM_EPS);
      const qkv = this.conv(normed, a.toQkv);
      const frames: Tensor[] = [];
      for (let b = 0; b < n; b++) {
        for (let f = 0; f < t; f++) {
          // [3C, H*W] -> q, k, v as [H*W, 1, C] views.
          const flat = qkv
            .select(0, b)
            .select(1, f)
            .reshape([3 * c, h * wd]);
          const part = (i: number) =>
            flat
              .narrow(0, i * c, c)
              .transpose(0, 1)
              .unsqueeze(1);
          const o = attention(part(0), part(1), part(2));
          frames.push(
            o
              .reshape([h * wd, c])
              .transpose(0, 1)
              .reshape([1, c, 1, h, wd]),
          );
        }
      }
      const joined = frames.length === 1 ? frames[0] : cat(frames, 0);
      const out = n * t === 1 ? joined : joined.reshape([n, t, c, h, wd]).permute([0, 2, 1, 3, 4]);
      return this.conv(out, a.proj).add(x);
    });
  }

  mid(x: Tensor, m: MidBlockSpec, cache: FeatureCache): Tensor {
    return tidy(() => this.resBlock(this.attention(this.resBlock(x, m.resnets[0], cache), m.attention), m.resnets[1], cache));
  }

  resample(x: Tensor, r: ResampleSpec, cache: FeatureCache): Tensor {
    return tidy(() => {
      let y = x;
      if (r.mode === 'upsample3d' && r.timeConv && !cache.firstVisit(r.timeConv.name)) {
        // The time conv doubles the channels into (2, C); the two halves become consecutive frames.
        const [n, c, t, h, wd] = x.shape;
        const doubled = this.causalConv(x, r.timeConv, cache);
        y = doubled
          .reshape([n, 2, c, t, h, wd])
          .permute([0, 2, 3, 1, 4, 5])
          .reshape([n, c, 2 * t, h, wd]);
      }
      if (r.mode.startsWith('up')) {
        return this.conv(upsample(y, { scale: 2, mode: 'nearest' }), r.conv, {
          padding: [
            [0, 0],
            [1, 1],
            [1, 1],
          ],
        });
      }
      // ZeroPad2d((0, 1, 0, 1)) then a stride-2 3x3 conv: the pad is the conv's own [0, 1] padding.
      const down = this.conv(y, r.conv, {
        stride: [1, 2, 2],
        padding: [
          [0, 0],
          [0, 1],
          [0, 1],
        ],
      });
      if (r.mode !== 'downsample3d' || !r.timeConv) return down;
      const name = r.timeConv.name;
      const prev = cache.get(name);
      const t = down.shape[2];
      // The first chunk passes through; later ones convolve with stride 2 over (previous chunk's last frame, chunk).
      const out = prev
        ? this.conv(down, r.timeConv, {
            stride: [2, 1, 1],
            padding: [
              [1, 0],
              [0, 0],
              [0, 0],
            ],
            previous: prev,
          })
        : down;
      cache.set(name, t > 1 ? narrowCopy(down, 2, t - 1, 1) : down.narrow(2, 0, 1));
      return out;
    });
  }

  /** AvgDown3D: (time, space) blocks folded into channels, then the mean of each group of channels. */
  avgDown(x: Tensor, s: ShuffleSpec): Tensor {
    const { factorT: ft, factorS: fs } = s;
    return tidy(() => {
      const padT = (ft - (x.shape[2] % ft)) % ft;
      const xp = padT > 0 ? pad(x, [0, 0, 0, 0, padT, 0]) : x;
      const [n, c, t, h, wd] = xp.shape;
      const factor = ft * fs * fs;
      const group = (c * factor) / s.cout;
      const folded = xp
        .reshape([n, c, t / ft, ft, h / fs, fs, wd / fs, fs])
        .permute([0, 1, 3, 5, 7, 2, 4, 6])
        .reshape([n, s.cout, group, t / ft, h / fs, wd / fs]);
      return folded.mean(2);
    });
  }

  /** DupUp3D: channels repeated, then unfolded into (time, space) blocks; the first chunk drops its leading frames. */
  dupUp(x: Tensor, s: ShuffleSpec, firstChunk: boolean): Tensor {
    const { factorT: ft, factorS: fs } = s;
    const [n, c, t, h, wd] = x.shape;
    const repeats = (s.cout * ft * fs * fs) / c;
    return tidy(() => {
      const repeated = x.unsqueeze(2).expand([n, c, repeats, t, h, wd]).reshape([n, s.cout, ft, fs, fs, t, h, wd]);
      const out = repeated.permute([0, 1, 5, 2, 6, 3, 7, 4]).reshape([n, s.cout, t * ft, h * fs, wd * fs]);
      return firstChunk && ft > 1 ? out.narrow(2, ft - 1, t * ft - (ft - 1)) : out.narrow(2, 0, t * ft);
    });
  }

  residualStage(x: Tensor, st: ResidualStageSpec, cache: FeatureCache, firstChunk: boolean): Tensor {
    return tidy(() => {
      let y = x;
      for (const r of st.resnets) y = this.resBlock(y, r, cache);
      if (st.resample) y = this.resample(y, st.resample, cache);
      if (!st.shortcut) return alias(y);
      const short = st.kind === 'residual-down' ? this.avgDown(x, st.shortcut) : this.dupUp(x, st.shortcut, firstChunk);
      return y.add(short);
    });
  }

  upStage(x: Tensor, st: UpStageSpec, cache: FeatureCache): Tensor {
    return tidy(() => {
      let y = x;
      for (const r of st.resnets) y = this.resBlock(y, r, cache);
      return st.resample ? this.resample(y, st.resample, cache) : alias(y);
    });
  }

  /** One chunk of frames through the encoder (moments: 2 x zDim channels). */
  encoder(x: Tensor, e: EncoderSpec, cache: FeatureCache): Tensor {
    return tidy(() => {
      let y = this.causalConv(x, e.convIn, cache);
      for (const l of e.layers) {
        if (l.kind === 'res') y = this.resBlock(y, l, cache);
        else if (l.kind === 'attn') y = this.attention(y, l);
        else if (l.kind === 'resample') y = this.resample(y, l, cache);
        else y = this.residualStage(y, l, cache, false);
      }
      y = this.mid(y, e.mid, cache);
      return this.causalConv(this.normSilu(y, e.normOut), e.convOut, cache);
    });
  }

  /** One latent chunk through the decoder; the first chunk of a video yields 1 frame per latent frame, later ones 4. */
  decoder(z: Tensor, d: DecoderSpec, cache: FeatureCache, firstChunk: boolean): Tensor {
    return tidy(() => {
      let y = this.causalConv(z, d.convIn, cache);
      y = this.mid(y, d.mid, cache);
      for (const st of d.stages) y = st.kind === 'up' ? this.upStage(y, st, cache) : this.residualStage(y, st, cache, firstChunk);
      return this.causalConv(this.normSilu(y, d.normOut), d.convOut, cache);
    });
  }
}
