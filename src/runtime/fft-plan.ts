// How a DFT of length n is computed, shared by both backends so that they run the same algorithm (the CPU in
// float64, the GPU in float32 from float32-rounded tables):
// - n whose prime factors are 2, 3 and 5 ("smooth"): mixed-radix Stockham passes (radix 4 first, then 2, 3, 5).
//   Stockham is self-sorting: no bit-reversal pass, natural order in and out.
// - any other n: Bluestein's chirp-z: X_k = w_k * sum_j (z_j w_j) conj(w_{k-j}) with w_j = exp(-i pi j^2 / n), a
//   circular convolution of length m >= 2n - 1 (the smallest smooth m) done with two length-m FFTs. The FFT of the
//   chirp is computed once on the host in float64 (with the 1/m of the inverse folded in), so the device adds only
//   float32 rounding of its own.
// Twiddles, chirp and the chirp's FFT are float64 on the host; the GPU gets them rounded once to float32, never
// evaluating sin/cos itself (GPU sin/cos are approximations that lose digits for large angles).

/** A length whose DFT runs as Stockham passes: its radices in pass order, and the product of all of them. */
export interface StockhamPlan {
  readonly size: number;
  readonly radices: readonly number[];
}

export interface FftPlan {
  /** The transform length. */
  readonly n: number;
  /** The passes of the length-m transform actually run (m = n unless Bluestein). */
  readonly stockham: StockhamPlan;
  readonly bluestein: boolean;
  /**
   * float64 interleaved complex tables: twiddles exp(-2 pi i t / m) for t < m; with Bluestein also the chirp w_j
   * (j < n) and B = FFT_m(conj(w) wrapped) / m (m entries).
   */
  readonly twiddles: Float64Array;
  readonly chirp?: Float64Array;
  readonly chirpFft?: Float64Array;
}

const RADICES = [4, 2, 3, 5] as const;
export const MAX_RADIX = 5;

/** The radices of n (4s first, then at most one 2, then 3s and 5s), or undefined when n has another prime factor. */
export function stockhamRadices(n: number): number[] | undefined {
  if (!Number.isInteger(n) || n < 1) return undefined;
  const radices: number[] = [];
  let rest = n;
  for (const r of RADICES) {
    while (rest % r === 0) {
      radices.push(r);
      rest /= r;
    }
  }
  return rest === 1 ? radices : undefined;
}

/** The smallest m >= lower whose prime factors are 2, 3 and 5. */
export function nextSmooth(lower: number): number {
  for (let m = Math.max(1, lower); ; m++) if (stockhamRadices(m)) return m;
}

function twiddleTable(m: number): Float64Array {
  const t = new Float64Array(2 * m);
  for (let i = 0; i < m; i++) {
    const a = (-2 * Math.PI * i) / m;
    t[2 * i] = Math.cos(a);
    t[2 * i + 1] = Math.sin(a);
  }
  return t;
}

const plans = new Map<number, FftPlan>();

/** The plan for length n (cached: a plan of n costs O(m log m) host work once). */
export function fftPlan(n: number): FftPlan {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`fft length must be an integer >= 1, got ${n}`);
  const cached = plans.get(n);
  if (cached) return cached;
  const radices = stockhamRadices(n);
  let plan: FftPlan;
  if (radices) {
    plan = { n, stockham: { size: n, radices }, bluestein: false, twiddles: twiddleTable(n) };
  } else {
    const m = nextSmooth(2 * n - 1);
    const stockham = { size: m, radices: stockhamRadices(m)! };
    const twiddles = twiddleTable(m);
    const chirp = new Float64Array(2 * n);
    for (let j = 0; j < n; j++) {
      // j^2 mod 2n exactly (an integer), so the angle stays small and exact for any n.
      const q = Number((BigInt(j) * BigInt(j)) % BigInt(2 * n));
      const a = (-Math.PI * q) / n;
      chirp[2 * j] = Math.cos(a);
      chirp[2 * j + 1] = Math.sin(a);
    }
    // b_j = conj(w_j) for j in (-n, n), wrapped mod m; B = FFT(b) / m.
    const b = new Float64Array(2 * m);
    for (let j = 0; j < n; j++) {
      b[2 * j] = chirp[2 * j];
      b[2 * j + 1] = -chirp[2 * j + 1];
      if (j > 0) {
        b[2 * (m - j)] = chirp[2 * j];
        b[2 * (m - j) + 1] = -chirp[2 * j + 1];
      }
    }
    const re = new Float64Array(m);
    const im = new Float64Array(m);
    for (let j = 0; j < m; j++) {
      re[j] = b[2 * j] / m;
      im[j] = b[2 * j + 1] / m;
    }
    stockhamTransform(re, im, stockham, twiddles, false);
    const chirpFft = new Float64Array(2 * m);
    for (let j = 0; j < m; j++) {
      chirpFft[2 * j] = re[j];
      chirpFft[2 * j + 1] = im[j];
    }
    plan = { n, stockham, bluestein: true, twiddles, chirp, chirpFft };
  }
  if (plans.size > 64) plans.clear();
  plans.set(n, plan);
  return plan;
}

/**
 * In-place float64 DFT of (re, im) of length plan.size by Stockham passes: pass s with radix r and span p (the
 * product of the radices before it) reads z[i + j * size / r] for butterfly i (k = i mod p), multiplies input j by
 * exp(-+2 pi i j k / (p r)), takes the r-point DFT and writes output q to (i - k) * r + k + q * p. inverse: the
 * conjugate twiddles (no 1/n). The WGSL kernels run exactly these passes.
 */
export function stockhamTransform(re: Float64Array, im: Float64Array, plan: StockhamPlan, twiddles: Float64Array, inverse: boolean): void {
  const size = plan.size;
  const sign = inverse ? -1 : 1;
  let srcRe: Float64Array = re;
  let srcIm: Float64Array = im;
  let dstRe: Float64Array = new Float64Array(size);
  let dstIm: Float64Array = new Float64Array(size);
  const xr = new Float64Array(MAX_RADIX);
  const xi = new Float64Array(MAX_RADIX);
  let span = 1;
  for (const r of plan.radices) {
    const butterflies = size / r;
    const step = size / (span * r);
    for (let i = 0; i < butterflies; i++) {
      const k = i % span;
      for (let j = 0; j < r; j++) {
        const t = j * k * step;
        const wr = twiddles[2 * t];
        const wi = sign * twiddles[2 * t + 1];
        const ar = srcRe[i + j * butterflies];
        const ai = srcIm[i + j * butterflies];
        xr[j] = ar * wr - ai * wi;
        xi[j] = ar * wi + ai * wr;
      }
      const base = (i - k) * r + k;
      for (let q = 0; q < r; q++) {
        let sr = 0;
        let si = 0;
        for (let j = 0; j < r; j++) {
          const t = ((j * q) % r) * (size / r);
          const wr = twiddles[2 * t];
          const wi = sign * twiddles[2 * t + 1];
          sr += xr[j] * wr - xi[j] * wi;
          si += xr[j] * wi + xi[j] * wr;
        }
        dstRe[base + q * span] = sr;
        dstIm[base + q * span] = si;
      }
    }
    [srcRe, dstRe] = [dstRe, srcRe];
    [srcIm, dstIm] = [dstIm, srcIm];
    span *= r;
  }
  if (srcRe !== re) {
    re.set(srcRe);
    im.set(srcIm);
  }
}

/**
 * The DFT of length plan.n of (re, im) in place, float64: X_k = sum_j z_j exp(-+2 pi i j k / n), unnormalized in
 * both directions.
 */
export function fftTransform(re: Float64Array, im: Float64Array, plan: FftPlan, inverse: boolean): void {
  if (!plan.bluestein) {
    stockhamTransform(re, im, plan.stockham, plan.twiddles, inverse);
    return;
  }
  const { n } = plan;
  const m = plan.stockham.size;
  const w = plan.chirp!;
  const bf = plan.chirpFft!;
  const sign = inverse ? -1 : 1;
  const ar = new Float64Array(m);
  const ai = new Float64Array(m);
  for (let j = 0; j < n; j++) {
    const wr = w[2 * j];
    const wi = sign * w[2 * j + 1];
    ar[j] = re[j] * wr - im[j] * wi;
    ai[j] = re[j] * wi + im[j] * wr;
  }
  stockhamTransform(ar, ai, plan.stockham, plan.twiddles, false);
  for (let j = 0; j < m; j++) {
    // The inverse transform's chirp FFT is the conjugate (the chirp sequence is symmetric).
    const br = bf[2 * j];
    const bi = sign * bf[2 * j + 1];
    const r = ar[j] * br - ai[j] * bi;
    ai[j] = ar[j] * bi + ai[j] * br;
    ar[j] = r;
  }
  stockhamTransform(ar, ai, plan.stockham, plan.twiddles, true);
  for (let k = 0; k < n; k++) {
    const wr = w[2 * k];
    const wi = sign * w[2 * k + 1];
    re[k] = ar[k] * wr - ai[k] * wi;
    im[k] = ar[k] * wi + ai[k] * wr;
  }
}
