// Finds the WebGPU entry point of this runtime: `navigator.gpu` in browsers (and Deno), the `webgpu` npm package
// (Dawn) in Node. Kept apart from device setup so diagnosis can report *which* step failed.
import { nodeHost } from '../host.js';

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
    // Dawn is the Node host's (node.ts): nothing here names it, so browser bundlers never see it.
    return { gpu: await nodeHost('the WebGPU device in Node (Dawn)').dawnGpu(), source: 'npm:webgpu' };
  })();
  cached.catch(() => {
    cached = undefined;
  });
  return cached;
}
