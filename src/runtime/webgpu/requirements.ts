// What tensorgpu needs from a WebGPU adapter. Shared by diagnosis (to say *which* limit is short) and device setup
// (to request exactly these), so the two can never disagree.

/**
 * Minimum adapter limits. Every value equals the WebGPU spec default, so any conformant adapter passes; an adapter
 * below them (old mobile GPUs, some compatibility-mode GL drivers) cannot run our kernels as written.
 */
export const REQUIRED_LIMITS = {
  // Reductions and matmul tiles launch 256 threads in one workgroup (16x16 tiles, 256-wide row reductions).
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupSizeX: 256,
  // Fused kernels (attention, MoE gather-matmul) bind up to 8 storage buffers at once.
  maxStorageBuffersPerShaderStage: 8,
  // Matmul tiles of two 32x32 f32 blocks plus reduction scratch fit in 16 KiB.
  maxComputeWorkgroupStorageSize: 16384,
  // One weight matrix of a small model (e.g. a 4096x8192 f32 projection is 128 MiB) must bind as one buffer.
  maxStorageBufferBindingSize: 128 * 1024 * 1024,
} as const satisfies Record<string, number>;

export type RequiredLimitName = keyof typeof REQUIRED_LIMITS;

/** Limits worth showing a user (doctor, diagnosis): the required ones plus those that bound model size and grids. */
export const REPORTED_LIMITS: readonly string[] = [
  ...Object.keys(REQUIRED_LIMITS),
  'maxBufferSize',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupsPerDimension',
  'maxBindGroups',
  'maxUniformBufferBindingSize',
  'minStorageBufferOffsetAlignment',
];

/** Features used when the adapter has them; without them a slower or less precise path runs. */
export const OPTIONAL_FEATURES = [
  // f16 weights and activations in WGSL; otherwise f16 is unpacked to f32 in the shader.
  'shader-f16',
  // Subgroup reductions in softmax/norm/GEMV; otherwise workgroup-memory tree reductions.
  'subgroups',
  // GPU-side kernel timings for benchmarks; otherwise wall-clock timing only.
  'timestamp-query',
] as const;

export type OptionalFeature = (typeof OPTIONAL_FEATURES)[number];

/** What running without each optional feature costs, in words for a report. */
export const WITHOUT_FEATURE: Record<OptionalFeature, string> = {
  'shader-f16': 'f16 tensors are widened to f32 inside shaders (more bandwidth, same results)',
  subgroups: 'reductions use workgroup memory instead of subgroup operations (slower)',
  'timestamp-query': 'benchmarks time kernels by wall clock only',
};

export interface AdapterCheck {
  ok: boolean;
  /** One entry per unmet requirement, e.g. "maxComputeWorkgroupSizeX: needs >= 256, adapter has 128". */
  missing: string[];
}

/**
 * Checks reported adapter limits against REQUIRED_LIMITS. `features` is accepted so callers can pass the adapter as
 * is; no feature is required today (all of OPTIONAL_FEATURES have fallbacks), so it never causes a failure.
 */
export function checkAdapter(limits: Record<string, number>, features: Iterable<string>): AdapterCheck {
  void features;
  const missing: string[] = [];
  for (const [name, required] of Object.entries(REQUIRED_LIMITS)) {
    const actual = limits[name];
    if (typeof actual !== 'number' || Number.isNaN(actual)) {
      missing.push(`${name}: needs >= ${formatLimit(name, required)}, adapter does not report it`);
    } else if (actual < required) {
      missing.push(`${name}: needs >= ${formatLimit(name, required)}, adapter has ${formatLimit(name, actual)}`);
    }
  }
  return { ok: missing.length === 0, missing };
}

/** Which optional features an adapter has, in OPTIONAL_FEATURES order. */
export function optionalFeatureSupport(features: Iterable<string>): Record<OptionalFeature, boolean> {
  const have = new Set(features);
  return Object.fromEntries(OPTIONAL_FEATURES.map((f) => [f, have.has(f)])) as Record<OptionalFeature, boolean>;
}

/** Byte-sized limits read better in MiB; counts stay plain. */
export function formatLimit(name: string, value: number): string {
  const isBytes = /Size$/.test(name) && !/WorkgroupSize[XYZ]$/.test(name);
  if (isBytes && value >= 1024 ** 3 && value % 1024 ** 3 === 0) return `${value / 1024 ** 3} GiB`;
  if (isBytes && value >= 1024 * 1024 && value % (1024 * 1024) === 0) return `${value / (1024 * 1024)} MiB`;
  if (isBytes && value >= 1024 && value % 1024 === 0) return `${value / 1024} KiB`;
  return String(value);
}
