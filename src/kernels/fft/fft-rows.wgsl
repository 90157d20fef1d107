// RPW DFTs per workgroup (short rows share one, so barriers and idle invocations are paid once per RPW rows),
// whole rows in workgroup memory: load (rows, or STFT frames with the window applied),
// the Stockham passes, store (complex, real part, power or magnitude, in any layout). With Bluestein the row is
// multiplied by the chirp and zero-padded to SIZE, convolved with the chirp through a forward and an inverse pass
// set and the chirp's FFT, and multiplied by the chirp again: still one dispatch, nothing in global memory between.
// The header (params, bindings, load_input/store_output, the passes) comes from the description in webgpu.ts.

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let first_row = (wid.x + wid.y * nwg.x) * RPW;
  if (first_row >= p.rows) {
    return;
  }
  let t = lid.x;
  for (var e = t; e < SIZE * RPW; e += WG) {
    let row = first_row + e / SIZE;
    let j = e % SIZE;
    var v = vec2<f32>(0.0);
    if (row < p.rows) {
      if (BLUESTEIN) {
        if (j < p.n) {
          v = cmul(load_input(row, j), chirp(j));
        }
      } else {
        v = load_input(row, j);
      }
    }
    buf[e] = v;
  }
  workgroupBarrier();
  if (BLUESTEIN) {
    stockham(t, false);
    for (var e = t; e < SIZE * RPW; e += WG) {
      buf[e] = cmul(buf[e], chirp_fft(e % SIZE));
    }
    workgroupBarrier();
    stockham(t, true);
  } else {
    stockham(t, INVERSE);
  }
  for (var e = t; e < p.out_bins * RPW; e += WG) {
    let row = first_row + e / p.out_bins;
    let k = e % p.out_bins;
    if (row < p.rows) {
      var v = buf[(e / p.out_bins) * SIZE + k];
      if (BLUESTEIN) {
        v = cmul(v, chirp(k));
      }
      store_output(row, k, v);
    }
  }
}
