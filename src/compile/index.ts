export { compile, jit, type CompiledFunction, type CompileOptions, type SignatureStats } from './compile.js';
export { traceConstant, unreplayable } from './trace.js';
