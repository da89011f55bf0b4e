// q4_requant: straight-through requant of an fp32 latent L[N, K] at the frozen (a, b), written
// into the codes in the layout the forward reads (in place; CODES is the only writable binding).
// Symmetric (KIND 0): code = clamp(round(l / s), -8, 7) + 8, s == 0 gives 8.
// With minimum (KIND 1): code = clamp(round((l - m) / d), 0, 15), d == 0 gives 0.
// WGSL's round() rounds half to even. Padding codes (k >= K) are 8 / 0, as at upload.
// Workgroup: 256 threads; each thread owns one u32 word (8 codes) of one row, reading its 8
// latents as two vec4 loads when K % 8 == 0 (LT = vec4<f32>), else 8 guarded scalar loads.
// The prelude gives KIND CPW G BPG ABT group_ab code_f deq (q4.c), LT and lat8(base, k0).
struct Params { N: u32, K: u32, wpr: u32, ng: u32, total: u32 }

@group(0) @binding(0) var<storage, read> L: array<LT>;
@group(0) @binding(1) var<storage, read> AB: array<ABT>;
@group(0) @binding(2) var<storage, read_write> CODES: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let idx = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (idx >= p.total) { return; }
    let n = idx / p.wpr;
    let k0 = (idx % p.wpr) * 8u;
    let ab = group_ab(n * p.ng + k0 / G);
    let lv = lat8(n * p.K, k0);
    var word = 0u;
    for (var i = 0u; i < 8u; i++) {
        let k = k0 + i;
        var c = select(8u, 0u, KIND == 1u);
        if (k < p.K) {
            let l = lv[i];
            if (KIND == 0u) {
                if (ab.x != 0.0) { c = u32(i32(clamp(round(l / ab.x), -8.0, 7.0)) + 8); }
            } else {
                if (ab.x != 0.0) { c = u32(clamp(round((l - ab.y) / ab.x), 0.0, 15.0)); } else { c = 0u; }
            }
        }
        word |= c << (4u * i);
    }
    CODES[idx] = word;
}
