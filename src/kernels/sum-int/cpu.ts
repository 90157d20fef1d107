// The reference of sumInt: BigInt sums of the integers along dim (exact, wrapping modulo 2^64 as torch's int64),
// over the loop every reduce reference shares (reduce/cpu.ts).
import type { StorageArray } from '../../core/codecs.js';
import type { Operand } from '../../runtime/backend.js';
import { values } from '../../runtime/cpu/cpu-backend.js';
import { int64Storage, int64Values } from '../int64/cpu.js';
import { forEachRow, rowCount } from '../reduce/cpu.js';

export function sumIntReference(x: Operand<StorageArray>, dim: number): StorageArray {
  const v = x.dtype === 'int64' ? int64Values(x) : Array.from(values(x), BigInt);
  const out = new BigInt64Array(rowCount(x.view.shape, dim));
  forEachRow(x.view.shape, dim, (o, base, size, inner) => {
    let acc = 0n;
    for (let j = 0; j < size; j++) acc += v[base + j * inner];
    out[o] = BigInt.asIntN(64, acc);
  });
  return int64Storage(out);
}
