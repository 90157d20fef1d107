// The host's floor for enqueueing work on this device, measured with raw WebGPU calls and nothing of tensorgpu's:
// setBindGroup + dispatchWorkgroups with bind groups built beforehand (what a replay does: distinct ones over a
// chain of buffers, and the cheapest case of two alternating over the same buffers), and the same with a
// new bind group and a uniform writeBuffer per dispatch (what a naive eager op does). Benchmarks print tensorgpu's
// own figures beside these, measured in the same run.

export interface DispatchFloor {
  /**
   * Host µs per dispatch with prebuilt bind groups, each over its own pair of buffers (a chain, as a real step
   * binds different buffers every dispatch): what a replay has to do.
   */
  prebuiltMicros: number;
  /** The same, alternating between two bind groups over the same two buffers (Dawn's cheapest case). */
  prebuiltSameMicros: number;
  /** Host µs per dispatch with createBindGroup + writeBuffer each. */
  freshMicros: number;
}

const KERNEL = `struct P { n: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.n) { o[g.x] = a[g.x] + 1.0; } }`;

/** Median over 3 timed rounds (after one untimed) of `dispatches` dispatches each. */
export async function measureDispatchFloor(device: GPUDevice, dispatches = 2000): Promise<DispatchFloor> {
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code: KERNEL }), entryPoint: 'main' } });
  const layout = pipeline.getBindGroupLayout(0);
  const buffers = [0, 1].map(() => device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE }));
  const chain = Array.from({ length: dispatches + 1 }, () => device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE }));
  const uniforms = Array.from({ length: dispatches }, () => device.createBuffer({ size: 256, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST }));
  const params = new Uint32Array([256]);
  const group = (u: GPUBuffer, i: number) =>
    device.createBindGroup({
      layout,
      entries: [
        { binding: 0, resource: { buffer: u } },
        { binding: 1, resource: { buffer: buffers[i & 1] } },
        { binding: 2, resource: { buffer: buffers[1 - (i & 1)] } },
      ],
    });
  device.queue.writeBuffer(uniforms[0], 0, params);
  const prebuilt = [group(uniforms[0], 0), group(uniforms[0], 1)];
  const distinct = Array.from({ length: dispatches }, (_, i) =>
    device.createBindGroup({
      layout,
      entries: [
        { binding: 0, resource: { buffer: uniforms[0] } },
        { binding: 1, resource: { buffer: chain[i + 1] } },
        { binding: 2, resource: { buffer: chain[i] } },
      ],
    }),
  );
  const round = (mode: 'same' | 'distinct' | 'fresh'): number => {
    const fresh = mode === 'fresh';
    const t0 = performance.now();
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline);
    for (let i = 0; i < dispatches; i++) {
      let g = mode === 'distinct' ? distinct[i] : prebuilt[i & 1];
      if (fresh) {
        device.queue.writeBuffer(uniforms[i], 0, params);
        g = group(uniforms[i], i);
      }
      pass.setBindGroup(0, g);
      pass.dispatchWorkgroups(1);
    }
    pass.end();
    device.queue.submit([encoder.finish()]);
    return ((performance.now() - t0) * 1000) / dispatches;
  };
  const median = async (mode: 'same' | 'distinct' | 'fresh') => {
    const times: number[] = [];
    for (let r = 0; r < 4; r++) {
      const t = round(mode);
      await device.queue.onSubmittedWorkDone();
      if (r > 0) times.push(t);
    }
    return times.sort((a, b) => a - b)[1];
  };
  try {
    return { prebuiltMicros: await median('distinct'), prebuiltSameMicros: await median('same'), freshMicros: await median('fresh') };
  } finally {
    for (const b of [...buffers, ...chain, ...uniforms]) b.destroy();
  }
}
