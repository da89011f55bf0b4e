/* A small strict JSON reader (RFC 8259) and string writer, for JSONL training data, adapter
 * configs and safetensors headers. Internal to wgml. */
#ifndef WGML_MODEL_JSON_H
#define WGML_MODEL_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_kind;

/* A parsed value. Strings are decoded to UTF-8 (NUL-terminated; len excludes the NUL; an
 * embedded \u0000 is rejected). Objects keep their members in file order (keys[i], items[i]);
 * a repeated key is an error. src_off is the byte offset of the value in the input (for a
 * string: of its opening quote). */
typedef struct json_value {
    json_kind kind;
    int boolean;
    double number;
    char *str;
    size_t len;
    size_t n;                 /* array elements / object members */
    struct json_value *items; /* [n] */
    char **keys;              /* objects: [n] */
    size_t src_off;
} json_value;

/* Parses exactly one value in text[0..len) (surrounding white space allowed). On error
 * returns non-zero and writes "column C: what" (1-based byte column) into err. Nesting is
 * limited to 64 levels. */
int json_parse(const char *text, size_t len, json_value *out, char *err, size_t errlen);
void json_free(json_value *v);

/* The member of object o named key, or NULL (also when o is not an object). */
const json_value *json_get(const json_value *o, const char *key);

/* Appends s[0..n) as a JSON string literal (quotes and escapes) to *buf (malloc'ed, grown;
 * *len bytes used, NUL-terminated). Returns non-zero when out of memory. */
int json_put_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n);
/* Appends raw text. */
int json_put_raw(char **buf, size_t *len, size_t *cap, const char *s);

#endif
