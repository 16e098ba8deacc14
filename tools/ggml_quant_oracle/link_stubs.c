// Definitions ggml-quants.c needs from the rest of ggml, so it links on its own (for make_refs.sh).
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include "ggml-impl.h"
float ggml_table_f32_f16[1 << 16];
__attribute__((constructor)) static void init_table(void) {
  for (int i = 0; i < (1 << 16); ++i) ggml_table_f32_f16[i] = ggml_compute_fp16_to_fp32((ggml_fp16_t)i);
}
void ggml_abort(const char * file, int line, const char * fmt, ...) { fprintf(stderr, "abort %s:%d\n", file, line); abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { abort(); }
const char * ggml_type_name(enum ggml_type type) { return "?"; }
size_t ggml_type_size(enum ggml_type type) { abort(); }
