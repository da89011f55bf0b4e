// graph_fill: writes one 32-bit pattern into every word of a buffer (graph_fill_bits: fills and
// the NaN poisoning of fresh outputs).
// Workgroup: 256 threads; each thread owns one word (flat_main).
struct Params { n_words: u32, bits: u32 }

//!bindings write(out: array<u32>) uniform(p: Params)

//!include flat_main
const FLAT_WG: u32 = 256u;
fn items() -> u32 { return p.n_words; }

fn item(i: u32) { out[i] = p.bits; }
