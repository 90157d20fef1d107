// The adapter probe: request an adapter, then a device, and report how far it got. Two copies of the same steps:
// - NODE_PROBE_SCRIPT (node.ts, Node-only) runs in a child process, because Dawn writes its reasons (Vulkan loader,
//   drivers) to the native stderr, which only a parent process can capture.
// - probeInProcess runs where there is no child process (browsers, Deno) against navigator.gpu.
// Both report ProbeOutput lines, merged by parseProbeStdout. This module is browser-safe.

import { REPORTED_LIMITS } from './requirements.js';

/** Where the probe was when it stopped. */
export type ProbeStage = 'import' | 'create' | 'adapter' | 'device' | 'done';

export interface ProbedAdapter {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  features: string[];
  limits: Record<string, number>;
  isFallbackAdapter?: boolean;
  /** 'compatibility' when only a compatibility-mode adapter (e.g. OpenGL ES) was found. */
  featureLevel: 'core' | 'compatibility';
}

/** What the probe reports: the last stage reached, and the error that stopped it there, if any. */
export interface ProbeOutput {
  stage: ProbeStage;
  /** True once the probe reached a conclusion (an error, no adapter, or a working device). */
  finished: boolean;
  error?: string;
  /** Node's error code for import failures (ERR_MODULE_NOT_FOUND, ERR_DLOPEN_FAILED, ...). */
  errorCode?: string;
  adapter?: ProbedAdapter;
}

/** Merges the probe's JSON lines; lines that are not JSON (stray prints) are ignored. */
export function parseProbeStdout(stdout: string): ProbeOutput | undefined {
  let merged: ProbeOutput | undefined;
  for (const line of stdout.split('\n')) {
    const text = line.trim();
    if (!text.startsWith('{')) continue;
    try {
      const part = JSON.parse(text) as Partial<ProbeOutput>;
      if (typeof part.stage !== 'string') continue;
      merged = { ...merged, ...part } as ProbeOutput;
    } catch {
      // Not ours.
    }
  }
  return merged;
}

/** The same steps as node.ts's NODE_PROBE_SCRIPT, in-process against a GPU object (browsers, Deno). Never rejects. */
export async function probeInProcess(gpu: GPU, timeoutMs: number): Promise<ProbeOutput> {
  let stage: ProbeStage = 'adapter';
  let adapterSummary: ProbedAdapter | undefined;
  const steps = async (): Promise<ProbeOutput> => {
    let featureLevel: ProbedAdapter['featureLevel'] = 'core';
    let adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
    if (!adapter) {
      featureLevel = 'compatibility';
      adapter = await gpu.requestAdapter({ powerPreference: 'high-performance', featureLevel: 'compatibility' });
    }
    if (!adapter) return { stage, finished: true };
    const info = adapter.info;
    const limits: Record<string, number> = {};
    const reported = adapter.limits as unknown as Record<string, unknown>;
    for (const name of REPORTED_LIMITS) {
      const value = reported[name];
      if (typeof value === 'number') limits[name] = value;
    }
    adapterSummary = {
      vendor: info.vendor,
      architecture: info.architecture,
      device: info.device,
      description: info.description,
      features: [...adapter.features].sort(),
      limits,
      isFallbackAdapter: info.isFallbackAdapter,
      featureLevel,
    };
    stage = 'device';
    const device = await adapter.requestDevice();
    device.destroy();
    return { stage: 'done', finished: true, adapter: adapterSummary };
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<ProbeOutput>((resolve) => {
    timer = setTimeout(() => resolve({ stage, finished: false, adapter: adapterSummary }), timeoutMs);
  });
  try {
    return await Promise.race([steps(), timeout]);
  } catch (e) {
    return { stage, finished: true, error: e instanceof Error ? e.message : String(e), adapter: adapterSummary };
  } finally {
    clearTimeout(timer);
  }
}
