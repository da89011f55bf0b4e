// sgd_update: the SGD update of every parameter in the flat buffers at once, exactly
// torch.optim.SGD (dampening 0, not Nesterov) in its order of operations:
//   g <- g·coef + wd·p; buf <- momentum·buf + g; p <- p - lr·buf
// with lr, wd and momentum from hyper ([0], [1], [11]) and the clip coefficient from state
// (adamw_finish). The momentum buffer is the flat m buffer (m1); it starts at zero, so the
// first step's buf is g, as torch's first step sets it (momentum 0: buf is g every step). The
// entry point, the skip and the shared bindings: optim_update.
//!include optim_update

//!bindings uniform(p: Params)

fn update(i: u32, coef: f32) {
    let lr = hyper[0];
    let wd = hyper[1];
    let momentum = hyper[11];
    let x = params[i];
    let g = grads[i] * coef + wd * x;
    let buf = momentum * m1[i] + g;
    m1[i] = buf;
    params[i] = x - lr * buf;
}
