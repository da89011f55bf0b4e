// index_fix: the one rule by which every index kernel turns a runtime index into a row (the
// gathers, index_select, embedding and embedding_bag, their backward scatters, the embedding
// backward's buckets), included with "//!include index_fix": fix_index(v, size) wraps a
// negative index by +size (PyTorch's v = -1 is the last row) and clamps the result into
// [0, size - 1], so that no index, however wrong, reads or writes outside a tensor. The eager
// handlers reject indices outside [-size, size) before they get here; a built graph, whose
// indices change per run, gets the clamped row. size > 0. Not a kernel.
fn fix_index(v: i32, size: i32) -> u32 {
    return u32(clamp(select(v, v + size, v < 0), 0, size - 1));
}
