// A built-in 5x7 bitmap font (digits, ASCII letters and the symbols numbers and labels need) drawn onto a Raster,
// for the plots' titles, tick labels and legends: no font files or text shaping, the same pixels everywhere.
import type { Raster, Rgb } from './raster.js';

export const GLYPH_W = 5;
export const GLYPH_H = 7;
/** Pixels from one glyph's left edge to the next's at scale 1 (a one-pixel gap). */
export const ADVANCE = GLYPH_W + 1;

// Seven rows of five columns each, '#' = ink. Enough for numbers (fixed and exponential), the axis labels and
// ordinary titles; anything else is drawn as a box so a missing glyph is visible rather than silently dropped.
const GLYPH_ROWS: Record<string, string> = {
  '0': '.###. #...# #..## #.#.# ##..# #...# .###.',
  '1': '..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.',
  '2': '.###. #...# ....# ...#. ..#.. .#... #####',
  '3': '##### ...#. ..#.. ...#. ....# #...# .###.',
  '4': '...#. ..##. .#.#. #..#. ##### ...#. ...#.',
  '5': '##### #.... ####. ....# ....# #...# .###.',
  '6': '..##. .#... #.... ####. #...# #...# .###.',
  '7': '##### ....# ...#. ..#.. .#... .#... .#...',
  '8': '.###. #...# #...# .###. #...# #...# .###.',
  '9': '.###. #...# #...# .#### ....# ...#. .##..',
  ' ': '..... ..... ..... ..... ..... ..... .....',
  '.': '..... ..... ..... ..... ..... .##.. .##..',
  ',': '..... ..... ..... ..... .##.. ..#.. .#...',
  ':': '..... .##.. .##.. ..... .##.. .##.. .....',
  '-': '..... ..... ..... .###. ..... ..... .....',
  '+': '..... ..#.. ..#.. ##### ..#.. ..#.. .....',
  '=': '..... ..... ##### ..... ##### ..... .....',
  _: '..... ..... ..... ..... ..... ..... #####',
  '/': '..... ....# ...#. ..#.. .#... #.... .....',
  '%': '##... ##..# ...#. ..#.. .#... #..## ...##',
  '(': '...#. ..#.. .#... .#... .#... ..#.. ...#.',
  ')': '.#... ..#.. ...#. ...#. ...#. ..#.. .#...',
  '[': '.###. .#... .#... .#... .#... .#... .###.',
  ']': '.###. ...#. ...#. ...#. ...#. ...#. .###.',
  A: '.###. #...# #...# ##### #...# #...# #...#',
  B: '####. #...# #...# ####. #...# #...# ####.',
  C: '.###. #...# #.... #.... #.... #...# .###.',
  D: '###.. #..#. #...# #...# #...# #..#. ###..',
  E: '##### #.... #.... ####. #.... #.... #####',
  F: '##### #.... #.... ####. #.... #.... #....',
  G: '.###. #...# #.... #.### #...# #...# .####',
  H: '#...# #...# #...# ##### #...# #...# #...#',
  I: '.###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.',
  J: '..### ...#. ...#. ...#. ...#. #..#. .##..',
  K: '#...# #..#. #.#.. ##... #.#.. #..#. #...#',
  L: '#.... #.... #.... #.... #.... #.... #####',
  M: '#...# ##.## #.#.# #.#.# #...# #...# #...#',
  N: '#...# #...# ##..# #.#.# #..## #...# #...#',
  O: '.###. #...# #...# #...# #...# #...# .###.',
  P: '####. #...# #...# ####. #.... #.... #....',
  Q: '.###. #...# #...# #...# #.#.# #..#. .##.#',
  R: '####. #...# #...# ####. #.#.. #..#. #...#',
  S: '.#### #.... #.... .###. ....# ....# ####.',
  T: '##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..',
  U: '#...# #...# #...# #...# #...# #...# .###.',
  V: '#...# #...# #...# #...# #...# .#.#. ..#..',
  W: '#...# #...# #...# #.#.# #.#.# #.#.# .#.#.',
  X: '#...# #...# .#.#. ..#.. .#.#. #...# #...#',
  Y: '#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..',
  Z: '##### ....# ...#. ..#.. .#... #.... #####',
  a: '..... ..... .###. ....# .#### #...# .####',
  b: '#.... #.... #.##. ##..# #...# #...# ####.',
  c: '..... ..... .###. #.... #.... #...# .###.',
  d: '....# ....# .##.# #..## #...# #...# .####',
  e: '..... ..... .###. #...# ##### #.... .###.',
  f: '..##. .#..# .#... ###.. .#... .#... .#...',
  g: '..... .#### #...# #...# .#### ....# .###.',
  h: '#.... #.... #.##. ##..# #...# #...# #...#',
  i: '..#.. ..... .##.. ..#.. ..#.. ..#.. .###.',
  j: '...#. ..... ..##. ...#. ...#. #..#. .##..',
  k: '#.... #.... #..#. #.#.. ##... #.#.. #..#.',
  l: '.##.. ..#.. ..#.. ..#.. ..#.. ..#.. .###.',
  m: '..... ..... ##.#. #.#.# #.#.# #...# #...#',
  n: '..... ..... #.##. ##..# #...# #...# #...#',
  o: '..... ..... .###. #...# #...# #...# .###.',
  p: '..... ..... ####. #...# ####. #.... #....',
  q: '..... ..... .##.# #..## .#### ....# ....#',
  r: '..... ..... #.##. ##..# #.... #.... #....',
  s: '..... ..... .###. #.... .###. ....# ####.',
  t: '.#... .#... ###.. .#... .#... .#..# ..##.',
  u: '..... ..... #...# #...# #...# #..## .##.#',
  v: '..... ..... #...# #...# #...# .#.#. ..#..',
  w: '..... ..... #...# #...# #.#.# #.#.# .#.#.',
  x: '..... ..... #...# .#.#. ..#.. .#.#. #...#',
  y: '..... ..... #...# #...# .#### ....# .###.',
  z: '..... ..... ##### ...#. ..#.. .#... #####',
};

/** Each glyph as GLYPH_H row bitmasks, bit (GLYPH_W - 1 - col) set where column col has ink. */
const GLYPHS: ReadonlyMap<string, readonly number[]> = new Map(Object.entries(GLYPH_ROWS).map(([ch, rows]) => [ch, parseGlyph(ch, rows)]));

function parseGlyph(ch: string, rows: string): number[] {
  const lines = rows.split(' ');
  if (lines.length !== GLYPH_H || lines.some((l) => l.length !== GLYPH_W)) {
    throw new Error(`bitmap font: glyph ${JSON.stringify(ch)} is not ${GLYPH_W}x${GLYPH_H}`);
  }
  return lines.map((l) => [...l].reduce((bits, c) => (bits << 1) | (c === '#' ? 1 : 0), 0));
}

// The outline drawn for characters the font lacks.
const MISSING_GLYPH = parseGlyph('?', '##### #...# #...# #...# #...# #...# #####');

/** Width in pixels of `text` drawn at `scale` (no trailing gap). */
export function textWidth(text: string, scale: number): number {
  const n = [...text].length;
  return n === 0 ? 0 : (n * ADVANCE - 1) * scale;
}

/**
 * Draws `text` with its top-left corner at (x, y), each font pixel a scale x scale block. `vertical` turns it 90
 * degrees counter-clockwise (reading bottom to top, as a y-axis label), with (x, y) then its bottom-left corner.
 */
export function drawText(r: Raster, text: string, x: number, y: number, scale: number, color: Rgb, vertical = false): void {
  [...text].forEach((ch, i) => {
    const rows = GLYPHS.get(ch) ?? MISSING_GLYPH;
    for (let gy = 0; gy < GLYPH_H; gy++) {
      for (let gx = 0; gx < GLYPH_W; gx++) {
        if (!((rows[gy] >> (GLYPH_W - 1 - gx)) & 1)) continue;
        const along = (i * ADVANCE + gx) * scale;
        const across = gy * scale;
        if (vertical) r.fillRect(x + across, y - along - scale, scale, scale, color);
        else r.fillRect(x + along, y + across, scale, scale, color);
      }
    }
  });
}
