// matmul_fma: the inner product over one staged k-tile, the loop every tiled GEMM runs between
// its barriers (matmul.wgsl, matmul_db.wgsl, qw_mm.wgsl, qw_mm_db.wgsl). Not a kernel, nor
// declarations: a block of statements, included inside the kernel's k-step loop
// ("//!include matmul_fma" at the start of a line) once the tile is in workgroup memory.
// For each of the BK k rows of the tile, the thread reads its TM4 vec4s of A and TN4 vec4s of
// B (slots g*WY + ty and h*WX + tx of the row, XORed with sw(k)) and adds their outer product
// into its register tile: acc[g*4 + r][h] += A[.., r] * B[h] for r < 4. Every bound is a
// constant, so the compiler unrolls the loops and keeps acc in registers.
// The includer defines, in the GEMM's letters (the 4-bit GEMM: B is W, N its output columns
// C, K its reduction R):
//   constants BK (k rows of a staged tile), BM4 and BN4 (vec4 slots per k row of As and Bs),
//   TM4 and TN4 (the register tile's row and column groups of 4), WX and WY (the thread grid);
//   the workgroup arrays As and Bs: k-major rows of vec4 slots, two tiles (buffers) each when
//   double-buffered; fn sw(k: u32) -> u32, the slot swizzle of row k (0u when unswizzled);
//   and in scope: acc (array<array<vec4<f32>, TN4>, TM>, the accumulator), tx and ty (the
//   thread's place in the WX x WY grid) and cur, the buffer the tile sits in (0u when single).
let abase = cur * BK * BM4;
let bbase = cur * BK * BN4;
for (var kk = 0u; kk < BK; kk++) {
    let swk = sw(kk);
    var av: array<vec4<f32>, TM4>;
    var bv: array<vec4<f32>, TN4>;
    for (var g = 0u; g < TM4; g++) { av[g] = As[abase + kk * BM4 + ((g * WY + ty) ^ swk)]; }
    for (var h = 0u; h < TN4; h++) { bv[h] = Bs[bbase + kk * BN4 + ((h * WX + tx) ^ swk)]; }
    for (var g = 0u; g < TM4; g++) {
        for (var r = 0u; r < 4u; r++) {
            let a = av[g][r];
            for (var h = 0u; h < TN4; h++) {
                acc[g * 4u + r][h] = fma(vec4<f32>(a), bv[h], acc[g * 4u + r][h]);
            }
        }
    }
}
