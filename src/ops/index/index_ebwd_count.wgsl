// index_ebwd_count: embedding backward, pass 1 of 5: cnt[v] = how many positions have row v.
// The row of an id: index_fix's (wrapped by +V, clamped into [0, V - 1]). Integer atomics:
// the counts are exact, so the result does not depend on the order in which threads run.
// Workgroup: 256 threads; one thread owns one position.
//!include index_fix
struct Params { n: u32, v: u32, d: u32, pad: u32 }

//!bindings read(idx: array<i32>) write(cnt: array<atomic<u32>>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(t: u32) {
    let row = fix_index(idx[t], i32(p.v));
    atomicAdd(&cnt[row], 1u);
}
