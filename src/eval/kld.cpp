#include "eval/kld.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "eval/distribution.h"
#include "eval/row_forward.h"

namespace polykv {

double percentile_nearest_rank(std::vector<float>& values, double q) {
  if (values.empty()) return 0.0;
  const size_t rank = size_t(std::ceil(q * double(values.size())));  // 1-based
  const size_t k = std::min(values.size(), std::max<size_t>(rank, 1)) - 1;
  std::nth_element(values.begin(), values.begin() + ptrdiff_t(k), values.end());
  return double(values[k]);
}

KldResult evaluate_kld(Model& model, const TokenRows& rows, const KldOptions& opts) {
  using clock = std::chrono::steady_clock;
  check_ctx(rows.ctx);
  check(rows.n_rows() > 0, "no rows to evaluate");
  check_ids_in_vocab(rows, model.config().n_vocab);
  const int n_vocab = model.config().n_vocab;
  const size_t chunk = size_t(std::max(1, opts.chunk_tokens));
  const size_t n_fed = size_t(rows.ctx) - 1;  // the last token of a row is only a target

  KldResult res;
  res.ctx = rows.ctx;
  res.ref = opts.ref;
  res.test = opts.test;
  RowForward ref_fwd(model, opts.ref, rows.ctx), test_fwd(model, opts.test, rows.ctx);
  std::vector<double> ref_lp, test_lp;
  std::vector<float> tv_values;
  double kld_sum = 0, tv_sum = 0, ref_nll_sum = 0, test_nll_sum = 0;
  int64_t top1_same = 0;

  const auto t_start = clock::now();
  for (int r = 0; r < rows.n_rows(); ++r) {
    const auto t_row = clock::now();
    const std::span<const int32_t> row = rows.row(r);
    ref_fwd.reset();
    test_fwd.reset();
    double row_test_nll = 0;
    for (size_t begin = 0; begin < n_fed; begin += chunk) {
      const size_t n = std::min(chunk, n_fed - begin);
      const float* ref_logits = ref_fwd.forward(row.subspan(begin, n));
      const float* test_logits = test_fwd.forward(row.subspan(begin, n));
      for (size_t i = 0; i < n; ++i) {
        const float* lr = ref_logits + i * size_t(n_vocab);
        const float* lt = test_logits + i * size_t(n_vocab);
        log_softmax(lr, n_vocab, ref_lp);
        log_softmax(lt, n_vocab, test_lp);
        const DistributionDiff d = compare_distributions(ref_lp, test_lp);
        kld_sum += d.kl_nats;
        res.max_kld = std::max(res.max_kld, d.kl_nats);
        tv_sum += d.total_variation;
        tv_values.push_back(float(d.total_variation));
        top1_same += argmax(lr, n_vocab) == argmax(lt, n_vocab);
        const size_t target = size_t(row[begin + i + 1]);
        ref_nll_sum -= ref_lp[target];
        row_test_nll -= test_lp[target];
      }
    }
    test_nll_sum += row_test_nll;
    res.n_positions += int64_t(n_fed);
    ++res.n_rows;
    if (opts.on_row)
      opts.on_row({r, rows.n_rows(), row_test_nll / double(n_fed),
                   std::chrono::duration<double>(clock::now() - t_row).count()});
  }
  const double n = double(res.n_positions);
  res.mean_kld = kld_sum / n;
  res.mean_tv = tv_sum / n;
  res.p95_tv = percentile_nearest_rank(tv_values, 0.95);
  res.top1_agreement = double(top1_same) / n;
  res.ppl = std::exp(test_nll_sum / n);
  res.ref_ppl = std::exp(ref_nll_sum / n);
  res.seconds = std::chrono::duration<double>(clock::now() - t_start).count();
  return res;
}

}  // namespace polykv
