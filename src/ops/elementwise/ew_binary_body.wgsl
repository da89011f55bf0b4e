// ew_binary_body: the shared part of the binary kernels ew_binary (f32) and ew_binary_int (i32),
// which include it and define apply(x: V, y: V) -> V: the output and uniform bindings and the
// value of one output vector for ew_map's entry point. See ew_binary.wgsl for the prelude.
@group(0) @binding(2) var<storage, read_write> out: array<V>;
@group(0) @binding(3) var<uniform> p: Params;

fn value(o: vec4<u32>) -> V {
    return apply(ld_a(o.y), ld_b(o.z));
}

//!include ew_map
