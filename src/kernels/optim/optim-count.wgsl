// A capturable optimizer step's counter advanced by one step on the device (optimCountKernel in webgpu.ts):
// counter = [t, 1 - beta1^t, 1 - beta2^t] -> [t + 1, c1 * beta1 + (1 - beta1), c2 * beta2 + (1 - beta2)]. The header
// (params, the counter binding) comes from the description in webgpu.ts.

@compute @workgroup_size(1)
fn main() {
  counter[0] = counter[0] + 1.0;
  counter[1] = counter[1] * p.b1 + p.omb1;
  counter[2] = counter[2] * p.b2 + p.omb2;
}
