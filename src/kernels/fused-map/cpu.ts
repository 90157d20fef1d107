// The float64 reference of a fused chain: each op through the CPU backend's own elementwise code, every value stored
// in its dtype, exactly as the ops one by one would compute it.
import type { StorageArray } from '../../core/codecs.js';
import { contiguousView } from '../../core/shape.js';
import type { Operand, ScalarOperand } from '../../runtime/backend.js';
import type { CpuBackend } from '../../runtime/cpu/cpu-backend.js';
import type { FusedMapArgs, FusedRef } from './index.js';

type Handle = StorageArray;

export function fusedMapReference(backend: CpuBackend, args: FusedMapArgs<Handle>): unknown[] {
  const view = contiguousView(args.shape);
  const values: Operand<Handle>[] = [];
  const operand = (r: FusedRef): Operand<Handle> | ScalarOperand => {
    if ('input' in r) return args.inputs[r.input];
    if ('node' in r) return values[r.node];
    return { scalar: r.scalar, dtype: r.dtype };
  };
  const tensor = (r: FusedRef): Operand<Handle> => {
    const x = operand(r);
    if ('scalar' in x) throw new Error('fusedMap: this operand must be a tensor');
    return x;
  };
  for (const node of args.nodes) {
    let handle: Handle;
    switch (node.kind) {
      case 'unary':
        handle = backend.unary(node.op, tensor(node.args[0]), node.dtype);
        break;
      case 'binary':
        handle = backend.binary(node.op, operand(node.args[0]), operand(node.args[1]), args.shape, node.dtype);
        break;
      case 'where':
        handle = backend.where(tensor(node.args[0]), operand(node.args[1]), operand(node.args[2]), args.shape, node.dtype);
        break;
      case 'cast':
        handle = backend.cast(tensor(node.args[0]), node.dtype, node.saturate);
        break;
    }
    values.push({ handle, dtype: node.dtype, view });
  }
  return args.outputs.map((k) => values[k].handle);
}
