// matmul_params: the Params block of the matmul family's tile, double-buffered and outer kernels
// (matmul_outer.wgsl includes it with "//!include matmul_params"; matmul.wgsl and matmul_db.wgsl
// through matmul_tile), as matmul_record in matmul.c fills it: sizes, batch strides, C's strides,
// the tile grid, alpha and beta, the split-K chunk and count, and the causal band of attention's
// products (band_sq, band_off; read by matmul.wgsl only). out_n is the skinny kernel's N (its own
// Params names the same layout; unused here). flags, read on CPU adapters only (on GPUs they are
// the prelude's constants): the orientation and epilogue flags, bit 0 TRANS_A, 1 TRANS_B, 2 HAS_C,
// 3 C_IS_OUT, 4 SPLITK, and in bits 5-6 the tiled kernel's band mode; runtime values there so that
// one pipeline serves them all, since a CPU driver spends seconds compiling each (matmul.c,
// append_flags). And the tile a workgroup owns in that grid (Tile, tile_count, tile_of), for the
// includer's BM x BN blocks of O (the includer defines BM and BN, and binds the Params as p). Not a
// kernel.
struct Params {
    M: u32, N: u32, K: u32, batch: u32,
    a_bs: u32, b_bs: u32, c_bs: u32, c_sm: u32,
    c_sn: u32, tiles_n: u32, tiles_m: u32, alpha: f32,
    beta: f32, k_chunk: u32, splits: u32, out_n: u32,
    flags: u32, band_sq: u32, band_off: u32, pad2: u32,
}

// The workgroup's tile: K slice s, batch b, first row m0 and column n0 of O. A thread's place
// (tx, ty) in the WX x WY grid is lid % WX, lid / WX, kept apart: the tile is uniform across
// the workgroup, and Tint's uniformity analysis (which takes a struct whole) must see the loops
// around workgroupBarrier() depend on uniform values only.
struct Tile { s: u32, b: u32, m0: u32, n0: u32 }

// Workgroups that own a tile; those past it return at once.
fn tile_count() -> u32 { return p.tiles_n * p.tiles_m * p.batch * p.splits; }

fn tile_of(wg: u32) -> Tile {
    let tiles = p.tiles_n * p.tiles_m;
    let per_slice = tiles * p.batch;
    let bt = wg % per_slice;
    let t = bt % tiles;
    return Tile(wg / per_slice, bt / tiles, (t / p.tiles_n) * BM, (t % p.tiles_n) * BN);
}
