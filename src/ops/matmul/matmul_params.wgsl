// matmul_params: the Params block of the matmul family's tile, double-buffered and outer
// kernels (matmul_outer.wgsl includes it with "//!include matmul_params"; matmul.wgsl and
// matmul_db.wgsl through matmul_tile), as matmul_record in matmul.c fills it: sizes, batch
// strides, C's strides, the tile grid, alpha and beta, the split-K chunk and count, and the
// causal band of attention's products (band_sq, band_off; read by matmul.wgsl only). out_n is
// the skinny kernel's N (its own Params names the same layout; unused here). Not a kernel.
struct Params {
    M: u32, N: u32, K: u32, batch: u32,
    a_bs: u32, b_bs: u32, c_bs: u32, c_sm: u32,
    c_sn: u32, tiles_n: u32, tiles_m: u32, alpha: f32,
    beta: f32, k_chunk: u32, splits: u32, out_n: u32,
    pad1: u32, band_sq: u32, band_off: u32, pad2: u32,
}
