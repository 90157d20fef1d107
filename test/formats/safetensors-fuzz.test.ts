// Property tests of the safetensors reader against hostile input: a valid generated file (several tensors of
// several formats, metadata) is damaged, by editing its header's meaning (offsets, dims, dtype names) and by
// overwriting bytes (mostly in the length field and the header), cutting it short or appending to it. Opening it
// and loading every listed tensor must then either succeed with exactly the file's bytes, or fail with a
// CheckpointError: never another error type, never a hang. The same for parseHeader, headerLength and the two
// scanners on arbitrary bytes and JSON. Seeded (FC_SEED, FC_RUNS override) so a failure replays.
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointError, Generator, setDefaultDevice, type Tensor } from '../../src/index.js';
import { DTYPE_INFO } from '../../src/core/dtype.js';
import { toBytes } from '../../src/ops/convert.js';
import { firstDuplicateKey } from '../../src/formats/json-keys.js';
import {
  firstInvalidUtf8,
  headerLength,
  MAX_HEADER_BYTES,
  parseHeader,
  SAFETENSORS_DTYPES,
  type SafetensorsHeader,
} from '../../src/formats/safetensors-header.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';

setDefaultDevice('cpu');

const SEED = Number(process.env.FC_SEED ?? 20240611);
const RUNS = Number(process.env.FC_RUNS ?? 300);
/** Each run gets this long before it counts as a hang. */
const RUN_LIMIT_MS = 2000;

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tensorgpu-safetensors-fuzz-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const FORMATS = Object.keys(SAFETENSORS_DTYPES);
const utf8 = (s: string) => new TextEncoder().encode(s);

// ---- a valid file, then damage -----------------------------------------------------------------------------------

interface TensorSpec {
  name: string;
  format: string;
  shape: number[];
}

interface FileSpec {
  tensors: TensorSpec[];
  metadata: Record<string, string>;
  dataSeed: number;
}

const tensorSpec: fc.Arbitrary<TensorSpec> = fc.record({
  name: fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('w', 'model.layers.0.mlp.weight', '__proto__', 'toString', '0', '\u00e9\u{1f600}', 'a"b\\c')),
  format: fc.constantFrom(...FORMATS),
  shape: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 }),
});

const fileSpec: fc.Arbitrary<FileSpec> = fc.record({
  tensors: fc.uniqueArray(tensorSpec, { selector: (t) => t.name, minLength: 1, maxLength: 5 }).map((ts) => ts.filter((t) => t.name !== '__metadata__')),
  metadata: fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 8, unit: 'binary' }), { maxKeys: 3 }),
  dataSeed: fc.nat(),
});

/** Edits that keep the header JSON well-formed, so the damage reaches the checks behind the parser. */
type HeaderEdit =
  | { kind: 'offset'; tensor: number; which: 0 | 1; delta: number }
  | { kind: 'dim'; tensor: number; dim: number; value: number }
  | { kind: 'dtype'; tensor: number; format: string }
  | { kind: 'drop'; tensor: number; key: 'dtype' | 'shape' | 'data_offsets' }
  | { kind: 'metadata'; value: number | null };

const headerEdit: fc.Arbitrary<HeaderEdit> = fc.oneof(
  fc.record({ kind: fc.constant('offset' as const), tensor: fc.nat(), which: fc.constantFrom(0 as const, 1 as const), delta: fc.integer({ min: -9, max: 9 }) }),
  fc.record({
    kind: fc.constant('dim' as const),
    tensor: fc.nat(),
    dim: fc.nat(),
    value: fc.oneof(fc.integer({ min: 0, max: 6 }), fc.constantFrom(-1, 1.5, 2 ** 26, 2 ** 32, 2 ** 53, 2 ** 60, 1e300)),
  }),
  fc.record({
    kind: fc.constant('dtype' as const),
    tensor: fc.nat(),
    format: fc.oneof(fc.constantFrom(...FORMATS), fc.constantFrom('F128', 'bf16', 'toString', '__proto__', '')),
  }),
  fc.record({ kind: fc.constant('drop' as const), tensor: fc.nat(), key: fc.constantFrom('dtype' as const, 'shape' as const, 'data_offsets' as const) }),
  fc.record({ kind: fc.constant('metadata' as const), value: fc.constantFrom(1, null) }),
);

/**
 * Byte positions: mostly the length field and the header, where one changed byte changes the meaning most; some in
 * the data, which must leave the file valid and show up in the loaded bytes.
 */
const region = fc.oneof(
  { weight: 3, arbitrary: fc.constant('prefix' as const) },
  { weight: 5, arbitrary: fc.constant('header' as const) },
  { weight: 2, arbitrary: fc.constant('data' as const) },
  { weight: 1, arbitrary: fc.constant('any' as const) },
);
type Region = 'prefix' | 'header' | 'data' | 'any';

/** Bytes that matter to a JSON parser, a UTF-8 decoder or a little-endian length, and any byte. */
const byteValue = fc.oneof(
  fc.integer({ min: 0, max: 255 }),
  fc.constantFrom(...utf8('"{}[],:\\-.0123456789eE '), 0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xc3, 0xe0, 0xed, 0xf0, 0xf4, 0xff),
);

type ByteEdit =
  | { kind: 'set'; region: Region; at: number; value: number }
  | { kind: 'truncate'; keep: number }
  | { kind: 'append'; bytes: Uint8Array }
  | { kind: 'delete'; region: 'header' | 'any'; at: number; count: number };

const byteEdit: fc.Arbitrary<ByteEdit> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('set' as const), region, at: fc.nat(), value: byteValue }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncate' as const), keep: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('append' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 9 }) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('delete' as const),
      region: fc.constantFrom('header' as const, 'any' as const),
      at: fc.nat(),
      count: fc.integer({ min: 1, max: 4 }),
    }),
  },
);

type HeaderJson = Record<string, unknown>;

/** The header object and data of a valid file (tensors packed in order, like the reference writer). */
function validFile(spec: FileSpec): { header: HeaderJson; data: Uint8Array } {
  const header: HeaderJson = Object.create(null) as HeaderJson;
  if (Object.keys(spec.metadata).length > 0) header.__metadata__ = spec.metadata;
  let at = 0;
  for (const t of spec.tensors) {
    const size = t.shape.reduce((a, d) => a * d, SAFETENSORS_DTYPES[t.format].bytes);
    header[t.name] = { dtype: t.format, shape: t.shape, data_offsets: [at, at + size] };
    at += size;
  }
  const g = new Generator(spec.dataSeed);
  const data = Uint8Array.from({ length: at }, () => g.nextU32() & 0xff);
  if (at > 0) data[0] |= 1; // never all zero
  return { header, data };
}

function applyHeaderEdit(header: HeaderJson, names: string[], edit: HeaderEdit): void {
  if (edit.kind === 'metadata') {
    header.__metadata__ = { k: edit.value };
    return;
  }
  const entry = header[names[edit.tensor % names.length]] as { dtype?: string; shape?: number[]; data_offsets?: number[] };
  switch (edit.kind) {
    case 'offset':
      if (entry.data_offsets) entry.data_offsets[edit.which] += edit.delta;
      break;
    case 'dim':
      if (entry.shape) entry.shape[edit.dim % (entry.shape.length + 1)] = edit.value;
      break;
    case 'dtype':
      entry.dtype = edit.format;
      break;
    case 'drop':
      delete entry[edit.key];
      break;
  }
}

function serialize(header: HeaderJson, data: Uint8Array): Uint8Array {
  let json = utf8(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded > json.length) json = Uint8Array.from({ length: padded }, (_, i) => json[i] ?? 0x20);
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

function applyByteEdit(file: Uint8Array, headerEnd: number, edit: ByteEdit): Uint8Array {
  const pick = (r: Region, at: number) => {
    const [lo, hi] = r === 'prefix' ? [0, 8] : r === 'header' ? [8, headerEnd] : r === 'data' ? [headerEnd, file.length] : [0, file.length];
    return Math.min(lo + (at % Math.max(1, hi - lo)), file.length);
  };
  switch (edit.kind) {
    case 'set': {
      const at = pick(edit.region, edit.at);
      if (at >= file.length) return file;
      const out = file.slice();
      out[at] = edit.value;
      return out;
    }
    case 'truncate':
      return file.slice(0, edit.keep % (file.length + 1));
    case 'append': {
      const out = new Uint8Array(file.length + edit.bytes.length);
      out.set(file);
      out.set(edit.bytes, file.length);
      return out;
    }
    case 'delete': {
      const at = pick(edit.region, edit.at);
      return new Uint8Array([...file.subarray(0, at), ...file.subarray(at + edit.count)]);
    }
  }
}

/** What a successfully parsed header must satisfy whatever the input: entries tile the data section exactly. */
function checkHeaderInvariants(h: SafetensorsHeader, fileSize: number): void {
  const entries = [...h.entries.values()].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = h.dataStart;
  for (const e of entries) {
    expect(e.begin, e.name).toBe(at);
    expect(e.end).toBeGreaterThanOrEqual(e.begin);
    const kind = SAFETENSORS_DTYPES[e.format];
    expect(kind, e.format).toBeDefined();
    expect(e.dtype).toBe(kind.dtype);
    expect(e.shape.every((d) => Number.isSafeInteger(d) && d >= 0)).toBe(true);
    expect(e.shape.reduce((a, d) => a * BigInt(d), BigInt(kind.bytes))).toBe(BigInt(e.end - e.begin));
    at = e.end;
  }
  expect(at).toBe(fileSize);
  for (const v of Object.values(h.metadata)) expect(typeof v).toBe('string');
}

/** A property body: a CheckpointError is an accepted outcome, anything else fails the property. */
function onlyCheckpointErrors(err: unknown, file?: string): void {
  if (!(err instanceof CheckpointError)) throw err;
  if (file !== undefined) expect(err.file).toBe(file);
}

describe('damaged safetensors files: open + load either round-trips the bytes or throws a CheckpointError', () => {
  it('holds for header edits and byte edits of valid files', async () => {
    let runs = 0;
    let opened = 0;
    let loaded = 0;
    await fc.assert(
      fc.asyncProperty(
        fileSpec,
        // Often no edit of one kind, so that the other reaches the load path (about a sixth of the files open).
        fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 2, arbitrary: fc.array(headerEdit, { minLength: 1, maxLength: 2 }) }),
        fc.oneof({ weight: 1, arbitrary: fc.constant([]) }, { weight: 3, arbitrary: fc.array(byteEdit, { minLength: 1, maxLength: 3 }) }),
        fc.constantFrom(undefined, 4, 5, 12),
        async (spec, headerEdits, byteEdits, chunkBytes) => {
          const path = join(dir, `run-${runs++}.safetensors`);
          const { header, data } = validFile(spec);
          const names = spec.tensors.map((t) => t.name);
          for (const e of headerEdits) applyHeaderEdit(header, names, e);
          let bytes = serialize(header, data);
          const headerEnd = bytes.length - data.length;
          for (const e of byteEdits) bytes = applyByteEdit(bytes, headerEnd, e);
          await writeFile(path, bytes);

          let f: SafetensorsFile | undefined;
          try {
            f = await SafetensorsFile.open(path);
            opened++;
            expect(f.size).toBe(bytes.length);
            checkHeaderInvariants(f.header, bytes.length);
            for (const name of f.names) {
              const e = f.entry(name);
              let t: Tensor;
              try {
                t = await f.load(name, { chunkBytes });
              } catch (err) {
                onlyCheckpointErrors(err, path);
                expect(e.dtype, `${name} (${e.format}) failed to load: ${(err as Error).message}`).toBeUndefined();
                expect((err as CheckpointError).tensor).toBe(name);
                continue;
              }
              loaded++;
              expect(e.dtype, `${e.format} loaded`).toBeDefined();
              expect(t.dtype).toBe(e.dtype);
              expect(t.shape).toEqual(e.shape);
              const got = await toBytes(t);
              expect(got.length).toBe(t.shape.reduce((a, d) => a * d, 1) * DTYPE_INFO[t.dtype].itemBytes);
              expect(Buffer.from(got).equals(Buffer.from(bytes.subarray(e.begin, e.end))), name).toBe(true);
              t.dispose();
            }
          } catch (err) {
            onlyCheckpointErrors(err, path);
          } finally {
            await f?.close();
            await rm(path, { force: true });
          }
        },
      ),
      { numRuns: RUNS, seed: SEED, plugins: [fc.timeout(RUN_LIMIT_MS)] },
    );
    // The generators must reach past the parser often enough for the success path to be tested.
    expect(opened).toBeGreaterThan(RUNS / 12);
    expect(loaded).toBeGreaterThan(RUNS / 12);
  }, 30_000);
});

describe('parseHeader, headerLength and the scanners on arbitrary input throw only CheckpointError', () => {
  const fileSize = fc.oneof(fc.nat({ max: 4096 }), fc.constant(0));
  const opts = { numRuns: RUNS, seed: SEED };

  it('parseHeader on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fileSize, (json, size) => {
        try {
          checkHeaderInvariants(parseHeader(json, size, 'mem'), size);
        } catch (err) {
          onlyCheckpointErrors(err, 'mem');
        }
      }),
      opts,
    );
  });

  it('parseHeader on arbitrary JSON text and objects', () => {
    const text = fc.oneof(
      fc.json(),
      fc.object().map((o) => JSON.stringify(o)),
      fc.dictionary(fc.string(), fc.jsonValue()).map((o) => JSON.stringify(o)),
    );
    fc.assert(
      fc.property(text, fileSize, (t, size) => {
        const json = utf8(t);
        try {
          checkHeaderInvariants(parseHeader(json, 8 + json.length + size, 'mem'), 8 + json.length + size);
        } catch (err) {
          onlyCheckpointErrors(err, 'mem');
        }
      }),
      opts,
    );
  });

  it('parseHeader on header-shaped objects (entries with plausible and implausible fields)', () => {
    const count = fc.oneof(fc.nat({ max: 40 }), fc.integer({ min: -3, max: -1 }), fc.constantFrom(1.5, 2 ** 53, 2 ** 60, 1e300));
    const entry = fc.record(
      {
        dtype: fc.oneof(fc.constantFrom(...FORMATS), fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 1 })),
        shape: fc.oneof(fc.array(count, { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })),
        data_offsets: fc.oneof(fc.tuple(count, count), fc.array(count, { maxLength: 3 }), fc.jsonValue({ maxDepth: 1 })),
      },
      { requiredKeys: [] },
    );
    const header = fc.dictionary(
      fc.oneof(fc.string({ maxLength: 3 }), fc.constant('__metadata__')),
      fc.oneof({ weight: 5, arbitrary: entry }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) }),
      {
        maxKeys: 4,
      },
    );
    let accepted = 0;
    fc.assert(
      fc.property(header, fc.nat({ max: 64 }), (h, size) => {
        const json = utf8(JSON.stringify(h));
        try {
          checkHeaderInvariants(parseHeader(json, 8 + json.length + size, 'mem'), 8 + json.length + size);
          accepted++;
        } catch (err) {
          onlyCheckpointErrors(err, 'mem');
        }
      }),
      { ...opts, numRuns: RUNS * 3 },
    );
    expect(accepted).toBeGreaterThan(0);
  });

  it('headerLength on arbitrary prefixes and sizes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 10 }), fc.oneof(fc.nat({ max: 1 << 20 }), fc.constant(MAX_HEADER_BYTES + 100)), (prefix, size) => {
        try {
          const n = headerLength(prefix, size, 'mem');
          expect(n).toBeGreaterThanOrEqual(2);
          expect(n).toBeLessThanOrEqual(Math.min(size - 8, MAX_HEADER_BYTES));
          expect(BigInt(n)).toBe(new DataView(prefix.buffer, prefix.byteOffset).getBigUint64(0, true));
        } catch (err) {
          onlyCheckpointErrors(err, 'mem');
          expect((err as CheckpointError).offset).toBe(0);
        }
      }),
      opts,
    );
  });

  it('firstInvalidUtf8 agrees with a fatal TextDecoder, and everything before the bad byte is valid', () => {
    const bytes = fc.oneof(fc.uint8Array({ maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 8 }).map(utf8));
    fc.assert(
      fc.property(bytes, (b) => {
        let valid = true;
        try {
          new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(b);
        } catch {
          valid = false;
        }
        const at = firstInvalidUtf8(b);
        expect(at === -1).toBe(valid);
        if (at >= 0) {
          expect(at).toBeLessThan(b.length);
          expect(firstInvalidUtf8(b.subarray(0, at))).toBe(-1);
        }
      }),
      { ...opts, numRuns: RUNS * 5 },
    );
  });

  it('firstDuplicateKey: none in JSON.stringify output, and it finds a key appended twice', () => {
    const obj = fc.dictionary(fc.string({ unit: 'binary', maxLength: 4 }), fc.jsonValue({ maxDepth: 3 }), { minKeys: 1, maxKeys: 5 });
    fc.assert(
      fc.property(obj, fc.nat(), (o, pick) => {
        const text = JSON.stringify(o);
        expect(firstDuplicateKey(text)).toBeUndefined();
        const keys = Object.keys(o);
        const key = keys[pick % keys.length];
        const tail = `${JSON.stringify(key)}:0}`;
        const twice = `${text.slice(0, -1)},${tail}`;
        JSON.parse(twice);
        expect(firstDuplicateKey(twice)).toEqual({ key, index: twice.length - tail.length });
      }),
      opts,
    );
  });
});
