// q4_mm_head: what the two 4-bit GEMM kernels (q4_mm.wgsl, q4_mm_db.wgsl) share, included by
// both ("//!include q4_mm_head"): the Params, the bindings and the thread grid of a BM x BC
// tile with TM x TC registers per thread. Not a kernel on its own.
struct Params {
    M: u32, R: u32, C: u32, wpr: u32,
    ng: u32, tiles_c: u32, tiles_m: u32, Kp: u32,
    r_chunk: u32, splits: u32, flags: u32, pad1: u32,
}

@group(0) @binding(0) var<storage, read> A: array<AV>;
@group(0) @binding(1) var<storage, read> CODES: array<u32>;
@group(0) @binding(2) var<storage, read> AB: array<ABT>;
@group(0) @binding(3) var<storage, read> BIAS: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

const WX: u32 = BC / TC;
const WY: u32 = BM / TM;
const THREADS: u32 = WX * WY;
const TM4: u32 = TM / 4u;
const TC4: u32 = TC / 4u;
