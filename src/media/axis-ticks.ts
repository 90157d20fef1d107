// Round axis tick values (1, 2 or 5 x 10^k apart) and their labels in one notation, shared by the plots.

/**
 * About `count` round tick values (1, 2 or 5 x 10^k apart) lying within [min, max], in increasing order; the
 * bounds may come in either order. min == max gives that single value; a non-finite bound gives none.
 */
export function niceTicks(min: number, max: number, count: number): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min > max) [min, max] = [max, min];
  if (min === max) return [min];
  const step = tickStep(max - min, Math.max(1, Math.round(count)));
  // Small steps divide by their (integral) inverse so 0.1-spaced ticks come out as 0.3, not 0.30000000000000004.
  const inverse = step < 1 ? Math.round(1 / step) : 0;
  const at = (k: number): number => (inverse ? k / inverse : k * step) + 0; // + 0 turns -0 into 0
  const first = Math.ceil(min / step - 1e-9);
  const last = Math.floor(max / step + 1e-9);
  const ticks: number[] = [];
  for (let k = first; k <= last; k++) ticks.push(at(k));
  return ticks;
}

/** The 1/2/5 x 10^k step nearest to span / count (the same thresholds as d3's ticks: sqrt 50, sqrt 10, sqrt 2). */
function tickStep(span: number, count: number): number {
  const raw = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / magnitude;
  const factor = norm >= Math.sqrt(50) ? 10 : norm >= Math.sqrt(10) ? 5 : norm >= Math.sqrt(2) ? 2 : 1;
  return factor * magnitude;
}

/**
 * Labels for one axis's ticks, all in one notation: fixed with as many decimals as the spacing needs, or
 * exponential (2.5e-5, 1e+6) when fixed would be too long to read.
 */
export function formatTicks(ticks: readonly number[]): string[] {
  if (ticks.length === 0) return [];
  const spacing = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : 0;
  const largest = Math.max(...ticks.map(Math.abs));
  const exponential = largest >= 1e6 || (spacing > 0 && spacing < 1e-4) || (spacing === 0 && largest > 0 && largest < 1e-4);
  if (exponential) {
    const digits = (v: number): number =>
      spacing > 0 && v !== 0 ? Math.min(6, Math.max(0, Math.floor(Math.log10(Math.abs(v))) - Math.floor(Math.log10(spacing) + 1e-9))) : 0;
    // toExponential pads with zeros (2.50e-5); strip them so labels stay short.
    return ticks.map((v) => v.toExponential(digits(v)).replace(/\.?0+e/, 'e'));
  }
  const reference = spacing > 0 ? spacing : largest;
  const decimals = reference > 0 ? Math.max(0, -Math.floor(Math.log10(reference) + 1e-9)) : 0;
  return ticks.map((v) => v.toFixed(decimals));
}
