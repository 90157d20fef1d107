// Classification is tested from recorded probe results (the stderr lines are verbatim from Dawn in webgpu 0.6.2),
// so every code is covered without the hardware that produces it; a few real probes check the child process path.

import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { classifyProbe, diagnose, fallbackNotice, nativeMessagesOf, type ProbeResult } from '../../../src/runtime/webgpu/diagnose.js';
import type { ProbedAdapter } from '../../../src/runtime/webgpu/probe-adapter.js';
import { parseProbeStdout } from '../../../src/runtime/webgpu/probe-adapter.js';
import { checkAdapter, REQUIRED_LIMITS } from '../../../src/runtime/webgpu/requirements.js';

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const REQUIRE_GPU = process.env.TENSORGPU_REQUIRE_GPU === '1';

const linux: ProbeResult = {
  runtime: 'node',
  platform: 'linux',
  arch: 'x64',
  osRelease: '6.1.0-18-amd64',
  dawnOptions: [],
  stderr: '',
  softwareIcds: [],
  timeoutMs: 15_000,
  exitCode: 0,
  signal: null,
};

/** Recorded from SwiftShader under webgpu 0.6.2 (features trimmed). */
const swiftshader: ProbedAdapter = {
  vendor: 'google',
  architecture: 'swiftshader',
  device: 'swiftshader-device-subzero-',
  description: 'SwiftShader driver 5.0.0',
  features: ['core-features-and-limits', 'subgroups', 'timestamp-query'],
  limits: {
    maxComputeInvocationsPerWorkgroup: 256,
    maxComputeWorkgroupSizeX: 256,
    maxStorageBuffersPerShaderStage: 12,
    maxComputeWorkgroupStorageSize: 32768,
    maxStorageBufferBindingSize: 1073741824,
    maxBufferSize: 1073741824,
  },
  isFallbackAdapter: true,
  featureLevel: 'core',
};

const discreteGpu: ProbedAdapter = {
  vendor: 'nvidia',
  architecture: 'hopper',
  device: '',
  description: 'NVIDIA H200',
  features: ['shader-f16', 'subgroups', 'timestamp-query'],
  limits: { ...REQUIRED_LIMITS, maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024 },
  isFallbackAdapter: false,
  featureLevel: 'core',
};

const NO_DRIVERS_STDERR = [
  'Warning: vkCreateInstance: Found no drivers!',
  'Warning: vkCreateInstance failed with VK_ERROR_INCOMPATIBLE_DRIVER',
  '    at CheckVkSuccessImpl (/home/runner/work/node-webgpu/node-webgpu/third_party/dawn/src/dawn/native/vulkan/VulkanError.cpp:106)',
  '',
].join('\n');

const nullAdapter = { stage: 'adapter', finished: true } as const;

describe('checkAdapter', () => {
  it('passes an adapter at exactly the required limits', () => {
    expect(checkAdapter({ ...REQUIRED_LIMITS }, [])).toEqual({ ok: true, missing: [] });
  });

  it('names each short limit with required vs actual', () => {
    const r = checkAdapter({ ...REQUIRED_LIMITS, maxComputeWorkgroupSizeX: 128, maxStorageBufferBindingSize: 64 << 20 }, []);
    expect(r.ok).toBe(false);
    expect(r.missing).toEqual(['maxComputeWorkgroupSizeX: needs >= 256, adapter has 128', 'maxStorageBufferBindingSize: needs >= 128 MiB, adapter has 64 MiB']);
  });

  it('reports a limit the adapter does not report', () => {
    const { maxComputeWorkgroupStorageSize: _dropped, ...rest } = REQUIRED_LIMITS;
    expect(checkAdapter(rest, []).missing).toEqual(['maxComputeWorkgroupStorageSize: needs >= 16 KiB, adapter does not report it']);
  });
});

describe('nativeMessagesOf', () => {
  it("trims, drops Dawn's source locations, dedupes", () => {
    expect(nativeMessagesOf(NO_DRIVERS_STDERR + NO_DRIVERS_STDERR)).toEqual([
      'Warning: vkCreateInstance: Found no drivers!',
      'Warning: vkCreateInstance failed with VK_ERROR_INCOMPATIBLE_DRIVER',
    ]);
  });

  it('caps the count', () => {
    const many = Array.from({ length: 100 }, (_, i) => `Warning: message ${i}`).join('\n');
    expect(nativeMessagesOf(many)).toHaveLength(20);
  });
});

describe('parseProbeStdout', () => {
  it('merges progress lines and ignores stray output', () => {
    const out = parseProbeStdout('{"stage":"import","finished":false}\nhello\n{"stage":"adapter","finished":false}\n{"stage":"adapter","finished":true}\n');
    expect(out).toEqual({ stage: 'adapter', finished: true });
  });

  it('returns undefined when the probe printed nothing', () => {
    expect(parseProbeStdout('')).toBeUndefined();
  });
});

describe('classifyProbe', () => {
  it('ok: a discrete GPU, no hint', () => {
    const d = classifyProbe({ ...linux, output: { stage: 'done', finished: true, adapter: discreteGpu } });
    expect(d).toMatchObject({ available: true, code: 'ok', backend: 'webgpu', runtime: 'node' });
    expect(d.adapter).toMatchObject({ description: 'NVIDIA H200', backend: 'vulkan', featureLevel: 'core' });
    expect(d.hint).toBeUndefined();
  });

  it('ok: SwiftShader, with a note that it runs on the CPU', () => {
    const d = classifyProbe({ ...linux, output: { stage: 'done', finished: true, adapter: swiftshader } });
    expect(d.code).toBe('ok');
    expect(d.hint).toMatch(/software renderer/);
  });

  it('ok: OpenGL ES compatibility adapter reports backend opengles', () => {
    const llvmpipe: ProbedAdapter = {
      ...discreteGpu,
      vendor: '',
      architecture: '',
      device: 'llvmpipe-llvm-15-0-6-256-bits-',
      description: 'OpenGL version OpenGL ES 3.2 Mesa 22.3.6',
      featureLevel: 'compatibility',
    };
    const d = classifyProbe({ ...linux, output: { stage: 'done', finished: true, adapter: llvmpipe } });
    expect(d.adapter).toMatchObject({ backend: 'opengles', featureLevel: 'compatibility' });
  });

  it('no-webgpu-runtime: package not installed', () => {
    const d = classifyProbe({ ...linux, webgpuResolveError: "Cannot find module 'webgpu'" });
    expect(d).toMatchObject({ available: false, code: 'no-webgpu-runtime' });
    expect(d.hint).toMatch(/npm install webgpu/);
  });

  it('no-webgpu-runtime: browser without navigator.gpu', () => {
    const d = classifyProbe({
      runtime: 'browser',
      platform: 'browser',
      dawnOptions: [],
      stderr: '',
      browser: { hasNavigator: true, hasGpu: false, secureContext: true },
    });
    expect(d.code).toBe('no-webgpu-runtime');
    expect(d.hint).toMatch(/Chrome or Edge 113\+, Safari 26\+, or Firefox 141\+/);
    expect(fallbackNotice(d)).not.toMatch(/npx tensorgpu doctor/);
  });

  it('no-webgpu-runtime: insecure browser context', () => {
    const d = classifyProbe({
      runtime: 'browser',
      platform: 'browser',
      dawnOptions: [],
      stderr: '',
      browser: { hasNavigator: true, hasGpu: false, secureContext: false },
    });
    expect(d.code).toBe('no-webgpu-runtime');
    expect(d.hint).toMatch(/https:\/\/ or from http:\/\/localhost/);
  });

  it('no-adapter: browser with navigator.gpu but no adapter', () => {
    const d = classifyProbe({
      runtime: 'browser',
      platform: 'browser',
      dawnOptions: [],
      stderr: '',
      browser: { hasNavigator: true, hasGpu: true, secureContext: true },
      output: nullAdapter,
    });
    expect(d.code).toBe('no-adapter');
    expect(d.hint).toMatch(/hardware acceleration/);
  });

  it("a browser whose navigator.gpu never answers: the browser's own wording, nothing about a probe process or the CPU device", () => {
    const page: ProbeResult = {
      runtime: 'browser',
      platform: 'browser',
      dawnOptions: [],
      stderr: '',
      browser: { hasNavigator: true, hasGpu: true, secureContext: true },
      output: { stage: 'adapter', finished: false },
    };
    for (const r of [{ ...page, timedOut: true, timeoutMs: 15_000 }, page]) {
      const d = classifyProbe(r);
      expect(d.code).toBe('probe-failed');
      expect(d.reason).toBe("the browser's WebGPU did not answer within 15 s (stuck requesting a GPU adapter)");
      expect(d.hint).toMatch(/reload the page, check chrome:\/\/gpu/);
      expect(`${d.reason} ${d.hint}`).not.toMatch(/probe|exited|CPU device|npx|vulkaninfo/);
    }
  });

  it('webgpu-package-broken: native addon fails to dlopen', () => {
    const d = classifyProbe({
      ...linux,
      output: {
        stage: 'import',
        finished: true,
        error: '/app/node_modules/webgpu/dist/linux-x64/dawn.node: file too short',
        errorCode: 'ERR_DLOPEN_FAILED',
      },
    });
    expect(d.code).toBe('webgpu-package-broken');
    expect(d.reason).toMatch(/failed to load: .*dawn\.node: file too short/);
  });

  it('webgpu-package-broken: glibc too old names the version', () => {
    const d = classifyProbe({
      ...linux,
      output: {
        stage: 'import',
        finished: true,
        error: "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by /app/dawn.node)",
        errorCode: 'ERR_DLOPEN_FAILED',
      },
    });
    expect(d.code).toBe('webgpu-package-broken');
    expect(d.hint).toMatch(/GLIBC_2\.38/);
  });

  it('webgpu-package-broken: no prebuilt Dawn for this platform', () => {
    const d = classifyProbe({
      ...linux,
      platform: 'freebsd',
      output: {
        stage: 'import',
        finished: true,
        error: "Cannot find module '/app/node_modules/webgpu/dist/freebsd-x64/dawn.node'",
        errorCode: 'MODULE_NOT_FOUND',
      },
    });
    expect(d.code).toBe('webgpu-package-broken');
    expect(d.reason).toMatch(/no native Dawn build for freebsd x64/);
  });

  it('webgpu-package-broken: crash while loading the addon', () => {
    const d = classifyProbe({ ...linux, signal: 'SIGSEGV', exitCode: null, output: { stage: 'import', finished: false } });
    expect(d.code).toBe('webgpu-package-broken');
    expect(d.reason).toMatch(/SIGSEGV/);
  });

  it('vulkan-loader-missing: libvulkan.so.1 absent', () => {
    const d = classifyProbe({
      ...linux,
      stderr:
        "Warning: Couldn't load Vulkan: libvulkan.so.1: cannot open shared object file: No such file or directory\n" +
        '    at operator() (/home/runner/work/node-webgpu/node-webgpu/third_party/dawn/src/dawn/native/vulkan/BackendVk.cpp:368)\n',
      output: nullAdapter,
    });
    expect(d).toMatchObject({ available: false, code: 'vulkan-loader-missing' });
    expect(d.hint).toMatch(/apt-get install libvulkan1/);
    expect(d.nativeMessages).toEqual(["Warning: Couldn't load Vulkan: libvulkan.so.1: cannot open shared object file: No such file or directory"]);
  });

  it('vulkan-loader-missing: libvulkan.so.1 damaged', () => {
    const d = classifyProbe({
      ...linux,
      stderr: "Warning: Couldn't load Vulkan: /lib/x86_64-linux-gnu/libvulkan.so.1: file too short\n",
      output: nullAdapter,
    });
    expect(d.code).toBe('vulkan-loader-missing');
    expect(d.hint).toMatch(/--reinstall libvulkan1/);
  });

  it('no-gpu-driver: Vulkan found no drivers, suggests an installed CPU driver', () => {
    const d = classifyProbe({ ...linux, stderr: NO_DRIVERS_STDERR, softwareIcds: [SWIFTSHADER_ICD], output: nullAdapter });
    expect(d).toMatchObject({ available: false, code: 'no-gpu-driver', reason: 'no GPU adapter: Vulkan found no drivers' });
    expect(d.hint).toContain(`VK_ICD_FILENAMES=${SWIFTSHADER_ICD}`);
    expect(fallbackNotice(d)).toBe(
      'tensorgpu: WebGPU unavailable (no GPU adapter: Vulkan found no drivers); using CPU. Run `npx tensorgpu doctor` for details.',
    );
  });

  it('no-gpu-driver: names a VK_ICD_FILENAMES file that cannot be opened', () => {
    const d = classifyProbe({
      ...linux,
      stderr: 'Warning: loader_get_json: Failed to open JSON file /nonexistent/icd.json\n' + NO_DRIVERS_STDERR,
      output: nullAdapter,
    });
    expect(d.code).toBe('no-gpu-driver');
    expect(d.reason).toContain('/nonexistent/icd.json');
    expect(d.hint).toMatch(/apt-get install chromium-common/);
  });

  it('no-adapter: OpenGL ES backend without a display', () => {
    const d = classifyProbe({
      ...linux,
      dawnOptions: ['backend=opengles'],
      stderr: 'Warning: eglInitialize failed with EGL_NOT_INITIALIZED\n - While trying to discover a BackendType::OpenGLES adapter.\n',
      output: nullAdapter,
    });
    expect(d.code).toBe('no-adapter');
    expect(d.hint).toMatch(/EGL_PLATFORM=surfaceless/);
  });

  it('no-adapter: Dawn rejects TENSORGPU_DAWN_OPTIONS', () => {
    const d = classifyProbe({
      ...linux,
      dawnOptions: ['backend=bogus'],
      output: {
        stage: 'adapter',
        finished: true,
        error: "unrecognised backend 'bogus'\nPossible backends : 'null', 'webgpu', 'd3d11', 'd3d12', 'metal', 'vulkan', 'opengl', 'opengles'",
      },
    });
    expect(d.code).toBe('no-adapter');
    expect(d.reason).toMatch(/unrecognised backend 'bogus'/);
    expect(d.hint).toMatch(/TENSORGPU_DAWN_OPTIONS \(backend=bogus\).*Possible backends/);
  });

  it("no-adapter: Dawn's null backend is not a usable device", () => {
    const d = classifyProbe({
      ...linux,
      dawnOptions: ['backend=null'],
      output: { stage: 'done', finished: true, adapter: { ...discreteGpu, description: '', device: 'null-backend' } },
    });
    expect(d).toMatchObject({ available: false, code: 'no-adapter' });
    expect(d.hint).toMatch(/Remove backend=null/);
  });

  it('os-too-old: macOS 10.15', () => {
    const d = classifyProbe({ ...linux, platform: 'darwin', osRelease: '19.6.0', output: nullAdapter });
    expect(d.code).toBe('os-too-old');
    expect(d.reason).toMatch(/macOS 10\.15 \(Darwin 19\.6\.0\)/);
    expect(d.hint).toMatch(/macOS 11/);
  });

  it('no-adapter, not os-too-old: a current macOS without a Metal GPU', () => {
    const d = classifyProbe({ ...linux, platform: 'darwin', osRelease: '23.4.0', output: nullAdapter });
    expect(d.code).toBe('no-adapter');
    expect(d.reason).toMatch(/macOS 14/);
  });

  it('os-too-old: Windows 7', () => {
    const d = classifyProbe({ ...linux, platform: 'win32', osRelease: '6.1.7601', output: nullAdapter });
    expect(d.code).toBe('os-too-old');
  });

  it('limits-too-low: lists each short limit', () => {
    const weak = { ...discreteGpu, limits: { ...discreteGpu.limits, maxComputeWorkgroupSizeX: 128, maxStorageBuffersPerShaderStage: 4 } };
    const d = classifyProbe({ ...linux, output: { stage: 'done', finished: true, adapter: weak } });
    expect(d).toMatchObject({ available: false, code: 'limits-too-low' });
    expect(d.reason).toContain('maxComputeWorkgroupSizeX: needs >= 256, adapter has 128');
    expect(d.reason).toContain('maxStorageBuffersPerShaderStage: needs >= 8, adapter has 4');
    expect(d.adapter?.description).toBe('NVIDIA H200');
  });

  it('device-request-failed: adapter found, device refused', () => {
    const d = classifyProbe({
      ...linux,
      output: { stage: 'device', finished: true, adapter: discreteGpu, error: 'Failed to create device: out of memory' },
    });
    expect(d.code).toBe('device-request-failed');
    expect(d.reason).toMatch(/NVIDIA H200.*out of memory/);
  });

  it('probe-failed: timeout names the stuck stage', () => {
    const d = classifyProbe({ ...linux, timedOut: true, signal: 'SIGKILL', output: { stage: 'adapter', finished: false } });
    expect(d.code).toBe('probe-failed');
    expect(d.reason).toBe('the WebGPU probe did not finish within 15 s (stuck requesting a GPU adapter)');
  });

  it('probe-failed: driver crash while creating the device', () => {
    const d = classifyProbe({
      ...linux,
      signal: 'SIGSEGV',
      exitCode: null,
      output: { stage: 'device', finished: false, adapter: discreteGpu },
    });
    expect(d.code).toBe('probe-failed');
    expect(d.reason).toBe('the WebGPU probe crashed (SIGSEGV) while creating a GPU device');
  });

  it('probe-failed: child could not start, or printed nothing', () => {
    expect(classifyProbe({ ...linux, spawnError: 'spawn EAGAIN' }).code).toBe('probe-failed');
    const silent = classifyProbe({ ...linux, exitCode: 9 });
    expect(silent.code).toBe('probe-failed');
    expect(silent.reason).toMatch(/exited with code 9 before reporting anything/);
  });
});

describe('diagnose (real probe in a child process)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'tensorgpu-diagnose-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('is memoized and never rejects', async () => {
    const first = diagnose();
    expect(diagnose()).toBe(first);
    const d = await first;
    expect(d.backend).toBe('webgpu');
    expect(typeof d.available).toBe('boolean');
    if (REQUIRE_GPU) expect(d, d.reason).toMatchObject({ available: true, code: 'ok' });
  });

  it.skipIf(process.platform !== 'linux')('a VK_ICD_FILENAMES naming a missing file: no-gpu-driver, with the loader message', async () => {
    const d = await diagnose({ env: { ...process.env, VK_ICD_FILENAMES: join(scratch, 'missing_icd.json') } });
    expect(d).toMatchObject({ available: false, code: 'no-gpu-driver' });
    expect(d.reason).toContain('missing_icd.json');
    expect(d.nativeMessages).toContain(`Warning: loader_get_json: Failed to open JSON file ${join(scratch, 'missing_icd.json')}`);
    expect(d.nativeMessages).toContain('Warning: vkCreateInstance: Found no drivers!');
  });

  const haveSwiftShader = existsSync(SWIFTSHADER_ICD);
  const swiftShaderTest = haveSwiftShader || REQUIRE_GPU ? it : it.skip;
  swiftShaderTest(
    haveSwiftShader ? 'SwiftShader ICD: available, adapter named' : `SwiftShader ICD: ${SWIFTSHADER_ICD} missing (apt-get install chromium-common)`,
    async () => {
      expect(existsSync(SWIFTSHADER_ICD), `${SWIFTSHADER_ICD} is required when TENSORGPU_REQUIRE_GPU=1`).toBe(true);
      const d = await diagnose({ env: { ...process.env, VK_ICD_FILENAMES: SWIFTSHADER_ICD } });
      expect(d, d.reason).toMatchObject({ available: true, code: 'ok' });
      expect(d.adapter).toMatchObject({ architecture: 'swiftshader', backend: 'vulkan', isFallbackAdapter: true });
      expect(d.adapter?.description).toMatch(/SwiftShader/);
      expect(d.adapter?.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(REQUIRED_LIMITS.maxStorageBufferBindingSize);
      expect(fallbackNotice(d)).toMatch(/^tensorgpu: using WebGPU \(SwiftShader/);
    },
  );

  it('a webgpu module that does not exist: no-webgpu-runtime', async () => {
    const d = await diagnose({ webgpuModule: join(scratch, 'nowhere', 'index.js') });
    expect(d).toMatchObject({ available: false, code: 'no-webgpu-runtime' });
  });

  it('a native addon that fails to load: webgpu-package-broken, showing the loader error', async () => {
    writeFileSync(join(scratch, 'dawn.node'), 'not a shared library');
    writeFileSync(
      join(scratch, 'broken.mjs'),
      "import { createRequire } from 'node:module';\nexport const create = createRequire(import.meta.url)('./dawn.node');\n",
    );
    const d = await diagnose({ webgpuModule: join(scratch, 'broken.mjs') });
    expect(d).toMatchObject({ available: false, code: 'webgpu-package-broken' });
    expect(d.reason).toContain('dawn.node');
  });

  it('a probe that hangs is killed after timeoutMs: probe-failed', async () => {
    writeFileSync(join(scratch, 'hang.mjs'), 'setInterval(() => {}, 1000);\nawait new Promise(() => {});\n');
    const started = Date.now();
    const d = await diagnose({ webgpuModule: join(scratch, 'hang.mjs'), timeoutMs: 500 });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(d).toMatchObject({ available: false, code: 'probe-failed' });
    expect(d.reason).toBe('the WebGPU probe did not finish within 500 ms (stuck loading the webgpu package)');
  });
});
