// Finds the WebGPU entry point of this runtime: `navigator.gpu` in browsers (and Deno), the `webgpu` npm package
// (Dawn) in Node. Kept apart from device setup so diagnosis can report *which* step failed.

export type GpuRuntime = 'browser' | 'node' | 'deno' | 'bun' | 'unknown';

export function detectRuntime(): GpuRuntime {
  const g = globalThis as { Deno?: unknown; Bun?: unknown; window?: unknown; process?: { versions?: { node?: string } } };
  if (g.Deno) return 'deno';
  if (g.Bun) return 'bun';
  if (g.process?.versions?.node) return 'node';
  if (g.window) return 'browser';
  return 'unknown';
}

export interface GpuEntry {
  gpu: GPU;
  /** Where it came from, for messages: 'navigator.gpu' or 'npm:webgpu'. */
  source: string;
}

/** Dawn options for Node: env TENSORGPU_DAWN_OPTIONS="backend=opengles;..." passes extra toggles through. */
function dawnOptions(): string[] {
  const extra = process.env.TENSORGPU_DAWN_OPTIONS;
  return extra ? extra.split(';').filter(Boolean) : [];
}

let cached: Promise<GpuEntry> | undefined;

/**
 * The GPU object of this runtime. Rejects with an Error whose message says what is missing (the caller turns it
 * into a diagnosis); never returns undefined.
 */
export function loadGpu(): Promise<GpuEntry> {
  cached ??= (async () => {
    const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
    if (nav?.gpu) return { gpu: nav.gpu, source: 'navigator.gpu' };
    if (detectRuntime() !== 'node') throw new Error('this runtime exposes no navigator.gpu');
    // A specifier in a variable: browser bundlers (which never reach this line) must not try to bundle Dawn.
    const dawn = 'webgpu';
    const mod = (await import(/* @vite-ignore */ /* webpackIgnore: true */ dawn)) as unknown as {
      create: (options: string[]) => GPU;
      globals: Record<string, unknown>;
    };
    // Dawn's Node binding exposes GPUBufferUsage & co. as exports, not globals; kernels use the global names.
    for (const [name, value] of Object.entries(mod.globals)) {
      if (!(name in globalThis)) (globalThis as Record<string, unknown>)[name] = value;
    }
    return { gpu: mod.create(dawnOptions()), source: 'npm:webgpu' };
  })();
  cached.catch(() => {
    cached = undefined;
  });
  return cached;
}
