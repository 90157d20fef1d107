// One sequence's decode loop on the device, with the step captured: the first decode step runs eagerly while its
// dispatches are recorded, and every later step replays them (no tensors, shapes, pool traffic, bind groups or
// uniform writes on the host). What changes per step lives in three device scalars written once per step: the
// position (cache.length), the sampler's uniform draw, and the input token, which the step itself overwrites with
// the token it samples. On WebGPU the eager and replayed steps run the same kernels, so they give the same bits.
// A constrained session (a grammar) also keeps the sampler's token bitmask on the device, rewritten before each step.
//
// A step is re-recorded only when a new session starts (a new KV cache); it is not captured when the sampling
// needs the token history on the host (repetition / presence / frequency penalties: the history is uploaded each
// step), in the per-expert MoE baseline (it reads the routing back), on the CPU, or with TENSORGPU_CAPTURE=0.
import { envVar } from '../core/env.js';
import type { DeviceName } from '../runtime/backend.js';
import { keep, tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { capture, writeTensor, type CapturedGraph } from '../ops/capture.js';
import { tensor, zeros } from '../ops/creation.js';
import { sampleToken, type SampleOptions } from '../ops/sample.js';
import { copyInto } from '../ops/shape-ops.js';
import type { CausalLM, ModelCache } from '../models/causal-lm.js';

export type SessionSampling = Omit<SampleOptions, 'seed' | 'generator' | 'previousTokens' | 'draw' | 'mask'>;

export interface DecodeSessionOptions {
  sampling?: SessionSampling;
  /** Capture the first decode step and replay it (default: on, unless TENSORGPU_CAPTURE=0). */
  capture?: boolean;
  /** Keep each step's float32 logits [1, vocab] in `logits` (a copy inside the step: log-probs, tests). */
  keepLogits?: boolean;
  /** Sample under a token bitmask given to each prefill / next call (constrained decoding; see generate/grammar.ts). */
  masked?: boolean;
  /** Run the prompt's forward through compile() (the model keeps it: traced per prompt length, replayed after). */
  compilePrefill?: boolean;
}

/** How the session's decode steps ran. */
export interface DecodeSessionStats {
  /** 'replay' once a step was recorded; 'eager' with the reason capture does not apply. */
  mode: 'replay' | 'eager';
  reason?: string;
  recordedSteps: number;
  replayedSteps: number;
  eagerSteps: number;
  /** Dispatches in the recorded step. */
  capturedDispatches: number;
  /** Host time spent queueing decode steps (writes, replay or eager ops, the submit), excluding GPU waits. */
  hostMs: number;
  /** The same for the last step. */
  lastHostMs: number;
}

export class DecodeSession {
  readonly cache: ModelCache;
  readonly device: DeviceName;
  /** The next step's input token: int32 [1], overwritten on the device by each step's sample. */
  private readonly token: Tensor;
  private readonly position: Tensor;
  private readonly draw: Tensor;
  /** int32 [ceil(vocab / 32)]: the step's allowed tokens, when masked. */
  private readonly mask: Tensor | undefined;
  /** The last step's logits when keepLogits. */
  readonly logits: Tensor | undefined;
  private graph: CapturedGraph | undefined;
  private readonly sampling: SessionSampling;
  private readonly captureWanted: boolean;
  private readonly compilePrefill: boolean;
  readonly stats: DecodeSessionStats = { mode: 'eager', recordedSteps: 0, replayedSteps: 0, eagerSteps: 0, capturedDispatches: 0, hostMs: 0, lastHostMs: 0 };

  constructor(
    readonly model: CausalLM,
    options: DecodeSessionOptions = {},
  ) {
    this.device = model.device;
    this.sampling = options.sampling ?? {};
    this.cache = model.newCache();
    this.token = keep(zeros([1], { dtype: 'int32', device: this.device }));
    this.position = keep(zeros([1], { dtype: 'int32', device: this.device }));
    this.draw = keep(zeros([1], { device: this.device }));
    this.mask = options.masked ? keep(zeros([Math.ceil(model.config.vocabSize / 32)], { dtype: 'int32', device: this.device })) : undefined;
    this.logits = options.keepLogits ? keep(zeros([1, model.config.vocabSize], { device: this.device })) : undefined;
    const why =
      this.device !== 'webgpu'
        ? 'not on WebGPU'
        : model.moeMode !== 'fused'
          ? 'the per-expert MoE baseline reads the routing back'
          : options.capture === false || envVar('TENSORGPU_CAPTURE') === '0'
            ? 'capture turned off'
            : undefined;
    this.captureWanted = why === undefined;
    this.compilePrefill = options.compilePrefill ?? false;
    this.stats.reason = why;
  }

  /**
   * Runs the prompt, samples the first token (kept on the device as the next input) and returns its id. `mask`
   * (the token bitmask for this token) is required exactly when the session is masked.
   */
  async prefill(ids: readonly number[], draw: number, history?: readonly number[], mask?: Int32Array): Promise<number> {
    writeTensor(this.draw, [draw]);
    this.writeMask(mask);
    const input = tensor([...ids], { dtype: 'int32', device: this.device });
    try {
      this.sample(await this.model.forward(input, this.cache, { compile: this.compilePrefill }), history);
    } finally {
      input.dispose();
    }
    return this.readToken();
  }

  /**
   * One decode step from the last sampled token; returns the new token's id. `history` (the ids so far) is for
   * sampling penalties only.
   */
  async next(draw: number, history?: readonly number[], mask?: Int32Array): Promise<number> {
    if (this.cache.length + 1 > this.cache.capacity) throw new RangeError(`the cache holds ${this.cache.capacity} positions; all are used`);
    const t0 = performance.now();
    writeTensor(this.draw, [draw]);
    this.writeMask(mask);
    if (this.device === 'webgpu') writeTensor(this.position, [this.cache.length]);
    if (history !== undefined && this.captureWanted) this.stats.reason = 'penalties need the token history on the host';
    if (this.graph && history === undefined) {
      this.graph.replay();
      this.cache.length += 1;
      this.stats.replayedSteps++;
    } else if (this.captureWanted && history === undefined) {
      const { graph } = capture('decode step', () => this.step());
      this.graph = graph;
      this.stats.recordedSteps++;
      this.stats.mode = 'replay';
      this.stats.reason = undefined;
      this.stats.capturedDispatches = graph?.dispatches ?? 0;
    } else if (this.model.moeMode === 'fused') {
      this.step(history);
      this.stats.eagerSteps++;
    } else {
      this.sample(await this.model.forward(this.token, this.cache), history);
      this.stats.eagerSteps++;
    }
    const read = this.token.toArray();
    this.stats.lastHostMs = performance.now() - t0;
    this.stats.hostMs += this.stats.lastHostMs;
    return (await read)[0];
  }

  /** The decode step's ops: forward at the device position, sample with the device draw, the id into `token`. */
  private step(history?: readonly number[]): void {
    tidy(() => {
      const logits = this.model.forwardSync(this.token, this.cache, this.device === 'webgpu' ? { position: this.position } : {});
      this.sample(logits, history);
    });
  }

  /** Samples with the draw from its device scalar and writes the id into `token` (logits are disposed). */
  private sample(logits: Tensor, history?: readonly number[]): void {
    tidy(() => {
      copyInto(this.token, sampleToken(logits, { ...this.sampling, draw: this.draw, previousTokens: history, mask: this.mask }));
      if (this.logits) copyInto(this.logits, logits);
      logits.dispose();
    });
  }

  private writeMask(mask: Int32Array | undefined): void {
    if ((mask !== undefined) !== (this.mask !== undefined))
      throw new RangeError(this.mask ? 'a masked session needs a mask each step' : 'a mask needs a session made with masked: true');
    if (mask) writeTensor(this.mask!, mask);
  }

  private async readToken(): Promise<number> {
    return (await this.token.toArray())[0];
  }

  dispose(): void {
    this.graph?.dispose();
    this.graph = undefined;
    this.token.dispose();
    this.position.dispose();
    this.draw.dispose();
    this.mask?.dispose();
    this.logits?.dispose();
    this.cache.dispose();
  }
}
