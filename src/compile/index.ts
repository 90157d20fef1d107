export { compile, jit, type CompiledFunction, type CompileOptions, type SignatureStats } from './compile.js';
export { unreplayable } from './trace.js';
