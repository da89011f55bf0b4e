// ew_bool: bool out = a (op) b: comparisons of f32 tensors (or of a tensor with a uniform scalar)
// and logical not/and/or of bool tensors, with NumPy broadcasting.
//
// The prelude (elementwise.c) supplies:
//   const OP: u32       a comparison (wgml_compare_op) or a logical op, named by the constants
//                       the prelude also supplies (CMP_EQ ... CMP_GE, BOOL_AND, BOOL_OR,
//                       BOOL_NOT: ew_ops.h)
//   const BCAST: bool   general broadcast path (else contiguous operands, one-element tensors or
//                       a uniform scalar)
//   alias V = vec4<f32>
//   the read bindings a, b; ld_a/ld_b(w) -> vec4<f32>: the four elements of word w (fast path);
//   el_a/el_b(o) -> f32: the element at offset o (broadcast path). Bools load as 0.0 / 1.0.
//
// Output bools are one byte each, four to a u32 word (element i in bits 8*(i%4)..). Workgroup:
// 256 threads; one thread owns one output word (4 elements) and writes it whole, with the bytes
// past the last element set to 0. On the broadcast path it locates the word's first element from
// the output index and steps along the innermost dimension, recomputing only when it wraps.
//!bindings write(out: array<u32>) uniform(p: Params)

//!include ew_walk

fn test(x: vec4<f32>, y: vec4<f32>) -> vec4<bool> {
    let z = vec4<f32>(0.0);
    switch (OP) {
        case CMP_EQ: { return x == y; }
        case CMP_NE: { return !(x == y); } // true for NaN operands (the != of some drivers is ordered)
        case CMP_LT: { return x < y; }
        case CMP_LE: { return x <= y; }
        case CMP_GT: { return x > y; }
        case CMP_GE: { return x >= y; }
        case BOOL_AND: { return (x != z) & (y != z); }
        case BOOL_OR: { return (x != z) | (y != z); }
        case BOOL_NOT: { return x == z; }
        default: { return vec4<bool>(false); } // no code: tests/py/test_op_table.py checks every row has its case
    }
}

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.nv; }

fn item(w: u32) {
    var x: vec4<f32>;
    var y: vec4<f32>;
    if (BCAST) {
        let last = p.rank - 1u;
        let s0 = p.shape[last / 4u][last % 4u];
        let step = inner_step();
        var loc = locate(4u * w);
        for (var e = 0u; e < 4u; e++) {
            let i = 4u * w + e;
            if (i >= p.n) {
                break;
            }
            x[e] = el_a(loc.y);
            y[e] = el_b(loc.z);
            loc += step;
            if (loc.x == s0) {
                loc = locate(i + 1u);
            }
        }
    } else {
        x = ld_a(w);
        y = ld_b(w);
    }
    let bits = select(vec4<u32>(0u), vec4<u32>(1u), test(x, y)) << vec4<u32>(0u, 8u, 16u, 24u);
    var word = bits.x | bits.y | bits.z | bits.w;
    let left = p.n - 4u * w;
    if (left < 4u) {
        word &= (1u << (8u * left)) - 1u;
    }
    out[w] = word;
}
