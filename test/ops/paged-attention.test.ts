// A paged KV cache (pages of a shared pool, a page table per sequence): attentionInputs writes a sequence's rows
// through its table and attention reads them back, on the CPU and on WebGPU, against the same work on a contiguous
// cache; and the batch-invariant kernels (withBatchInvariance): a row's linear / expertLinear output is the same
// bits whatever the number of rows beside it.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type Tensor } from '../../src/index.js';
import { BITS, expectClose, randomTensor, randomValues } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const HEADS = 4;
const KV = 2;
const D = 32;
const PAGE = 16;

function ropeTables(positions: number): [Tensor, Tensor] {
  const half = D / 2;
  const cos: number[] = [];
  const sin: number[] = [];
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      cos.push(Math.cos(p * 1e4 ** (-(2 * i) / D)));
      sin.push(Math.sin(p * 1e4 ** (-(2 * i) / D)));
    }
  }
  return [tg.tensor(cos, { shape: [positions, half] }), tg.tensor(sin, { shape: [positions, half] })];
}

interface Outputs {
  /** Attention output of every step, concatenated. */
  attn: number[];
  /** The sequence's cache rows in logical order. */
  keys: number[];
}

const POOL_PAGES = 40;
const WIDTH = (HEADS + 2 * KV) * D;

/** A pool [POOL_PAGES * PAGE, KV, D] holding other sequences' (random) rows: pages not in a table must never be read. */
async function pool(device: 'cpu' | 'webgpu', seed: number): Promise<[Tensor, Tensor]> {
  const rows = POOL_PAGES * PAGE;
  const make = (k: number) => tg.tensor(randomValues(rows * KV * D, 'float32', 'normal', seed + k), { shape: [rows, KV, D] });
  return device === 'webgpu' ? [await make(1).to('webgpu'), await make(2).to('webgpu')] : [make(1), make(2)];
}

async function tables(device: 'cpu' | 'webgpu', positions: number): Promise<[Tensor, Tensor]> {
  const [cos, sin] = ropeTables(positions);
  return device === 'webgpu' ? [await cos.to('webgpu'), await sin.to('webgpu')] : [cos, sin];
}

/**
 * A prompt of `prompt` tokens, then `decode` single-token steps, through attentionInputs + attention: contiguous
 * (a cache of its own) or paged (pool pages `table`, through pagedIndex).
 */
async function runSequence(device: 'cpu' | 'webgpu', paged: boolean, prompt: number, decode: number, table: number[], seed: number): Promise<Outputs> {
  const total = prompt + decode;
  const [cos, sin] = await tables(device, total + 1);
  let qkvAll = tg.tensor(randomValues(total * WIDTH, 'float32', 'normal', seed), { shape: [total, WIDTH] });
  if (device === 'webgpu') qkvAll = await qkvAll.to('webgpu');
  const [keys, values] = paged ? await pool(device, seed) : [tg.zeros([total, KV, D], { device }), tg.zeros([total, KV, D], { device })];
  const attn: number[] = [];
  for (const [start, s] of [[0, prompt], ...Array.from({ length: decode }, (_, i) => [prompt + i, 1])]) {
    const qkv = tg.narrow(qkvAll, 0, start, s);
    const pages = paged ? tg.pagedIndex([{ pages: table, start, rows: s }], PAGE, device) : undefined;
    const q = tg.attentionInputs(qkv, { heads: HEADS, kvHeads: KV, headDim: D, cos, sin, keys, values, position: start, pages });
    const length = start + s;
    const out = pages
      ? tg.attention(q, keys, values, { pages })
      : tg.attention(q, tg.narrow(keys, 0, 0, length), tg.narrow(values, 0, 0, length), { causal: true, queryOffset: start });
    attn.push(...(await out.toArray()));
  }
  const flat = await keys.toArray();
  const logical: number[] = [];
  for (let j = 0; j < total; j++) {
    const row = paged ? table[Math.floor(j / PAGE)]! * PAGE + (j % PAGE) : j;
    logical.push(...flat.slice(row * KV * D, (row + 1) * KV * D));
  }
  return { attn, keys: logical };
}

// Page tables out of order, a length ending mid-page, a prompt crossing pages.
const CASES = [
  { prompt: 5, decode: 3, table: [7] },
  { prompt: 20, decode: 14, table: [3, 0, 9] },
];

/** Three sequences decoding one token each in one call (one past a 256-key split), and each of them alone. */
async function runBatch(device: 'cpu' | 'webgpu'): Promise<{ together: number[]; alone: number[][] }> {
  const seqs = [
    { start: 5, table: [12] },
    { start: 300, table: Array.from({ length: 19 }, (_, i) => (i * 7 + 1) % POOL_PAGES) },
    { start: 40, table: [30, 31, 39] },
  ];
  const [keys, values] = await pool(device, 77);
  const [cos, sin] = await tables(device, 320);
  let qkv = tg.tensor(randomValues(seqs.length * WIDTH, 'float32', 'normal', 78), { shape: [seqs.length, WIDTH] });
  if (device === 'webgpu') qkv = await qkv.to('webgpu');
  const run = async (rows: number[]) => {
    const pages = tg.pagedIndex(
      rows.map((r) => ({ pages: seqs[r]!.table, start: seqs[r]!.start, rows: 1 })),
      PAGE,
      device,
    );
    const x = rows.length === seqs.length ? qkv : tg.narrow(qkv, 0, rows[0]!, 1);
    const q = tg.attentionInputs(x, { heads: HEADS, kvHeads: KV, headDim: D, cos, sin, keys, values, position: 0, pages });
    return Array.from(await tg.attention(q, keys, values, { pages }).toArray());
  };
  const together = await run([0, 1, 2]);
  const alone = [await run([0]), await run([1]), await run([2])];
  return { together, alone };
}

describe('paged KV cache on the CPU', () => {
  it.each(CASES)('equals a contiguous cache: prompt $prompt, then $decode steps', async (c) => {
    const want = await runSequence('cpu', false, c.prompt, c.decode, [], 11);
    const got = await runSequence('cpu', true, c.prompt, c.decode, c.table, 11);
    expectClose(got.keys, want.keys, BITS, 'cache rows');
    expectClose(got.attn, want.attn, BITS, 'attention');
  });

  it('rejects a bad paged index by name', () => {
    const pool = tg.zeros([32, KV, D]);
    const q = tg.zeros([1, HEADS, D]);
    const pages = tg.pagedIndex([{ pages: [0, 1], start: 3, rows: 1 }], PAGE, 'cpu');
    expect(() => tg.attention(tg.zeros([2, HEADS, D]), pool, pool, { pages })).toThrow(/describes 1 rows, the input has 2/);
    expect(() => tg.attention(q, pool, pool, { pages: { ...pages, index: tg.tensor([3, 2, 0, 1]) } })).toThrow(/1-D int32 tensor/);
    expect(() => tg.attention(q, pool, pool, { pages: { ...pages, pageSize: 5 } })).toThrow(/pageSize must be a positive integer dividing/);
    expect(() => tg.pagedIndex([{ pages: [0, 1], start: 31, rows: 2 }], PAGE, 'cpu')).toThrow(/positions 31\.\.32 do not fit 2 pages of 16/);
    const [cos, sin] = ropeTables(8);
    const qkv = tg.zeros([1, WIDTH]);
    expect(() =>
      tg.attentionInputs(qkv, {
        heads: HEADS,
        kvHeads: KV,
        headDim: D,
        cos,
        sin,
        keys: pool,
        values: pool,
        position: 0,
        pages: tg.pagedIndex([{ pages: [0], start: 9, rows: 1 }], PAGE, 'cpu'),
      }),
    ).toThrow(/outside the RoPE table/);
  });

  it('runs a batch of sequences in one call as each alone', async () => {
    const { together, alone } = await runBatch('cpu');
    expectClose(together, alone.flat(), BITS, 'batch vs alone');
  });
});

describe.skipIf(!gpu.available)(`paged KV cache on WebGPU ${gpu.skipReason}`, () => {
  it.each(CASES)('writes the rows of a contiguous cache and matches the CPU: prompt $prompt, then $decode steps', async (c) => {
    const contiguous = await runSequence('webgpu', false, c.prompt, c.decode, [], 23);
    const got = await runSequence('webgpu', true, c.prompt, c.decode, c.table, 23);
    expectClose(got.keys, contiguous.keys, BITS, 'cache rows');
    expectClose(got.attn, contiguous.attn, { atol: 1e-5, rtol: 1e-4 }, 'attention vs contiguous');
    const cpu = await runSequence('cpu', true, c.prompt, c.decode, c.table, 23);
    expectClose(got.attn, cpu.attn, { atol: 1e-5, rtol: 1e-4 }, 'attention vs CPU');
  });

  it('runs a batch of sequences (one over 256 keys) in one dispatch pair with the bits of each alone, and matches the CPU', async () => {
    const { together, alone } = await runBatch('webgpu');
    expectClose(together, alone.flat(), BITS, 'batch vs alone');
    const cpu = await runBatch('cpu');
    expectClose(together, cpu.together, { atol: 1e-5, rtol: 1e-4 }, 'vs CPU');
  });
});

describe.skipIf(!gpu.available)(`batch-invariant kernels on WebGPU ${gpu.skipReason}`, () => {
  it.each([
    { k: 96, n: 40, dtype: 'float32' as const, residual: false, swiglu: false },
    { k: 256, n: 64, dtype: 'bfloat16' as const, residual: true, swiglu: false },
    { k: 128, n: 48, dtype: 'float8_e4m3fn' as const, residual: false, swiglu: true },
  ])('a row of linear gives the same bits beside 0..8 others: K $k, $dtype weights', async (c) => {
    const rows = 9;
    const x = await randomTensor([rows, c.k]).to('webgpu');
    const w = await tg.tensor(randomValues(c.n * c.k, c.dtype, 'normal', 3, 0.5), { shape: [c.n, c.k], dtype: c.dtype, saturate: true }).to('webgpu');
    const res = c.residual ? await randomTensor([rows, c.swiglu ? c.n / 2 : c.n]).to('webgpu') : undefined;
    const scale =
      c.dtype === 'float8_e4m3fn'
        ? await tg
            .tensor(randomValues(c.n, 'float32', 'normal', 4))
            .abs()
            .add(0.5)
            .to('webgpu')
        : undefined;
    const options = (r?: Tensor) => ({ residual: r, activation: c.swiglu ? ('swiglu' as const) : undefined, weightScale: scale });
    const run = (b: number, start = 0) =>
      tg.withBatchInvariance(() => tg.linear(tg.narrow(x, 0, start, b), w, undefined, options(res && tg.narrow(res, 0, start, b)))).toArray();
    const alone = await Promise.all(Array.from({ length: rows }, (_, r) => run(1, r)));
    const width = c.swiglu ? c.n / 2 : c.n;
    for (const b of [2, 4, 5, 9]) {
      const all = await run(b);
      for (let r = 0; r < b; r++) expectClose(all.slice(r * width, (r + 1) * width), alone[r], BITS, `row ${r} of ${b}`);
    }
    const cpuScale = scale && (await scale.to('cpu'));
    const cpu = await tg.linear(await x.to('cpu'), await w.to('cpu'), undefined, { ...options(res && (await res.to('cpu'))), weightScale: cpuScale }).toArray();
    expectClose(await run(rows), cpu, { atol: 1e-4, rtol: 1e-4 }, 'vs CPU');
  });

  it('an expertLinear row gives the same bits with 1 or 20 tokens (past the grouped-GEMM threshold)', async () => {
    const [t, k, e, n, kd] = [20, 2, 6, 32, 64];
    const x = await randomTensor([t, kd]).to('webgpu');
    const w = await randomTensor([e, n, kd], 'float32', 'normal', 0.3).to('webgpu');
    const ids = await tg
      .tensor(
        Array.from({ length: t * k }, (_, i) => (i * 5 + 1) % e),
        { dtype: 'int32', shape: [t, k] },
      )
      .to('webgpu');
    const all = await tg.withBatchInvariance(() => tg.expertLinear(x, w, ids)).toArray();
    for (const r of [0, 7, 19]) {
      const one = await tg.withBatchInvariance(() => tg.expertLinear(tg.narrow(x, 0, r, 1), w, tg.narrow(ids, 0, r, 1))).toArray();
      expectClose(all.slice(r * k * n, (r + 1) * k * n), one, BITS, `token ${r}`);
    }
  });
});
