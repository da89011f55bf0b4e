// reduce_pick: the order and the merge of sum / amax / argmax that reduce_rows, reduce_pairs
// (the two stages of a split reduction) and reduce_cols share ("//!include reduce_pick"). Not a
// kernel: the includer's prelude gives OP (0 sum, 1 max, 2 argmax). Pick and wr_op are the
// element type and combine of wg_reduce's tree (the row kernels include that too).
const NONE: u32 = 0xffffffffu;

// a is greater than b, NaN counting as the greatest value (as torch.amax / argmax do)
// NaN tested on the bits (a compiler may assume a == a for floats)
fn is_nan(a: f32) -> bool { return (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u; }
fn gt(a: f32, b: f32) -> bool { return a > b || (is_nan(a) && !is_nan(b)); }

// Merge (bv, bi) into (av, ai): max keeps the greater value and, on a tie, the lower index.
fn better(av: f32, ai: u32, bv: f32, bi: u32) -> bool {
    if (bi == NONE) { return false; }
    if (ai == NONE) { return true; }
    return gt(bv, av) || (!gt(av, bv) && bi < ai);
}

// An accumulator: the sum (i unused), or the maximum and its index (NONE before any element).
struct Pick { v: f32, i: u32 }
alias WR = Pick;
fn wr_op(a: Pick, b: Pick) -> Pick {
    if (OP == 0u) { return Pick(a.v + b.v, a.i); }
    if (better(a.v, a.i, b.v, b.i)) { return b; }
    return a;
}
