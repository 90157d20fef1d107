// What one fused map can take (the planner splits longer chains to fit).

/** The most buffers a fused map binds (inputs + outputs): WebGPU's guaranteed maxStorageBuffersPerShaderStage. */
export const FUSED_MAP_MAX_BUFFERS = 8;
/** The most numbers a fused map carries in its uniforms. */
export const FUSED_MAP_MAX_SCALARS = 16;
