// Command-line front to ggml's quantize_row_*_ref (linked from a llama.cpp checkout; see make_refs.sh).
// usage: oracle TYPE in.f32 out.bin  -- quantizes the whole file as one row
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml-quants.h"
int main(int argc, char** argv) {
  FILE* f = fopen(argv[2], "rb"); fseek(f, 0, SEEK_END); long nb = ftell(f); fseek(f, 0, SEEK_SET);
  int64_t n = nb / 4; float* x = malloc(nb); fread(x, 4, n, f); fclose(f);
  char* out = calloc(n * 4 + 1024, 1); size_t bytes = 0; const char* t = argv[1];
  if (!strcmp(t, "q4_0")) { quantize_row_q4_0_ref(x, (void*)out, n); bytes = n / 32 * 18; }
  else if (!strcmp(t, "q4_1")) { quantize_row_q4_1_ref(x, (void*)out, n); bytes = n / 32 * 20; }
  else if (!strcmp(t, "q5_0")) { quantize_row_q5_0_ref(x, (void*)out, n); bytes = n / 32 * 22; }
  else if (!strcmp(t, "q5_1")) { quantize_row_q5_1_ref(x, (void*)out, n); bytes = n / 32 * 24; }
  else if (!strcmp(t, "q8_0")) { quantize_row_q8_0_ref(x, (void*)out, n); bytes = n / 32 * 34; }
  else if (!strcmp(t, "q8_K")) { quantize_row_q8_K_ref(x, (void*)out, n); bytes = n / 256 * 292; }
  else if (!strcmp(t, "q2_K")) { quantize_row_q2_K_ref(x, (void*)out, n); bytes = n / 256 * 84; }
  else if (!strcmp(t, "q3_K")) { quantize_row_q3_K_ref(x, (void*)out, n); bytes = n / 256 * 110; }
  else if (!strcmp(t, "q4_K")) { quantize_row_q4_K_ref(x, (void*)out, n); bytes = n / 256 * 144; }
  else if (!strcmp(t, "q5_K")) { quantize_row_q5_K_ref(x, (void*)out, n); bytes = n / 256 * 176; }
  else if (!strcmp(t, "q6_K")) { quantize_row_q6_K_ref(x, (void*)out, n); bytes = n / 256 * 210; }
  else { fprintf(stderr, "type?\n"); return 1; }
  FILE* o = fopen(argv[3], "wb"); fwrite(out, 1, bytes, o); fclose(o); return 0;
}
