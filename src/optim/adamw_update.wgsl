// adamw_update: the AdamW update of every parameter in the flat buffers at once, exactly
// torch.optim.AdamW's order of operations:
//   p <- p·(1 - lr·wd); g <- g·coef; m <- b1·m + (1 - b1)·g; v <- b2·v + (1 - b2)·g²;
//   p <- p - (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps)
// with coef, lr / bc1, sqrt(bc2) and 1 - lr·wd from state (adamw_finish), betas, 1 - betas
// (hyper[8], hyper[9]; computed in double on the host) and eps from hyper. The gradients
// themselves stay unscaled. The entry point, the skip and the shared bindings: optim_update.
//!include optim_update

//!bindings write(m2: array<vec4<f32>>) uniform(p: Params)

fn update(i: u32, coef: f32) {
    let step_size = bitcast<f32>(state[5]);
    let sqrt_bc2 = bitcast<f32>(state[6]);
    let decay = bitcast<f32>(state[7]);
    let b1 = hyper[2];
    let b2 = hyper[3];
    let eps = hyper[4];
    let g = grads[i] * coef;
    let m = b1 * m1[i] + hyper[8] * g;
    let v = b2 * m2[i] + hyper[9] * g * g;
    m1[i] = m;
    m2[i] = v;
    params[i] = params[i] * decay - step_size * (m / (sqrt(v) / sqrt_bc2 + vec4<f32>(eps)));
}
