#include "engine/spec/speculative.h"

#include "core/error.h"

namespace polykv {
namespace {

// Draws from `dist` with token `skip` removed, renormalised. The caller guarantees some mass remains
// (p(skip) < 1, else skip could not have been rejected).
int32_t draw_without(Sampler& sampler, const std::vector<Sampler::TokenProb>& dist, int32_t skip) {
  double total = 0.0;
  for (const auto& t : dist)
    if (t.id != skip) total += t.p;
  const double u = sampler.uniform() * total;
  double acc = 0.0;
  int32_t last = -1;
  for (const auto& t : dist) {
    if (t.id == skip) continue;
    acc += t.p;
    last = t.id;
    if (u < acc) return t.id;
  }
  check(last >= 0, "speculative: nothing left to draw after a rejection");
  return last;  // rounding: u >= acc by a hair
}

}  // namespace

VerifyResult verify_drafts(Sampler& sampler, const float* rows, int32_t n_vocab, std::span<const int32_t> drafts,
                           std::vector<int32_t>& history) {
  const size_t n0 = history.size();
  const bool greedy = sampler.params().temperature <= 0.0f;
  VerifyResult r;
  std::vector<Sampler::TokenProb> dist;
  for (size_t i = 0;; ++i) {
    const float* row = rows + i * size_t(n_vocab);
    if (i == drafts.size()) {  // every draft accepted: the bonus token from the last row
      r.next = sampler.sample(row, n_vocab, history);
      break;
    }
    const int32_t d = drafts[i];
    if (greedy) {
      const int32_t t = sampler.sample(row, n_vocab, history);  // no RNG use at temperature 0
      if (t != d) {
        r.next = t;
        break;
      }
    } else {
      sampler.distribution(row, n_vocab, history, dist);
      double p = 0.0;
      for (const auto& c : dist)
        if (c.id == d) p = c.p;
      if (!(sampler.uniform() < p)) {
        r.next = draw_without(sampler, dist, d);
        break;
      }
    }
    ++r.n_accepted;
    history.push_back(d);
  }
  history.resize(n0);
  return r;
}

}  // namespace polykv
