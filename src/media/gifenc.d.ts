// Types for the parts of gifenc (plain JavaScript, no bundled types) that video-preview.ts uses.
declare module 'gifenc' {
  export type Palette = number[][];
  export interface GifFrameOptions {
    palette?: Palette;
    /** Milliseconds (stored in centiseconds). */
    delay?: number;
    /** -1 once, 0 forever, n > 0 extra loops. */
    repeat?: number;
  }
  export interface GifStream {
    writeFrame(index: Uint8Array, width: number, height: number, options?: GifFrameOptions): void;
    finish(): void;
    bytesView(): Uint8Array;
  }
  export function GIFEncoder(options?: { initialCapacity?: number }): GifStream;
  export function quantize(rgba: Uint8Array | Uint8ClampedArray, maxColors: number, options?: { format?: 'rgb565' | 'rgb444' | 'rgba4444' }): Palette;
  export function applyPalette(rgba: Uint8Array | Uint8ClampedArray, palette: Palette, format?: 'rgb565' | 'rgb444' | 'rgba4444'): Uint8Array;
}
