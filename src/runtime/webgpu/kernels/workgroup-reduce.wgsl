// The workgroup tree reduction, written once. A kernel instantiates it with workgroupReduce() (wgsl.ts), which fills
// in a name N, the element type T, the combine expression and the ending, giving
//   var<workgroup> N_scratch: array<T, WG>;
//   fn N(t: u32, v: T) -> T   (t: the invocation's local index)
// Every invocation of the workgroup must call N (it holds barriers, so only in workgroup-uniform control flow). Slot t
// takes v, then for stride = WG/2, WG/4, ..., 1 (WG a power of two) each slot t < stride takes the combine of
// a = slot t and b = slot t + stride, with a barrier after each step: the same fixed tree on every run and GPU (CPU
// references that mirror it round the same way). a is always the lower slot, so combine need not be commutative (an
// argmax keeps the lower index on ties). Pairs and larger states reduce as one vector or struct value.
// Endings (workgroupReduce's `result`): 'read' returns slot 0 as is (the scratch must not be rewritten before a later
// barrier); 'reusable' reads it, then a barrier, so a second call may follow at once; 'uniform' returns it through
// workgroupUniformLoad, a uniform value callers may branch on around barriers.

var<workgroup> {{NAME}}_scratch: array<{{TYPE}}, WG>;

fn {{NAME}}(t: u32, v: {{TYPE}}) -> {{TYPE}} {
  {{NAME}}_scratch[t] = v;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (t < stride) {
      let a = {{NAME}}_scratch[t];
      let b = {{NAME}}_scratch[t + stride];
      {{NAME}}_scratch[t] = {{COMBINE}};
    }
    workgroupBarrier();
  }
{{RESULT}}
}
