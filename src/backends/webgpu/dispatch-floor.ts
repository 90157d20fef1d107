// The host's floor for enqueueing work on this device, measured with raw WebGPU calls and nothing of tensorgpu's:
// setBindGroup + dispatchWorkgroups with bind groups built beforehand (what a replay does), and the same with a
// new bind group and a uniform writeBuffer per dispatch (what a naive eager op does). Benchmarks print tensorgpu's
// own figures beside these, measured in the same run.

export interface DispatchFloor {
  /** Host µs per dispatch with prebuilt bind groups. */
  prebuiltMicros: number;
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
  const uniforms = Array.from({ length: dispatches }, () => device.createBuffer({ size: 256, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST }));
  const params = new Uint32Array([256]);
  const group = (u: GPUBuffer, i: number) =>
    device.createBindGroup({ layout, entries: [{ binding: 0, resource: { buffer: u } }, { binding: 1, resource: { buffer: buffers[i & 1] } }, { binding: 2, resource: { buffer: buffers[1 - (i & 1)] } }] });
  device.queue.writeBuffer(uniforms[0], 0, params);
  const prebuilt = [group(uniforms[0], 0), group(uniforms[0], 1)];
  const round = (fresh: boolean): number => {
    const t0 = performance.now();
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline);
    for (let i = 0; i < dispatches; i++) {
      let g = prebuilt[i & 1];
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
  const median = async (fresh: boolean) => {
    const times: number[] = [];
    for (let r = 0; r < 4; r++) {
      const t = round(fresh);
      await device.queue.onSubmittedWorkDone();
      if (r > 0) times.push(t);
    }
    return times.sort((a, b) => a - b)[1];
  };
  try {
    return { prebuiltMicros: await median(false), freshMicros: await median(true) };
  } finally {
    for (const b of [...buffers, ...uniforms]) b.destroy();
  }
}
