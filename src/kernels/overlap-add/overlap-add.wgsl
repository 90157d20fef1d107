// istft's overlap-add, gathered: output sample t of signal b sums the frames covering position t + pad_left, each
// times the window, and divides by the same frames' sum of window^2 (torch.istft's envelope normalization). No
// atomics and a fixed order: the same bits every run. Positions no frame covers give 0.
fn overlap_add_at(i: u32) {
  let b = i / p.length;
  let t = i % p.length;
  let pos = t + p.pad_left;
  var sum = 0.0;
  var envelope = 0.0;
  var first = 0u;
  if (pos + 1u > p.n_fft) {
    first = (pos + 1u - p.n_fft + p.hop - 1u) / p.hop;
  }
  let last = min(p.frames - 1u, pos / p.hop);
  for (var f = first; f <= last && f < p.frames; f++) {
    let j = pos - f * p.hop;
    let w = load_window(p.w_off + j * p.w_s);
    sum += load_frames(p.f_off + b * p.f_s0 + f * p.f_s1 + j * p.f_s2) * w;
    envelope += w * w;
  }
  out[i] = select(sum / envelope, 0.0, envelope == 0.0);
}
