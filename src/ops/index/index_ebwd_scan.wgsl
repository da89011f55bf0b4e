// index_ebwd_scan: embedding backward, pass 2 of 5: off[0] = 0, off[v + 1] = cnt[0] + ... + cnt[v]
// (off has V + 1 entries: row v's positions go to list slots off[v] .. off[v + 1] - 1).
// Workgroup: one workgroup of 256 threads for the whole table. Thread t owns the consecutive
// rows t*per .. t*per + per - 1 (per = ceil(V / 256)): it sums them, the 256 sums are scanned in
// workgroup memory (Hillis-Steele, 8 steps), then it writes its rows' offsets.
struct Params { n: u32, v: u32, d: u32, pad: u32 }

//!bindings read(cnt: array<u32>) write(off: array<u32>) uniform(p: Params)

var<workgroup> sc: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    let per = (p.v + 255u) / 256u;
    let r0 = min(lid * per, p.v);
    let r1 = min(r0 + per, p.v);
    var s = 0u;
    for (var r = r0; r < r1; r++) { s += cnt[r]; }
    sc[lid] = s;
    workgroupBarrier();
    for (var k = 1u; k < 256u; k = k << 1u) {
        var add = 0u;
        if (lid >= k) { add = sc[lid - k]; }
        workgroupBarrier();
        sc[lid] = sc[lid] + add;
        workgroupBarrier();
    }
    var run = sc[lid] - s; // exclusive prefix of this thread's rows
    if (lid == 0u) { off[0] = 0u; }
    for (var r = r0; r < r1; r++) {
        run += cnt[r];
        off[r + 1u] = run;
    }
}
