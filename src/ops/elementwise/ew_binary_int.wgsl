// ew_binary_int: out = a (op) b for i32 tensors with NumPy broadcasting; b may be a uniform
// scalar (an integer held as f32 in the uniform). The prelude and the thread layout are
// ew_binary's (alias V is vec4<i32> or i32; the rows with a 1 in the table's i32 column); the walk and the entry point are shared
// (ew_binary_body).
//
// Integer semantics as PyTorch's integer tensors, wrapping on overflow: add, sub (alpha an
// integer), mul, minimum, maximum, and division with a rounding mode: trunc is WGSL's integer
// division (toward 0); floor moves the truncated quotient down by one where the remainder is
// non-zero and the operands' signs differ. A zero divisor gives a (WGSL's rule; PyTorch raises).

//!include ew_binary_body

fn ew_div_floor_int(x: V, y: V) -> V {
    let q = x / y;
    let fix = ((x % y) != V(0)) & ((x < V(0)) != (y < V(0)));
    return q - select(V(0), V(1), fix);
}

fn apply(x: V, y: V) -> V {
    switch (OP) {
        case BIN_ADD: { return x + V(i32(p.alpha)) * y; }
        case BIN_SUB: { return x - V(i32(p.alpha)) * y; }
        case BIN_MUL: { return x * y; }
        case BIN_MINIMUM: { return min(x, y); }
        case BIN_MAXIMUM: { return max(x, y); }
        case BIN_DIV_TRUNC: { return x / y; }
        case BIN_DIV_FLOOR: { return ew_div_floor_int(x, y); }
        default: { return V(0); } // no code: tests/py/test_op_table.py checks every i32 row has its case
    }
}
