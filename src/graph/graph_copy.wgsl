// graph_copy: dst = src, word by word. graph_dispatch binds such a copy in place of a read-only
// binding that would overlap another binding of the same dispatch (WebGPU's aliasing rule).
// Workgroup: 256 threads; each thread copies one word (flat_main).
struct Params { n_words: u32, pad0: u32, pad1: u32, pad2: u32 }

//!bindings read(src: array<u32>) write(dst: array<u32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n_words; }

fn item(i: u32) { dst[i] = src[i]; }
