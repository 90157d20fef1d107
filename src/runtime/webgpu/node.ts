// The Node side of WebGPU: Dawn (the `webgpu` npm package) and the adapter probe's child process. Node-only: the
// Node host (runtime/node-host.ts) reaches it, a browser bundle never does (browsers use navigator.gpu and probe it
// in-process, probe-adapter.ts).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { release } from 'node:os';
import { pathToFileURL } from 'node:url';
import type { AdapterProbeOptions } from '../host.js';
import type { ProbeResult } from './diagnose.js';
import { parseProbeStdout } from './probe-adapter.js';
import { REPORTED_LIMITS } from './requirements.js';

const MAX_STREAM_BYTES = 64 * 1024;
/** CPU Vulkan drivers worth suggesting when the machine has no GPU driver. */
const SOFTWARE_ICDS = [
  '/usr/lib/chromium/vk_swiftshader_icd.json',
  '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json',
  '/usr/share/vulkan/icd.d/lvp_icd.aarch64.json',
];

/** Dawn options: env TENSORGPU_DAWN_OPTIONS="backend=opengles;..." passes extra toggles through. */
function dawnOptions(env: Record<string, string | undefined>): string[] {
  return (env.TENSORGPU_DAWN_OPTIONS ?? '').split(';').filter(Boolean);
}

/** Dawn's GPU object. Dawn's binding exposes GPUBufferUsage & co. as exports, not globals; kernels use the globals. */
export async function dawnGpu(): Promise<GPU> {
  // Imported when a device is first asked for: loading the native addon is the step that can fail or crash.
  const mod = await import('webgpu');
  for (const [name, value] of Object.entries(mod.globals)) {
    if (!(name in globalThis)) (globalThis as Record<string, unknown>)[name] = value;
  }
  return mod.create(dawnOptions(process.env));
}

// Kept as plain ES2022 with no imports but node:fs so it runs under any Node >= 20 with no transpiling. Each line it
// prints is a JSON object; the parent merges them, so a crash mid-way still tells which stage it died in.
// Inputs come through env: TENSORGPU_PROBE_MODULE (file URL of the webgpu package) and TENSORGPU_PROBE_OPTIONS
// (JSON array of Dawn options).
export const NODE_PROBE_SCRIPT = `
import { writeSync } from 'node:fs';
const LIMITS = ${JSON.stringify(REPORTED_LIMITS)};
const emit = (o) => writeSync(1, JSON.stringify(o) + '\\n');
const stop = (stage, e) => {
  emit({ stage, finished: true, error: String((e && e.message) || e), errorCode: e && typeof e.code === 'string' ? e.code : undefined });
  process.exit(0);
};
emit({ stage: 'import', finished: false });
let mod;
try { mod = await import(process.env.TENSORGPU_PROBE_MODULE); } catch (e) { stop('import', e); }
emit({ stage: 'create', finished: false });
let gpu;
try { gpu = mod.create(JSON.parse(process.env.TENSORGPU_PROBE_OPTIONS || '[]')); } catch (e) { stop('create', e); }
emit({ stage: 'adapter', finished: false });
let adapter;
let featureLevel = 'core';
try {
  adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) {
    featureLevel = 'compatibility';
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance', featureLevel: 'compatibility' });
  }
} catch (e) { stop('adapter', e); }
if (!adapter) { emit({ stage: 'adapter', finished: true }); process.exit(0); }
const info = adapter.info || {};
const limits = {};
for (const name of LIMITS) if (typeof adapter.limits[name] === 'number') limits[name] = adapter.limits[name];
emit({ stage: 'device', finished: false, adapter: {
  vendor: info.vendor || '', architecture: info.architecture || '', device: info.device || '',
  description: info.description || '', features: [...adapter.features].sort(), limits,
  isFallbackAdapter: info.isFallbackAdapter ?? adapter.isFallbackAdapter, featureLevel,
} });
try { const device = await adapter.requestDevice(); device.destroy(); } catch (e) { stop('device', e); }
emit({ stage: 'done', finished: true });
// Dawn keeps background threads alive; exit explicitly rather than wait for the loop to drain.
process.exit(0);
`;

/** Runs NODE_PROBE_SCRIPT in a child process and collects what it saw, Dawn's native stderr included. */
export async function probeAdapter({ env, timeoutMs, webgpuModule }: AdapterProbeOptions): Promise<ProbeResult> {
  const result: ProbeResult = {
    runtime: 'node',
    platform: process.platform,
    arch: process.arch,
    osRelease: release(),
    // The options the real device will get (dawnGpu), so the probe sees exactly them.
    dawnOptions: dawnOptions(env),
    stderr: '',
    softwareIcds: SOFTWARE_ICDS.filter((p) => existsSync(p)),
    timeoutMs,
  };

  let moduleUrl: string;
  try {
    // Resolved here, not in the child, so the child finds the package regardless of its cwd.
    const entry = webgpuModule ?? createRequire(import.meta.url).resolve('webgpu');
    moduleUrl = entry.startsWith('file:') ? entry : pathToFileURL(entry).href;
  } catch (e) {
    return { ...result, webgpuResolveError: errorText(e) };
  }

  return new Promise<ProbeResult>((resolve) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    let settled = false;
    const finish = (extra: Partial<ProbeResult>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, stderr, output: parseProbeStdout(stdout), timedOut, ...extra });
    };
    const child = spawn(process.execPath, ['--no-warnings', '--input-type=module', '-e', NODE_PROBE_SCRIPT], {
      env: { ...env, TENSORGPU_PROBE_MODULE: moduleUrl, TENSORGPU_PROBE_OPTIONS: JSON.stringify(result.dawnOptions) },
      stdio: ['ignore', 'pipe', 'pipe'],
      windowsHide: true,
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      if (stdout.length < MAX_STREAM_BYTES) stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr.length < MAX_STREAM_BYTES) stderr += chunk;
    });
    child.on('error', (e) => finish({ spawnError: errorText(e) }));
    child.on('close', (exitCode, signal) => finish({ exitCode, signal }));
  });
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
