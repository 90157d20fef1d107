// The AutoencoderKLWan module tree as data, built from the config exactly as diffusers builds it (module names are
// the safetensors names). The weight list, the random-weight generator and the forward pass all walk this tree, so
// they cannot disagree about a name or a shape.
import type { WanVaeConfig } from './config.js';

/** A convolution with bias: weight [cout, cin, ...kernel]; 2-D convs (the resample layers) have a 2-long kernel. */
export interface ConvSpec {
  readonly name: string;
  readonly cin: number;
  readonly cout: number;
  readonly kernel: readonly number[];
}

/** WanResidualBlock: RMS norm, SiLU, causal 3x3x3 conv, twice, plus a 1x1x1 shortcut when channels change. */
export interface ResBlockSpec {
  readonly kind: 'res';
  readonly name: string;
  readonly cin: number;
  readonly cout: number;
  readonly norm1: string;
  readonly conv1: ConvSpec;
  readonly norm2: string;
  readonly conv2: ConvSpec;
  readonly shortcut?: ConvSpec;
}

/** WanAttentionBlock: one head over the H*W positions of each frame. */
export interface AttentionSpec {
  readonly kind: 'attn';
  readonly name: string;
  readonly dim: number;
  readonly norm: string;
  readonly toQkv: ConvSpec;
  readonly proj: ConvSpec;
}

export type ResampleMode = 'upsample2d' | 'upsample3d' | 'downsample2d' | 'downsample3d';

/** WanResample: 2x spatial up/down (a 2-D conv per frame), and for the 3d modes a causal time conv. */
export interface ResampleSpec {
  readonly kind: 'resample';
  readonly name: string;
  readonly mode: ResampleMode;
  readonly conv: ConvSpec;
  readonly timeConv?: ConvSpec;
}

/** Wan2.2's parameter-free shortcuts: AvgDown3D (space/time to channels, group mean) and DupUp3D (the inverse). */
export interface ShuffleSpec {
  readonly cin: number;
  readonly cout: number;
  readonly factorT: number;
  readonly factorS: number;
}

/** Wan2.2's WanResidualDownBlock / WanResidualUpBlock: resnets, an optional resample, and a shuffle shortcut. */
export interface ResidualStageSpec {
  readonly kind: 'residual-down' | 'residual-up';
  readonly name: string;
  readonly resnets: readonly ResBlockSpec[];
  readonly resample?: ResampleSpec;
  readonly shortcut?: ShuffleSpec;
}

/** Wan2.1's WanUpBlock: resnets then an optional resample. */
export interface UpStageSpec {
  readonly kind: 'up';
  readonly name: string;
  readonly resnets: readonly ResBlockSpec[];
  readonly resample?: ResampleSpec;
}

export interface MidBlockSpec {
  readonly resnets: readonly [ResBlockSpec, ResBlockSpec];
  readonly attention: AttentionSpec;
}

export type EncoderLayer = ResBlockSpec | AttentionSpec | ResampleSpec | ResidualStageSpec;
export type DecoderStage = UpStageSpec | ResidualStageSpec;

export interface EncoderSpec {
  readonly convIn: ConvSpec;
  readonly layers: readonly EncoderLayer[];
  readonly mid: MidBlockSpec;
  readonly normOut: string;
  readonly convOut: ConvSpec;
}

export interface DecoderSpec {
  readonly convIn: ConvSpec;
  readonly mid: MidBlockSpec;
  readonly stages: readonly DecoderStage[];
  readonly normOut: string;
  readonly convOut: ConvSpec;
}

export interface WanVaeSpec {
  readonly encoder: EncoderSpec;
  readonly decoder: DecoderSpec;
  readonly quantConv: ConvSpec;
  readonly postQuantConv: ConvSpec;
}

export interface Channels {
  /** Encoder input channels (image channels x patchSize^2). */
  readonly encoderIn: number;
  /** Decoder output channels (image channels x patchSize^2). */
  readonly decoderOut: number;
}

const conv = (name: string, cin: number, cout: number, kernel: readonly number[]): ConvSpec => ({ name, cin, cout, kernel });
const CAUSAL3 = [3, 3, 3];
const POINT3 = [1, 1, 1];

function resBlock(name: string, cin: number, cout: number): ResBlockSpec {
  return {
    kind: 'res',
    name,
    cin,
    cout,
    norm1: `${name}.norm1.gamma`,
    conv1: conv(`${name}.conv1`, cin, cout, CAUSAL3),
    norm2: `${name}.norm2.gamma`,
    conv2: conv(`${name}.conv2`, cout, cout, CAUSAL3),
    shortcut: cin !== cout ? conv(`${name}.conv_shortcut`, cin, cout, POINT3) : undefined,
  };
}

function attention(name: string, dim: number): AttentionSpec {
  return {
    kind: 'attn',
    name,
    dim,
    norm: `${name}.norm.gamma`,
    toQkv: conv(`${name}.to_qkv`, dim, 3 * dim, [1, 1]),
    proj: conv(`${name}.proj`, dim, dim, [1, 1]),
  };
}

function resample(name: string, dim: number, mode: ResampleMode, upsampleOut = Math.floor(dim / 2)): ResampleSpec {
  const up = mode.startsWith('up');
  return {
    kind: 'resample',
    name,
    mode,
    conv: conv(`${name}.resample.1`, dim, up ? upsampleOut : dim, [3, 3]),
    timeConv:
      mode === 'upsample3d'
        ? conv(`${name}.time_conv`, dim, 2 * dim, [3, 1, 1])
        : mode === 'downsample3d'
          ? conv(`${name}.time_conv`, dim, dim, [3, 1, 1])
          : undefined,
  };
}

function midBlock(name: string, dim: number): MidBlockSpec {
  return { resnets: [resBlock(`${name}.resnets.0`, dim, dim), resBlock(`${name}.resnets.1`, dim, dim)], attention: attention(`${name}.attentions.0`, dim) };
}

function encoder(c: WanVaeConfig, inChannels: number): EncoderSpec {
  const dims = [1, ...c.dimMult].map((u) => c.baseDim * u);
  const last = c.dimMult.length - 1;
  const layers: EncoderLayer[] = [];
  let scale = 1;
  for (let i = 0; i < c.dimMult.length; i++) {
    let cin = dims[i];
    const cout = dims[i + 1];
    if (c.isResidual) {
      const name = `encoder.down_blocks.${layers.length}`;
      const temporal = i !== last && c.temperalDownsample[i];
      const resnets: ResBlockSpec[] = [];
      for (let r = 0; r < c.numResBlocks; r++, cin = cout) resnets.push(resBlock(`${name}.resnets.${r}`, cin, cout));
      layers.push({
        kind: 'residual-down',
        name,
        resnets,
        resample: i !== last ? resample(`${name}.downsampler`, cout, temporal ? 'downsample3d' : 'downsample2d') : undefined,
        shortcut: { cin: dims[i], cout, factorT: temporal ? 2 : 1, factorS: i !== last ? 2 : 1 },
      });
      continue;
    }
    for (let r = 0; r < c.numResBlocks; r++, cin = cout) {
      layers.push(resBlock(`encoder.down_blocks.${layers.length}`, cin, cout));
      if (c.attnScales.includes(scale)) layers.push(attention(`encoder.down_blocks.${layers.length}`, cout));
    }
    if (i !== last) {
      layers.push(resample(`encoder.down_blocks.${layers.length}`, cout, c.temperalDownsample[i] ? 'downsample3d' : 'downsample2d'));
      scale /= 2;
    }
  }
  const top = dims[dims.length - 1];
  return {
    convIn: conv('encoder.conv_in', inChannels, dims[0], CAUSAL3),
    layers,
    mid: midBlock('encoder.mid_block', top),
    normOut: 'encoder.norm_out.gamma',
    convOut: conv('encoder.conv_out', top, 2 * c.zDim, CAUSAL3),
  };
}

function decoder(c: WanVaeConfig, outChannels: number): DecoderSpec {
  const mult = c.dimMult;
  const dims = [mult[mult.length - 1], ...[...mult].reverse()].map((u) => c.decoderBaseDim * u);
  const temporalUp = [...c.temperalDownsample].reverse();
  const stages: DecoderStage[] = [];
  for (let i = 0; i < mult.length; i++) {
    const name = `decoder.up_blocks.${i}`;
    // Wan2.1's upsampling halves the channels, so every stage after the first starts from half its nominal width.
    let cin = i > 0 && !c.isResidual ? Math.floor(dims[i] / 2) : dims[i];
    const cout = dims[i + 1];
    const upFlag = i !== mult.length - 1;
    const mode: ResampleMode | undefined = upFlag ? (temporalUp[i] ? 'upsample3d' : 'upsample2d') : undefined;
    const resnets: ResBlockSpec[] = [];
    for (let r = 0; r < c.numResBlocks + 1; r++, cin = cout) resnets.push(resBlock(`${name}.resnets.${r}`, cin, cout));
    if (c.isResidual) {
      stages.push({
        kind: 'residual-up',
        name,
        resnets,
        resample: mode ? resample(`${name}.upsampler`, cout, mode, cout) : undefined,
        shortcut: upFlag ? { cin: dims[i], cout, factorT: temporalUp[i] ? 2 : 1, factorS: 2 } : undefined,
      });
    } else {
      stages.push({ kind: 'up', name, resnets, resample: mode ? resample(`${name}.upsamplers.0`, cout, mode) : undefined });
    }
  }
  const outDim = dims[dims.length - 1];
  return {
    convIn: conv('decoder.conv_in', c.zDim, dims[0], CAUSAL3),
    mid: midBlock('decoder.mid_block', dims[0]),
    stages,
    normOut: 'decoder.norm_out.gamma',
    convOut: conv('decoder.conv_out', outDim, outChannels, CAUSAL3),
  };
}

/** Image channels x patch area, as the hub's Wan2.2 config counts in_channels (12 for RGB with patch 2). */
export function defaultChannels(c: WanVaeConfig): Channels {
  return { encoderIn: c.inChannels, decoderOut: c.outChannels };
}

export function wanVaeSpec(c: WanVaeConfig, channels: Channels = defaultChannels(c)): WanVaeSpec {
  return {
    encoder: encoder(c, channels.encoderIn),
    decoder: decoder(c, channels.decoderOut),
    quantConv: conv('quant_conv', 2 * c.zDim, 2 * c.zDim, POINT3),
    postQuantConv: conv('post_quant_conv', c.zDim, c.zDim, POINT3),
  };
}

export type WeightRole = 'conv' | 'bias' | 'gamma';

export interface VaeWeightSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly role: WeightRole;
  /** For conv weights: inputs summed per output (cin x kernel volume), which sets a sane init scale. */
  readonly fanIn?: number;
}

function convWeights(s: ConvSpec): VaeWeightSpec[] {
  const fanIn = s.cin * s.kernel.reduce((a, b) => a * b, 1);
  return [
    { name: `${s.name}.weight`, shape: [s.cout, s.cin, ...s.kernel], role: 'conv', fanIn },
    { name: `${s.name}.bias`, shape: [s.cout], role: 'bias' },
  ];
}

/** Gammas: [C, 1, 1, 1] for the 3-D RMS norms, [C, 1, 1] for attention's per-frame one (diffusers' shapes). */
const gamma = (name: string, dim: number, images: boolean): VaeWeightSpec => ({ name, shape: images ? [dim, 1, 1] : [dim, 1, 1, 1], role: 'gamma' });

function resWeights(r: ResBlockSpec): VaeWeightSpec[] {
  return [
    gamma(r.norm1, r.cin, false),
    ...convWeights(r.conv1),
    gamma(r.norm2, r.cout, false),
    ...convWeights(r.conv2),
    ...(r.shortcut ? convWeights(r.shortcut) : []),
  ];
}

function layerWeights(l: EncoderLayer | DecoderStage | AttentionSpec): VaeWeightSpec[] {
  switch (l.kind) {
    case 'res':
      return resWeights(l);
    case 'attn':
      return [gamma(l.norm, l.dim, true), ...convWeights(l.toQkv), ...convWeights(l.proj)];
    case 'resample':
      return [...convWeights(l.conv), ...(l.timeConv ? convWeights(l.timeConv) : [])];
    default:
      return [...l.resnets.flatMap(resWeights), ...(l.resample ? layerWeights(l.resample) : [])];
  }
}

const midWeights = (m: MidBlockSpec) => [...resWeights(m.resnets[0]), ...layerWeights(m.attention), ...resWeights(m.resnets[1])];

/** Every tensor of the checkpoint, in a stable order. */
export function wanVaeWeightSpecs(spec: WanVaeSpec): VaeWeightSpec[] {
  const e = spec.encoder;
  const d = spec.decoder;
  return [
    ...convWeights(e.convIn),
    ...e.layers.flatMap(layerWeights),
    ...midWeights(e.mid),
    gamma(e.normOut, e.convOut.cin, false),
    ...convWeights(e.convOut),
    ...convWeights(spec.quantConv),
    ...convWeights(spec.postQuantConv),
    ...convWeights(d.convIn),
    ...midWeights(d.mid),
    ...d.stages.flatMap(layerWeights),
    gamma(d.normOut, d.convOut.cin, false),
    ...convWeights(d.convOut),
  ];
}
