// An RGB raster with clipped drawing primitives (pixels, rectangles, round-brush lines), encoded by pngjs: the plots
// (loss-plot.ts, the spectrogram's axes) draw on it, so no canvas library is needed.
import { PNG } from 'pngjs';

export type Rgb = readonly [number, number, number];

/** An RGB image with clipped drawing primitives: pixels outside the image are dropped, never wrapped. */
export class Raster {
  readonly data: Buffer;

  constructor(
    readonly width: number,
    readonly height: number,
    background: Rgb,
  ) {
    this.data = Buffer.alloc(width * height * 3);
    this.fillRect(0, 0, width, height, background);
  }

  setPixel(x: number, y: number, color: Rgb): void {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    const i = (y * this.width + x) * 3;
    this.data[i] = color[0];
    this.data[i + 1] = color[1];
    this.data[i + 2] = color[2];
  }

  fillRect(x: number, y: number, w: number, h: number, color: Rgb): void {
    const x0 = Math.max(0, x);
    const y0 = Math.max(0, y);
    const x1 = Math.min(this.width, x + w);
    const y1 = Math.min(this.height, y + h);
    for (let py = y0; py < y1; py++) for (let px = x0; px < x1; px++) this.setPixel(px, py, color);
  }

  /** A filled disc of the given diameter centred on (x, y); diameter 1 is a single pixel. */
  dot(x: number, y: number, color: Rgb, diameter = 1): void {
    const cx = Math.round(x);
    const cy = Math.round(y);
    if (diameter <= 1) return this.setPixel(cx, cy, color);
    const r = diameter / 2;
    const reach = Math.floor(r);
    for (let dy = -reach; dy <= reach; dy++) {
      for (let dx = -reach; dx <= reach; dx++) if (dx * dx + dy * dy <= r * r) this.setPixel(cx + dx, cy + dy, color);
    }
  }

  /** A Bresenham line stamped with a round brush of the given thickness. */
  line(x0: number, y0: number, x1: number, y1: number, color: Rgb, thickness = 1): void {
    // Non-finite or far-off endpoints can only come from a degenerate value range; skip rather than loop for ages.
    const limit = 4 * Math.max(this.width, this.height);
    for (const v of [x0, y0, x1, y1]) if (!Number.isFinite(v) || Math.abs(v) > limit) return;
    let x = Math.round(x0);
    let y = Math.round(y0);
    const xe = Math.round(x1);
    const ye = Math.round(y1);
    const dx = Math.abs(xe - x);
    const dy = -Math.abs(ye - y);
    const sx = x < xe ? 1 : -1;
    const sy = y < ye ? 1 : -1;
    let err = dx + dy;
    for (;;) {
      this.dot(x, y, color, thickness);
      if (x === xe && y === ye) return;
      const e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y += sy;
      }
    }
  }

  /** A one-pixel outline of the rectangle with corners (x0, y0) and (x1, y1), both inclusive. */
  strokeRect(x0: number, y0: number, x1: number, y1: number, color: Rgb): void {
    this.line(x0, y0, x1, y0, color);
    this.line(x1, y0, x1, y1, color);
    this.line(x1, y1, x0, y1, color);
    this.line(x0, y1, x0, y0, color);
  }

  toPng(): Buffer {
    const png = new PNG({ width: this.width, height: this.height });
    png.data = this.data;
    // RGB in and out: pngjs packs the bytes as given, with no RGBA round trip.
    return PNG.sync.write(png, { colorType: 2, inputColorType: 2, inputHasAlpha: false });
  }
}
