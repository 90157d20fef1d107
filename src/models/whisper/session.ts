// One Whisper decoding on the device, the decode step captured: the encoder output of a window is projected into the
// cross-attention buffers once (setAudio), a prompt runs eagerly through the cache (prefill), and each later token is
// one step whose token id and position are device scalars, so on WebGPU the first step is recorded and every later
// one (in this window and the next: the buffers stay the same) is replayed with no host work beyond encoding. The
// logits come back to the host each step, where openai/whisper's logit filters run (transcribe/decoding.ts).
import { envVar } from '../../core/env.js';
import { keep, tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { capture, writeTensor, type CapturedGraph } from '../../ops/capture.js';
import { tensor, zeros } from '../../ops/creation.js';
import { copyInto } from '../../ops/shape-ops.js';
import type { WhisperCache, WhisperModel } from './model.js';

export interface WhisperSessionOptions {
  /** Record and replay the decode step on WebGPU (default true; TENSORGPU_CAPTURE=0 turns it off). */
  capture?: boolean;
}

export interface WhisperSessionStats {
  mode: 'eager' | 'replay';
  /** Why steps run eagerly, when they do. */
  reason?: string;
  recordedSteps: number;
  replayedSteps: number;
  eagerSteps: number;
  capturedDispatches: number;
  /** Host time of the decode steps (ms), excluding the logits read back. */
  hostMs: number;
  /** Windows whose encoder output was set (a window decoded again after a seek counts again). */
  windows: number;
  /** Encoder forwards run (one per window, or one per batch of windows). */
  encoderPasses: number;
}

export class WhisperSession {
  readonly cache: WhisperCache;
  private readonly token: Tensor;
  private readonly position: Tensor;
  private readonly logits: Tensor;
  private graph: CapturedGraph | undefined;
  private readonly captureWanted: boolean;
  readonly stats: WhisperSessionStats = {
    mode: 'eager',
    recordedSteps: 0,
    replayedSteps: 0,
    eagerSteps: 0,
    capturedDispatches: 0,
    hostMs: 0,
    windows: 0,
    encoderPasses: 0,
  };

  constructor(
    readonly model: WhisperModel,
    options: WhisperSessionOptions = {},
  ) {
    const device = model.device;
    this.cache = model.newCache();
    this.token = keep(zeros([1], { dtype: 'int32', device }));
    this.position = keep(zeros([1], { dtype: 'int32', device }));
    this.logits = keep(zeros([1, model.config.vocabSize], { device }));
    const why = device !== 'webgpu' ? 'not on WebGPU' : options.capture === false || envVar('TENSORGPU_CAPTURE') === '0' ? 'capture turned off' : undefined;
    this.captureWanted = why === undefined;
    this.stats.reason = why;
  }

  /** Runs the encoder on one window's features [nMels, frames] and keeps its cross-attention K / V. */
  setFeatures(features: Tensor): void {
    const encoded = this.model.encode(features);
    try {
      this.model.setAudio(this.cache, encoded);
    } finally {
      encoded.dispose();
    }
    this.stats.windows++;
    this.stats.encoderPasses++;
  }

  /** Keeps the cross-attention K / V of a window encoded beforehand (a row [maxSource, d] of encodeWindows). */
  setEncoded(encoded: Tensor): void {
    this.model.setAudio(this.cache, encoded);
    this.stats.windows++;
  }

  /** Counts an encoder forward run outside the session (encodeWindows over several windows is one). */
  countEncoderPass(): void {
    this.stats.encoderPasses++;
  }

  /** Runs a new prompt from position 0; returns the logits of `rows` (default: the last position), each [vocab]. */
  async prefill(ids: readonly number[], rows: readonly number[] = [ids.length - 1]): Promise<Float32Array[]> {
    this.cache.length = 0;
    const input = tensor([...ids], { dtype: 'int32', device: this.model.device });
    try {
      const logits = this.model.decode(input, this.cache, { start: 0, rows });
      const flat = (await logits.toArray()) as Float32Array;
      logits.dispose();
      const v = this.model.config.vocabSize;
      return rows.map((_, i) => flat.slice(i * v, (i + 1) * v));
    } finally {
      input.dispose();
    }
  }

  /** One decode step on `token` at the cache's position: its logits [vocab]. */
  async next(token: number): Promise<Float32Array> {
    if (this.cache.length + 1 > this.cache.capacity) throw new RangeError(`the decoder cache holds ${this.cache.capacity} positions; all are used`);
    const t0 = performance.now();
    const at = this.cache.length;
    writeTensor(this.token, [token]);
    if (this.captureWanted) writeTensor(this.position, [this.cache.length]);
    if (this.graph) {
      this.graph.replay();
      this.stats.replayedSteps++;
    } else if (this.captureWanted) {
      const { graph } = capture('whisper decode step', () => this.step(true));
      this.graph = graph;
      this.stats.recordedSteps++;
      this.stats.mode = 'replay';
      this.stats.capturedDispatches = graph?.dispatches ?? 0;
    } else {
      this.step(false);
      this.stats.eagerSteps++;
    }
    this.cache.length = at + 1;
    this.stats.hostMs += performance.now() - t0;
    return (await this.logits.toArray()) as Float32Array;
  }

  private step(onDevice: boolean): void {
    tidy(() => {
      const logits = onDevice
        ? this.model.decode(this.token, this.cache, { position: this.position })
        : this.model.decode(this.token, this.cache, { start: this.cache.length });
      copyInto(this.logits, logits);
    });
  }

  dispose(): void {
    this.graph?.dispose();
    this.graph = undefined;
    for (const t of [this.token, this.position, this.logits]) t.dispose();
    this.cache.dispose();
  }
}
