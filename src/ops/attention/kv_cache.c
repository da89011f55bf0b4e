/* The KV cache's forms and the WGSL accessors of its bindings: see kv_cache.h. */
#include "ops/attention/kv_cache.h"

#include <stdio.h>
#include <string.h>

bool kv_cache_f16(const wgml_tensor *t) { return t && t->dtype == WGML_U32; }

bool kv_cache_alike(const wgml_tensor *a, const wgml_tensor *b) {
    return a->dtype == b->dtype && a->rank == b->rank && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank);
}

int64_t kv_cache_dim(const wgml_tensor *t) { return t->shape[t->rank - 1] * (kv_cache_f16(t) ? 2 : 1); }

wgml_status check_kv_cache(wgml_ctx *ctx, const wgml_graph *g, const char *op, const char *arg, const wgml_tensor *t) {
    wgml_status s;
    if ((s = check_tensor(ctx, op, arg, t))) return s;
    if (t->dtype != WGML_F32 && t->dtype != WGML_U32)
        return wgml_set_error(ctx, WGML_ERR_DTYPE, "%s: %s must be f32 (a cache [B, Hkv, Smax, D]) or u32 (its f16 form, "
                              "[B, Hkv, Smax, D / 2]), got %s %s", op, arg, wgml_dtype_name(t->dtype), tshape(t));
    if ((s = check_rank(ctx, op, arg, t, 4, 4))) return s;
    return check_graph(ctx, g, op, arg, t);
}

/* Per form and width: the binding's element type, the read of unit i as a vec4 and the write of
 * x's first w components (%1$s: the binding's name). */
typedef struct kv_form {
    const char *type, *get, *put;
} kv_form;

static const kv_form f32_forms[5] = {
    [1] = {"f32", "vec4<f32>(%s[i], 0.0, 0.0, 0.0)", "%s[i] = x.x;"},
    [2] = {"vec2<f32>", "vec4<f32>(%s[i], 0.0, 0.0)", "%s[i] = x.xy;"},
    [4] = {"vec4<f32>", "%s[i]", "%s[i] = x;"},
};
static const kv_form f16_forms[5] = {
    [2] = {"u32", "vec4<f32>(unpack2x16float(%s[i]), 0.0, 0.0)", "%s[i] = pack2x16float(x.xy);"},
    [4] = {"vec2<u32>", "vec4<f32>(unpack2x16float(%s[i].x), unpack2x16float(%s[i].y))",
           "%s[i] = vec2<u32>(pack2x16float(x.xy), pack2x16float(x.zw));"},
};

int kv_cache_wgsl(char *buf, size_t size, int len, const char *name, bool f16, bool write, int w) {
    if (w < 1 || w > 4 || w == 3 || len < 0 || (size_t)len >= size) return -1;
    const kv_form *f = &(f16 ? f16_forms : f32_forms)[w];
    if (!f->type) return -1;
    char get[160], put[160];
    snprintf(get, sizeof get, f->get, name, name);
    snprintf(put, sizeof put, f->put, name);
    int n = snprintf(buf + len, size - (size_t)len,
                     "//!bindings %s(%s: array<%s>)\nfn %s_get(i: u32) -> vec4<f32> { return %s; }\n", write ? "write" : "read",
                     name, f->type, name, get);
    if (n < 0 || (size_t)n >= size - (size_t)len) return -1;
    len += n;
    if (!write) return len;
    n = snprintf(buf + len, size - (size_t)len, "fn %s_put(i: u32, x: vec4<f32>) { %s }\n", name, put);
    if (n < 0 || (size_t)n >= size - (size_t)len) return -1;
    return len + n;
}
