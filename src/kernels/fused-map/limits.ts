// What one fused map can take (the planner splits longer chains to fit).
import { isFloating } from '../../core/dtype.js';
import { DIVISION_OPS } from '../../runtime/backend.js';
import type { FusedNode } from './index.js';

/** The most buffers a fused map binds (inputs + outputs): WebGPU's guaranteed maxStorageBuffersPerShaderStage. */
export const FUSED_MAP_MAX_BUFFERS = 8;
/** The most numbers a fused map carries in its uniforms. */
export const FUSED_MAP_MAX_SCALARS = 16;

const DIVISIONS: ReadonlySet<string> = new Set(DIVISION_OPS);

/**
 * Buffers a chain binds beyond its inputs and outputs: the device error flag (1) when it divides integers (an
 * integer result means integer operands, computed in i32), whose zero divisor raises ZeroDivisionError; else 0.
 */
export function errorFlagBindings(nodes: readonly FusedNode[]): number {
  return nodes.some((n) => n.kind === 'binary' && DIVISIONS.has(n.op) && !isFloating(n.dtype)) ? 1 : 0;
}
