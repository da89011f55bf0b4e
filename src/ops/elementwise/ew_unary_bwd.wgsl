// ew_unary_bwd: dx = f'(x) * dy for the unary ops (and clamp), contiguous f32 tensors.
//
// The prelude (unary_backward.c) supplies:
//   const OP: u32   a code of the unary table (ew_ops.h): a wgml_unary_op or UN_CLAMP, named by
//                   the table's constants, which the prelude also supplies (round to decimals
//                   has round's zero gradient: elementwise_grad.c asks for UN_ROUND)
//   const PT: u32   vectors per thread
//   alias V, VB     vec4<f32> / vec4<bool> when numel % 4 == 0, else f32 / bool
//
// Workgroup and thread layout: ew_unary_main.

struct Params {
    nv: u32,   // vectors
    pad: u32,
    lo: f32,   // clamp bounds
    hi: f32,
}

//!bindings read(x: array<V>, dy: array<V>) write(dx: array<V>) uniform(p: Params)

//!include ew_unary_df

fn item(j: u32) {
    dx[j] = df(x[j], dy[j]);
}

//!include ew_unary_main
