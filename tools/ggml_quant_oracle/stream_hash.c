// Prints the FNV-1a hash of ggml's quantize_row_<type>_ref over the block stream of
// tests/kquant_stream.h (see make_refs.sh). usage: stream_hash TYPE SEED N_BLOCKS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml-quants.h"
#include "kquant_stream.h"
int main(int argc, char** argv) {
  const char* t = argv[1];
  const uint64_t seed = strtoull(argv[2], NULL, 0), n_blocks = strtoull(argv[3], NULL, 0);
  float x[256];
  unsigned char out[512];
  size_t bytes = 0;
  uint64_t h = kKqStreamHashStart;
  for (uint64_t b = 0; b < n_blocks; ++b) {
    kq_stream_block(seed, b, x);
    if (!strcmp(t, "q2_K")) { quantize_row_q2_K_ref(x, (void*)out, 256); bytes = 84; }
    else if (!strcmp(t, "q3_K")) { quantize_row_q3_K_ref(x, (void*)out, 256); bytes = 110; }
    else if (!strcmp(t, "q4_K")) { quantize_row_q4_K_ref(x, (void*)out, 256); bytes = 144; }
    else if (!strcmp(t, "q5_K")) { quantize_row_q5_K_ref(x, (void*)out, 256); bytes = 176; }
    else if (!strcmp(t, "q6_K")) { quantize_row_q6_K_ref(x, (void*)out, 256); bytes = 210; }
    else { fprintf(stderr, "type?\n"); return 1; }
    h = kq_stream_hash(out, bytes, h);
  }
  printf("%s 0x%016llxull\n", t, (unsigned long long)h);
  return 0;
}
