// ew_binary_body: the shared part of the binary kernels ew_binary (f32) and ew_binary_int (i32),
// which include it and define apply(x: V, y: V) -> V: the output and uniform bindings and the
// value of one output vector for ew_map's entry point. See ew_binary.wgsl for the prelude.
//!bindings write(out: array<V>) uniform(p: Params)

fn value(o: vec4<u32>) -> V {
    return apply(ld_a(o.y), ld_b(o.z));
}

//!include ew_map
