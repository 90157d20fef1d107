// sampleRows: a batch of logits rows sampled in one dispatch, each row with its own options. Checked row by row
// against sampleToken (the single-row sampler, itself tested against the definition in sample.test.ts) on fresh
// random logits: identical ids on WebGPU, identical ids on the CPU backend, and greedy rows equal across backends.
import { describe, expect, it } from 'vitest';
import {
  cat,
  gpuCounters,
  narrow,
  randn,
  sampleRows,
  sampleToken,
  samplingDraw,
  setDefaultDevice,
  ShapeError,
  tensor,
  Generator,
  type RowSampling,
  type Tensor,
} from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const V = 1003; // not a multiple of the workgroup
const ROWS: RowSampling[] = [
  { temperature: 0 },
  { topK: 1, seed: 3 },
  { temperature: 0.8, topK: 20, seed: 11 },
  { topP: 0.9, seed: 12 },
  { minP: 0.05, temperature: 1.3, seed: 13 },
  { temperature: 0.7, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.2, previousTokens: [5, 9, 5, 1002, 77], seed: 14 },
  { temperature: 0, repetitionPenalty: 2, previousTokens: [], seed: 15 },
  { temperature: 1, previousTokens: [0, 1, 2], presencePenalty: 3, seed: 16 },
];

function logitsOn(device: 'cpu' | 'webgpu', seed: number, rows = ROWS.length, dtype: 'float32' | 'float16' | 'bfloat16' = 'float32'): Tensor {
  const x = randn([rows, V], { generator: new Generator(seed), device }).mul(3);
  return dtype === 'float32' ? x : x.to(dtype);
}

async function ids(t: Tensor): Promise<number[]> {
  const out = [...(await t.toArray())];
  t.dispose();
  return out;
}

async function oneByOne(logits: Tensor, rows: readonly RowSampling[]): Promise<number[]> {
  const picked = rows.map((r, i) => sampleToken(narrow(logits, 0, i, 1), r));
  const all = cat(picked, 0);
  for (const p of picked) p.dispose();
  return ids(all);
}

describe('sampleRows on the CPU backend', () => {
  it('gives the ids sampleToken gives row by row', async () => {
    for (const seed of [1, 2, 3]) {
      const x = logitsOn('cpu', seed);
      expect(await ids(sampleRows(x, ROWS))).toEqual(await oneByOne(x, ROWS));
      x.dispose();
    }
  });

  it('validates shapes: rows per logits row, [B, V] logits, float32 [B] draws', () => {
    const x = logitsOn('cpu', 1, 3);
    expect(() => sampleRows(x, ROWS)).toThrow(ShapeError);
    expect(() => sampleRows(narrow(x, 0, 0, 1).reshape([V]), [{}])).toThrow(ShapeError);
    expect(() => sampleRows(x, ROWS.slice(0, 3), { draws: tensor([0.5, 0.5]) })).toThrow(ShapeError);
    expect(() => sampleRows(x, [{ topP: 0 }, {}, {}])).toThrow(RangeError);
    x.dispose();
  });
});

describe.skipIf(!gpu.available)(`sampleRows on WebGPU ${gpu.skipReason}`, () => {
  it('matches sampleToken row by row exactly, greedy rows match the CPU, in one dispatch', async () => {
    for (const seed of [4, 5, 6]) {
      const x = logitsOn('webgpu', seed);
      const d0 = gpuCounters().dispatches;
      const batched = sampleRows(x, ROWS);
      expect(gpuCounters().dispatches - d0).toBe(1);
      const got = await ids(batched);
      expect(got).toEqual(await oneByOne(x, ROWS));
      const cpuX = await x.to('cpu');
      const cpu = await ids(sampleRows(cpuX, ROWS));
      for (const r of [0, 1, 6]) expect(got[r], `greedy row ${r}`).toBe(cpu[r]);
      for (const t of [x, cpuX]) t.dispose();
    }
  });

  it('reads f16 and bf16 logits, and gives -1 for a row of -Inf / NaN', async () => {
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const x = logitsOn('webgpu', 7, ROWS.length, dtype);
      expect(await ids(sampleRows(x, ROWS))).toEqual(await oneByOne(x, ROWS));
      x.dispose();
    }
    const bad = tensor(
      [
        [-Infinity, -Infinity, -Infinity],
        [NaN, NaN, NaN],
        [0, 2, 1],
      ],
      { device: 'webgpu' },
    );
    expect(await ids(sampleRows(bad, [{ seed: 1 }, { temperature: 0 }, { temperature: 0 }]))).toEqual([-1, -1, 1]);
    bad.dispose();
  });

  it("takes each row's draw from a device tensor exactly as from its seed", async () => {
    const x = logitsOn('webgpu', 8);
    const draws = tensor(
      ROWS.map((r) => samplingDraw({ seed: r.seed ?? 0 })),
      { device: 'webgpu' },
    );
    const seeded = ROWS.map((r) => ({ ...r, seed: r.seed ?? 0 }));
    expect(
      await ids(
        sampleRows(
          x,
          ROWS.map(({ seed: _, ...r }) => r),
          { draws },
        ),
      ),
    ).toEqual(await ids(sampleRows(x, seeded)));
    for (const t of [x, draws]) t.dispose();
  });

  it('handles one row, a row view at an offset, and an empty batch', async () => {
    const x = logitsOn('webgpu', 9);
    const view = narrow(x, 0, 3, 2);
    expect(await ids(sampleRows(view, ROWS.slice(3, 5)))).toEqual(await oneByOne(view, ROWS.slice(3, 5)));
    expect(await ids(sampleRows(narrow(x, 0, 2, 1), [ROWS[2]!]))).toEqual(await oneByOne(narrow(x, 0, 2, 1), [ROWS[2]!]));
    expect(await ids(sampleRows(narrow(x, 0, 0, 0), []))).toEqual([]);
    x.dispose();
  });
});
