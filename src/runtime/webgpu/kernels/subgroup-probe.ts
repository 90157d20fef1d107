// Launcher of the subgroup layout probe (subgroup-probe.wgsl), run once when a device with subgroups starts.
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import { defineKernel } from './kernel.js';

const probe = defineKernel({
  name: 'subgroup-layout-probe',
  source: 'subgroup-probe.wgsl',
  outputs: { out: 'u32' },
  grid: 'custom',
  enables: () => ['subgroups'],
});

/** Invocations the probe checks (one workgroup): out needs this many u32 words. */
export const SUBGROUP_PROBE_INVOCATIONS = probe.workgroupSize({});

export function subgroupProbeKernel(ctx: GpuContext, out: GpuBuffer): void {
  probe.run(ctx, {}, {}, { out }, { workgroups: [1, 1, 1] });
}
