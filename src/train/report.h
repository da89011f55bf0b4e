/* Fine-tuning run reports (host side): the learning-rate schedule, loss.csv and the loss.svg
 * plot. Internal to wgml. */
#ifndef WGML_TRAIN_REPORT_H
#define WGML_TRAIN_REPORT_H

#include "wgml.h"

/* Linear warmup over `warmup` steps to lr, then cosine decay to min_lr at step total - 1.
 * step is 0-based. */
double lr_schedule(int64_t step, int64_t total, int64_t warmup, double lr, double min_lr);

/* One row of the run's history: a training step (loss > 0 or NaN), optionally with a
 * held-out perplexity (eval_ppl > 0) measured after it; step 0 with only eval_ppl is the
 * measurement before training. */
typedef struct report_row {
    int64_t step;
    double loss, lr, tokens_per_s, eval_ppl; /* NaN / 0 when absent */
} report_row;

/* loss.csv: "step,loss,lr,tokens_per_s,eval_ppl" then one line per row (empty fields when
 * absent). Written atomically. */
wgml_status report_write_csv(const char *path, const report_row *rows, size_t n, char *err, size_t errlen);
/* Reads back a loss.csv written by report_write_csv (rows with step <= max_step). */
wgml_status report_read_csv(const char *path, int64_t max_step, report_row **rows, size_t *n, char *err, size_t errlen);
/* loss.svg: training loss (a line) and held-out loss ln(ppl) (points) against the step, with
 * axes, ticks, labels and a legend. Written atomically. */
wgml_status report_write_svg(const char *path, const char *title, const report_row *rows, size_t n, char *err, size_t errlen);

#endif
