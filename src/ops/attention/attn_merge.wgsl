// attn_merge: the merge of split attention's key chunks and the decode kernel's chunk length,
// shared by attn_combine.wgsl, attn_decode.wgsl and the q4 GEMV's merge prologue
// ("//!include attn_merge"; not a kernel). The includer defines part_at(i) -> f32 over the
// partials: per output row and chunk, D unnormalised outputs, the chunk's max m (log2 units) and
// its sum l.

// out[row, d] = Σ acc·2^(m - M) / Σ l·2^(m - M) over the first n of the row's n_split chunks,
// M their max; a row whose chunks saw no key gets 0.
fn attn_merge(row: u32, d: u32, D: u32, n_split: u32, n: u32) -> f32 {
    let stride = D + 2u;
    let base = row * n_split * stride;
    var mx = -3.0e38;
    for (var s = 0u; s < n; s++) { mx = max(mx, part_at(base + s * stride + D)); }
    var num = 0.0;
    var den = 0.0;
    for (var s = 0u; s < n; s++) {
        let o = base + s * stride;
        let w = exp2(part_at(o + D) - mx);
        num += part_at(o + d) * w;
        den += part_at(o + D + 1u) * w;
    }
    return select(num / den, 0.0, den == 0.0);
}

// attn_decode.wgsl's chunk length for L keys over n_chunk chunks of at most ch keys: L / n_chunk
// rounded up to a multiple of 64, at least 64 (n_chunk * ch >= L)
fn decode_chunk_len(L: i32, n_chunk: u32, ch: u32) -> u32 {
    return min(max((u32(max(L, 1)) + n_chunk * 64u - 1u) / (n_chunk * 64u), 1u) * 64u, ch);
}

// the chunks of that split that hold keys: the only ones a merge must read
fn decode_chunks_used(L: i32, n_chunk: u32, ch: u32) -> u32 {
    let cl = decode_chunk_len(L, n_chunk, ch);
    return min((u32(max(L, 1)) + cl - 1u) / cl, n_chunk);
}
