// Why WebGPU can or cannot be used here, and what the user can do about it.
// In Node the probe runs in a child process: Dawn explains failures (no Vulkan loader, no driver) only on the
// native stderr, which JavaScript cannot read in-process. The classification is a pure function of what the probe
// saw (classifyProbe), so every outcome is testable from recorded output without the hardware that produces it.
// The child process is the Node host's (node.ts); this module imports nothing from Node, so browser bundles take it.

import { NodeOnlyError } from '../../core/errors.js';
import { nodeHost } from '../host.js';
import { detectRuntime, loadGpu } from './runtime.js';
import { probeInProcess, type ProbeOutput, type ProbeStage } from './probe-adapter.js';
import { checkAdapter } from './requirements.js';

export type DiagnosisCode =
  | 'ok'
  | 'no-webgpu-runtime'
  | 'webgpu-package-broken'
  | 'no-adapter'
  | 'vulkan-loader-missing'
  | 'no-gpu-driver'
  | 'limits-too-low'
  | 'device-request-failed'
  | 'os-too-old'
  | 'probe-failed';

export interface AdapterSummary {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** Dawn backend: from TENSORGPU_DAWN_OPTIONS, the adapter description, or the platform default. */
  backend?: string;
  features: string[];
  limits: Record<string, number>;
  isFallbackAdapter?: boolean;
  /** 'compatibility' when only a compatibility-mode adapter exists (e.g. OpenGL ES); device setup must ask for it. */
  featureLevel?: 'core' | 'compatibility';
}

export interface Diagnosis {
  available: boolean;
  backend: 'webgpu';
  runtime: string;
  code: DiagnosisCode;
  adapter?: AdapterSummary;
  /** Short, one line: what is wrong ("no GPU adapter: Vulkan found no drivers"). */
  reason?: string;
  /** What to do about it. */
  hint?: string;
  /** Dawn's own stderr lines from the probe (trimmed, deduplicated, capped). Empty outside Node. */
  nativeMessages: string[];
}

/** Everything the probe saw; the input of classifyProbe. Recorded instances make the tests. */
export interface ProbeResult {
  runtime: string;
  /** process.platform in Node; 'browser' etc. elsewhere. */
  platform: string;
  /** process.arch in Node. */
  arch?: string;
  /** os.release(): kernel version on Linux, Darwin version on macOS, NT version on Windows. */
  osRelease?: string;
  /** Dawn options the probe passed to create() (from TENSORGPU_DAWN_OPTIONS). */
  dawnOptions: string[];
  /** Set when the parent could not resolve the `webgpu` package at all. */
  webgpuResolveError?: string;
  /** Set when the child process could not be started. */
  spawnError?: string;
  timedOut?: boolean;
  timeoutMs?: number;
  exitCode?: number | null;
  signal?: string | null;
  /** The child's merged JSON report; undefined when it printed none. */
  output?: ProbeOutput;
  /** The child's raw stderr (Dawn's messages). */
  stderr: string;
  /** CPU Vulkan drivers present on this machine, to suggest when there is no GPU driver. */
  softwareIcds?: string[];
  /** Browser facts, for runtimes probed in-process. */
  browser?: { hasNavigator: boolean; hasGpu: boolean; secureContext?: boolean };
}

export interface DiagnoseOptions {
  /** Probe again instead of returning this process's memoized diagnosis. */
  refresh?: boolean;
  /** Kill the probe after this long (default 15 s); a stuck driver then reads as 'probe-failed'. */
  timeoutMs?: number;
  /** Environment of the probe child (Node only), e.g. to try another VK_ICD_FILENAMES. Not memoized. */
  env?: NodeJS.ProcessEnv;
  /** File URL or path of the `webgpu` entry module to probe instead of the resolved package. Not memoized. */
  webgpuModule?: string;
}

const DEFAULT_TIMEOUT_MS = 15_000;
const MAX_NATIVE_MESSAGES = 20;

let memo: Promise<Diagnosis> | undefined;

/** Whether WebGPU is usable here and, if not, why. Never rejects: unexpected failures become 'probe-failed'. */
export function diagnose(options: DiagnoseOptions = {}): Promise<Diagnosis> {
  const custom = options.env !== undefined || options.webgpuModule !== undefined;
  if (!custom && !options.refresh && memo) return memo;
  const run = (async (): Promise<Diagnosis> => {
    try {
      return classifyProbe(await probe(options));
    } catch (e) {
      if (e instanceof NodeOnlyError) {
        return {
          available: false,
          backend: 'webgpu',
          runtime: detectRuntime(),
          code: 'no-webgpu-runtime',
          reason: 'the browser entry loaded in Node has no Node host to probe Dawn with',
          hint: "Import 'tensorgpu' (the Node entry) in Node, or use the CPU device.",
          nativeMessages: [],
        };
      }
      return {
        available: false,
        backend: 'webgpu',
        runtime: detectRuntime(),
        code: 'probe-failed',
        reason: `the WebGPU probe failed unexpectedly: ${errorText(e)}`,
        hint:
          detectRuntime() === 'node'
            ? 'Please report this at the tensorgpu issue tracker with the output of `npx tensorgpu doctor --json`.'
            : "Please report this at the tensorgpu issue tracker with the browser's name and version (and chrome://gpu's report).",
        nativeMessages: [],
      };
    }
  })();
  if (!custom) memo = run;
  return run;
}

export async function isAvailable(): Promise<boolean> {
  return (await diagnose()).available;
}

/** One line for the 'auto' device fallback notice. */
export function fallbackNotice(d: Diagnosis): string {
  if (d.available) return `tensorgpu: using WebGPU (${d.adapter ? adapterName(d.adapter) : 'unknown adapter'}).`;
  const reason = firstLine(d.reason ?? d.code);
  const more = d.runtime === 'node' ? 'Run `npx tensorgpu doctor` for details.' : d.hint ? firstLine(d.hint) : '';
  return `tensorgpu: WebGPU unavailable (${reason}); using CPU. ${more}`.trimEnd();
}

// CPU renderers of WebGPU: SwiftShader (Chrome's), Mesa llvmpipe/lavapipe/softpipe, WARP on Windows (which names
// itself the Microsoft Basic Render Driver). Browsers and Dawn may instead only set isFallbackAdapter.
const SOFTWARE_ADAPTER = /swiftshader|llvmpipe|lavapipe|softpipe|microsoft basic render|\bwarp\b|software/i;

/** Whether an adapter renders in software on the CPU (what doctor calls a fallback adapter). */
export function isSoftwareAdapter(a: Pick<AdapterSummary, 'description' | 'device' | 'architecture' | 'isFallbackAdapter'> & { vendor?: string }): boolean {
  return a.isFallbackAdapter === true || SOFTWARE_ADAPTER.test(`${a.vendor ?? ''} ${a.description} ${a.device} ${a.architecture}`);
}

/** A human name for an adapter: the description when the driver gives one, else vendor/architecture/device. */
export function adapterName(a: AdapterSummary): string {
  const parts = [a.vendor, a.architecture, a.device].filter(Boolean).join(' ');
  if (a.description && parts) return `${a.description} (${parts})`;
  return a.description || parts || 'unnamed adapter';
}

// ---------------------------------------------------------------------------------------------------------------
// Probing

async function probe(options: DiagnoseOptions): Promise<ProbeResult> {
  const runtime = detectRuntime();
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (runtime === 'node') {
    const host = nodeHost('diagnose() in Node (the adapter probe)');
    return host.probeAdapter({ env: options.env ?? process.env, timeoutMs, webgpuModule: options.webgpuModule });
  }
  return probeHere(runtime, timeoutMs);
}

/** Browsers and Deno: probe navigator.gpu in this process; there is no native stderr to capture. */
async function probeHere(runtime: string, timeoutMs: number): Promise<ProbeResult> {
  const g = globalThis as { navigator?: { gpu?: unknown }; isSecureContext?: boolean };
  const browser = { hasNavigator: g.navigator !== undefined, hasGpu: g.navigator?.gpu !== undefined, secureContext: g.isSecureContext };
  const result: ProbeResult = { runtime, platform: runtime, dawnOptions: [], stderr: '', browser };
  if (!browser.hasGpu) return result;
  const { gpu } = await loadGpu();
  const output = await probeInProcess(gpu, timeoutMs);
  // In process, an unfinished probe can only mean the timeout fired: there is no child to exit or crash.
  return { ...result, output, ...(output.finished ? {} : { timedOut: true, timeoutMs }) };
}

// ---------------------------------------------------------------------------------------------------------------
// Classification

/** Dawn's stderr as messages: trimmed, deduplicated, capped; its `at Fn (file:line)` source locations dropped. */
export function nativeMessagesOf(stderr: string): string[] {
  const seen = new Set<string>();
  for (const raw of stderr.split(/\r?\n/)) {
    const line = raw.trim();
    // Dawn appends the C++ source location of its builder (/home/runner/...); it tells a user nothing.
    if (!line || /^at \S+ \(.*:\d+\)$/.test(line)) continue;
    seen.add(line);
    if (seen.size >= MAX_NATIVE_MESSAGES) break;
  }
  return [...seen];
}

const STAGE_TEXT: Record<ProbeStage, string> = {
  import: 'loading the webgpu package',
  create: 'starting Dawn',
  adapter: 'requesting a GPU adapter',
  device: 'creating a GPU device',
  done: 'shutting down',
};

/** Turns what the probe saw into a diagnosis. Pure: no I/O, so tests can feed it recorded probe results. */
export function classifyProbe(r: ProbeResult): Diagnosis {
  const nativeMessages = nativeMessagesOf(r.stderr);
  const fail = (code: DiagnosisCode, reason: string, hint?: string, adapter?: AdapterSummary): Diagnosis => ({
    available: false,
    backend: 'webgpu',
    runtime: r.runtime,
    code,
    ...(adapter ? { adapter } : {}),
    reason,
    ...(hint ? { hint } : {}),
    nativeMessages,
  });

  if (r.browser && !r.browser.hasGpu) return noRuntimeHere(r, fail);
  if (r.webgpuResolveError !== undefined) {
    return fail(
      'no-webgpu-runtime',
      'the `webgpu` package (Dawn for Node) is not installed',
      'Run `npm install webgpu` in your project, or use the CPU device.',
    );
  }
  if (r.spawnError !== undefined) {
    return fail('probe-failed', `could not start the probe process: ${r.spawnError}`, reportHint(r));
  }

  const out = r.output;
  const limitMs = r.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const seconds = limitMs < 1000 ? `${limitMs} ms` : `${Math.round(limitMs / 100) / 10} s`;
  if (r.timedOut && r.browser) {
    // navigator.gpu answers through the browser's GPU process: no driver to check by hand, no probe process.
    const who = r.runtime === 'browser' ? "the browser's WebGPU" : `${r.runtime}'s WebGPU`;
    return fail(
      'probe-failed',
      `${who} did not answer within ${seconds} (stuck ${STAGE_TEXT[out?.stage ?? 'adapter']})`,
      r.runtime === 'browser'
        ? "The browser's GPU process may be hung or have crashed: reload the page, check chrome://gpu (about:support in Firefox), or restart the browser."
        : `Restart ${r.runtime}; if it persists, its GPU driver may be hung.`,
    );
  }
  if (r.timedOut) {
    return fail(
      'probe-failed',
      `the WebGPU probe did not finish within ${seconds} (stuck ${STAGE_TEXT[out?.stage ?? 'import']})`,
      'A GPU driver may be hung or very slow to start; retry, check the driver (e.g. `vulkaninfo --summary` on Linux), or use the CPU device.',
    );
  }
  if (!out) {
    const how = r.signal ? `was killed by ${r.signal}` : `exited with code ${r.exitCode ?? 'unknown'}`;
    return fail('probe-failed', `the WebGPU probe ${how} before reporting anything`, reportHint(r));
  }
  if (!out.finished && r.browser) {
    // An in-process probe stops unfinished only on its timeout (probeHere sets timedOut); a recorded result may not.
    return classifyProbe({ ...r, timedOut: true });
  }
  if (!out.finished) {
    const how = r.signal ? `crashed (${r.signal})` : `exited with code ${r.exitCode ?? 'unknown'}`;
    if (out.stage === 'import') {
      return fail(
        'webgpu-package-broken',
        `the webgpu native addon ${how} while loading`,
        `Reinstall it (\`npm install webgpu\`); if it still crashes, Dawn's prebuilt binary may not support ${platformName(r)}.`,
      );
    }
    return fail('probe-failed', `the WebGPU probe ${how} while ${STAGE_TEXT[out.stage]}`, driverCrashHint(r));
  }

  if (out.error !== undefined && out.stage === 'import') return importFailure(r, out, fail);
  if (out.error !== undefined && out.stage === 'create') {
    return r.dawnOptions.length
      ? fail(
          'probe-failed',
          `Dawn rejected TENSORGPU_DAWN_OPTIONS (${r.dawnOptions.join(';')}): ${firstLine(out.error)}`,
          `Fix or unset TENSORGPU_DAWN_OPTIONS. ${firstLine(out.error.split('\n').slice(1).join(' '))}`.trim(),
        )
      : fail('webgpu-package-broken', `Dawn failed to start: ${firstLine(out.error)}`, 'Reinstall it: `npm install webgpu`.');
  }
  if (out.error !== undefined && out.stage === 'adapter') {
    // With options set, a throw here is nearly always Dawn rejecting them (e.g. "unrecognised backend 'x'").
    const detail = firstLine(out.error.split('\n').slice(1).join(' '));
    return fail(
      'no-adapter',
      `requesting a GPU adapter failed: ${firstLine(out.error)}`,
      r.dawnOptions.length ? `Check TENSORGPU_DAWN_OPTIONS (${r.dawnOptions.join(';')}).${detail ? ` Dawn says: ${detail}` : ''}` : noAdapterHint(r),
    );
  }

  if (!out.adapter) return noAdapter(r, nativeMessages, fail);

  const adapter: AdapterSummary = { ...out.adapter, backend: inferBackend(r, out.adapter) };
  if (adapter.backend === 'null') {
    return fail(
      'no-adapter',
      "TENSORGPU_DAWN_OPTIONS selects Dawn's null backend, which runs no shaders",
      'Remove backend=null from TENSORGPU_DAWN_OPTIONS.',
      adapter,
    );
  }
  const check = checkAdapter(adapter.limits, adapter.features);
  if (!check.ok) {
    return fail(
      'limits-too-low',
      `the GPU adapter ${adapterName(adapter)} is below tensorgpu's minimum limits: ${check.missing.join('; ')}`,
      'Use another GPU (TENSORGPU_DAWN_OPTIONS="adapter=<name>" picks one in Node) or the CPU device.',
      adapter,
    );
  }
  if (out.error !== undefined) {
    return fail(
      'device-request-failed',
      `the GPU adapter ${adapterName(adapter)} refused to create a device: ${firstLine(out.error)}`,
      'The driver may be out of memory or in a bad state: close other GPU programs, update the driver, or use the CPU device.',
      adapter,
    );
  }
  const note = isSoftwareAdapter(adapter)
    ? 'This adapter is a software renderer running on the CPU: it works, but expect it to be far slower than a GPU.'
    : undefined;
  return { available: true, backend: 'webgpu', runtime: r.runtime, code: 'ok', adapter, ...(note ? { hint: note } : {}), nativeMessages };
}

type Fail = (code: DiagnosisCode, reason: string, hint?: string, adapter?: AdapterSummary) => Diagnosis;

function noRuntimeHere(r: ProbeResult, fail: Fail): Diagnosis {
  if (r.runtime === 'bun') {
    return fail('no-webgpu-runtime', 'Bun exposes no WebGPU', 'Run with Node.js >= 20 (it uses the `webgpu` package) or use the CPU device.');
  }
  if (r.runtime === 'deno') {
    return fail('no-webgpu-runtime', 'this Deno exposes no navigator.gpu', 'Use a Deno release with WebGPU enabled (navigator.gpu), or the CPU device.');
  }
  if (r.browser?.hasNavigator && r.browser.secureContext === false) {
    return fail('no-webgpu-runtime', 'WebGPU is hidden because this page is not a secure context', 'Serve the page over https:// or from http://localhost.');
  }
  return fail(
    'no-webgpu-runtime',
    'this browser exposes no navigator.gpu',
    'Use Chrome or Edge 113+, Safari 26+, or Firefox 141+ (Windows); the page must be served over https:// or localhost.',
  );
}

function importFailure(r: ProbeResult, out: ProbeOutput, fail: Fail): Diagnosis {
  const error = out.error ?? '';
  if (/dawn\.node/.test(error) && /MODULE_NOT_FOUND/.test(out.errorCode ?? '')) {
    return fail(
      'webgpu-package-broken',
      `the webgpu package has no native Dawn build for ${platformName(r)}`,
      'Prebuilt Dawn ships for linux x64/arm64, macOS and windows x64/arm64; on another platform use the CPU device.',
    );
  }
  if (out.errorCode === 'ERR_MODULE_NOT_FOUND' && !/dawn\.node/.test(error)) {
    return fail(
      'no-webgpu-runtime',
      `the webgpu package could not be loaded: ${firstLine(error)}`,
      'Run `npm install webgpu` in your project, or use the CPU device.',
    );
  }
  const glibc = /GLIBC_[\d.]+/.exec(error)?.[0];
  return fail(
    'webgpu-package-broken',
    `the webgpu native addon failed to load: ${firstLine(error)}`,
    glibc
      ? `Dawn's prebuilt binary needs ${glibc}, newer than this system's C library; use a newer OS or the CPU device.`
      : 'Reinstall it (`npm install webgpu`); if the error persists, the prebuilt Dawn binary does not load on this platform.',
  );
}

function noAdapter(r: ProbeResult, messages: string[], fail: Fail): Diagnosis {
  const text = messages.join('\n');
  if (r.platform === 'darwin') {
    const darwin = Number.parseInt(r.osRelease ?? '', 10);
    const mac = macosVersion(darwin);
    if (darwin > 0 && darwin < 20) {
      return fail(
        'os-too-old',
        `no GPU adapter: macOS ${mac} (Darwin ${r.osRelease}) is older than Dawn's Metal backend supports`,
        "Dawn's WebGPU needs macOS 11 (Big Sur) or newer with a Metal-capable GPU; upgrade macOS or use the CPU device.",
      );
    }
    return fail(
      'no-adapter',
      `no GPU adapter: Metal reported no usable GPU on macOS ${mac}`,
      'Dawn needs a Metal GPU (Apple silicon, or a Mac GPU of Metal family 2+); virtual machines and CI runners often have none. Use the CPU device there.',
    );
  }
  if (r.platform === 'win32') {
    const major = Number.parseInt(r.osRelease ?? '', 10);
    if (major > 0 && major < 10) {
      return fail(
        'os-too-old',
        `no GPU adapter: Windows NT ${r.osRelease} is older than Dawn supports`,
        "Dawn's WebGPU needs Windows 10 or newer (Direct3D 12); upgrade Windows or use the CPU device.",
      );
    }
    return fail('no-adapter', 'no GPU adapter: Direct3D found no usable GPU', noAdapterHint(r));
  }

  if (/Couldn't load Vulkan|libvulkan\.so[\d.]*: cannot open shared object/i.test(text)) {
    // "cannot open shared object file" means absent; anything else (e.g. "file too short") means present but broken.
    const absent = /cannot open shared object/i.test(text);
    return fail(
      'vulkan-loader-missing',
      `no GPU adapter: the Vulkan loader (libvulkan.so.1) ${absent ? 'is not installed' : 'could not be loaded'}`,
      absent
        ? 'Install the Vulkan loader and a driver: on Debian/Ubuntu `sudo apt-get install libvulkan1 mesa-vulkan-drivers` ' +
            '(NVIDIA GPUs: the NVIDIA driver instead of mesa-vulkan-drivers).'
        : 'The Vulkan loader on this system is damaged: reinstall it (Debian/Ubuntu: `sudo apt-get install --reinstall libvulkan1`).',
    );
  }
  if (/Found no drivers|VK_ERROR_INCOMPATIBLE_DRIVER/i.test(text)) {
    const missingIcd = /Failed to open JSON file (\S+)/.exec(text)?.[1];
    const software = r.softwareIcds?.[0];
    const fixes = [
      missingIcd ? `VK_ICD_FILENAMES names ${missingIcd}, which cannot be opened: fix or unset it.` : '',
      "Install your GPU's Vulkan driver (Debian/Ubuntu: `sudo apt-get install mesa-vulkan-drivers` for AMD/Intel, the NVIDIA driver for NVIDIA;" +
        ' in Docker with NVIDIA, run with --gpus all and NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics).',
      software
        ? `No GPU? A CPU Vulkan driver is installed here: run with VK_ICD_FILENAMES=${software}.`
        : 'No GPU? Use a CPU Vulkan driver: `sudo apt-get install chromium-common` then ' +
          'VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json (SwiftShader), or Mesa lavapipe from mesa-vulkan-drivers.',
    ];
    return fail(
      'no-gpu-driver',
      `no GPU adapter: Vulkan found no drivers${missingIcd ? `; VK_ICD_FILENAMES names a missing file, ${missingIcd}` : ''}`,
      fixes.filter(Boolean).join(' '),
    );
  }
  if (/eglInitialize failed|EGL_NOT_INITIALIZED|EGL_BAD/i.test(text)) {
    return fail(
      'no-adapter',
      'no GPU adapter: the OpenGL (EGL) backend could not initialize a display',
      'With no display (servers, CI), set EGL_PLATFORM=surfaceless for Mesa; or drop backend=opengl(es) from TENSORGPU_DAWN_OPTIONS.',
    );
  }
  return fail('no-adapter', 'no GPU adapter was found', noAdapterHint(r));
}

function noAdapterHint(r: ProbeResult): string {
  if (r.platform === 'win32') {
    return 'Update the GPU driver; in Remote Desktop sessions and VMs without GPU passthrough there is no usable GPU. Or use the CPU device.';
  }
  if (r.browser) {
    return 'Enable hardware acceleration in the browser settings and check chrome://gpu (the GPU may be blocklisted).';
  }
  return "Check that the GPU driver works (on Linux `vulkaninfo --summary`), see Dawn's messages below, or use the CPU device.";
}

function driverCrashHint(r: ProbeResult): string {
  return r.platform === 'linux'
    ? 'The GPU driver crashed the probe: update it (or try VK_ICD_FILENAMES with another driver), or use the CPU device.'
    : 'The GPU driver crashed the probe: update it, or use the CPU device.';
}

function reportHint(r: ProbeResult): string {
  if (r.browser) return "Please report this with the browser's name and version (and chrome://gpu's report).";
  return 'Please report this with the output of `npx tensorgpu doctor --json`; meanwhile use the CPU device.';
}

function inferBackend(r: ProbeResult, a: { description: string; featureLevel?: string }): string | undefined {
  const chosen = r.dawnOptions.find((o) => o.startsWith('backend='));
  if (chosen) return chosen.slice('backend='.length);
  if (/OpenGL ES/i.test(a.description)) return 'opengles';
  if (/OpenGL/i.test(a.description)) return 'opengl';
  if (a.featureLevel === 'compatibility') return undefined;
  if (r.platform === 'linux') return 'vulkan';
  if (r.platform === 'darwin') return 'metal';
  if (r.platform === 'win32') return 'd3d12';
  return undefined;
}

/** Darwin 20 is macOS 11; before that Darwin N was macOS 10.(N-4). */
function macosVersion(darwin: number): string {
  if (!(darwin > 0)) return 'unknown';
  if (darwin >= 25) return String(darwin + 1); // Darwin 25 is macOS 26 (Tahoe): Apple jumped to year numbers.
  if (darwin >= 20) return String(darwin - 9);
  return `10.${darwin - 4}`;
}

function platformName(r: ProbeResult): string {
  return r.arch ? `${r.platform} ${r.arch}` : r.platform;
}

function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((l) => l.trim())
      ?.trim() ?? ''
  );
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
