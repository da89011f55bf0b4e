/* The list of operators a program needs and the registry lacks (program.c's check_ops): each
 * distinct name once, compared whole, and a message that lists them within a fixed size. */
#include "program/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int prog_missing_add(prog_missing *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->names[i], name)) return 0;
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 8;
        char **grown = realloc(m->names, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        m->names = grown, m->cap = cap;
    }
    size_t len = strlen(name);
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, name, len + 1);
    m->names[m->n++] = copy;
    return 0;
}

void prog_missing_text(const prog_missing *m, char *buf, size_t n) {
    /* Room kept after every name but the last for the tail ", ... (K more)" (at most 24
     * characters and the NUL with K an int), so the list always ends on a whole name. */
    const size_t tail = 32;
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < m->n; i++) {
        const char *sep = i ? ", " : "";
        size_t need = strlen(sep) + strlen(m->names[i]), keep = i + 1 < m->n ? tail : 0;
        if (len + need + keep < n) {
            len += (size_t)snprintf(buf + len, n - len, "%s%s", sep, m->names[i]);
            continue;
        }
        snprintf(buf + len, n - len, "%s... (%d more)", sep, m->n - i);
        return;
    }
}

void prog_missing_free(prog_missing *m) {
    for (int i = 0; i < m->n; i++) free(m->names[i]);
    free(m->names);
    m->names = NULL, m->n = m->cap = 0;
}
