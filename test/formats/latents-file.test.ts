// Latent files for `tensorgpu vae-decode` on the CPU backend: safetensors and NumPy .npy (v1/v2/v3, f4/f2/f8) round
// trips with the rank completion [C, T, h, w] / [C, h, w] -> [B, C, T, h, w], then one malformed file per rule, each
// of which must fail with a CheckpointError naming the file and the byte offset of the problem. The .npy files are
// built by hand here, so the reader is not checked against a writer sharing its assumptions.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointError, Generator, randn, setDefaultDevice, tensor } from '../../src/index.js';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '../../src/core/codecs.js';
import { readLatents, writeLatents } from '../../src/formats/latents-file.js';
import { writeSafetensors } from '../../src/formats/safetensors-writer.js';

setDefaultDevice('cpu');

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tensorgpu-latents-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

let counter = 0;
const fresh = (ext: string) => join(dir, `l-${counter++}${ext}`);

function values(n: number, seed = 7): Float32Array {
  const g = new Generator(seed);
  return Float32Array.from({ length: n }, () => g.normal());
}

type Descr = '<f4' | '<f2' | '<f8';

/** Little-endian storage of `v` in a NumPy float dtype. */
function encode(descr: Descr, v: Float32Array): Uint8Array {
  const item = { '<f4': 4, '<f2': 2, '<f8': 8 }[descr];
  const out = new Uint8Array(v.length * item);
  const dv = new DataView(out.buffer);
  v.forEach((x, i) => {
    if (descr === '<f4') dv.setFloat32(i * 4, x, true);
    else if (descr === '<f2') dv.setUint16(i * 2, f32ToF16Bits(x), true);
    else dv.setFloat64(i * 8, x, true);
  });
  return out;
}

interface NpyOptions {
  version?: 1 | 2 | 3;
  fortran?: boolean;
  /** The header dict as written, replacing the generated one. */
  header?: string;
}

/** A .npy file as numpy.save writes it: magic, version, header length, a space-padded dict ending in '\n', data. */
function npy(descr: string, shape: readonly number[], data: Uint8Array, o: NpyOptions = {}): { bytes: Uint8Array; dataStart: number } {
  const version = o.version ?? 1;
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = o.header ?? `{'descr': '${descr}', 'fortran_order': ${o.fortran ? 'True' : 'False'}, 'shape': ${shapeText}, }`;
  const pre = version === 1 ? 10 : 12;
  while ((pre + dict.length + 1) % 64 !== 0) dict += ' ';
  dict += '\n';
  const header = new TextEncoder().encode(dict);
  const bytes = new Uint8Array(pre + header.length + data.length);
  bytes.set([0x93, ...new TextEncoder().encode('NUMPY'), version, 0]);
  const dv = new DataView(bytes.buffer);
  if (version === 1) dv.setUint16(8, header.length, true);
  else dv.setUint32(8, header.length, true);
  bytes.set(header, pre);
  bytes.set(data, pre + header.length);
  return { bytes, dataStart: pre + header.length };
}

async function writeNpy(descr: string, shape: readonly number[], data: Uint8Array, o: NpyOptions = {}): Promise<{ path: string; dataStart: number }> {
  const path = fresh('.npy');
  const { bytes, dataStart } = npy(descr, shape, data, o);
  await writeFile(path, bytes);
  return { path, dataStart };
}

/** The error `p` rejects with (a resolved promise fails the test). */
async function errorOf(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => expect.fail('expected an error'),
    (e: unknown) => e as Error,
  );
}

/** Asserts a CheckpointError naming `path` and `offset`, with a message matching `problem`. */
async function expectCheckpointError(read: Promise<unknown>, path: string, offset: number | undefined, problem: RegExp): Promise<void> {
  const err = await read.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CheckpointError);
  const e = err as CheckpointError;
  expect(e.file).toBe(path);
  expect(e.offset).toBe(offset);
  expect(e.message.startsWith(path)).toBe(true);
  if (offset !== undefined) expect(e.message).toContain(`byte ${offset}`);
  expect(e.message).toMatch(problem);
}

describe('readLatents: safetensors', () => {
  it('round-trips writeLatents, values and shape exact', async () => {
    const z = randn([1, 16, 2, 2, 3], { generator: new Generator(3) });
    const path = fresh('.safetensors');
    await writeLatents(path, z);
    const back = await readLatents(path);
    expect(back.shape).toEqual([1, 16, 2, 2, 3]);
    expect(back.dtype).toBe('float32');
    expect(await back.toArray()).toEqual(await z.toArray());
  });

  it('completes [C, T, h, w] and [C, h, w] to [B, C, T, h, w], converting bf16 and f64 to float32', async () => {
    const v = values(4 * 2 * 3);
    const bf = Uint16Array.from(v, f32ToBf16Bits);
    const p4 = fresh('.safetensors');
    await writeSafetensors(p4, [['z', { dtype: 'bfloat16', shape: [4, 1, 2, 3], bytes: () => new Uint8Array(bf.buffer) }]]);
    const t4 = await readLatents(p4);
    expect(t4.shape).toEqual([1, 4, 1, 2, 3]);
    expect(t4.dtype).toBe('float32');
    expect(Array.from(await t4.toArray())).toEqual(Array.from(bf, bf16BitsToF32));

    const p3 = fresh('.safetensors');
    await writeSafetensors(p3, [['z', { dtype: 'F64', shape: [4, 2, 3], bytes: () => encode('<f8', v) }]]);
    const t3 = await readLatents(p3);
    expect(t3.shape).toEqual([1, 4, 1, 2, 3]);
    expect(await t3.toArray()).toEqual(v);
  });

  it("takes the tensor named 'latents' when there are several, and says so when there is none", async () => {
    const z = tensor(values(6), { shape: [1, 2, 1, 1, 3] });
    const other = tensor(values(2, 9), { shape: [2] });
    const path = fresh('.safetensors');
    await writeSafetensors(path, [
      ['timesteps', { dtype: 'float32', shape: [2], bytes: async () => new Uint8Array((await other.toArray()).buffer) }],
      ['latents', { dtype: 'float32', shape: z.shape, bytes: async () => new Uint8Array((await z.toArray()).buffer) }],
    ]);
    expect(await (await readLatents(path)).toArray()).toEqual(await z.toArray());

    const bad = fresh('.safetensors');
    await writeSafetensors(bad, [
      ['a', { dtype: 'float32', shape: [2], bytes: () => new Uint8Array(8) }],
      ['b', { dtype: 'float32', shape: [2], bytes: () => new Uint8Array(8) }],
    ]);
    await expectCheckpointError(readLatents(bad), bad, 8, /holds 2 tensors and none is named 'latents' \(a, b\)/);
  });

  it('rejects integer tensors, wrong ranks and a file with no tensors, naming the tensor and its offset', async () => {
    const ints = fresh('.safetensors');
    await writeSafetensors(ints, [['latents', { dtype: 'int32', shape: [1, 2, 1, 1, 1], bytes: () => new Uint8Array(8) }]]);
    const e = await errorOf(readLatents(ints));
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e.message).toMatch(/tensor 'latents', byte \d+: unsupported latents dtype I32/);

    const flat = fresh('.safetensors');
    await writeSafetensors(flat, [['latents', { dtype: 'float32', shape: [4, 4], bytes: () => new Uint8Array(64) }]]);
    const r = await errorOf(readLatents(flat));
    expect(r).toBeInstanceOf(CheckpointError);
    expect(r.message).toMatch(/rank 2 \(shape \[4, 4\]\); expected \[B, C, T, h, w\], \[C, T, h, w\] or \[C, h, w\]/);

    const empty = fresh('.safetensors');
    await writeSafetensors(empty, []);
    await expectCheckpointError(readLatents(empty), empty, 8, /holds no tensors/);
  });

  it('passes on the header validation of the safetensors reader (a truncated file)', async () => {
    const path = fresh('.safetensors');
    await writeLatents(path, tensor(values(6), { shape: [1, 2, 1, 1, 3] }));
    const { readFile } = await import('node:fs/promises');
    const bytes = await readFile(path);
    await writeFile(path, bytes.subarray(0, bytes.length - 4));
    await expect(readLatents(path)).rejects.toThrow(CheckpointError);
  });
});

describe('readLatents: .npy', () => {
  it('reads float32 (format 1.0), float16 (2.0) and float64 (3.0) in C order', async () => {
    const v = values(16 * 2 * 2 * 3);
    const shape = [1, 16, 2, 2, 3];
    const f4 = await writeNpy('<f4', shape, encode('<f4', v));
    const t4 = await readLatents(f4.path);
    expect(t4.shape).toEqual(shape);
    expect(await t4.toArray()).toEqual(v);

    const f2 = await writeNpy('<f2', shape, encode('<f2', v), { version: 2 });
    expect(Array.from(await (await readLatents(f2.path)).toArray())).toEqual(Array.from(v, (x) => f16BitsToF32(f32ToF16Bits(x))));

    const f8 = await writeNpy('<f8', shape, encode('<f8', v), { version: 3 });
    expect(await (await readLatents(f8.path)).toArray()).toEqual(v);
  });

  it('completes [C, T, h, w] and [C, h, w], and reads the old (1L, 2L) shape spelling', async () => {
    const v = values(4 * 2 * 3);
    expect((await readLatents((await writeNpy('<f4', [4, 1, 2, 3], encode('<f4', v))).path)).shape).toEqual([1, 4, 1, 2, 3]);
    expect((await readLatents((await writeNpy('<f4', [4, 2, 3], encode('<f4', v))).path)).shape).toEqual([1, 4, 1, 2, 3]);
    const old = await writeNpy('<f4', [], encode('<f4', v), { header: `{'descr': '<f4', 'fortran_order': False, 'shape': (4L, 2L, 3L), }` });
    expect(await (await readLatents(old.path)).toArray()).toEqual(v);
  });

  it('rejects a file without the NumPy magic at byte 0, and an unknown format version at byte 6', async () => {
    const path = fresh('.npy');
    await writeFile(path, new TextEncoder().encode('not a numpy file at all'));
    await expectCheckpointError(readLatents(path), path, 0, /not a NumPy \.npy file/);
    const v9 = fresh('.npy');
    const { bytes } = npy('<f4', [1, 1, 1], encode('<f4', values(1)));
    bytes[6] = 9;
    await writeFile(v9, bytes);
    await expectCheckpointError(readLatents(v9), v9, 6, /unsupported \.npy format version 9\.0/);
  });

  it('rejects big-endian, integer and structured dtypes at the header', async () => {
    for (const descr of ['>f4', '<i4', '|u1']) {
      const { path } = await writeNpy(descr, [1, 1, 1], new Uint8Array(4));
      await expectCheckpointError(
        readLatents(path),
        path,
        10,
        new RegExp(`unsupported dtype '\\${descr[0]}${descr.slice(1)}': expected '<f4', '<f2' or '<f8'`),
      );
    }
    const { path } = await writeNpy('', [1], new Uint8Array(4), { header: `{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1, 1, 1), }` });
    await expectCheckpointError(readLatents(path), path, 10, /unsupported structured dtype: expected/);
  });

  it('rejects Fortran order', async () => {
    const { path } = await writeNpy('<f4', [2, 2, 2], encode('<f4', values(8)), { fortran: true });
    await expectCheckpointError(readLatents(path), path, 10, /Fortran order/);
  });

  it('rejects data shorter than the shape needs, at the first data byte', async () => {
    const { path, dataStart } = await writeNpy('<f4', [1, 2, 2, 2], encode('<f4', values(7)));
    await expectCheckpointError(readLatents(path), path, dataStart, /data has 28 bytes, shape \(1, 2, 2, 2\) of <f4 needs 32/);
  });

  it('rejects trailing bytes, at the first byte past the data', async () => {
    const { path, dataStart } = await writeNpy('<f2', [1, 2, 2, 2], encode('<f2', values(9)));
    await expectCheckpointError(readLatents(path), path, dataStart + 16, /2 trailing bytes after the 16 bytes of data/);
  });

  it('rejects ranks other than 3, 4 and 5', async () => {
    for (const shape of [[], [8], [2, 4], [1, 1, 1, 2, 2, 2]]) {
      const n = shape.reduce((a, d) => a * d, 1);
      const { path, dataStart } = await writeNpy('<f4', shape, encode('<f4', values(n)));
      await expectCheckpointError(readLatents(path), path, dataStart, new RegExp(`rank ${shape.length} `));
    }
  });

  it('rejects headers that are not the dict NumPy writes, and a header longer than the file', async () => {
    const cases: [string, RegExp][] = [
      [`{'descr': '<f4', 'shape': (1, 1, 1), }`, /no 'fortran_order' key/],
      [`{'descr': '<f4', 'fortran_order': False, 'shape': (1, -1, 1), }`, /'shape' must be a tuple of non-negative integers/],
      [`{'descr': '<f4', 'fortran_order': 0, 'shape': (1, 1, 1), }`, /'fortran_order' must be True or False/],
      [`{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1)`, /not a Python dict literal/],
      [`__import__('os').system('true')`, /not a Python dict literal/],
      [`[1, 2]`, /header is not a dict/],
    ];
    for (const [header, problem] of cases) {
      const { path } = await writeNpy('<f4', [], new Uint8Array(4), { header });
      await expectCheckpointError(readLatents(path), path, 10, problem);
    }
    const path = fresh('.npy');
    const { bytes } = npy('<f4', [1, 1, 1], new Uint8Array(4));
    new DataView(bytes.buffer).setUint16(8, 60000, true);
    await writeFile(path, bytes);
    await expectCheckpointError(readLatents(path), path, 8, /header claims 60000 bytes/);
  });

  it('rejects other extensions and missing files, naming the path', async () => {
    await expectCheckpointError(readLatents(join(dir, 'z.pt')), join(dir, 'z.pt'), undefined, /unsupported latents file type '\.pt'/);
    await expectCheckpointError(readLatents(join(dir, 'missing.npy')), join(dir, 'missing.npy'), undefined, /cannot read: ENOENT/);
  });
});
