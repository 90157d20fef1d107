// The Stockham passes over the RPW rows held in workgroup memory (row l at l * SIZE): pass s (radix r, span =
// product of the radices before it) has SIZE / r butterflies per row, each reading r values, twiddling input j by exp(-+2 pi i j k / (span r)), taking
// the r-point DFT and writing output q to (i - k) r + k + q span (k = i mod span): self-sorting, natural order.
// Every butterfly's inputs are read into registers before the barrier and written after it, so one array serves as
// both source and destination (REGS = the most values one invocation holds in any pass).
var<workgroup> buf: array<vec2<f32>, SIZE * RPW>;

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
    for (var g = t; g < count * RPW; g += WG) {
      let i = g % count;
      let row0 = (g / count) * SIZE;
      let k = i % span;
      regs[slot] = buf[row0 + i];
      for (var j = 1u; j < r; j++) {
        regs[slot + j] = cmul(buf[row0 + i + j * count], twiddle(j * k * step, inverse));
      }
      slot += r;
    }
    workgroupBarrier();
    slot = 0u;
    for (var g = t; g < count * RPW; g += WG) {
      let i = g % count;
      let k = i % span;
      let base = (g / count) * SIZE + (i - k) * r + k;
      var a: array<vec2<f32>, 5>;
      for (var j = 0u; j < r; j++) {
        a[j] = regs[slot + j];
      }
      let y = small_dft(a, r, SIZE, inverse);
      for (var q = 0u; q < r; q++) {
        buf[base + q * span] = y[q];
      }
      slot += r;
    }
    workgroupBarrier();
    span *= r;
  }
}
