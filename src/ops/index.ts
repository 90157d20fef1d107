export * from './creation.js';
export * from './elementwise.js';
export * from './reduce.js';
export * from './matmul.js';
export * from './shape-ops.js';
export * from './convert.js';
export * from './scaled-mm.js';
export * from './quantize.js';
