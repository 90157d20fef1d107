// The kernel descriptions (src/runtime/webgpu/kernels/kernel.ts): the generated Params struct agrees with the
// packer byte for byte on a real device (WGSL's uniform layout rules, arrays at 16-byte strides), bindings follow
// declaration order and renumber around absent optional ones, the cache key holds every variant field, and every
// slip a launcher could make (a missing or unknown param or buffer, a bad variant value, a placeholder left
// unfilled, filled twice or hidden in a comment) is an error naming it. Also: no embedded kernel body declares
// its own header any more.
import { describe, expect, it } from 'vitest';
import { webgpuBackend } from '../../../src/runtime/registry.js';
import type { GpuContext } from '../../../src/runtime/webgpu/gpu-context.js';
import { defineKernel } from '../../../src/runtime/webgpu/kernels/kernel.js';
import { WGSL_SOURCES } from '../../../src/runtime/webgpu/kernels/wgsl-sources.generated.js';
import { setupWebGpu } from '../../helpers/webgpu.js';

const gpu = await setupWebGpu();

// A test kernel over fill.wgsl's body (fill_word: out[w] = p.word) with an extra entry point that copies every
// param, as the shader sees it, into out.
const dumpKernel = (name: string) =>
  defineKernel({
    name,
    source: 'fill.wgsl',
    variant: { flag: 'boolean' },
    params: { words: 'u32', word: 'u32', scale: 'f32', shape: 'u32[6]', offset: 'i32', weights: 'f32[3]', last: 'u32' },
    outputs: { out: 'u32' },
    inputs: { extra: { type: 'f32', when: (v) => v.flag } },
    grid: 'custom',
    functions: () => `
@compute @workgroup_size(1)
fn dump() {
  out[0] = p.words;
  out[1] = p.word;
  out[2] = bitcast<u32>(p.scale);
  for (var i = 0u; i < 6u; i++) {
    out[3u + i] = p.shape[i / 4u][i % 4u];
  }
  out[9] = bitcast<u32>(p.offset);
  for (var i = 0u; i < 3u; i++) {
    out[10u + i] = bitcast<u32>(p.weights[i / 4u][i % 4u]);
  }
  out[13] = p.last;
}
`,
  });
const dump = dumpKernel('test-dump');

const PARAMS = { words: 1, word: 0xdeadbeef, scale: -1.5, shape: [3, 1, 4, 1, 5, 9], offset: -7, weights: [0.5, 2, -3], last: 42 };

describe('kernel descriptions', () => {
  it('lays Params out by WGSL uniform rules: no hand-written padding', () => {
    const wgsl = dump.wgsl({ flag: false });
    expect(wgsl).toContain(
      'struct Params {\n  words: u32,\n  word: u32,\n  scale: f32,\n  shape: array<vec4<u32>, 2>,\n  offset: i32,\n  weights: array<vec4<f32>, 1>,\n  last: u32,\n}',
    );
    const dv = new DataView(dump.pack(PARAMS)!);
    // shape aligns to 16 and takes 32 bytes; weights aligns to 16 again after offset.
    expect([dv.getUint32(0, true), dv.getUint32(4, true), dv.getFloat32(8, true)]).toEqual([1, 0xdeadbeef, -1.5]);
    expect(Array.from({ length: 6 }, (_, i) => dv.getUint32(16 + 4 * i, true))).toEqual(PARAMS.shape);
    expect(dv.getInt32(48, true)).toBe(-7);
    expect([dv.getFloat32(64, true), dv.getFloat32(68, true), dv.getFloat32(72, true)]).toEqual(PARAMS.weights);
    expect(dv.getUint32(80, true)).toBe(42);
    expect(dv.byteLength).toBe(96);
  });

  it('numbers bindings in declaration order: uniform, outputs, inputs; optional ones renumber', () => {
    expect(dump.wgsl({ flag: true })).toContain(
      '@group(0) @binding(0) var<uniform> p: Params;\n@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n@group(0) @binding(2) var<storage, read> extra: array<f32>;',
    );
    expect(dump.wgsl({ flag: false })).not.toContain('extra');
    expect(dump.wgsl({ flag: false })).toContain('const WG = 256u;');
  });

  it('keys every variant field, and rejects bad variants, params and buffers by name', () => {
    expect(dump.key({ flag: true })).toBe('test-dump|true');
    expect(dump.key({ flag: false })).not.toBe(dump.key({ flag: true }));
    expect(() => dump.key({ flag: 1 as unknown as boolean })).toThrow(/variant field flag = 1 is not a boolean/);
    expect(() => dump.key({ flag: true, other: 1 } as { flag: boolean })).toThrow(/unknown variant field other/);
    expect(() => dump.pack({ ...PARAMS, last: undefined as unknown as number })).toThrow(/param last has no value/);
    expect(() => dump.pack({ ...PARAMS, extra: 1 } as typeof PARAMS)).toThrow(/unknown param extra/);
    expect(() => dump.pack({ ...PARAMS, shape: [1, 2, 3, 4, 5, 6, 7] })).toThrow(/param shape holds 6 values, got 7/);
    expect(() => dump.pack({ ...PARAMS, scale: [1] as unknown as number })).toThrow(/param scale is a scalar/);
  });

  it('fails on a placeholder left unfilled, a code value with no placeholder, and a grid over a missing count', () => {
    const unfilled = defineKernel({ name: 't', source: 'scatter.wgsl', outputs: { out: 'u32' }, grid: 'custom' });
    expect(() => unfilled.wgsl({})).toThrow(/\{\{STORE\}\} has no value/);
    const extra = defineKernel({ name: 't', source: 'fill.wgsl', outputs: { out: 'u32' }, grid: 'custom', code: () => ({ NOPE: '' }) });
    expect(() => extra.wgsl({})).toThrow(/fill.wgsl has no \{\{NOPE\}\} placeholder/);
    expect(() => defineKernel({ name: 't', source: 'fill.wgsl', params: { n: 'f32' }, outputs: { out: 'u32' }, grid: { threads: 'n', invoke: 'f' } })).toThrow(
      /p.n, which must be a u32 param/,
    );
    expect(() => defineKernel({ name: 't', source: 'fill.wgsl', params: { n: 'u32' }, outputs: { o: 'u32' }, grid: { words: 'n', element: 'f' } })).toThrow(
      /writes the output named out/,
    );
  });

  it('keeps its own copy of a variant: a launcher may refill one variant object every dispatch', () => {
    // A context that builds every pipeline it is asked for, as a new device does for variants resolved before it.
    const built: Record<string, string> = {};
    const ctx = (): GpuContext =>
      ({
        alloc: () => ({ buffer: {} as GPUBuffer, size: 4 }),
        release: () => {},
        pipeline: (key: string, build: () => string) => ((built[key] = build()), {} as GPUComputePipeline),
        dispatch: () => {},
        subgroupReduce: () => false,
        subgroupShareWidth: () => 0,
        limits: { maxStorageBufferBindingSize: 1 << 30, maxComputeWorkgroupsPerDimension: 65535 },
      }) as unknown as GpuContext;
    const kernel = dumpKernel('test-refilled');
    const out = { buffer: {} as GPUBuffer, size: 64 };
    const variant = { flag: false };
    kernel.run(ctx(), variant, PARAMS, { out }, { workgroups: [1, 1, 1] });
    variant.flag = true;
    kernel.run(ctx(), variant, PARAMS, { out, extra: out }, { workgroups: [1, 1, 1] });
    // On a second device, the first variant (found again by value) builds its own WGSL, not the refilled object's.
    kernel.run(ctx(), { flag: false }, PARAMS, { out }, { workgroups: [1, 1, 1] });
    expect(built['test-refilled|false']).toBe(kernel.wgsl({ flag: false }));
    expect(built['test-refilled|true']).toBe(kernel.wgsl({ flag: true }));
    expect(built['test-refilled|false']).not.toContain('extra');
  });

  it('every embedded kernel body is only its own math: no Params struct, bindings or numeric placeholders', () => {
    for (const [file, text] of Object.entries(WGSL_SOURCES)) {
      expect(text, file).not.toMatch(/struct Params|@binding\(|_pad\d*:/);
      expect(text, file).not.toMatch(/\{\{(WG|LANES|BITS|MASK|FUNCTIONS)\}\}/);
      expect(text, file).not.toMatch(/\/\/[^\n]*\{\{\w+\}\}/);
    }
  });

  describe.skipIf(!gpu.available)(`on the device ${gpu.skipReason}`, () => {
    it('the shader reads every param where the packer wrote it', async () => {
      const backend = webgpuBackend()!;
      const out = backend.alloc(14 * 4);
      try {
        dump.run(backend, { flag: false }, PARAMS, { out }, { workgroups: [1, 1, 1], entry: 'dump' });
        const words = new Uint32Array(
          await backend
            .read({ handle: out, dtype: 'int32', view: { shape: [14], strides: [1], offset: 0 } })
            .then((a) => new Uint32Array((a as Int32Array).buffer)),
        );
        const f = (x: number) => new Uint32Array(new Float32Array([x]).buffer)[0];
        expect(Array.from(words)).toEqual([1, 0xdeadbeef, f(-1.5), ...PARAMS.shape, -7 >>> 0, ...PARAMS.weights.map(f), 42]);
        expect(() => dump.run(backend, { flag: false }, PARAMS, { out, extra: out } as { out: typeof out }, { workgroups: [1, 1, 1] })).toThrow(
          /buffer extra is not bound/,
        );
        expect(() => dump.run(backend, { flag: true }, PARAMS, { out }, { workgroups: [1, 1, 1] })).toThrow(/no buffer for binding extra/);
        expect(() => dump.run(backend, { flag: false }, PARAMS, { out })).toThrow(/custom grid needs workgroups or threads/);
      } finally {
        backend.release(out);
      }
    });
  });
});
