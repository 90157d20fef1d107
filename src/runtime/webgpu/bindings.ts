// Explicit bind-group layouts derived from a kernel's WGSL, so that every kernel gets (1) its uniform block at a
// dynamic offset into one shared arena buffer, written once per submit, and (2) bind groups that can be cached:
// with the uniform's offset dynamic, a bind group depends only on the buffers bound, which repeat step after step.

/** How binding i is declared: 'u' uniform, 'r' read-only storage, 'w' read-write storage. */
export type BindingKind = 'u' | 'r' | 'w';

const DECLARATION = /@group\(0\)\s*@binding\((\d+)\)\s*var\s*<\s*(uniform|storage\s*,\s*read_write|storage\s*,\s*read|storage)\s*>/g;

/** The group-0 bindings a WGSL module declares, in binding order ('rrw...'); throws on a gap (a launcher bug). */
export function bindingSignature(code: string): string {
  const kinds: BindingKind[] = [];
  for (const m of code.matchAll(DECLARATION)) {
    const kind = m[2].startsWith('uniform') ? 'u' : m[2].replace(/\s/g, '') === 'storage,read' ? 'r' : 'w';
    const index = Number(m[1]);
    if (kinds[index] !== undefined && kinds[index] !== kind) throw new Error(`WGSL binding ${index} is declared twice with different kinds`);
    kinds[index] = kind;
  }
  for (let i = 0; i < kinds.length; i++) if (kinds[i] === undefined) throw new Error(`WGSL bindings skip @binding(${i}); they must be numbered 0..n-1`);
  // A bare `var<storage>` is read-only in WGSL.
  return kinds.join('');
}

export function layoutEntries(signature: string): GPUBindGroupLayoutEntry[] {
  return [...signature].map((kind, binding) => ({
    binding,
    visibility: GPUShaderStage.COMPUTE,
    buffer: kind === 'u' ? { type: 'uniform', hasDynamicOffset: true } : { type: kind === 'r' ? 'read-only-storage' : 'storage' },
  }));
}

/**
 * Uniform blocks of one batch of dispatches, packed at 256-byte-aligned offsets into a host array and written
 * to one GPU buffer with a single writeBuffer before the batch is submitted.
 */
export class UniformArena {
  /** Bytes every uniform binding covers (the largest block a kernel may declare). */
  static readonly BINDING_SIZE = 512;
  readonly buffer: GPUBuffer;
  private readonly host: Uint8Array;
  private cursor = 0;
  private written = 0;

  constructor(
    private readonly device: GPUDevice,
    readonly capacity: number,
    private readonly alignment: number,
    label: string,
  ) {
    this.buffer = device.createBuffer({ size: capacity + UniformArena.BINDING_SIZE, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, label });
    this.host = new Uint8Array(capacity + UniformArena.BINDING_SIZE);
  }

  /** Whether `bytes` more fit. */
  fits(bytes: number): boolean {
    return this.cursor + bytes <= this.capacity;
  }

  /** Copies a block in and returns its offset. */
  push(params: ArrayBuffer): number {
    if (params.byteLength > UniformArena.BINDING_SIZE)
      throw new RangeError(`a uniform block of ${params.byteLength} bytes exceeds ${UniformArena.BINDING_SIZE}`);
    const offset = this.cursor;
    this.host.set(bytesOf(params), offset);
    this.cursor = offset + Math.ceil(params.byteLength / this.alignment) * this.alignment;
    return offset;
  }

  /** Writes the blocks pushed since the last upload (queue order puts them before the next submit). */
  upload(): void {
    if (this.cursor > this.written) {
      this.device.queue.writeBuffer(this.buffer, this.written, this.host, this.written, this.cursor - this.written);
      this.written = this.cursor;
    }
  }

  /** Starts a new batch: earlier blocks were uploaded and their dispatches submitted before this batch's writes. */
  reset(): void {
    this.cursor = 0;
    this.written = 0;
  }

  destroy(): void {
    this.buffer.destroy();
  }
}

/**
 * A byte view of a uniform block. Kernels pack into one block each, reused every dispatch (kernel.ts), so the view
 * is made once per block rather than once per dispatch.
 */
const byteViews = new WeakMap<ArrayBuffer, Uint8Array>();
function bytesOf(params: ArrayBuffer): Uint8Array {
  let view = byteViews.get(params);
  if (view === undefined || view.byteLength !== params.byteLength) byteViews.set(params, (view = new Uint8Array(params)));
  return view;
}
