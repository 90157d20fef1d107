// Datasheet memory bandwidth of GPUs we expect to meet, so `--profile` can put a kernel's GB/s against what the
// memory could give. WebGPU exposes no bandwidth figure, so the adapter's description is matched by name; an adapter
// not listed gets no percentage rather than a guess.

interface KnownGpu {
  readonly pattern: RegExp;
  readonly name: string;
  /** Peak DRAM bandwidth in GB/s (10^9 bytes), from the vendor's datasheet. */
  readonly gbs: number;
}

// Most specific first: "H100 PCIe" must win over "H100".
const KNOWN: readonly KnownGpu[] = [
  { pattern: /H200/i, name: 'NVIDIA H200', gbs: 4800 },
  { pattern: /H100.*(PCIe|80GB PCIe)/i, name: 'NVIDIA H100 PCIe', gbs: 2000 },
  { pattern: /H100.*NVL/i, name: 'NVIDIA H100 NVL', gbs: 3900 },
  { pattern: /H100/i, name: 'NVIDIA H100 SXM', gbs: 3350 },
  { pattern: /A100.*80GB/i, name: 'NVIDIA A100 80GB', gbs: 2039 },
  { pattern: /A100/i, name: 'NVIDIA A100 40GB', gbs: 1555 },
  { pattern: /L40S?\b/i, name: 'NVIDIA L40/L40S', gbs: 864 },
  { pattern: /RTX 4090/i, name: 'NVIDIA RTX 4090', gbs: 1008 },
  { pattern: /RTX 5090/i, name: 'NVIDIA RTX 5090', gbs: 1792 },
  { pattern: /M3 Ultra/i, name: 'Apple M3 Ultra', gbs: 819 },
  { pattern: /M2 Ultra/i, name: 'Apple M2 Ultra', gbs: 800 },
  { pattern: /M4 Max/i, name: 'Apple M4 Max', gbs: 546 },
  { pattern: /M3 Max/i, name: 'Apple M3 Max', gbs: 400 },
];

export interface PeakBandwidth {
  name: string;
  gbs: number;
}

/** The datasheet bandwidth of the GPU an adapter describes, or null when it is not one we know. */
export function peakBandwidth(adapter: { description: string; device?: string }): PeakBandwidth | null {
  const text = `${adapter.description} ${adapter.device ?? ''}`;
  const hit = KNOWN.find((g) => g.pattern.test(text));
  return hit ? { name: hit.name, gbs: hit.gbs } : null;
}
