// Token sampling on WebGPU: greedy and top-1 against an exact argmax; seeded draws against the CPU reference
// sampler (same uniform, so the same token except where f32 rounding moves a boundary); a chi-square test of the
// GPU's draws against the distribution computed here from the definition (and proof that a wrong one fails);
// determinism; sampleToken's zero-read contract; penalties as HF defines them; option and shape errors.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { Generator, sample, sampleToken, setDefaultDevice, type SampleOptions, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

// ---- the definition, in float64 -----------------------------------------------------------------------------------

/** HF logits processors in order: repetition (divide positive, multiply negative), presence/frequency, temperature. */
function processed(logits: readonly number[], o: SampleOptions, previous: readonly number[] = []): number[] {
  const x = logits.map((v) => (Number.isNaN(v) ? -Infinity : v));
  const counts = new Map<number, number>();
  for (const id of previous) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, count] of counts) {
    if (id < 0 || id >= x.length || x[id] === -Infinity) continue;
    const rep = o.repetitionPenalty ?? 1;
    let v = x[id] > 0 ? x[id] / rep : x[id] * rep;
    v -= (o.presencePenalty ?? 0) + (o.frequencyPenalty ?? 0) * count;
    x[id] = v;
  }
  const t = o.temperature ?? 1;
  return t === 0 ? x : x.map((v) => v / t);
}

/** First index of the maximum (NaN counts as -Inf), or -1 for a row of -Inf/NaN. */
function argmax(x: ArrayLike<number>): number {
  let best = -1;
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i] > max) [best, max] = [i, x[i]];
  return best;
}

/**
 * The sampling distribution by definition: softmax of the processed logits; top-k keeps the k largest (ties with the
 * k-th all kept); top-p keeps the smallest most-likely prefix (of what top-k kept, renormalised) whose mass reaches
 * topP, plus ties with its last element; min-p keeps p >= minP * p_max; the rest renormalised.
 */
function expectedDistribution(logits: readonly number[], o: SampleOptions, previous: readonly number[] = []): number[] {
  const x = processed(logits, o, previous);
  const max = x.reduce((m, v) => Math.max(m, v), -Infinity);
  const w = x.map((v) => Math.exp(v - max));
  const order = [...x.keys()].sort((a, b) => x[b] - x[a]);
  let threshold = -Infinity;
  const k = o.topK ?? 0;
  if (k > 0 && k < x.length) threshold = x[order[k - 1]];
  const topP = o.topP ?? 1;
  if (topP < 1) {
    const kept = order.filter((i) => x[i] >= threshold);
    const mass = kept.reduce((s, i) => s + w[i], 0);
    let cum = 0;
    for (const i of kept) {
      cum += w[i] / mass;
      if (cum >= topP) {
        threshold = x[i];
        break;
      }
    }
  }
  const keep = x.map((v, i) => v > -Infinity && v >= threshold && w[i] >= (o.minP ?? 0));
  const total = w.reduce((s, v, i) => s + (keep[i] ? v : 0), 0);
  return w.map((v, i) => (keep[i] ? v / total : 0));
}

// ---- chi-square goodness of fit -----------------------------------------------------------------------------------

function lnGamma(z: number): number {
  // Lanczos (g = 7, n = 9): ~15 digits for z > 0.
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012,
    9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (z < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * z)) - lnGamma(1 - z);
  z -= 1;
  let a = c[0];
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += c[i] / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Regularised upper incomplete gamma Q(a, x) (Numerical Recipes: series below a + 1, continued fraction above). */
function gammaQ(a: number, x: number): number {
  if (x <= 0) return 1;
  const lead = -x + a * Math.log(x) - lnGamma(a);
  if (x < a + 1) {
    let sum = 1 / a;
    let term = sum;
    for (let n = 1; n < 1000 && Math.abs(term) > Math.abs(sum) * 1e-15; n++) sum += term *= x / (a + n);
    return 1 - sum * Math.exp(lead);
  }
  let b = x + 1 - a;
  let c = 1e300;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 1000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = Math.abs(d) < 1e-300 ? 1e-300 : d;
    c = b + an / c;
    c = Math.abs(c) < 1e-300 ? 1e-300 : c;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-15) break;
  }
  return Math.exp(lead) * h;
}

/**
 * Pearson's chi-square of observed counts against probabilities: categories expecting fewer than 5 draws are pooled;
 * a draw where the expected probability is 0 makes the fit fail outright (p = 0).
 */
function chiSquare(counts: readonly number[], probs: readonly number[]): { stat: number; df: number; p: number } {
  const n = counts.reduce((a, b) => a + b, 0);
  if (counts.some((c, i) => c > 0 && probs[i] === 0)) return { stat: Infinity, df: 0, p: 0 };
  const bins: [number, number][] = [];
  let pooled: [number, number] = [0, 0];
  probs.forEach((p, i) => {
    if (p === 0) return;
    if (n * p < 5) pooled = [pooled[0] + counts[i], pooled[1] + n * p];
    else bins.push([counts[i], n * p]);
  });
  if (pooled[1] > 0) bins.push(pooled);
  const stat = bins.reduce((s, [o, e]) => s + (o - e) ** 2 / e, 0);
  const df = bins.length - 1;
  return { stat, df, p: df > 0 ? gammaQ(df / 2, stat / 2) : 1 };
}

const ALPHA = 1e-3;

describe('chi-square helper (host only)', () => {
  it('matches known quantiles and pools small bins', () => {
    // Upper-tail quantiles of chi-square: 3.841 (df 1, 5%), 18.307 (df 10, 5%), 29.588 (df 10, 0.1%).
    expect(gammaQ(0.5, 3.841 / 2)).toBeCloseTo(0.05, 4);
    expect(gammaQ(5, 18.307 / 2)).toBeCloseTo(0.05, 4);
    expect(gammaQ(5, 29.588 / 2)).toBeCloseTo(0.001, 5);
    expect(chiSquare([50, 50], [0.5, 0.5]).p).toBeCloseTo(1, 9);
    expect(chiSquare([1, 99], [0, 1]).p).toBe(0);
    expect(chiSquare([90, 10], [0.5, 0.5]).p).toBeLessThan(1e-10);
  });

  it('the definition: top-k keeps ties, top-p the smallest prefix reaching topP, min-p relative to the max', () => {
    const l = [Math.log(0.4), Math.log(0.3), Math.log(0.2), Math.log(0.1)];
    const close = (a: number[], b: number[]) => a.forEach((v, i) => expect(v).toBeCloseTo(b[i], 12));
    close(expectedDistribution(l, {}), [0.4, 0.3, 0.2, 0.1]);
    close(expectedDistribution(l, { topK: 2 }), [4 / 7, 3 / 7, 0, 0]);
    close(expectedDistribution(l, { topP: 0.69 }), [4 / 7, 3 / 7, 0, 0]);
    close(expectedDistribution(l, { topP: 0.71 }), [4 / 9, 3 / 9, 2 / 9, 0]);
    close(expectedDistribution(l, { minP: 0.45 }), [4 / 9, 3 / 9, 2 / 9, 0]);
    close(expectedDistribution([1, 2, 2, 0], { topK: 2 }), [0, 0.5, 0.5, 0]);
    close(expectedDistribution([1, 2, 2, 0], { topK: 1 + 1, temperature: 0.5 }), [0, 0.5, 0.5, 0]);
  });
});

// ---- GPU ----------------------------------------------------------------------------------------------------------

/** Logits with a Gaussian spread (seeded), as a plain array. */
function randomLogits(n: number, seed: number, scale = 2): number[] {
  const g = new Generator(seed);
  return Array.from({ length: n }, () => g.normal() * scale);
}

/** Values as the backends see them (f32, or rounded to a narrower dtype). */
async function valuesOf(t: Tensor): Promise<number[]> {
  return Array.from(await (await t.to('cpu')).toArray());
}

/** `count` GPU draws with seeds start, start+1, ...: sampleToken per draw, one read for all (cat). */
async function gpuDraws(logits: Tensor, o: SampleOptions, start: number, count: number): Promise<Int32Array> {
  const out = new Int32Array(count);
  const batch = 250;
  for (let b = 0; b < count; b += batch) {
    const toks: Tensor[] = [];
    try {
      for (let i = b; i < Math.min(count, b + batch); i++) toks.push(sampleToken(logits, { ...o, seed: start + i }));
      const all = tg.cat(toks);
      out.set((await all.toArray()) as Int32Array, b);
      all.dispose();
    } finally {
      toks.forEach((t) => t.dispose());
    }
  }
  return out;
}

function histogram(draws: ArrayLike<number>, v: number): number[] {
  const h = new Array<number>(v).fill(0);
  for (let i = 0; i < draws.length; i++) h[draws[i]]++;
  return h;
}

describe.skipIf(!gpu.available)(`sample / sampleToken on WebGPU ${gpu.skipReason}`, () => {
  it('greedy (temperature 0) and topK = 1 are exactly the argmax (first index on ties), f32/f16/bf16, up to 128256', async () => {
    for (const [n, dtype] of [
      [128256, 'float32'],
      [128256, 'bfloat16'],
      [5000, 'float16'],
      [1, 'float32'],
      [300, 'float32'],
    ] as const) {
      for (let rep = 0; rep < 2; rep++) {
        const vals = randomLogits(n, 77 + rep + n);
        if (n > 1 && rep === 1) {
          // A tie for the max: the first index wins, as in torch.argmax; -Inf and NaN are never picked.
          const top = vals.reduce((m, v) => Math.max(m, v), -Infinity) + 1;
          vals[Math.floor(n * 0.7)] = top;
          vals[Math.floor(n * 0.3)] = top;
          vals[0] = NaN;
          vals[n - 1] = -Infinity;
        }
        const x = await tg.tensor(vals, { dtype }).to('webgpu');
        const want = argmax(await valuesOf(x));
        // (A 128256 draw takes ~150 ms on SwiftShader: fewer variants there.)
        const options: SampleOptions[] = [{ temperature: 0 }, { topK: 1, temperature: 0.3, topP: 0.5 }];
        if (n < 128256) options.push({ topK: 1 }, { temperature: 0, topK: 7, minP: 0.2 });
        for (const o of options) expect(await sample(x, { ...o, seed: rep }), `${JSON.stringify(o)} n ${n} ${dtype}`).toBe(want);
        expect(await sample(await x.to('cpu'), { temperature: 0 })).toBe(want);
        if (n === 300) {
          // [1, V] and a row at an offset of a [2, V] tensor (contiguous view) take the same path.
          const two = tg.cat([x.reshape(1, n), x.reshape(1, n)]);
          expect(await sample(x.reshape(1, n), { temperature: 0 })).toBe(want);
          expect(await sample(two.select(0, 1), { temperature: 0 })).toBe(want);
          two.dispose();
        }
        x.dispose();
      }
    }
    // A strided row (compacted first) and a row whose max is the last element.
    const wide = await tg
      .tensor(randomLogits(2 * 999, 5))
      .reshape(999, 2)
      .to('webgpu');
    const col = wide.select(1, 1);
    expect(await sample(col, { temperature: 0 })).toBe(argmax(await valuesOf(col)));
    const last = await tg.tensor([0, 1, 2, 3, 4.5]).to('webgpu');
    expect(await sample(last, { topK: 1 })).toBe(4);
    wide.dispose();
    last.dispose();
  });

  it('seeded draws pick the same token as the CPU reference for >= 95% of seeds, across option combos', async () => {
    const v = 3000;
    const prev = [3, 3, 17, 2999, 17, 17, 40, -5, 4000];
    const logits = randomLogits(v, 11, 2.5);
    // The top few logits get the most previous-token mass, so penalties move the distribution.
    prev.forEach((id) => id >= 0 && id < v && (logits[id] = Math.abs(logits[id]) + 4));
    const combos: SampleOptions[] = [
      {},
      { temperature: 0.7 },
      { topK: 40 },
      { topP: 0.9 },
      { minP: 0.1 },
      { temperature: 0.7, topK: 50, topP: 0.8, minP: 0.05 },
      { temperature: 1.5, repetitionPenalty: 1.3, presencePenalty: 0.4, frequencyPenalty: 0.1, previousTokens: prev },
      { topK: 20, topP: 0.95, repetitionPenalty: 0.8, previousTokens: prev },
    ];
    const xs = { float32: await tg.tensor(logits).to('webgpu'), bfloat16: await tg.tensor(logits, { dtype: 'bfloat16' }).to('webgpu') };
    const report: string[] = [];
    for (const [dtype, x] of Object.entries(xs)) {
      const xc = await x.to('cpu');
      for (const o of dtype === 'float32' ? combos : combos.slice(5)) {
        const seeds = 24;
        let same = 0;
        const support = expectedDistribution(await valuesOf(xc), o, prev.slice(0, o.previousTokens ? prev.length : 0));
        for (let s = 0; s < seeds; s++) {
          const g = await sample(x, { ...o, seed: 1000 + s });
          const c = await sample(xc, { ...o, seed: 1000 + s });
          if (g === c) same++;
          // Every GPU pick is inside the support the definition allows.
          expect(support[g], `GPU picked ${g} outside the support, ${JSON.stringify(o)}`).toBeGreaterThan(0);
        }
        report.push(`${dtype} ${JSON.stringify({ ...o, previousTokens: o.previousTokens ? 'prev' : undefined })}: ${same}/${seeds}`);
        expect(same / seeds, report.at(-1)).toBeGreaterThanOrEqual(0.95);
      }
      xc.dispose();
    }
    // One vocabulary-sized row: Llama 3's 128256.
    const big = randomLogits(128256, 12, 3);
    const bg = await tg.tensor(big).to('webgpu');
    const bc = tg.tensor(big);
    let same = 0;
    for (let s = 0; s < 4; s++) if ((await sample(bg, { topK: 50, topP: 0.9, seed: s })) === (await sample(bc, { topK: 50, topP: 0.9, seed: s }))) same++;
    expect(same, '128256 topK 50 topP 0.9').toBeGreaterThanOrEqual(4);
    bg.dispose();
    Object.values(xs).forEach((t) => t.dispose());
  });

  it('chi-square: 2000 GPU draws fit the exact distribution (temperature 0.8, topK 8, topP 0.9); wrong ones fail', async () => {
    const logits = [1.2, 2.0, 0.4, -1.0, 2.6, 2.45, -Infinity, 0.1, 1.5, NaN, -0.3, 1.9];
    const o: SampleOptions = { temperature: 0.8, topK: 8, topP: 0.9 };
    const x = await tg.tensor(logits).to('webgpu');
    const n = 2000;
    const draws = await gpuDraws(x, o, 50_000, n);
    const counts = histogram(draws, logits.length);
    const exact = expectedDistribution(await valuesOf(x), o);
    const fit = chiSquare(counts, exact);
    const label = `counts ${counts.join(' ')} vs expected ${exact.map((p) => (p * n).toFixed(0)).join(' ')}: chi2 ${fit.stat.toFixed(2)}, df ${fit.df}, p ${fit.p.toExponential(2)}`;
    expect(fit.p, label).toBeGreaterThan(ALPHA);
    expect(exact.filter((p) => p > 0).length, 'top-p cuts below top-k here').toBeLessThan(8);
    // Tokens outside the support are never drawn (the chi-square already fails on one, this names it).
    counts.forEach((c, i) => exact[i] === 0 && expect(c, `token ${i} is outside the support`).toBe(0));

    // The same counts against wrong distributions fail: the test has power.
    const wrong: [string, number[]][] = [
      ['temperature 1 instead of 0.8', expectedDistribution(logits, { ...o, temperature: 1 })],
      ['no top-p', expectedDistribution(logits, { ...o, topP: 1 })],
      ['the two top probabilities swapped', exact.map((p, i) => (i === 4 ? exact[5] : i === 5 ? exact[4] : p))],
    ];
    for (const [why, probs] of wrong) expect(chiSquare(counts, probs).p, why).toBeLessThan(ALPHA);

    // The CPU reference with the same seeds: same fit, and nearly always the same token.
    const xc = await x.to('cpu');
    let same = 0;
    const cpuDraws: number[] = [];
    for (let i = 0; i < n; i++) {
      cpuDraws.push(await sample(xc, { ...o, seed: 50_000 + i }));
      if (cpuDraws[i] === draws[i]) same++;
    }
    expect(chiSquare(histogram(cpuDraws, logits.length), exact).p).toBeGreaterThan(ALPHA);
    expect(same / n).toBeGreaterThanOrEqual(0.99);
    x.dispose();
  });

  it('chi-square: 1200 GPU draws with min-p and penalties (previous tokens as a GPU int32 tensor) fit the definition', async () => {
    const logits = [0.5, 1.5, -0.2, 2.2, 0.9, -1.3, 1.1, 2.0, 0.0, -2.5, 0.7, 1.8, -0.6, 0.3, 1.4, -4.0];
    const previous = [3, 3, 7, 12, 99];
    const o: SampleOptions = { temperature: 1.2, minP: 0.08, repetitionPenalty: 1.4, presencePenalty: 0.3, frequencyPenalty: 0.25 };
    const x = await tg.tensor(logits).to('webgpu');
    const prev = tg.tensor(previous, { dtype: 'int32', device: 'webgpu' });
    const n = 1200;
    const draws = await gpuDraws(x, { ...o, previousTokens: prev }, 90_000, n);
    const counts = histogram(draws, logits.length);
    const exact = expectedDistribution(logits, o, previous);
    const fit = chiSquare(counts, exact);
    expect(fit.p, `counts ${counts.join(' ')}; chi2 ${fit.stat.toFixed(2)} df ${fit.df}`).toBeGreaterThan(ALPHA);
    expect(
      exact.some((p) => p === 0),
      'min-p removes some tokens',
    ).toBe(true);
    // Without the penalties the expected distribution is a different one, and the draws reject it.
    expect(chiSquare(counts, expectedDistribution(logits, o)).p).toBeLessThan(ALPHA);
    x.dispose();
    prev.dispose();
  });

  it('is deterministic: the same seed (or generator state) gives the same token', async () => {
    const x = await tg.tensor(randomLogits(2000, 3, 1)).to('webgpu');
    const o: SampleOptions = { topK: 100, topP: 0.95, temperature: 1.1 };
    const tokens = new Set<number>();
    for (const seed of [1, 2, 3]) {
      const a = await sample(x, { ...o, seed });
      expect(await sample(x, { ...o, seed })).toBe(a);
      expect(await sample(x, { ...o, seed })).toBe(a);
      tokens.add(a);
    }
    // Flat logits, 3 seeds: not all the same token (the seed is used at all).
    expect(tokens.size).toBeGreaterThan(1);
    const seq = async (g: Generator) => [
      await sample(x, { ...o, generator: g }),
      await sample(x, { ...o, generator: g }),
      await sample(x, { ...o, generator: g }),
    ];
    expect(await seq(new Generator(42))).toEqual(await seq(new Generator(42)));
    tg.manualSeed(9);
    const first = [await sample(x, o), await sample(x, o)];
    tg.manualSeed(9);
    expect([await sample(x, o), await sample(x, o)]).toEqual(first);
    x.dispose();
  });

  it('sampleToken returns an int32 [1] tensor on the device without a read; sample() reads exactly once', async () => {
    const x = await tg.tensor(randomLogits(4096, 8)).to('webgpu');
    const prev = tg.tensor([1, 2, 3], { dtype: 'int32', device: 'webgpu' });
    await sample(x, { seed: 1, topK: 10, previousTokens: prev, repetitionPenalty: 1.2 }); // compile
    await tg.synchronize();
    const c0 = tg.gpuCounters();
    const tok = sampleToken(x, { seed: 5, topK: 10, topP: 0.9, previousTokens: prev, repetitionPenalty: 1.2 });
    await tg.synchronize();
    const c1 = tg.gpuCounters();
    expect(tok.device).toBe('webgpu');
    expect(tok.dtype).toBe('int32');
    expect(tok.shape).toEqual([1]);
    expect(c1.reads - c0.reads, 'sampleToken reads nothing').toBe(0);
    expect(c1.dispatches - c0.dispatches, 'sampleToken is one dispatch').toBe(1);
    // It can feed the next step on the device (e.g. an embedding lookup) before anything is read.
    const table = tg.arange(0, 4096, 1, { device: 'webgpu' }).reshape(4096, 1);
    const row = table.indexSelect(0, tok);
    expect(tg.gpuCounters().reads).toBe(c1.reads);
    const id = (await tok.toArray())[0];
    expect((await row.toArray())[0]).toBe(id);
    row.dispose();
    table.dispose();
    tok.dispose();

    const c2 = tg.gpuCounters();
    const s = await sample(x, { seed: 5, topK: 10, topP: 0.9, previousTokens: prev, repetitionPenalty: 1.2 });
    const c3 = tg.gpuCounters();
    expect(s).toBe(id);
    expect(c3.reads - c2.reads, 'sample() reads 4 bytes once').toBe(1);
    expect(c3.dispatches - c2.dispatches).toBe(1);
    x.dispose();
    prev.dispose();
  });

  it('a row with nothing samplable (all -Inf, all NaN) throws; sampleToken gives -1', async () => {
    for (const vals of [new Array(300).fill(-Infinity), [NaN, -Infinity, NaN]]) {
      const x = await tg.tensor(vals).to('webgpu');
      for (const o of [{}, { temperature: 0 }, { topK: 1 }, { topK: 5, topP: 0.5, minP: 0.1 }] as SampleOptions[]) {
        await expect(sample(x, o), JSON.stringify(o)).rejects.toThrow(tg.TensorGpuError);
        await expect(sample(x, o)).rejects.toThrow(/-Inf or NaN/);
        const t = sampleToken(x, o);
        expect(Array.from(await t.toArray())).toEqual([-1]);
        t.dispose();
        await expect(sample(await x.to('cpu'), o)).rejects.toThrow(tg.TensorGpuError);
      }
      x.dispose();
    }
    // A penalty cannot make a -Inf logit finite.
    const masked = await tg.tensor([-Infinity, -Infinity]).to('webgpu');
    await expect(sample(masked, { previousTokens: [0, 1], repetitionPenalty: 0.5, presencePenalty: -10 })).rejects.toThrow(tg.TensorGpuError);
    masked.dispose();
  });

  it('validates options and shapes (RangeError, ShapeError, DTypeError, DeviceMismatchError)', async () => {
    const live = tg.memoryStats().liveBytes;
    const x = await tg.tensor([1, 2, 3]).to('webgpu');
    const bad: [SampleOptions, string][] = [
      [{ temperature: -0.5 }, 'temperature'],
      [{ temperature: NaN }, 'temperature'],
      [{ topP: 0 }, 'topP'],
      [{ topP: 1.5 }, 'topP'],
      [{ minP: 1.01 }, 'minP'],
      [{ minP: -0.1 }, 'minP'],
      [{ topK: 2.5 }, 'topK'],
      [{ topK: -1 }, 'topK'],
      [{ repetitionPenalty: 0 }, 'repetitionPenalty'],
    ];
    for (const [o, what] of bad) {
      expect(() => sampleToken(x, o), JSON.stringify(o)).toThrow(RangeError);
      expect(() => sampleToken(x, o)).toThrow(what);
      await expect(sample(x, o)).rejects.toThrow(RangeError);
    }
    // Edge values that are valid: topP 1, minP 0 and 1, topK larger than V (= all), temperature 0.
    for (const o of [{ topP: 1 }, { minP: 0 }, { minP: 1 }, { topK: 50 }, { temperature: 0 }] as SampleOptions[]) {
      expect(await sample(x, { ...o, seed: 3 }), JSON.stringify(o)).toBeGreaterThanOrEqual(0);
    }
    expect(await sample(x, { minP: 1 }), 'minP 1 keeps only the max').toBe(2);
    const shapes = [
      tg.zeros([2, 3], { device: 'webgpu' }),
      tg.zeros([0], { device: 'webgpu' }),
      tg.zeros([1, 1, 3], { device: 'webgpu' }),
      tg.tensor(1, { device: 'webgpu' }),
      tg.zeros([1, 0], { device: 'webgpu' }),
    ];
    for (const s of shapes) {
      expect(() => sampleToken(s), JSON.stringify(s.shape)).toThrow(tg.ShapeError);
      await expect(sample(s)).rejects.toThrow(tg.ShapeError);
      s.dispose();
    }
    const ints = tg.tensor([1, 2, 3], { dtype: 'int32', device: 'webgpu' });
    expect(() => sampleToken(ints)).toThrow(tg.DTypeError);
    const floatPrev = tg.tensor([1, 2], { device: 'webgpu' });
    expect(() => sampleToken(x, { previousTokens: floatPrev })).toThrow(tg.DTypeError);
    const cpuPrev = tg.tensor([1, 2], { dtype: 'int32' });
    expect(() => sampleToken(x, { previousTokens: cpuPrev })).toThrow(tg.DeviceMismatchError);
    for (const t of [x, ints, floatPrev, cpuPrev]) t.dispose();
    expect(tg.memoryStats().liveBytes, 'nothing leaked by the failed calls').toBe(live);
  });

  it('previousTokens as an array, an int32 tensor, a view at an offset, a strided view: all the same', async () => {
    const v = 500;
    const logits = randomLogits(v, 21, 1.5);
    const ids = [7, 7, 123, 400, 9, 250];
    ids.forEach((id) => (logits[id] = 3 + (id % 5) * 0.1)); // the penalised ids are the likeliest
    const x = await tg.tensor(logits).to('webgpu');
    const xc = tg.tensor(logits);
    // Storage [99, 7, 7, 123, 400, 9, 250, 98]: the ids at offset 1; every other element of [7, 55, 7, 66, ...].
    const backing = tg.tensor([99, ...ids, 98], { dtype: 'int32', device: 'webgpu' });
    const interleaved = tg.tensor(
      ids.flatMap((id) => [id, 300]),
      { dtype: 'int32', device: 'webgpu' },
    );
    const head = tg.tensor([...ids, 1, 2, 3], { dtype: 'int32', device: 'webgpu' });
    const forms: [string, readonly number[] | Tensor][] = [
      ['array', ids],
      ['tensor', tg.tensor(ids, { dtype: 'int32', device: 'webgpu' })],
      ['slice at offset 1', backing.slice(0, 1, 1 + ids.length)],
      ['strided (step 2)', interleaved.slice(0, 0, 2 * ids.length, 2)],
      ['narrow at offset 0 of a longer storage', head.narrow(0, 0, ids.length)],
      ['2-D [2, 3]', tg.tensor(ids, { dtype: 'int32', device: 'webgpu', shape: [2, 3] })],
    ];
    const o: SampleOptions = { repetitionPenalty: 1.8, presencePenalty: 0.5, frequencyPenalty: 0.3, topK: 30, temperature: 0.9 };
    const plain = expectedDistribution(logits, o);
    const penalised = expectedDistribution(logits, o, ids);
    expect(penalised[7], 'penalties lower the repeated token').toBeLessThan(plain[7] / 2);
    for (let seed = 0; seed < 6; seed++) {
      const want = await sample(xc, { ...o, previousTokens: ids, seed });
      for (const [label, prev] of forms) expect(await sample(x, { ...o, previousTokens: prev, seed }), `${label}, seed ${seed}`).toBe(want);
    }
    // Greedy with penalties vs the definition.
    for (const [, prev] of forms)
      expect(await sample(x, { ...o, temperature: 0, previousTokens: prev })).toBe(argmax(processed(logits, { ...o, temperature: 0 }, ids)));
    // Tensors passed in are neither consumed nor changed.
    for (const [, prev] of forms) if (!Array.isArray(prev)) expect((prev as Tensor).isDisposed).toBe(false);
    expect(Array.from(await (forms[2][1] as Tensor).toArray())).toEqual(ids);
    expect(Array.from(await (forms[1][1] as Tensor).toArray())).toEqual(ids);
    for (const [, prev] of forms) if (!Array.isArray(prev)) (prev as Tensor).dispose();
    for (const t of [x, backing, interleaved, head]) t.dispose();
  });

  it('penalties follow HF: repetition divides positive logits and multiplies negative ones, once per distinct id', async () => {
    const greedy = async (logits: number[], o: SampleOptions) => {
      const x = await tg.tensor(logits).to('webgpu');
      try {
        const g = await sample(x, { ...o, temperature: 0 });
        expect(await sample(tg.tensor(logits), { ...o, temperature: 0 }), 'CPU agrees').toBe(g);
        return g;
      } finally {
        x.dispose();
      }
    };
    // Positive: 2.0 / 1.5 = 1.33 < 1.5 -> token 1; 2.0 / 1.2 = 1.67 > 1.5 -> still 0.
    expect(await greedy([2.0, 1.5, -0.5], { previousTokens: [0], repetitionPenalty: 1.5 })).toBe(1);
    expect(await greedy([2.0, 1.5, -0.5], { previousTokens: [0], repetitionPenalty: 1.2 })).toBe(0);
    // Negative: -1 * 1.5 = -1.5 < -1.2 -> token 1 (dividing would give -0.67 and keep token 0).
    expect(await greedy([-1.0, -1.2, -3.0], { previousTokens: [0], repetitionPenalty: 1.5 })).toBe(1);
    expect(await greedy([-1.0, -1.2, -3.0], { previousTokens: [0], repetitionPenalty: 1.1 })).toBe(0);
    // Penalty < 1 encourages: -1.3 * 0.5 = -0.65 > -1.0.
    expect(await greedy([-1.0, -1.3], { previousTokens: [1], repetitionPenalty: 0.5 })).toBe(1);
    // Once per distinct id: 2.0 / 1.5 = 1.33 > 1.3 (twice would be 0.89).
    expect(await greedy([2.0, 1.3], { previousTokens: [0, 0, 0], repetitionPenalty: 1.5 })).toBe(0);
    // Presence subtracts once; frequency per occurrence.
    expect(await greedy([1.0, 0.8], { previousTokens: [0, 0, 0], presencePenalty: 0.3 })).toBe(1);
    expect(await greedy([1.0, 0.8], { previousTokens: [0, 0, 0], presencePenalty: 0.1 })).toBe(0);
    expect(await greedy([1.0, 0.8], { previousTokens: [0, 0, 0], frequencyPenalty: 0.1 })).toBe(1);
    expect(await greedy([1.0, 0.8], { previousTokens: [0], frequencyPenalty: 0.1 })).toBe(0);
    // Ids outside [0, V) are ignored; penalties apply before temperature (greedy: temperature 0 ignores it).
    expect(await greedy([1.0, 0.8], { previousTokens: [-1, 2, 1000], repetitionPenalty: 5, presencePenalty: 5 })).toBe(0);

    // Random rows and previous lists: the GPU's greedy pick is the argmax of the HF-processed logits.
    const g = new Generator(4);
    let moved = 0;
    for (let trial = 0; trial < 6; trial++) {
      const v = 700;
      const logits = randomLogits(v, 300 + trial, 2);
      const prev = Array.from({ length: 40 }, () => g.nextU32() % v);
      // The top 10 logits are all previous tokens, so the pick moves whenever the penalties matter.
      [...logits.keys()]
        .sort((a, b) => logits[b] - logits[a])
        .slice(0, 10)
        .forEach((i) => prev.push(i));
      const o: SampleOptions = {
        repetitionPenalty: 1 + trial * 0.2,
        presencePenalty: trial % 2 ? 0.3 : 0,
        frequencyPenalty: trial % 3 ? 0.05 : 0,
        previousTokens: prev,
      };
      const want = argmax(processed(logits, { ...o, temperature: 0 }, prev));
      if (want !== argmax(logits)) moved++;
      expect(await greedy(logits, o), `trial ${trial}`).toBe(want);
    }
    expect(moved, 'trials where the penalties change the greedy pick').toBeGreaterThanOrEqual(3);
  });
});

describe('sample on the CPU backend (host only)', () => {
  it('rejects bad options and shapes the same way', async () => {
    const x = tg.tensor([1, 2, 3]);
    expect(() => sampleToken(x, { topP: 0 })).toThrow(RangeError);
    expect(() => sampleToken(tg.zeros([2, 3]))).toThrow(tg.ShapeError);
    expect(() => sampleToken(x, { previousTokens: tg.tensor([1.5]) })).toThrow(tg.DTypeError);
    await expect(sample(tg.full([4], -Infinity))).rejects.toThrow(tg.TensorGpuError);
    const t = sampleToken(x, { temperature: 0 });
    expect(t.dtype).toBe('int32');
    expect(Array.from(await t.toArray())).toEqual([2]);
  });
});
