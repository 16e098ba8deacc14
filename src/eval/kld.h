// How far a KV cache configuration moves the model's next-token distributions from a reference
// configuration (llama.cpp's --kl-divergence idea, computed in one run with two caches).
//
// Each row is run twice from position 0, once with the reference KV types and once with the test
// types, chunk by chunk in lockstep, so only one chunk's logits of each run are held at a time. At
// every scored position t = 0 .. ctx-2 (as in perplexity.h) the two full distributions are compared:
//   KL(ref || test) in nats, total variation distance 0.5 * sum |p_ref - p_test|, and whether the
//   argmax (top-1) tokens agree; -log p(ids[t+1]) of each run gives ppl and ref_ppl.
// Only per-position scalars are kept (the TV values, for the percentile).
#pragma once
#include <cstdint>
#include <functional>

#include "eval/kv_types.h"
#include "eval/perplexity.h"
#include "eval/token_rows.h"
#include "model/model.h"

namespace polykv {

struct KldOptions {
  KvTypePair ref;   // reference KV types (default f16/f16)
  KvTypePair test;  // KV types under test
  int chunk_tokens = 512;
  std::function<void(const RowProgress&)> on_row;  // row_nll_mean is the test run's
};

struct KldResult {
  int64_t n_positions = 0;
  int n_rows = 0;
  int ctx = 0;
  KvTypePair ref, test;
  double mean_kld = 0;         // nats
  double max_kld = 0;          // nats
  double mean_tv = 0;
  double p95_tv = 0;           // nearest-rank 95th percentile of the per-position TV
  double top1_agreement = 0;   // fraction of positions whose argmax tokens are equal
  double ppl = 0;              // test run
  double ref_ppl = 0;          // reference run
  double seconds = 0;
};

KldResult evaluate_kld(Model& model, const TokenRows& rows, const KldOptions& opts);

// Nearest-rank percentile (q in (0, 1]) of the values; 0 for none. Reorders `values`.
double percentile_nearest_rank(std::vector<float>& values, double q);

}  // namespace polykv
