// The built-in test signal: a linear chirp sweeping 100 Hz -> 7 kHz over its length, a steady 440 Hz tone, a
// 1 kHz tone sounding in every other second, a 3 kHz tone in the last third, and a little white noise from a fixed
// 32-bit LCG. Every sample is computed in float64 and rounded once to float32, from a formula simple enough to
// reproduce anywhere (tools/audio-reference/audio_reference.py does, to build the golden log-mel fixtures).

/** Samples of the built-in signal: `seconds` long at `sampleRate` (default 16 kHz), float32 in about [-0.9, 0.9]. */
export function syntheticSignal(seconds: number, sampleRate = 16000): Float32Array {
  const n = Math.round(seconds * sampleRate);
  const out = new Float32Array(n);
  const duration = n / sampleRate;
  const f0 = 100;
  const f1 = 7000;
  const sweep = duration > 0 ? (f1 - f0) / duration : 0;
  let state = 12345;
  for (let i = 0; i < n; i++) {
    const t = i / sampleRate;
    let x = 0.4 * Math.sin(2 * Math.PI * (f0 * t + 0.5 * sweep * t * t));
    x += 0.2 * Math.sin(2 * Math.PI * 440 * t);
    if (Math.floor(t) % 2 === 0) x += 0.1 * Math.sin(2 * Math.PI * 1000 * t);
    if (t >= (2 * duration) / 3) x += 0.15 * Math.sin(2 * Math.PI * 3000 * t);
    // Numerical Recipes' LCG: state = (1664525 * state + 1013904223) mod 2^32, uniform in [-1, 1).
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    x += 0.01 * ((state / 4294967296) * 2 - 1);
    out[i] = x;
  }
  return out;
}
