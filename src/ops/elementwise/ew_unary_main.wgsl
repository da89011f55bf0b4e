// ew_unary_main: the entry point of ew_unary and ew_unary_bwd, which "//!include ew_unary_main"
// after their bindings, a uniform p with p.nv (the vectors) and fn item(j: u32), the work of
// vector j. Workgroup: 256 threads; one workgroup owns 256*PT consecutive vectors; thread t owns
// vectors base + t + 256*k (k < PT), so every load and store instruction is coalesced.
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let base = (wid.x + wid.y * nwg.x) * (256u * PT) + lid;
    for (var k = 0u; k < PT; k++) {
        let j = base + k * 256u;
        if (j < p.nv) {
            item(j);
        }
    }
}
