// matmul split-K reduction: O[i] = alpha * sum_{s < splits} P[s * total + i] + beta * C(i),
// summing the slices in order s = 0, 1, ... (deterministic; no atomics). i runs over the
// batch * M * N outputs (row-major [b, m, n]); C is read through its strides as in matmul.wgsl,
// or is O itself (C_IS_OUT: accumulation in place).
// One thread per output element, 256 threads per workgroup; consecutive threads read
// consecutive words of each slice (coalesced).
// The prelude supplies HAS_C and C_IS_OUT and matmul_flags_init(), called first: on GPUs
// constants (the function empty); on CPU adapters private variables it sets from p.flags
// (bits 2 and 3, as matmul_params.wgsl's), so one pipeline serves every epilogue.
struct Params {
    total: u32, mn: u32, N: u32, splits: u32,
    c_bs: u32, c_sm: u32, c_sn: u32, alpha: f32,
    beta: f32, flags: u32, pad1: u32, pad2: u32,
}

//!bindings read(P: array<f32>, C: array<f32>) write(O: array<f32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.total; }

fn item(i: u32) {
    matmul_flags_init();
    var acc = 0.0;
    for (var s = 0u; s < p.splits; s++) { acc += P[s * p.total + i]; }
    var v = p.alpha * acc;
    if (C_IS_OUT) {
        v += p.beta * O[i];
    } else if (HAS_C) {
        let b = i / p.mn;
        let r = i % p.mn;
        v += p.beta * C[b * p.c_bs + (r / p.N) * p.c_sm + (r % p.N) * p.c_sn];
    }
    O[i] = v;
}
