// sincos: sin and cos from +, - and * alone, to about 1 ulp of f32, for every implementation
// ("//!include sincos" after an alias SC: f32 or vec4<f32>). WGSL's own sin and cos are only
// required to be within 2^-11 absolute on [-pi, pi]: SwiftShader (Dawn's CPU adapter) is off by
// up to ~2e-4, where lavapipe's are correctly rounded, so rotary embeddings and the sin/cos ops
// differed by adapter. Arguments are meant to be small (|x| up to a few pi; callers reduce
// first): x = q pi/2 + r, q = round(x 2/pi), |r| <= pi/4 + a rounding, with pi/2 in three parts
// (P1 8 significant bits, P2 12, P3 the rest: q P1 and q P2 are exact for small q). Then the
// Taylor polynomials of sin (to r^9) and cos (to r^10), whose truncation error at pi/4 is below
// 2e-9, and the quadrant q mod 4 picks and signs them.
const SC_2_PI: f32 = 0.6366197466850281;
const SC_P1: f32 = 1.5703125;
const SC_P2: f32 = 0.0004837512969970703;
const SC_P3: f32 = 7.549790126404332e-08;

fn sc_sin_r(r: SC) -> SC {
    let r2 = r * r;
    return r + r * r2 * (SC(-1.0 / 6.0) + r2 * (SC(1.0 / 120.0) + r2 * (SC(-1.0 / 5040.0) + r2 * SC(1.0 / 362880.0))));
}

fn sc_cos_r(r: SC) -> SC {
    let r2 = r * r;
    return SC(1.0) + r2 * (SC(-0.5) + r2 * (SC(1.0 / 24.0) + r2 * (SC(-1.0 / 720.0) + r2 * (SC(1.0 / 40320.0)
        + r2 * SC(-1.0 / 3628800.0)))));
}

// q mod 4 of x's quadrant, and r
fn sc_quadrant(x: SC) -> SC { return round(x * SC(SC_2_PI)); }
fn sc_rest(x: SC, q: SC) -> SC { return ((x - q * SC(SC_P1)) - q * SC(SC_P2)) - q * SC(SC_P3); }
fn sc_mod4(q: SC) -> SC { return q - SC(4.0) * floor(q * SC(0.25)); }

fn sc_sin(x: SC) -> SC {
    let q = sc_quadrant(x);
    let r = sc_rest(x, q);
    let m = sc_mod4(q);
    let v = select(sc_sin_r(r), sc_cos_r(r), (m == SC(1.0)) | (m == SC(3.0)));
    return select(v, -v, m >= SC(2.0));
}

fn sc_cos(x: SC) -> SC {
    let q = sc_quadrant(x);
    let r = sc_rest(x, q);
    let m = sc_mod4(q);
    let v = select(sc_cos_r(r), sc_sin_r(r), (m == SC(1.0)) | (m == SC(3.0)));
    return select(v, -v, (m == SC(1.0)) | (m == SC(2.0)));
}
