// `tensorgpu doctor`: everything a user (or a bug report) needs to know about why WebGPU does or does not work
// here. The CLI entry (main.ts) parses flags and calls runDoctor; this module only gathers and prints.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { release } from 'node:os';
import { adapterName, diagnose, type Diagnosis } from '../runtime/webgpu/diagnose.js';
import { isSoftwareAdapter } from './device.js';
import { checkAdapter, formatLimit, OPTIONAL_FEATURES, REPORTED_LIMITS, REQUIRED_LIMITS, WITHOUT_FEATURE } from '../runtime/webgpu/requirements.js';

export interface DoctorOptions {
  /** Print one JSON document instead of the readable report. */
  json?: boolean;
  /** Where lines go; defaults to stdout. */
  out?: (line: string) => void;
  /** Environment to probe under (defaults to this process's), e.g. to try another VK_ICD_FILENAMES. */
  env?: NodeJS.ProcessEnv;
  /** Probe timeout in ms (default: diagnose's 15 s). */
  timeoutMs?: number;
}

export interface DoctorEnvironment {
  tensorgpu?: string;
  node: string;
  platform: string;
  arch: string;
  osRelease: string;
  /** Version and location of the `webgpu` package, or why it could not be found. */
  webgpu: { version?: string; path?: string; error?: string };
  /** Environment variables that change what Dawn finds. */
  variables: Record<string, string>;
}

/** Variables that change which adapter Dawn finds; shown so a report is reproducible. */
const RELEVANT_VARIABLES = ['TENSORGPU_DAWN_OPTIONS', 'VK_ICD_FILENAMES', 'VK_DRIVER_FILES', 'EGL_PLATFORM', 'DISPLAY'];

/** Prints the report; resolves to the exit code: 0 when WebGPU is usable, 1 when not. */
export async function runDoctor(options: DoctorOptions = {}): Promise<number> {
  const out = options.out ?? ((line: string) => console.log(line));
  const env = options.env ?? process.env;
  const diagnosis = await diagnose({ refresh: true, env, timeoutMs: options.timeoutMs });
  const environment = describeEnvironment(env);
  const lines = options.json ? JSON.stringify({ environment, diagnosis }, null, 2).split('\n') : formatReport(environment, diagnosis);
  for (const line of lines) out(line);
  return diagnosis.available ? 0 : 1;
}

export function describeEnvironment(env: NodeJS.ProcessEnv): DoctorEnvironment {
  const variables: Record<string, string> = {};
  for (const name of RELEVANT_VARIABLES) {
    const value = env[name];
    if (value !== undefined) variables[name] = value;
  }
  return {
    tensorgpu: readVersion(new URL('../../package.json', import.meta.url)),
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    osRelease: release(),
    webgpu: webgpuPackage(),
    variables,
  };
}

export function formatReport(env: DoctorEnvironment, d: Diagnosis): string[] {
  const lines: string[] = [];
  const row = (label: string, value: string) => lines.push(`  ${`${label}:`.padEnd(24)}${value}`);

  lines.push(`tensorgpu doctor${env.tensorgpu ? ` (tensorgpu ${env.tensorgpu})` : ''}`);
  row('runtime', `${d.runtime} ${env.node}`);
  row('platform', `${env.platform} ${env.arch}, os release ${env.osRelease}`);
  row('webgpu package', env.webgpu.version ? `${env.webgpu.version} (${env.webgpu.path})` : `not found (${env.webgpu.error ?? 'unknown'})`);
  for (const [name, value] of Object.entries(env.variables)) row(name, value);
  lines.push('');

  if (d.available) {
    // The adapter in the headline, and whether `--device auto` takes it (cli/device.ts: not a software one).
    const software = d.adapter && isSoftwareAdapter(d.adapter);
    lines.push(
      `WebGPU: available${d.adapter ? ` (${adapterName(d.adapter)})` : ''}${software ? '; a software adapter: --device auto uses the CPU backend, --device webgpu this adapter' : ''}`,
    );
  } else {
    lines.push(`WebGPU: unavailable [${d.code}]`);
    if (d.reason) row('reason', d.reason);
    if (d.hint) row('what to do', d.hint);
  }

  if (d.adapter) {
    const a = d.adapter;
    row('adapter', adapterName(a));
    row(
      'backend',
      [
        a.backend ?? 'unknown',
        `feature level ${a.featureLevel ?? 'core'}`,
        a.isFallbackAdapter ? 'fallback (software) adapter' : 'not a fallback adapter',
      ].join(', '),
    );
    const shortfalls = new Set(checkAdapter(a.limits, a.features).missing.map((m) => m.split(':')[0]));
    lines.push('  limits:');
    const width = Math.max(...REPORTED_LIMITS.map((n) => n.length)) + 2;
    for (const name of REPORTED_LIMITS) {
      const value = a.limits[name];
      const required = (REQUIRED_LIMITS as Record<string, number>)[name];
      const need = required === undefined ? '' : `(needs >= ${formatLimit(name, required)}${shortfalls.has(name) ? ', TOO LOW' : ''})`;
      const shown = value === undefined ? 'not reported' : formatLimit(name, value);
      lines.push(`    ${name.padEnd(width)}${shown.padEnd(12)}${need}`.trimEnd());
    }
    lines.push('  optional features:');
    const have = new Set(a.features);
    for (const f of OPTIONAL_FEATURES) {
      lines.push(`    ${f.padEnd(width)}${have.has(f) ? 'present' : `absent: ${WITHOUT_FEATURE[f]}`}`);
    }
  }
  if (d.available && d.hint) row('note', d.hint);

  if (d.nativeMessages.length) {
    lines.push(d.available ? "  Dawn's messages:" : "  Dawn's messages (why, in its words):");
    for (const m of d.nativeMessages) lines.push(`    ${m}`);
  }
  return lines;
}

function webgpuPackage(): DoctorEnvironment['webgpu'] {
  try {
    const entry = createRequire(import.meta.url).resolve('webgpu');
    // The package has no "exports" map, so its package.json sits beside its main entry.
    const path = dirname(entry);
    return { version: readVersion(join(path, 'package.json')), path };
  } catch (e) {
    return { error: e instanceof Error ? e.message.split('\n')[0] : String(e) };
  }
}

function readVersion(file: URL | string): string | undefined {
  try {
    const version = (JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version;
    return typeof version === 'string' ? version : undefined;
  } catch {
    return undefined;
  }
}
