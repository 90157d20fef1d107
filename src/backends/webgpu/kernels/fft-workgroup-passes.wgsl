// The Stockham passes over the row held in workgroup memory: pass s (radix r, span = product of the radices before
// it) has SIZE / r butterflies, each reading r values, twiddling input j by exp(-+2 pi i j k / (span r)), taking
// the r-point DFT and writing output q to (i - k) r + k + q span (k = i mod span): self-sorting, natural order.
// Every butterfly's inputs are read into registers before the barrier and written after it, so one array serves as
// both source and destination (REGS = the most values one invocation holds in any pass).
var<workgroup> buf: array<vec2<f32>, SIZE>;

fn radix_of(s: u32) -> u32 {
  return p.radices[s / 4u][s % 4u];
}

fn stockham(t: u32, inverse: bool) {
  var span = 1u;
  for (var s = 0u; s < p.passes; s++) {
    let r = radix_of(s);
    let count = SIZE / r;
    let step = SIZE / (span * r);
    var regs: array<vec2<f32>, REGS>;
    var slot = 0u;
    for (var i = t; i < count; i += WG) {
      let k = i % span;
      for (var j = 0u; j < r; j++) {
        regs[slot + j] = cmul(buf[i + j * count], twiddle(j * k * step, inverse));
      }
      slot += r;
    }
    workgroupBarrier();
    slot = 0u;
    for (var i = t; i < count; i += WG) {
      let k = i % span;
      let base = (i - k) * r + k;
      for (var q = 0u; q < r; q++) {
        var acc = regs[slot];
        for (var j = 1u; j < r; j++) {
          acc += cmul(regs[slot + j], twiddle(((j * q) % r) * count, inverse));
        }
        buf[base + q * span] = acc;
      }
      slot += r;
    }
    workgroupBarrier();
    span *= r;
  }
}
