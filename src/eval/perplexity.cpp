#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "eval/distribution.h"

namespace polykv {

double PplResult::ppl() const { return std::exp(nll_mean()); }

void for_each_scored_position(RowForward& fwd, std::span<const int32_t> row, int chunk_tokens,
                              const std::function<void(int t, const float* logits)>& on_position) {
  check(row.size() >= 2, "a row needs at least 2 tokens");
  const size_t chunk = size_t(std::max(1, chunk_tokens));
  // The last token is only a target: it is never fed, since its logits would predict nothing scored.
  const size_t n_fed = row.size() - 1;
  const size_t n_vocab = size_t(fwd.n_vocab());
  fwd.reset();
  for (size_t begin = 0; begin < n_fed; begin += chunk) {
    const size_t n = std::min(chunk, n_fed - begin);
    const float* logits = fwd.forward(row.subspan(begin, n));
    for (size_t i = 0; i < n; ++i) on_position(int(begin + i), logits + i * n_vocab);
  }
}

std::vector<double> row_next_token_logprobs(RowForward& fwd, std::span<const int32_t> row, int chunk_tokens) {
  std::vector<double> out(row.size() - std::min<size_t>(row.size(), 1));
  const int n_vocab = fwd.n_vocab();
  for_each_scored_position(fwd, row, chunk_tokens, [&](int t, const float* logits) {
    out[size_t(t)] = log_prob_of(logits, n_vocab, row[size_t(t) + 1]);
  });
  return out;
}

PplResult evaluate_perplexity(Model& model, const TokenRows& rows, const KvTypePair& types,
                              const PplOptions& opts) {
  using clock = std::chrono::steady_clock;
  check_ctx(rows.ctx);
  check(rows.n_rows() > 0, "no rows to evaluate");
  check_ids_in_vocab(rows, model.config().n_vocab);
  PplResult res;
  res.ctx = rows.ctx;
  res.types = types;
  const auto t_start = clock::now();
  RowForward fwd(model, types, rows.ctx);
  for (int r = 0; r < rows.n_rows(); ++r) {
    const auto t_row = clock::now();
    const std::vector<double> lp = row_next_token_logprobs(fwd, rows.row(r), opts.chunk_tokens);
    double row_nll = 0;
    for (double v : lp) row_nll -= v;
    res.nll_sum += row_nll;
    res.n_scored += int64_t(lp.size());
    ++res.n_rows;
    if (opts.on_row)
      opts.on_row({r, rows.n_rows(), row_nll / double(lp.size()),
                   std::chrono::duration<double>(clock::now() - t_row).count()});
  }
  res.seconds = std::chrono::duration<double>(clock::now() - t_start).count();
  return res;
}

}  // namespace polykv
