/* The chat formats: the tokenizer's chat template (tokenizer.chat_template) is kept and the
 * format recognised when the tokenizer is built; wgml_chat_apply writes a conversation in it.
 * Two formats are known, ChatML (SmolLM2-Instruct's template with its default system message)
 * and Gemma's turns; there is no general Jinja engine, so another template is refused. */
#include "gpu/bytebuf.h"
#include "model/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

enum { CHAT_NONE = 0, CHAT_CHATML = 1, CHAT_GEMMA = 2 };

/* Which chat format: the template's text names it (ChatML's <|im_start|>, Gemma's
 * <start_of_turn>); without a template, a Gemma architecture means Gemma's. */
static int chat_kind_of(const wgml_gguf *f, const char *tpl) {
    if (tpl) {
        if (strstr(tpl, "<start_of_turn>") && strstr(tpl, "<end_of_turn>")) return CHAT_GEMMA;
        if (strstr(tpl, "<|im_start|>")) return CHAT_CHATML;
        return CHAT_NONE;
    }
    const char *a;
    size_t n;
    if (wgml_gguf_get_string(f, "general.architecture", &a, &n) == WGML_OK && n >= 5 && !memcmp(a, "gemma", 5))
        return CHAT_GEMMA;
    return CHAT_NONE;
}

/* tokenizer.chat_template (optional) kept as a string, and the chat format recognised. */
wgml_status chat_read_template(wgml_tokenizer *t, const wgml_gguf *f, char *err, size_t errlen) {
    const char *s;
    size_t n;
    if (wgml_gguf_get_string(f, "tokenizer.chat_template", &s, &n) == WGML_OK) {
        t->chat_template = malloc(n + 1);
        if (!t->chat_template) return tok_oom(err, errlen);
        memcpy(t->chat_template, s, n);
        t->chat_template[n] = 0;
    }
    t->chat_kind = chat_kind_of(f, t->chat_template);
    return WGML_OK;
}

/* The ChatML template of SmolLM2-Instruct, split around its default system message. */
static const char chatml_head[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '";
static const char chatml_tail[] =
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";


/* Python's str.isspace() on a code point (Jinja's trim is str.strip()). */
static int py_space(uint32_t cp) { return tok_is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

/* content without the leading and trailing white space: *a and *b bound what is left. */
static void trim_span(const char *s, size_t *a, size_t *b) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, n = strlen(s), e = n;
    while (i < n) {
        uint32_t cp;
        int l = tok_utf8_next(u + i, n - i, &cp);
        if (cp == 0xFFFFFFFFu || !py_space(cp)) break;
        i += (size_t)l;
    }
    /* from the end: step back over continuation bytes to each character's start */
    while (e > i) {
        size_t k = e - 1;
        while (k > i && (u[k] & 0xC0) == 0x80 && e - k < 4) k--;
        uint32_t cp;
        int l = tok_utf8_next(u + k, e - k, &cp);
        if ((size_t)l != e - k || cp == 0xFFFFFFFFu || !py_space(cp)) break;
        e = k;
    }
    *a = i;
    *b = e;
}

/* Gemma's chat format (the template of Gemma 3's GGUF): the BOS token's text, then each
 * message as "<start_of_turn>ROLE\nCONTENT<end_of_turn>\n" with CONTENT trimmed of white space
 * and the role "assistant" written "model"; a first message "system" is not a turn of its own
 * but its content and "\n\n" are put in front of the first turn's content. The roles after
 * it must alternate user, other, user, ... (the template raises an error otherwise). With
 * add_generation_prompt, "<start_of_turn>model\n" follows. Gemma 1 and 2's template has no
 * system role: a system message there is an error, as that template raises. */
static wgml_status chat_gemma(const wgml_tokenizer *t, const wgml_chat_msg *msgs, size_t n_msgs,
                              int add_generation_prompt, char **out, size_t *len) {
    const char *tpl = t->chat_template;
    size_t first = 0;
    const char *sys = NULL;
    if (n_msgs && !strcmp(msgs[0].role, "system")) {
        if (tpl && strstr(tpl, "System role not supported"))
            return tok_error(t, WGML_ERR_ARG, "chat: this Gemma template has no system role");
        sys = msgs[0].content;
        first = 1;
    }
    for (size_t i = first; i < n_msgs; i++)
        if (!strcmp(msgs[i].role, "user") != ((i - first) % 2 == 0))
            return tok_error(t, WGML_ERR_ARG,
                             "chat: message %zu has role '%s': Gemma's roles must alternate user/assistant/user/...", i,
                             msgs[i].role);
    bytebuf b = {0};
    bytebuf_put(&b, "", 0);
    if ((!tpl || strstr(tpl, "bos_token")) && t->bos >= 0) bytebuf_str(&b, t->tok[t->bos]);
    for (size_t i = first; i < n_msgs; i++) {
        bytebuf_str(&b, "<start_of_turn>");
        bytebuf_str(&b, strcmp(msgs[i].role, "assistant") ? msgs[i].role : "model");
        bytebuf_str(&b, "\n");
        if (i == first && sys) {
            bytebuf_str(&b, sys);
            bytebuf_str(&b, "\n\n");
        }
        size_t a, e;
        trim_span(msgs[i].content, &a, &e);
        bytebuf_put(&b, msgs[i].content + a, e - a);
        bytebuf_str(&b, "<end_of_turn>\n");
    }
    if (add_generation_prompt) bytebuf_str(&b, "<start_of_turn>model\n");
    if (b.oom) {
        free(b.p);
        return tok_error(t, WGML_ERR_OOM, "chat: out of memory");
    }
    *out = b.p;
    if (len) *len = b.n;
    return WGML_OK;
}

wgml_status wgml_chat_apply(const wgml_tokenizer *t, const wgml_chat_msg *msgs, size_t n_msgs,
                            int add_generation_prompt, char **out, size_t *len) {
    if (!t || !out || (!msgs && n_msgs)) return t ? tok_error(t, WGML_ERR_ARG, "chat: NULL argument") : WGML_ERR_ARG;
    *out = NULL;
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return tok_error(t, WGML_ERR_ARG, "chat: message %zu has a NULL role or content", i);
    if (t->chat_kind == CHAT_GEMMA) return chat_gemma(t, msgs, n_msgs, add_generation_prompt, out, len);
    if (!t->chat_template) return tok_error(t, WGML_ERR_UNSUPPORTED, "chat: the model has no tokenizer.chat_template");
    /* the template with "\n" escapes written as newlines */
    bytebuf tpl = {0};
    for (const char *p = t->chat_template; *p; p++) {
        if (p[0] == '\\' && p[1] == 'n') {
            bytebuf_put(&tpl, "\n", 1);
            p++;
        } else {
            bytebuf_put(&tpl, p, 1);
        }
    }
    if (tpl.oom) return tok_error(t, WGML_ERR_OOM, "chat: out of memory");
    size_t hl = sizeof chatml_head - 1, tl = sizeof chatml_tail - 1;
    if (tpl.n < hl + tl || memcmp(tpl.p, chatml_head, hl) || memcmp(tpl.p + tpl.n - tl, chatml_tail, tl) ||
        memchr(tpl.p + hl, '\'', tpl.n - hl - tl)) {
        free(tpl.p);
        return tok_error(t, WGML_ERR_UNSUPPORTED,
                         "chat: the model's chat template is not the ChatML template nor Gemma's, "
                         "the two this implementation knows (no general Jinja engine)");
    }
    const char *sys = tpl.p + hl;
    size_t sys_len = tpl.n - hl - tl;
    bytebuf b = {0};
    bytebuf_put(&b, "", 0);
    for (size_t i = 0; i < n_msgs; i++) {
        if (i == 0 && strcmp(msgs[0].role, "system") != 0) bytebuf_put(&b, sys, sys_len);
        bytebuf_str(&b, "<|im_start|>");
        bytebuf_str(&b, msgs[i].role);
        bytebuf_str(&b, "\n");
        bytebuf_str(&b, msgs[i].content);
        bytebuf_str(&b, "<|im_end|>\n");
    }
    if (add_generation_prompt) bytebuf_str(&b, "<|im_start|>assistant\n");
    free(tpl.p);
    if (b.oom) {
        free(b.p);
        return tok_error(t, WGML_ERR_OOM, "chat: out of memory");
    }
    *out = b.p;
    if (len) *len = b.n;
    return WGML_OK;
}
