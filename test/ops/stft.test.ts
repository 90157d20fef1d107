// stft / istft on CPU (float64, rounded once) and WebGPU (float32) against float64 references written here from
// torch.stft / torch.istft's definitions: the center padding (reflect or zeros) built explicitly, a window shorter
// than nFft zero-padded on both sides (left floor((nFft - winLength) / 2)), frame f = padded[f hop : f hop + nFft]
// times the window, and a direct DFT (angles from (j k) mod nFft, exact); istft: the inverse DFT of every frame
// (hermitian for onesided), times the window, overlap-added and divided by the summed squared window, the centre
// padding cut off. Cases: Whisper (400 / 160), 512 / 128, winLength < nFft, center off, constant padding,
// normalized, two-sided, the default rectangular window, an odd (Bluestein) nFft and one past the one-workgroup
// limit (4096: the global path), batch dims [2, 3, T]. istft(stft(x)) returns x for COLA Hann windows; dispatch
// counts (stft 1, istft 2); typed errors.
//
// Tolerances: as in fft.test.ts, atol = C * eps32 * sqrt(nFft) * s (s: the output's scale, 1 for stft, 1/sqrt(nFft)
// normalized; istft: 1/nFft per unit of spectrum), rtol 0; spectra of standard-normal signals are ~sqrt(nFft)
// (windowed). Measured worst C (STFT_REPORT=1 prints it): stft CPU 1.3 (one float32 rounding of the float64
// result), WebGPU 3.5; istft (random spectra, scale 4 / nFft for the window envelope) CPU 0.5, WebGPU 2.7. Bounds:
// C = 4 (CPU) and 12 (WebGPU, 3.4x the worst seen). A wrong window offset, frame start or padding gives errors ~ the
// values (C ~ 1e7). Round trips must return x within 1e-5 absolute (|x| <~ 5; measured ~1e-6).
import { afterAll, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, ShapeError, type Tensor } from '../../src/index.js';
import { expectClose, randomTensor, type Tolerance } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';
import { cosSin, runOn, type Dev } from '../helpers/dft.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const DEVICES: Dev[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];
const SLOW = 120_000;
const EPS32 = 2 ** -23;
const C: Record<Dev, number> = { cpu: 4, webgpu: 12 };

// ---- float64 references --------------------------------------------------------------------------------------------

interface RefOptions {
  nFft: number;
  hop: number;
  /** The window's values (winLength of them), or undefined for ones of length winLength (default nFft). */
  window?: ArrayLike<number>;
  winLength?: number;
  center: boolean;
  padMode: 'reflect' | 'constant';
  normalized: boolean;
  onesided: boolean;
}

/** The window zero-padded (centred) to nFft, as torch.stft does for win_length < n_fft. */
function paddedWindow(o: RefOptions): Float64Array {
  const winLength = o.window?.length ?? o.winLength ?? o.nFft;
  const w = new Float64Array(o.nFft);
  const left = Math.floor((o.nFft - winLength) / 2);
  for (let i = 0; i < winLength; i++) w[left + i] = o.window ? o.window[i] : 1;
  return w;
}

/** torch.stft of signals x [rows, t] (row-major): [rows, bins, frames, 2]. */
function stftRef(x: ArrayLike<number>, rows: number, t: number, o: RefOptions): { values: Float64Array; bins: number; frames: number } {
  const { nFft, hop } = o;
  const win = paddedWindow(o);
  const pad = o.center ? Math.floor(nFft / 2) : 0;
  const len = t + 2 * pad;
  const frames = 1 + Math.floor((len - nFft) / hop);
  const bins = o.onesided ? Math.floor(nFft / 2) + 1 : nFft;
  const [c, s] = cosSin(nFft);
  const scale = o.normalized ? 1 / Math.sqrt(nFft) : 1;
  const out = new Float64Array(rows * bins * frames * 2);
  const padded = new Float64Array(len);
  const frame = new Float64Array(nFft);
  for (let r = 0; r < rows; r++) {
    // The padded signal, explicitly: x in the middle, then the edges reflected (without repeating the edge
    // sample) or zeros.
    padded.fill(0);
    for (let i = 0; i < t; i++) padded[pad + i] = x[r * t + i];
    if (o.padMode === 'reflect') {
      for (let i = 1; i <= pad; i++) {
        padded[pad - i] = x[r * t + i];
        padded[pad + t - 1 + i] = x[r * t + t - 1 - i];
      }
    }
    for (let f = 0; f < frames; f++) {
      for (let j = 0; j < nFft; j++) frame[j] = padded[f * hop + j] * win[j];
      for (let k = 0; k < bins; k++) {
        let sr = 0;
        let si = 0;
        let a = 0;
        for (let j = 0; j < nFft; j++) {
          sr += frame[j] * c[a];
          si -= frame[j] * s[a];
          a += k;
          if (a >= nFft) a -= nFft;
        }
        const at = ((r * bins + k) * frames + f) * 2;
        out[at] = sr * scale;
        out[at + 1] = si * scale;
      }
    }
  }
  return { values: out, bins, frames };
}

/**
 * torch.istft of spec [rows, bins, frames, 2]: each frame's inverse DFT (onesided: the hermitian extension of bins
 * 0..nFft/2, imaginary parts of bin 0 and Nyquist dropped; two-sided: the real part), times the window, overlap-added,
 * divided by the overlap-added squared window, the first pad samples dropped; [rows, length].
 */
function istftRef(spec: ArrayLike<number>, rows: number, bins: number, frames: number, o: RefOptions, length: number): Float64Array {
  const { nFft, hop } = o;
  const win = paddedWindow(o);
  const pad = o.center ? Math.floor(nFft / 2) : 0;
  const [c, s] = cosSin(nFft);
  const scale = (1 / nFft) * (o.normalized ? Math.sqrt(nFft) : 1);
  const total = nFft + hop * (frames - 1);
  const out = new Float64Array(rows * length);
  const re = new Float64Array(nFft);
  const im = new Float64Array(nFft);
  for (let r = 0; r < rows; r++) {
    const sum = new Float64Array(total);
    const env = new Float64Array(total);
    for (let f = 0; f < frames; f++) {
      for (let k = 0; k < nFft; k++) {
        const q = o.onesided && k > nFft / 2 ? nFft - k : k;
        const at = ((r * bins + q) * frames + f) * 2;
        re[k] = spec[at];
        im[k] = o.onesided && (q === 0 || 2 * q === nFft) ? 0 : (q === k ? 1 : -1) * spec[at + 1];
      }
      for (let j = 0; j < nFft; j++) {
        let v = 0;
        let a = 0;
        for (let k = 0; k < nFft; k++) {
          v += re[k] * c[a] - im[k] * s[a];
          a += j;
          if (a >= nFft) a -= nFft;
        }
        sum[f * hop + j] += v * scale * win[j];
        env[f * hop + j] += win[j] * win[j];
      }
    }
    for (let i = 0; i < length; i++) {
      const p = i + pad;
      out[r * length + i] = p < total && env[p] !== 0 ? sum[p] / env[p] : 0;
    }
  }
  return out;
}

// ---- running and checking ----------------------------------------------------------------------------------------

const bound = (dev: Dev, n: number, scale: number): Tolerance => ({ atol: C[dev] * EPS32 * Math.sqrt(n) * scale, rtol: 0 });

const worst = new Map<string, number>();
afterAll(() => {
  if (process.env.STFT_REPORT) for (const [k, v] of [...worst].sort()) console.log(`stft error ${k}: C = ${v.toFixed(3)}`);
});

function check(got: ArrayLike<number>, want: ArrayLike<number>, dev: Dev, n: number, scale: number, label: string): void {
  let m = 0;
  for (let i = 0; i < Math.min(got.length, want.length); i++) m = Math.max(m, Math.abs(got[i] - want[i]));
  const key = `${label.split(' ')[0]}/${dev}`;
  worst.set(key, Math.max(worst.get(key) ?? 0, m / (EPS32 * Math.sqrt(n) * scale)));
  expectClose(got, want, bound(dev, n, scale), `${label} on ${dev}`);
}

// ---- stft against the reference -------------------------------------------------------------------------------------

interface StftCase {
  label: string;
  shape: number[];
  nFft: number;
  hop: number;
  /** A periodic Hann window of this length is passed (undefined: no window, the default ones). */
  hann?: number;
  winLength?: number;
  center?: boolean;
  padMode?: 'reflect' | 'constant';
  normalized?: boolean;
  onesided?: boolean;
  /** Leave hopLength to its default (nFft / 4; `hop` says what that is). */
  defaultHop?: boolean;
}

const STFT_CASES: StftCase[] = [
  { label: 'Whisper: nFft 400, hop 160, Hann 400', shape: [2, 3, 1200], nFft: 400, hop: 160, hann: 400 },
  { label: 'nFft 512, hop 128, Hann 512', shape: [2, 3, 1000], nFft: 512, hop: 128, hann: 512 },
  { label: 'nFft 16, hop 4, winLength 12 (zero-padded Hann)', shape: [2, 3, 50], nFft: 16, hop: 4, hann: 12, winLength: 12 },
  { label: 'nFft 15, hop 4, winLength 10 (odd padding split)', shape: [2, 3, 41], nFft: 15, hop: 4, hann: 10, winLength: 10 },
  { label: 'center false', shape: [2, 3, 301], nFft: 64, hop: 16, hann: 64, center: false },
  { label: "padMode 'constant'", shape: [2, 3, 200], nFft: 64, hop: 16, hann: 64, padMode: 'constant' },
  { label: 'normalized', shape: [2, 3, 200], nFft: 64, hop: 16, hann: 64, normalized: true },
  { label: 'onesided false', shape: [2, 3, 200], nFft: 64, hop: 16, hann: 64, onesided: false },
  { label: 'no window (ones), default hop', shape: [2, 3, 130], nFft: 32, hop: 8, defaultHop: true },
  { label: 'no window, winLength 20 of 32', shape: [2, 3, 130], nFft: 32, hop: 8, winLength: 20 },
  { label: 'odd nFft 401 (Bluestein), hop 100', shape: [2, 3, 900], nFft: 401, hop: 100, hann: 401 },
  { label: 'nFft 4096 (global path), hop 1024', shape: [2, 5000], nFft: 4096, hop: 1024, hann: 4096 },
];

describe(`stft against a float64 reference of torch.stft ${gpu.skipReason}`, () => {
  it.each(STFT_CASES.map((c) => [c.label, c] as const))(
    '%s',
    async (_, c) => {
      const x = randomTensor(c.shape);
      const window = c.hann ? tg.hannWindow(c.hann, { periodic: true }) : undefined;
      const t = c.shape[c.shape.length - 1];
      const rows = c.shape.slice(0, -1).reduce((a, b) => a * b, 1);
      const ref: RefOptions = {
        nFft: c.nFft,
        hop: c.hop,
        window: window ? await window.toArray() : undefined,
        winLength: c.winLength,
        center: c.center ?? true,
        padMode: c.padMode ?? 'reflect',
        normalized: c.normalized ?? false,
        onesided: c.onesided ?? true,
      };
      const want = stftRef(await x.toArray(), rows, t, ref);
      const options = (w?: Tensor): tg.StftOptions => ({
        nFft: c.nFft,
        ...(c.defaultHop ? {} : { hopLength: c.hop }),
        ...(c.winLength === undefined ? {} : { winLength: c.winLength }),
        ...(w ? { window: w } : {}),
        ...(c.center === undefined ? {} : { center: c.center }),
        ...(c.padMode === undefined ? {} : { padMode: c.padMode }),
        ...(c.normalized === undefined ? {} : { normalized: c.normalized }),
        ...(c.onesided === undefined ? {} : { onesided: c.onesided }),
      });
      const scale = ref.normalized ? 1 / Math.sqrt(c.nFft) : 1;
      const got: Partial<Record<Dev, Float32Array>> = {};
      for (const dev of DEVICES) {
        const r = await runOn(dev, window ? [x, window] : [x], (xx, ww) => tg.stft(xx, options(ww)));
        expect(r.shape, `${c.label} on ${dev}`).toEqual([...c.shape.slice(0, -1), want.bins, want.frames, 2]);
        check(r.values, want.values, dev, c.nFft, scale, `stft ${c.label}`);
        got[dev] = r.values;
      }
      if (got.webgpu) expectClose(got.webgpu, got.cpu!, bound('webgpu', c.nFft, scale), `${c.label}: WebGPU vs CPU`);
      x.dispose();
      window?.dispose();
    },
    SLOW,
  );

  it('float16 and bfloat16 signals and windows give the stft of the rounded values', async () => {
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const x = randomTensor([3, 201], dtype);
      const w = tg.hannWindow(64, { dtype });
      const ref: RefOptions = { nFft: 64, hop: 16, window: await w.toArray(), center: true, padMode: 'reflect', normalized: false, onesided: true };
      const want = stftRef(await x.toArray(), 3, 201, ref);
      for (const dev of DEVICES) {
        const r = await runOn(dev, [x, w], (xx, ww) => tg.stft(xx, { nFft: 64, hopLength: 16, window: ww }));
        check(r.values, want.values, dev, 64, 1, `stft ${dtype}`);
      }
      x.dispose();
      w.dispose();
    }
  });
});

// ---- istft ---------------------------------------------------------------------------------------------------------

describe(`istft ${gpu.skipReason}`, () => {
  it(
    'matches a float64 reference of torch.istft on a random spectrum (onesided and two-sided, winLength < nFft)',
    async () => {
      const cases = [
        { nFft: 64, hop: 16, hann: 64, frames: 9, onesided: true, normalized: false },
        { nFft: 64, hop: 32, hann: 64, frames: 7, onesided: false, normalized: true },
        { nFft: 16, hop: 4, hann: 12, frames: 11, onesided: true, normalized: false },
        { nFft: 15, hop: 5, hann: 15, frames: 8, onesided: true, normalized: false },
      ];
      for (const c of cases) {
        const bins = c.onesided ? Math.floor(c.nFft / 2) + 1 : c.nFft;
        const spec = randomTensor([2, 3, bins, c.frames, 2]);
        const window = tg.hannWindow(c.hann);
        const ref: RefOptions = {
          nFft: c.nFft,
          hop: c.hop,
          window: await window.toArray(),
          center: true,
          padMode: 'reflect',
          normalized: c.normalized,
          onesided: c.onesided,
        };
        const length = c.nFft + c.hop * (c.frames - 1) - 2 * Math.floor(c.nFft / 2);
        const want = istftRef(await spec.toArray(), 6, bins, c.frames, ref, length);
        for (const dev of DEVICES) {
          const r = await runOn(dev, [spec, window], (s, w) =>
            tg.istft(s, { nFft: c.nFft, hopLength: c.hop, window: w, winLength: c.hann, onesided: c.onesided, normalized: c.normalized }),
          );
          expect(r.shape).toEqual([2, 3, length]);
          // Values ~ sqrt(nFft) / nFft per unit of spectrum, divided by a window envelope >= ~0.5 except near the
          // ends (where fewer frames overlap): bound with the ifft's scale and a factor 4 for the envelope.
          check(r.values, want, dev, c.nFft, (4 * (c.normalized ? Math.sqrt(c.nFft) : 1)) / c.nFft, `istft nFft ${c.nFft} hop ${c.hop}`);
        }
        spec.dispose();
        window.dispose();
      }
    },
    SLOW,
  );

  it(
    'istft(stft(x)) returns x within 1e-5: periodic Hann, hop nFft / 4 and nFft / 2, with and without length, batch dims',
    async () => {
      for (const nFft of [64, 400, 512]) {
        for (const hop of [nFft / 4, nFft / 2]) {
          // T a multiple of hop (the frames cover exactly T) and one that is not (length needed to get T back).
          for (const t of [hop * 6, hop * 6 + 7]) {
            const x = randomTensor([2, 3, t]);
            const window = tg.hannWindow(nFft, { periodic: true });
            const xv = await x.toArray();
            for (const dev of DEVICES) {
              for (const length of [undefined, t, t - 5]) {
                const r = await runOn(dev, [x, window], (xx, w) => {
                  const s = tg.stft(xx, { nFft, hopLength: hop, window: w });
                  const y = tg.istft(s, { nFft, hopLength: hop, window: w, ...(length === undefined ? {} : { length }) });
                  s.dispose();
                  return y;
                });
                const want = length ?? hop * Math.floor(t / hop);
                const label = `nFft ${nFft} hop ${hop} T ${t} length ${length} on ${dev}`;
                expect(r.shape, label).toEqual([2, 3, want]);
                const expected: number[] = [];
                for (let row = 0; row < 6; row++) for (let i = 0; i < want; i++) expected.push(xv[row * t + i]);
                expectClose(r.values, expected, { atol: 1e-5, rtol: 0 }, label);
              }
            }
            x.dispose();
            window.dispose();
          }
        }
      }
    },
    SLOW,
  );

  it(
    'istft(stft(x, onesided false), onesided false), normalized both ways, and a 1-D signal',
    async () => {
      const x = randomTensor([2, 3, 256]);
      const x1 = randomTensor([300]);
      const window = tg.hannWindow(64);
      const [xv, x1v] = [await x.toArray(), await x1.toArray()];
      for (const dev of DEVICES) {
        for (const options of [{ onesided: false }, { normalized: true }, { onesided: false, normalized: true }]) {
          const r = await runOn(dev, [x, window], (xx, w) => {
            const s = tg.stft(xx, { nFft: 64, hopLength: 16, window: w, ...options });
            const y = tg.istft(s, { nFft: 64, hopLength: 16, window: w, ...options, length: 256 });
            s.dispose();
            return y;
          });
          expectClose(r.values, xv, { atol: 1e-5, rtol: 0 }, `${JSON.stringify(options)} on ${dev}`);
        }
        const r1 = await runOn(dev, [x1, window], (xx, w) => {
          const s = tg.stft(xx, { nFft: 64, hopLength: 32, window: w });
          expect(s.shape).toEqual([33, 10, 2]);
          const y = tg.istft(s, { nFft: 64, hopLength: 32, window: w, length: 300 });
          s.dispose();
          return y;
        });
        expect(r1.shape).toEqual([300]);
        expectClose(r1.values, x1v, { atol: 1e-5, rtol: 0 }, `1-D on ${dev}`);
      }
      [x, x1, window].forEach((t) => t.dispose());
    },
    SLOW,
  );
});

// ---- dispatches and errors ------------------------------------------------------------------------------------------

describe.skipIf(!gpu.available)(`stft / istft dispatch counts ${gpu.skipReason}`, () => {
  it(
    'stft is one dispatch with a window of nFft (framing, padding, window and DFT fused); istft is two',
    async () => {
      for (const [nFft, hop, t] of [
        [400, 160, 1600],
        [512, 128, 1000],
        [4096, 1024, 5000],
      ]) {
        const x = randomTensor([2, 3, t]);
        const window = tg.hannWindow(nFft);
        for (const padMode of ['reflect', 'constant'] as const) {
          expect(await dispatchesOf([x, window], (xx, w) => tg.stft(xx, { nFft, hopLength: hop, window: w, padMode })), `stft ${nFft} ${padMode}`).toBe(
            nFft <= 2048 ? 1 : 2 + 6, // 4096 = 4^6: the global path's load, 6 passes, store
          );
        }
        const spec = tg.stft(x, { nFft, hopLength: hop, window });
        if (nFft <= 2048) expect(await dispatchesOf([spec, window], (s, w) => tg.istft(s, { nFft, hopLength: hop, window: w })), `istft ${nFft}`).toBe(2);
        [x, window, spec].forEach((v) => v.dispose());
      }
    },
    SLOW,
  );
});

describe('stft / istft errors are typed', () => {
  it('padding, window and bin-count mismatches throw ShapeError', () => {
    const x = tg.zeros([2, 100]);
    const w16 = tg.hannWindow(16);
    const w500 = tg.hannWindow(500);
    const w2d = tg.zeros([4, 16]);
    // center reflect-padding of nFft / 2 = 128 needs more than 100 samples; constant padding does not.
    expect(() => tg.stft(x, { nFft: 256 })).toThrow(ShapeError);
    const constant = tg.stft(x, { nFft: 256, padMode: 'constant' });
    expect(constant.shape).toEqual([2, 129, 2, 2]);
    constant.dispose();
    expect(() => tg.stft(x, { nFft: 128, center: false })).toThrow(ShapeError);
    expect(() => tg.stft(x, { nFft: 16, winLength: 20 })).toThrow(ShapeError);
    expect(() => tg.stft(x, { nFft: 16, winLength: 12, window: w16 })).toThrow(ShapeError);
    expect(() => tg.stft(x, { nFft: 400, window: w500 })).toThrow(ShapeError);
    expect(() => tg.stft(x, { nFft: 16, window: w2d })).toThrow(ShapeError);
    expect(() => tg.stft(x, { nFft: 16, hopLength: 0 })).toThrow(ShapeError);
    expect(() => tg.stft(x, { nFft: 0 })).toThrow(ShapeError);
    expect(() => tg.stft(x, { nFft: 16, padMode: 'circular' as 'reflect' })).toThrow(ShapeError);
    const spec = tg.zeros([2, 10, 5, 2]);
    expect(() => tg.istft(spec, { nFft: 16, hopLength: 4 })).toThrow(ShapeError);
    expect(() => tg.istft(spec, { nFft: 16, hopLength: 4, onesided: false })).toThrow(ShapeError);
    expect(() => tg.istft(tg.zeros([2, 16, 5, 2]), { nFft: 16, hopLength: 4, onesided: true })).toThrow(ShapeError);
    expect(() => tg.istft(tg.zeros([9, 5, 3]), { nFft: 16, hopLength: 4 })).toThrow(ShapeError);
    expect(() => tg.istft(tg.zeros([9, 0, 2]), { nFft: 16, hopLength: 4 })).toThrow(ShapeError);
    expect(() => tg.istft(tg.zeros([9, 5, 2]), { nFft: 16, hopLength: 4, window: w500 })).toThrow(ShapeError);
    [x, w16, w500, w2d, spec].forEach((t) => t.dispose());
  });
});
