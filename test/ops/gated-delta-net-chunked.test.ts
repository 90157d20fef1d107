// gatedDeltaNet's chunked WebGPU prefill (gated-delta-net-chunked.ts, the WY / UT form over 64-token chunks) against
// the CPU's recurrent reference: fresh random inputs and random initial conv and recurrent states, prompts crossing
// chunk edges and ending in a partial chunk, prefills split into pieces (each piece chunked or recurrent by its
// length) equal to one pass, prompts run in several scratch segments, an odd geometry, dk 256, NaN kept to its own
// heads, and a dispatch count that does not grow with S.
import { afterEach, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice } from '../../src/index.js';
import { gatedDeltaNetTuning } from '../../src/kernels/gated-delta-net/webgpu.js';
import { gatedDeltaNetChunkedTuning } from '../../src/kernels/gated-delta-net/webgpu-chunked.js';
import { expectClose } from '../helpers/compare.js';
import { EPS, makeInputs, packedHead, run, split, type Result } from '../helpers/gated-delta-net.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

// float32 against the float64 recurrence: the chunked form reassociates the sums (and the CPU rounds the state to
// float32 every token), so a few 1e-5 of drift on values of order 1.
const TOL = { atol: 1e-4, rtol: 1e-4 };
const DEFAULTS = { chunkedFrom: gatedDeltaNetTuning.chunkedFrom, scratchBytes: gatedDeltaNetChunkedTuning.scratchBytes };

afterEach(() => {
  gatedDeltaNetTuning.chunkedFrom = DEFAULTS.chunkedFrom;
  gatedDeltaNetChunkedTuning.scratchBytes = DEFAULTS.scratchBytes;
});

function expectSame(got: Result, want: Result, label: string) {
  expectClose(got.out, want.out, TOL, `${label} out`);
  expectClose(got.state, want.state, TOL, `${label} state`);
  expectClose(got.conv, want.conv, TOL, `${label} conv state`);
}

const SMALL = { keyHeads: 2, valueHeads: 4, keyDim: 16, valueDim: 16, convKernel: 4 };

describe(`gatedDeltaNet chunked prefill ${gpu.skipReason}`, () => {
  it.each([64, 65, 130, 200])('S = %i from random states matches the CPU', async (s) => {
    if (!gpu.available) return;
    // decay 0.05: g ~ -0.05..-0.8 per token, so the state carries across whole chunks and the inter-chunk terms count.
    const x = makeInputs(SMALL, s, { decay: 0.05, randomStates: true });
    const cpu = await run(x, SMALL, [s], 'cpu');
    expectSame(await run(x, SMALL, [s], 'webgpu'), cpu, `S=${s}`);
  });

  it("the released model's strong decay (A up to 16) and an odd geometry (dk 24, dv 40, Hv = 2 Hk, 3 taps)", async () => {
    if (!gpu.available) return;
    const g = { keyHeads: 1, valueHeads: 2, keyDim: 24, valueDim: 40, convKernel: 3 };
    const x = makeInputs(g, 97, { randomStates: true });
    expectSame(await run(x, g, [97], 'webgpu'), await run(x, g, [97], 'cpu'), 'odd');
    const y = makeInputs(g, 70, { decay: 0.02, randomStates: true });
    expectSame(await run(y, g, [70], 'webgpu'), await run(y, g, [70], 'cpu'), 'odd, slow decay');
  });

  it('dk 256 (8-column state blocks), more state columns than one block, one tap', async () => {
    if (!gpu.available) return;
    const g = { keyHeads: 1, valueHeads: 1, keyDim: 256, valueDim: 20, convKernel: 1 };
    const x = makeInputs(g, 66, { decay: 0.05, randomStates: true });
    expectSame(await run(x, g, [66], 'webgpu'), await run(x, g, [66], 'cpu'), 'dk 256');
  });

  it('prefills in pieces equal one pass: 70 + 5 + 130, 1 + 128 + 3, and tiny scratch segments', async () => {
    if (!gpu.available) return;
    const x = makeInputs(SMALL, 205, { decay: 0.05, randomStates: true });
    const whole = await run(x, SMALL, [205], 'cpu');
    // 70 and 130 take the chunked path, 5 the recurrent one: each piece continues from the states the last left.
    expectSame(await run(x, SMALL, [70, 5, 130], 'webgpu'), whole, '70+5+130');
    expectSame(await run(x, SMALL, [205], 'webgpu'), whole, '205');
    const y = makeInputs(SMALL, 132, { decay: 0.05, randomStates: true });
    const wholeY = await run(y, SMALL, [132], 'cpu');
    expectSame(await run(y, SMALL, [1, 128, 3], 'webgpu'), wholeY, '1+128+3');
    // Every piece chunked, down to pieces shorter than the conv window (the new window mixes old rows and new).
    gatedDeltaNetTuning.chunkedFrom = 1;
    expectSame(await run(y, SMALL, [2, 64, 1, 65], 'webgpu'), wholeY, '2+64+1+65 all chunked');
    // A scratch budget of one chunk: 132 tokens in three segments of four dispatches each.
    gatedDeltaNetChunkedTuning.scratchBytes = 1;
    expectSame(await run(y, SMALL, [132], 'webgpu'), wholeY, 'segments of one chunk');
  });

  it('a NaN input poisons only its own value heads, and only from its token on', async () => {
    const g = SMALL;
    const x = makeInputs(g, 130, { decay: 0.05, randomStates: true });
    const values = (await x.proj.toArray()) as Float32Array;
    const width = x.proj.shape[1];
    values[100 * width + g.keyHeads * g.keyDim] = NaN; // k channel 0 of key head 0 at token 100: value heads 0, 1
    x.proj = tg.tensor(values, { shape: x.proj.shape });
    const cpu = await run(x, g, [130], 'cpu');
    const hvdv = g.valueHeads * g.valueDim;
    const nanAt = (r: Result, t: number, h: number) => r.out.subarray(t * hvdv + h * g.valueDim, t * hvdv + (h + 1) * g.valueDim).some(Number.isNaN);
    expect([nanAt(cpu, 99, 0), nanAt(cpu, 100, 0), nanAt(cpu, 129, 1), nanAt(cpu, 129, 2)]).toEqual([false, true, true, false]);
    if (!gpu.available) return;
    const webgpu = await run(x, g, [130], 'webgpu');
    expectSame(webgpu, cpu, 'NaN'); // NaN exactly where the CPU has it (heads 0 and 1 from token 100)
    const heads23 = Array.from({ length: 130 }, (_, t) => webgpu.out.subarray(t * hvdv + 2 * g.valueDim, (t + 1) * hvdv)).every(
      (row) => !row.some(Number.isNaN),
    );
    expect(heads23).toBe(true);
    expect(webgpu.state.subarray(2 * g.keyDim * g.valueDim).some(Number.isNaN)).toBe(false);
  });

  it('a chunked prefill is four dispatches at any length; decode and short prompts stay one', async () => {
    if (!gpu.available) return;
    const count = async (s: number) => {
      const x = makeInputs(SMALL, s, { randomStates: true });
      const state = tg.newGatedDeltaNetState(SMALL, 'webgpu');
      const n = await dispatchesOf([x.proj, x.conv, tg.cat([x.aLog, x.dtBias, x.norm])], (proj, conv, head) =>
        tg.gatedDeltaNet(split(proj, SMALL), { conv, ...packedHead(head, SMALL) }, state, { ...SMALL, eps: EPS }),
      );
      state.conv.dispose();
      state.recurrent.dispose();
      return n;
    };
    expect(await count(1)).toBe(1);
    expect(await count(gatedDeltaNetTuning.chunkedFrom - 1)).toBe(1);
    expect([await count(64), await count(130), await count(600)]).toEqual([4, 4, 4]);
  });
});
