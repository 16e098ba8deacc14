// `polykv bench --spec KIND --text FILE ...`: speculative decoding against plain decoding on real
// text, interleaved in one process. The KV is filled once with the text's first DEPTH tokens; every
// repetition then rolls back to DEPTH, runs the next P tokens as the prompt and generates N tokens
// greedily, first without speculation, then with it (same prompt), and checks the two outputs are
// identical (lossless). Reported: decode tok/s of both and their ratio per repetition, acceptance
// rate, tokens per verify step, drafted/accepted counts.
#pragma once
#include <string>

#include "cli/spec_options.h"
#include "model/config.h"

namespace polykv::cli {

struct BenchSpecArgs {
  std::string model_path, text_path, device = "auto", ctk, ctv;
  int threads = 0, depth = 0, n_prompt = 512, n_gen = 128, reps = 1;
  bool json = false;
  SpecCli spec;
  bool batch_invariant = false;  // --batch-invariant (BackendOptions::batch_invariant)
  RopeOverride rope;             // --rope-scaling etc. (the target model)
};

int run_bench_spec(const BenchSpecArgs& a);

}  // namespace polykv::cli
