// Sets every word of a buffer to one packed value (the element code repeated across the word's lanes); the header
// and the loop come from the description in elementwise.ts.

fn fill_word(w: u32) {
  out[w] = p.word;
}
