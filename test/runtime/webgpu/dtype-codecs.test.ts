// The WGSL codecs (dtype-codecs.wgsl) against the TypeScript codecs, bit for bit, on a real WebGPU adapter:
// every f16/bf16/fp8 code decoded, and f32 -> narrow encodes over every representable value, every midpoint and
// midpoint +-1 ulp, specials and ~1e5 seeded random f32 bit patterns. Inputs and outputs cross the GPU as u32 bit
// patterns, so -0, subnormals and NaN signs are compared exactly (NaN outputs: NaN-ness and sign).

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits, f32ToFp8Bits, fp8BitsToF32 } from '../../../src/core/codecs.js';
import { mulberry32 } from '../../helpers/reference.js';

const WGSL_PATH = new URL('../../../src/runtime/webgpu/kernels/dtype-codecs.wgsl', import.meta.url);
const codecsWgsl = readFileSync(WGSL_PATH, 'utf8');

Object.assign(globalThis, globals);

// Kept at module level: Dawn's adapter and device must not outlive a collected GPU object.
let gpu: GPU | undefined;

async function findAdapter(): Promise<{ adapter: GPUAdapter | null; reason: string }> {
  try {
    gpu = create([]);
    const adapter = await gpu.requestAdapter();
    return { adapter, reason: adapter ? '' : 'requestAdapter() returned null' };
  } catch (err) {
    return { adapter: null, reason: `WebGPU (npm webgpu) failed to load: ${(err as Error).message}` };
  }
}

const { adapter, reason: noAdapterReason } = await findAdapter();
const requireGpu = process.env.TENSORGPU_REQUIRE_GPU === '1';

if (!adapter && requireGpu) {
  it('has a WebGPU adapter (TENSORGPU_REQUIRE_GPU=1)', () => {
    expect.fail(`no WebGPU adapter: ${noAdapterReason}; on Linux try VK_ICD_FILENAMES=<swiftshader icd json>`);
  });
}

// ---- inputs -------------------------------------------------------------------------------------------------------

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bitsOf = (x: number): number => {
  f32[0] = x;
  return u32[0];
};
const fromBits = (b: number): number => {
  u32[0] = b;
  return f32[0];
};

/** Every decoded value of every format, their midpoints and midpoints +-1 ulp (both signs), specials, random bits. */
function encodeInputs(): Uint32Array {
  const out = new Set<number>();
  const addValue = (x: number): void => {
    if (Number.isNaN(x)) return;
    const b = bitsOf(x);
    out.add(b);
    out.add((b ^ 0x80000000) >>> 0);
  };
  const decoders: Array<[number, (c: number) => number]> = [
    [65536, f16BitsToF32],
    [65536, bf16BitsToF32],
    [256, (c) => fp8BitsToF32(c, 'e4m3fn')],
    [256, (c) => fp8BitsToF32(c, 'e5m2')],
  ];
  for (const [n, decode] of decoders) {
    const half = n / 2;
    // Positive codes ascend in value up to the first Inf/NaN; add a virtual next value past the largest finite.
    const vals: number[] = [];
    for (let c = 0; c < half; c++) {
      const v = decode(c);
      if (!Number.isFinite(v)) break;
      vals.push(v);
    }
    const max = vals[vals.length - 1];
    vals.push(max + (max - vals[vals.length - 2]));
    for (let i = 0; i < vals.length; i++) {
      addValue(vals[i]);
      if (i + 1 < vals.length) {
        const mid = (vals[i] + vals[i + 1]) / 2;
        const mb = bitsOf(mid);
        addValue(mid);
        addValue(fromBits(mb + 1));
        addValue(fromBits(mb - 1));
      }
    }
  }
  for (const b of [
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0xffffffff, 0x7fa00000, 0x00000001, 0x80000001,
    0x007fffff, 0x807fffff, 0x00400000, 0x00008000, 0x00008001, 0x00018000, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff,
  ]) {
    out.add(b >>> 0);
  }
  const rand = mulberry32(0xc0dec);
  for (let i = 0; i < 100_000; i++) {
    let b = rand();
    if (i % 2 === 1) b = ((b & 0x807fffff) | ((96 + (rand() % 64)) << 23)) >>> 0; // exponents 2^-31 .. 2^32
    out.add(b);
  }
  return Uint32Array.from(out);
}

const allCodes = (n: number): Uint32Array => Uint32Array.from({ length: n }, (_, i) => i);

// ---- GPU plumbing ---------------------------------------------------------------------------------------------------

const WORKGROUP = 64;
const ROW = 32768; // workgroups per row of the 2D dispatch (limit is 65535)

function shaderFor(expr: string): string {
  return `${codecsWgsl}
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * ${ROW * WORKGROUP}u;
  if (i >= arrayLength(&src)) {
    return;
  }
  let x = src[i];
  dst[i] = ${expr};
}
`;
}

// Runs without a GPU: the file's shape is part of its contract with the kernels it is concatenated into.
describe('dtype-codecs.wgsl source', () => {
  it('the codec file is plain functions using only integer bit manipulation', () => {
    // Decoders are branchless: they are inlined many times in GEMV/GEMM inner loops.
    const decoders = codecsWgsl.split(/\bfn\s+/).filter((f) => /^(f16|e4m3|e5m2)_to_f32/.test(f));
    for (const d of decoders) expect(d.split('\n}')[0]).not.toMatch(/\bif\b|\breturn\b[^;]*;[\s\S]*\breturn\b/);
    const code = codecsWgsl.replace(/\/\/.*$/gm, '');
    expect(code).not.toMatch(/@(group|binding|compute|vertex|fragment)/);
    expect(code).not.toMatch(/pack2x16float|unpack2x16float|\benable\b|\bf16\b/);
    const fns = [...code.matchAll(/\bfn\s+(\w+)/g)].map((m) => m[1]).sort();
    expect(fns).toEqual([
      'bf16_to_f32',
      'e4m3_to_f32',
      'e5m2_to_f32',
      'f16_to_f32',
      'f32_to_bf16',
      'f32_to_e4m3',
      'f32_to_e5m2',
      'f32_to_f16',
      'small_int_scaled_bits',
    ]);
  });
});

describe.skipIf(!adapter)(`WGSL dtype codecs on WebGPU${adapter ? '' : ` (skipped: ${noAdapterReason})`}`, () => {
  let device: GPUDevice;

  beforeAll(async () => {
    device = await adapter!.requestDevice();
  });

  afterAll(() => {
    device?.destroy();
  });

  async function runOnGpu(expr: string, input: Uint32Array): Promise<Uint32Array> {
    device.pushErrorScope('validation');
    const module = device.createShaderModule({ code: shaderFor(expr) });
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length > 0) {
      await device.popErrorScope();
      throw new Error(`WGSL compile errors for '${expr}':\n${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('\n')}`);
    }
    const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    const bytes = input.byteLength;
    const src = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
    const dst = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const read = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    try {
      device.queue.writeBuffer(src, 0, input);
      const bindGroup = device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: src } },
          { binding: 1, resource: { buffer: dst } },
        ],
      });
      const groups = Math.ceil(input.length / WORKGROUP);
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(Math.min(groups, ROW), Math.ceil(groups / ROW));
      pass.end();
      encoder.copyBufferToBuffer(dst, 0, read, 0, bytes);
      device.queue.submit([encoder.finish()]);
      const validation = await device.popErrorScope();
      if (validation) throw new Error(`WebGPU validation error for '${expr}': ${validation.message}`);
      await read.mapAsync(GPUMapMode.READ);
      const out = new Uint32Array(read.getMappedRange().slice(0));
      read.unmap();
      return out;
    } finally {
      src.destroy();
      dst.destroy();
      read.destroy();
    }
  }

  const hex = (n: number): string => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;
  const isNaNBits = (b: number): boolean => (b & 0x7fffffff) > 0x7f800000;

  /** f32 bit results: exact bits, except that a NaN only has to be a NaN of the expected sign. */
  function compareF32Bits(input: Uint32Array, got: Uint32Array, want: Uint32Array, what: string): void {
    const bad: string[] = [];
    let count = 0;
    for (let i = 0; i < input.length; i++) {
      const ok = isNaNBits(want[i]) ? isNaNBits(got[i]) && got[i] >>> 31 === want[i] >>> 31 : got[i] === want[i];
      if (!ok) {
        count++;
        if (bad.length < 10) bad.push(`${what}(${hex(input[i])}) = ${hex(got[i])}, want ${hex(want[i])}`);
      }
    }
    expect(bad, `${count} of ${input.length} differ`).toEqual([]);
  }

  function compareCodes(input: Uint32Array, got: Uint32Array, want: Uint32Array, what: string): void {
    const bad: string[] = [];
    let count = 0;
    for (let i = 0; i < input.length; i++) {
      if (got[i] !== want[i]) {
        count++;
        if (bad.length < 10) bad.push(`${what}(${hex(input[i])} = ${fromBits(input[i])}) = ${hex(got[i])}, want ${hex(want[i])}`);
      }
    }
    expect(bad, `${count} of ${input.length} differ`).toEqual([]);
  }

  const decodeCases: Array<[string, string, number, (c: number) => number]> = [
    ['f16_to_f32', 'bitcast<u32>(f16_to_f32(x))', 65536, f16BitsToF32],
    ['bf16_to_f32', 'bitcast<u32>(bf16_to_f32(x))', 65536, bf16BitsToF32],
    ['e4m3_to_f32', 'bitcast<u32>(e4m3_to_f32(x))', 256, (c) => fp8BitsToF32(c, 'e4m3fn')],
    ['e5m2_to_f32', 'bitcast<u32>(e5m2_to_f32(x))', 256, (c) => fp8BitsToF32(c, 'e5m2')],
  ];

  it.each(decodeCases)('%s decodes all codes like the TS codec', async (name, expr, n, decode) => {
    const input = allCodes(n);
    const got = await runOnGpu(expr, input);
    const want = new Uint32Array(n);
    const signBit = n === 256 ? 0x80 : 0x8000;
    for (let c = 0; c < n; c++) {
      const v = decode(c);
      // NaN sign comes from the code itself, not from how a JS NaN travels.
      want[c] = Number.isNaN(v) ? (c & signBit ? 0xffc00000 : 0x7fc00000) : bitsOf(v);
    }
    compareF32Bits(input, got, want, name);
  });

  let inputs: Uint32Array | undefined;
  const encodeInputsOnce = (): Uint32Array => (inputs ??= encodeInputs());

  const encodeCases: Array<[string, string, (x: number) => number]> = [
    ['f32_to_f16', 'f32_to_f16(bitcast<f32>(x))', f32ToF16Bits],
    ['f32_to_bf16', 'f32_to_bf16(bitcast<f32>(x))', f32ToBf16Bits],
    ['f32_to_e4m3', 'f32_to_e4m3(bitcast<f32>(x), false)', (x) => f32ToFp8Bits(x, 'e4m3fn')],
    ['f32_to_e4m3 saturate', 'f32_to_e4m3(bitcast<f32>(x), true)', (x) => f32ToFp8Bits(x, 'e4m3fn', true)],
    ['f32_to_e5m2', 'f32_to_e5m2(bitcast<f32>(x), false)', (x) => f32ToFp8Bits(x, 'e5m2')],
    ['f32_to_e5m2 saturate', 'f32_to_e5m2(bitcast<f32>(x), true)', (x) => f32ToFp8Bits(x, 'e5m2', true)],
  ];

  it.each(encodeCases)('%s encodes like the TS codec', async (name, expr, encode) => {
    const input = encodeInputsOnce();
    expect(input.length).toBeGreaterThan(400_000);
    const got = await runOnGpu(expr, input);
    const wide = new Float32Array(input.buffer, input.byteOffset, input.length);
    const want = new Uint32Array(input.length);
    for (let i = 0; i < input.length; i++) want[i] = encode(wide[i]);
    // NaN inputs: the TS codec sees a JS NaN, so pin their sign to the input's bits independently.
    const nanCode = name.startsWith('f32_to_f16') ? 0x7e00 : name.startsWith('f32_to_bf16') ? 0x7fc0 : 0x7f;
    const signBit = nanCode > 0xff ? 0x8000 : 0x80;
    for (let i = 0; i < input.length; i++) {
      if (isNaNBits(input[i])) want[i] = (input[i] >>> 31 ? signBit : 0) | nanCode;
    }
    compareCodes(input, got, want, name);
  });

  it('saturate can be a runtime value (not only a constant)', async () => {
    const input = Uint32Array.from([0x7f800000, 0xff800000, 0x44000000, 0x43e00000, 0x7fc00000, 0x3f800000]);
    const got = await runOnGpu('f32_to_e4m3(bitcast<f32>(x), (x & 1u) == 0u) | (f32_to_e5m2(bitcast<f32>(x), (x & 1u) == 0u) << 8u)', input);
    const want = Array.from(input, (b) => {
      const x = fromBits(b);
      return f32ToFp8Bits(x, 'e4m3fn', true) | (f32ToFp8Bits(x, 'e5m2', true) << 8);
    });
    expect(Array.from(got).map(hex)).toEqual(want.map(hex));
  });
});
