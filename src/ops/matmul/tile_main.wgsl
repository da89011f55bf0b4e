// tile_main: the entry point of the tiled GEMMs (matmul, matmul_db, matmul_outer, qw_mm,
// qw_mm_db, qw_mm_i8), which "//!include tile_main" and define THREADS (threads a workgroup),
// Tile, tile_count(), tile_of(k) (the k-th output tile: matmul_params, qw_mm_head) and
//   fn run_tile(t: Tile, lid: u32)   the workgroup's work on tile t, lid its thread.
// Workgroup k of the grid graph_dispatch folds into two dimensions (k = wid.x + wid.y * nwg.x)
// owns tile k; one past the last tile returns (the branch is uniform across the workgroup, so
// run_tile may use barriers).
@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let k = wid.x + wid.y * nwg.x;
    if (k < tile_count()) {
        run_tile(tile_of(k), lid);
    }
}
