// index_ebwd_fill: embedding backward, pass 3 of 5: each position drops itself into a free slot
// of its row's bucket, list[off[v] .. off[v + 1]). The slot comes from an integer atomic that
// counts cnt[v] down to 0, so the order inside a bucket varies between runs; pass 4 restores
// the order of positions.
// Workgroup: 256 threads; one thread owns one position.
//!include index_fix
struct Params { n: u32, v: u32, d: u32, pad: u32 }

//!bindings read(idx: array<i32>, off: array<u32>)
//!bindings write(cnt: array<atomic<u32>>, list: array<u32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n; }

fn item(t: u32) {
    let row = fix_index(idx[t], i32(p.v));
    let k = atomicSub(&cnt[row], 1u) - 1u;
    list[off[row] + k] = t;
}
