// Sampling on the device (ops/sample.ts validates and calls it): one token id per logits row, with temperature,
// top-k, top-p, min-p and the repetition penalties, so a decode step reads back 4 bytes.
import type { Operand, SamplingParams } from '../../runtime/backend.js';
import { values, viewIndices } from '../../runtime/cpu/cpu-backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { defineOpKernels } from '../op-kernels.js';
import { sampleReference } from './cpu.js';
import { rowWords, sampleKernel, sampleRowsKernel } from './webgpu.js';

/**
 * One token id sampled from a 1-D logits row (int32 storage of one element; -1 when nothing can be sampled).
 * `drawFrom` (float32 [1] on the device), when given, replaces params.u: a captured step's per-step draw.
 * `mask` (int32 [ceil(V / 32)], contiguous), when given, allows only the tokens whose bit is set.
 */
export interface SampleArgs<H> {
  readonly logits: Operand<H>;
  readonly previous?: Operand<H>;
  readonly params: SamplingParams;
  readonly drawFrom?: Operand<H>;
  readonly mask?: Operand<H>;
}

/**
 * One token id per row of a [B, V] logits operand, each row with its own parameters (int32 storage of B elements).
 * Row r's previous tokens are previous[spans[r][0], spans[r][0] + spans[r][1]); `draws` (float32 [B] on the
 * device), when given, replaces each params.u; `mask` (int32 [B, ceil(V / 32)], contiguous) holds each row's
 * bitmask. The same ids as `sample` row by row, in one dispatch.
 */
export interface SampleRowsArgs<H> {
  readonly logits: Operand<H>;
  readonly params: readonly SamplingParams[];
  readonly previous?: Operand<H>;
  readonly spans: readonly (readonly [number, number])[];
  readonly draws?: Operand<H>;
  readonly mask?: Operand<H>;
}

const tokens = (previous: Operand<Int32Array> | undefined): number[] => (previous ? Array.from(viewIndices(previous.view), (i) => previous.handle[i]) : []);

export const sampleKernels = defineOpKernels<SampleArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as SampleArgs<never>;
    const params = a.drawFrom ? { ...a.params, u: values(a.drawFrom)[0] } : a.params;
    return Int32Array.of(sampleReference(values(a.logits), tokens(a.previous), params, a.mask && values(a.mask)));
  },
  webgpu: (backend, args) => {
    const a = args as SampleArgs<never>;
    const prev = a.previous && toGpuOperand(a.previous);
    return withContiguous(backend, toGpuOperand(a.logits), (row) =>
      sampleKernel(backend, row, prev, a.params, a.drawFrom && toGpuOperand(a.drawFrom), a.mask && toGpuOperand(a.mask)),
    );
  },
});

export const sampleRowsKernels = defineOpKernels<SampleRowsArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as SampleRowsArgs<never>;
    const v = values(a.logits);
    const cols = a.logits.view.shape[1] ?? 0;
    const prev = tokens(a.previous);
    const u = a.draws ? values(a.draws) : undefined;
    const mask = a.mask && values(a.mask);
    const words = Math.ceil(cols / 32);
    return Int32Array.from(a.params, (p, r) =>
      sampleReference(
        v.subarray(r * cols, (r + 1) * cols),
        prev.slice(a.spans[r]![0], a.spans[r]![0] + a.spans[r]![1]),
        u ? { ...p, u: u[r]! } : p,
        mask?.subarray(r * words, (r + 1) * words),
      ),
    );
  },
  webgpu: (backend, args) => {
    const a = args as SampleRowsArgs<never>;
    const prev = a.previous && toGpuOperand(a.previous);
    const base = prev?.view.offset ?? 0;
    const words = backend.upload(
      'int32',
      new Int32Array(rowWords(a.params.map((p, r) => ({ params: p, prevAt: base + a.spans[r]![0], prevCount: a.spans[r]![1] }))).buffer),
    );
    try {
      return withContiguous(backend, toGpuOperand(a.logits), (rows) =>
        sampleRowsKernel(backend, rows, a.params.length, words, prev, a.draws && toGpuOperand(a.draws), a.mask && toGpuOperand(a.mask)),
      );
    } finally {
      backend.release(words);
    }
  },
});
