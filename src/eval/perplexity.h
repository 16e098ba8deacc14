// Perplexity over rows of tokens.
//
// Convention (the one of the fixtures' ppl_dev.ref.json): each row of ctx tokens is evaluated on
// its own from position 0 with a fresh KV cache; every position t = 0 .. ctx-2 is scored with
// nll_t = -log p(ids[t+1] | ids[0..t]) (natural log, log-softmax in double); over all rows,
// nll_mean = sum of nll_t / number of scored positions and ppl = exp(nll_mean).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "eval/kv_types.h"
#include "eval/row_forward.h"
#include "eval/token_rows.h"
#include "model/model.h"

namespace polykv {

struct RowProgress {
  int row = 0;             // 0-based index of the row just finished
  int n_rows = 0;
  double row_nll_mean = 0;  // mean nll (nats) of that row's scored positions
  double row_seconds = 0;
};

struct PplOptions {
  int chunk_tokens = 512;  // tokens per forward pass (bounds the logits buffer: chunk * n_vocab floats)
  std::function<void(const RowProgress&)> on_row;  // optional, after each row
};

struct PplResult {
  double nll_sum = 0;        // nats, over all scored positions
  int64_t n_scored = 0;      // positions scored: n_rows * (ctx - 1)
  int n_rows = 0;
  int ctx = 0;
  KvTypePair types;
  double seconds = 0;        // wall time of the evaluation (model loading excluded)

  double nll_mean() const { return n_scored > 0 ? nll_sum / double(n_scored) : 0.0; }
  double ppl() const;
};

// Feeds `row` through `fwd` (reset first) in chunks and calls on_position(t, logits_t) for every
// scored position t = 0 .. row.size()-2, where logits_t predicts row[t+1].
void for_each_scored_position(RowForward& fwd, std::span<const int32_t> row, int chunk_tokens,
                              const std::function<void(int t, const float* logits)>& on_position);

// log p(row[t+1] | row[0..t]) for t = 0 .. row.size()-2 (natural log).
std::vector<double> row_next_token_logprobs(RowForward& fwd, std::span<const int32_t> row, int chunk_tokens);

PplResult evaluate_perplexity(Model& model, const TokenRows& rows, const KvTypePair& types,
                              const PplOptions& opts = {});

}  // namespace polykv
