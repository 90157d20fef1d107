// One DFT per workgroup, the whole row in workgroup memory: load (rows, or STFT frames with the window applied),
// the Stockham passes, store (complex, real part, power or magnitude, in any layout). With Bluestein the row is
// multiplied by the chirp and zero-padded to SIZE, convolved with the chirp through a forward and an inverse pass
// set and the chirp's FFT, and multiplied by the chirp again: still one dispatch, nothing in global memory between.
// The header (params, bindings, load_input/store_output, the passes) comes from the description in fft.ts.

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let t = lid.x;
  for (var j = t; j < SIZE; j += WG) {
    var v = vec2<f32>(0.0);
    if (BLUESTEIN) {
      if (j < p.n) {
        v = cmul(load_input(row, j), chirp(j));
      }
    } else {
      v = load_input(row, j);
    }
    buf[j] = v;
  }
  workgroupBarrier();
  if (BLUESTEIN) {
    stockham(t, false);
    for (var j = t; j < SIZE; j += WG) {
      buf[j] = cmul(buf[j], chirp_fft(j));
    }
    workgroupBarrier();
    stockham(t, true);
  } else {
    stockham(t, INVERSE);
  }
  for (var k = t; k < p.out_bins; k += WG) {
    var v = buf[k];
    if (BLUESTEIN) {
      v = cmul(v, chirp(k));
    }
    store_output(row, k, v);
  }
}
