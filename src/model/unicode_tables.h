/* Unicode general-category ranges (generated into unicode_tables.c). */
#ifndef WGML_MODEL_UNICODE_TABLES_H
#define WGML_MODEL_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

extern const uint32_t wgml_uni_letter[][2];
extern const size_t wgml_uni_letter_count;
extern const uint32_t wgml_uni_number[][2];
extern const size_t wgml_uni_number_count;

#endif
