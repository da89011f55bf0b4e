/* DIR/NAME as a new string (malloc; NULL when out of memory): the files of a run directory
 * (checkpoints, adapters) are named this way. */
#ifndef WGML_IO_PATH_H
#define WGML_IO_PATH_H

#include <stdlib.h>
#include <string.h>

static inline char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

#endif
