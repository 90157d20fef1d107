import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Diagnosis } from '../../src/runtime/webgpu/diagnose.js';
import { describeEnvironment, formatReport, runDoctor } from '../../src/cli/doctor.js';

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const REQUIRE_GPU = process.env.TENSORGPU_REQUIRE_GPU === '1';

async function doctor(options: Parameters<typeof runDoctor>[0]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await runDoctor({ ...options, out: (line) => lines.push(line) });
  return { code, lines };
}

describe('runDoctor (real probe)', () => {
  it.skipIf(process.platform !== 'linux')('unavailable: exit 1, reason, hint and Dawn messages', async () => {
    const { code, lines } = await doctor({ env: { ...process.env, VK_ICD_FILENAMES: '/nonexistent/tensorgpu_icd.json' } });
    const text = lines.join('\n');
    expect(code).toBe(1);
    expect(lines[0]).toMatch(/^tensorgpu doctor/);
    expect(text).toMatch(/runtime: +node v\d+/);
    expect(text).toMatch(/webgpu package: +\d+\.\d+\.\d+/);
    expect(text).toContain('VK_ICD_FILENAMES:       /nonexistent/tensorgpu_icd.json');
    expect(text).toContain('WebGPU: unavailable [no-gpu-driver]');
    expect(text).toMatch(/reason: +no GPU adapter: Vulkan found no drivers/);
    expect(text).toMatch(/what to do: +VK_ICD_FILENAMES names \/nonexistent\/tensorgpu_icd.json/);
    expect(text).toContain('    Warning: vkCreateInstance: Found no drivers!');
  });

  it.skipIf(process.platform !== 'linux')('--json: one document with environment and diagnosis', async () => {
    const { code, lines } = await doctor({ json: true, env: { ...process.env, VK_ICD_FILENAMES: '/nonexistent/icd.json' } });
    const report = JSON.parse(lines.join('\n')) as { environment: { node: string }; diagnosis: Diagnosis };
    expect(code).toBe(1);
    expect(report.environment.node).toBe(process.version);
    expect(report.diagnosis).toMatchObject({ available: false, code: 'no-gpu-driver' });
  });

  const haveSwiftShader = existsSync(SWIFTSHADER_ICD);
  (haveSwiftShader || REQUIRE_GPU ? it : it.skip)(
    haveSwiftShader ? 'available (SwiftShader): exit 0, adapter, limits, features' : `${SWIFTSHADER_ICD} missing: skipped`,
    async () => {
      expect(existsSync(SWIFTSHADER_ICD), `${SWIFTSHADER_ICD} is required when TENSORGPU_REQUIRE_GPU=1`).toBe(true);
      const { code, lines } = await doctor({ env: { ...process.env, VK_ICD_FILENAMES: SWIFTSHADER_ICD } });
      const text = lines.join('\n');
      expect(code, text).toBe(0);
      expect(text).toContain('WebGPU: available');
      expect(text).toMatch(/adapter: +SwiftShader driver/);
      expect(text).toMatch(/backend: +vulkan, feature level core, fallback \(software\) adapter/);
      expect(text).toMatch(/maxStorageBufferBindingSize +\d+ [MG]iB +\(needs >= 128 MiB\)/);
      expect(text).toMatch(/subgroups +present/);
      expect(text).toMatch(/shader-f16 +(present|absent: f16 tensors)/);
      expect(text).toMatch(/note: +This adapter is a software renderer/);
    },
  );
});

describe('formatReport', () => {
  it('marks a limit below the requirement', () => {
    const d: Diagnosis = {
      available: false,
      backend: 'webgpu',
      runtime: 'node',
      code: 'limits-too-low',
      reason: 'the GPU adapter Old GPU is below tensorgpu minimum limits: maxComputeWorkgroupSizeX: needs >= 256, adapter has 128',
      hint: 'Use another GPU.',
      adapter: {
        vendor: 'acme',
        architecture: '',
        device: '',
        description: 'Old GPU',
        backend: 'vulkan',
        features: [],
        limits: {
          maxComputeInvocationsPerWorkgroup: 256,
          maxComputeWorkgroupSizeX: 128,
          maxStorageBuffersPerShaderStage: 8,
          maxComputeWorkgroupStorageSize: 16384,
          maxStorageBufferBindingSize: 134217728,
        },
        isFallbackAdapter: false,
        featureLevel: 'core',
      },
      nativeMessages: [],
    };
    const text = formatReport(describeEnvironment({}), d).join('\n');
    expect(text).toContain('WebGPU: unavailable [limits-too-low]');
    expect(text).toMatch(/maxComputeWorkgroupSizeX +128 +\(needs >= 256, TOO LOW\)/);
    expect(text).toMatch(/maxComputeInvocationsPerWorkgroup +256 +\(needs >= 256\)$/m);
    expect(text).toMatch(/maxBufferSize +not reported/);
    expect(text).toMatch(/shader-f16 +absent/);
  });
});
