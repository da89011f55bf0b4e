// The tail of a decode step for greedy generation kept on the GPU: the step's argmax becomes
// the next step's token (ids), is written to the token history at the step's position, and
// the position and the cache length advance by one, so the next run of the decode graph (in
// the same submit or a later one) continues without the host. One workgroup of one thread.
//!bindings read(next_id: array<i32>)
//!bindings write(ids: array<i32>, pos: array<i32>, len: array<i32>, history: array<i32>)

@compute @workgroup_size(1)
fn main() {
    let t = next_id[0];
    let p = pos[0];
    ids[0] = t;
    if (p >= 0 && u32(p) < arrayLength(&history)) {
        history[p] = t;
    }
    pos[0] = p + 1;
    len[0] = p + 2;
}
