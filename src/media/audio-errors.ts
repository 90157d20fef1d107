// Typed errors for audio files. Kept beside the audio readers rather than in core/errors.ts: only io/ raises them.
import { TensorGpuError } from '../core/errors.js';

/**
 * Audio bytes that cannot be decoded (or samples that cannot be encoded). Like CheckpointError, the message starts
 * with where the problem is: the source (a path, or a label such as 'WAV data') and the byte offset when known.
 */
export class AudioFormatError extends TensorGpuError {
  readonly source?: string;
  readonly offset?: number;

  constructor(problem: string, where: { readonly source?: string; readonly offset?: number } = {}) {
    const place = [where.source, where.offset !== undefined ? `byte ${where.offset}` : undefined].filter((x) => x !== undefined);
    super(place.length > 0 ? `${place.join(', ')}: ${problem}` : problem);
    this.source = where.source;
    this.offset = where.offset;
  }
}
