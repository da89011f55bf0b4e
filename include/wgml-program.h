/* wgml-program.h: running ExecuTorch programs (.pte files) whose graph was lowered to the
 * Vulkan delegate (by ExecuTorch's VulkanPartitioner or WebGPUPartitioner) (src/program).
 * Builds on wgml.h and wgml-io.h (the program dtypes and the .npy files the CLI reads inputs
 * from and writes outputs to; included here, so code written when they were declared here
 * compiles).
 *
 * Loading builds the whole method (its delegate graphs and the simple glue kernels around
 * them) into one wgml built graph: every delegate op is mapped onto wgml's ops through a table
 * of operator names, intermediates are memory-planned by the graph compiler, and a run is one
 * submit. A program using an operator wgml does not have is refused at load with the list of
 * every such operator. Inputs and outputs keep the program's host dtypes: int64 inputs are
 * narrowed to int32 on upload (an element out of int32 range is an error) and widened on
 * readback; float64 likewise through float32. A training program (ExecuTorch's joint
 * forward+backward export) can be loaded with an optimizer that steps its parameters on the
 * GPU after every run (wgml_program_load_training). */
#ifndef WGML_PROGRAM_H
#define WGML_PROGRAM_H

#include "wgml.h"
#include "wgml-io.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wgml_program wgml_program;

/* Loads the method `method` (NULL: the first, usually "forward") of a program from a file or
 * from bytes (copied). NULL on error, with the message on ctx (a malformed file names the
 * field and offset; an unsupported program lists every missing operator). */
wgml_program *wgml_program_load(wgml_ctx *ctx, const char *path, const char *method);
wgml_program *wgml_program_load_bytes(wgml_ctx *ctx, const void *data, size_t size, const char *method);
void wgml_program_free(wgml_program *p);

/* Shape and dtype of an input or output tensor. */
typedef struct wgml_program_io {
    wgml_program_dtype dtype; /* the host dtype (what set_input takes and get_output gives) */
    int rank;
    int64_t shape[WGML_MAX_RANK];
    int64_t numel;
    size_t nbytes; /* numel · element size */
} wgml_program_io;

int wgml_program_input_count(const wgml_program *p);
int wgml_program_output_count(const wgml_program *p);
wgml_status wgml_program_input_info(const wgml_program *p, int i, wgml_program_io *info);
wgml_status wgml_program_output_info(const wgml_program *p, int i, wgml_program_io *info);

/* Writes input i: bytes must be its nbytes, in its host dtype. Inputs keep their values across
 * runs until set again. */
wgml_status wgml_program_set_input(wgml_program *p, int i, const void *data, size_t bytes);
/* Runs the method once (one submit); does not wait. *seconds (may be NULL): waits and gives
 * the run's time (GPU timestamps, else wall time). */
wgml_status wgml_program_run(wgml_program *p, double *seconds);
/* Reads output i (waits for the run): bytes must be its nbytes, in its host dtype. */
wgml_status wgml_program_get_output(wgml_program *p, int i, void *data, size_t bytes);

/* Writes the tensor behind output i when it is program state, not computed by the method: a
 * parameter or buffer the method returns as it is (ExecuTorch's training programs return
 * their parameters so that an optimizer can update them in place between runs). bytes as for
 * get_output. WGML_ERR_ARG for an output the method computes. */
wgml_status wgml_program_write_output(wgml_program *p, int i, const void *data, size_t bytes);

/* The constants of the loaded method (weights baked into its delegates, constant tensors of
 * the method), in load order: shape, the dtype they are stored in and a name (the named-data
 * key or the tensor's fully qualified name; "" when it has none). Writing one replaces it for
 * later runs (e.g. an optimizer stepping the weights of a training program, whose delegates
 * hold the parameters as constants). A constant that the method converted to another dtype at
 * load keeps the converted copy it made. */
int wgml_program_constant_count(const wgml_program *p);
wgml_status wgml_program_constant_info(const wgml_program *p, int i, wgml_program_io *info, const char **name);
wgml_status wgml_program_write_constant(wgml_program *p, int i, const void *data, size_t bytes);

/* Reads constant i (its stored dtype; 64-bit types widened back), e.g. a trained parameter. */
wgml_status wgml_program_read_constant(wgml_program *p, int i, void *data, size_t bytes);

/* ---- training programs: the optimizer step on the GPU ------------------------------------- */
/* A joint forward+backward program (ExecuTorch's training export) returns the loss and then
 * the gradient of every parameter, while the parameters themselves are constants of its
 * delegates. Loaded with an optimizer, every run is the method and then one optimizer step on
 * the GPU, in the same submit: each parameter's constant is a view into the optimizer's flat
 * parameter buffer (src/optim), its gradient output is copied into the flat gradient buffer,
 * and the AdamW or SGD update writes the parameters in place; nothing goes through the host.
 * The outputs (loss, gradients) stay readable: they are those of the parameters before the
 * step, as PyTorch's loss.backward(); optimizer.step().
 *
 * Pairing. Gradient outputs: grad_outputs, else the program's own metadata (the method
 * __et_training_gradients_index_<method> gives the first gradient output, and
 * __et_training_fqn_<method> one name per parameter: n_params and the names). Constants:
 * param_constants (constant indices as wgml_program_constant_info numbers them in a plain
 * load; the delegate names a constant by the SHA-256 of its initial bytes, so a caller that
 * knows the initial state dict can match them), else by shape: each f32 constant, in load
 * order, becomes the first parameter still unpaired whose gradient has its shape (the
 * exporter uploads the parameters in the order it uses them, which is the parameter order of
 * an ordinary forward; parameters left outside the delegates are mutable tensors of the
 * method, candidates as well; a model with several parameters of one shape used out of order,
 * or with f32 buffers of a parameter's shape such as a norm's running statistics, needs
 * param_constants). A parameter left without a constant is an error naming it. */
typedef enum wgml_program_optimizer {
    WGML_PROGRAM_SGD = 1,  /* torch.optim.SGD: lr, momentum, weight_decay (dampening 0) */
    WGML_PROGRAM_ADAMW = 2 /* torch.optim.AdamW: lr, beta1, beta2, eps, weight_decay */
} wgml_program_optimizer;
typedef struct wgml_program_train_config {
    wgml_program_optimizer optimizer;
    double lr, beta1, beta2, eps, weight_decay, momentum;
    double max_grad_norm;       /* 0: no clipping (else torch.nn.utils.clip_grad_norm_) */
    int n_params;               /* 0: from the program's metadata */
    const int *grad_outputs;    /* n_params output indices, or NULL (metadata) */
    const int *param_constants; /* n_params constant indices, or NULL (by shape) */
} wgml_program_train_config;
/* PyTorch's defaults of the optimizer (AdamW: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight
 * decay 1e-2; SGD: lr 1e-3, no momentum, no weight decay), pairing from the program. */
wgml_program_train_config wgml_program_train_defaults(wgml_program_optimizer optimizer);
wgml_program *wgml_program_load_training(wgml_ctx *ctx, const void *data, size_t size, const char *method,
                                         const wgml_program_train_config *cfg);
/* Parameters of a program loaded for training: j in [0, count); the constant and the gradient
 * output it was paired with, and its name (from __et_training_fqn; "" when the program has none). */
int wgml_program_param_count(const wgml_program *p);
wgml_status wgml_program_param_info(const wgml_program *p, int j, int *constant, int *grad_output, const char **name);
/* A new learning rate for the steps of later runs (schedules; a small host write). */
wgml_status wgml_program_set_lr(wgml_program *p, double lr);
/* Optimizer steps taken so far (a readback of the optimizer's state). */
wgml_status wgml_program_steps(wgml_program *p, int64_t *steps);

/* The delegate operator names wgml maps (for listings); *n gets the count. */
const char *const *wgml_program_op_names(size_t *n);

#ifdef __cplusplus
}
#endif
#endif
