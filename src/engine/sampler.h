// Next-token sampling from a row of logits.
//
// Chain (llama.cpp's default order), each stage working on the candidates the previous one kept:
//   1. repetition penalty  over the distinct tokens among the last repeat_last_n of `history`
//                          (CTRL/llama.cpp convention: logit > 0 -> logit / penalty, else logit * penalty)
//   2. top-k               keep the k highest logits (k <= 0 or k >= n_vocab: off)
//   3. top-p               keep the shortest prefix, by descending probability, whose mass >= top_p
//                          (probabilities are softmax at temperature 1 over the top-k set; top_p >= 1: off)
//   4. min-p               keep tokens with p >= min_p * p_max (min_p <= 0: off)
//   5. temperature         p_i ∝ exp(logit_i / temperature)
//   6. draw                one token from that distribution with the seeded RNG
// temperature <= 0 is greedy: the highest penalized logit (lowest id on ties); truncation stages are
// skipped because they cannot change the argmax, and the RNG is not advanced.
//
// Non-finite logits: NaN and -inf are ignored (the token can never be drawn). If any logit is +inf,
// the distribution is the limit of softmax: uniform over the +inf tokens (greedy: the lowest such id).
// If no logit is usable (all NaN/-inf), sample() throws polykv::Error.
//
// Determinism: the RNG is std::mt19937_64(seed) and uniforms are built from its raw output (not via
// std::uniform_real_distribution), so the same seed and inputs give the same tokens on every platform.
//
// Cost per call: O(n_vocab) for the copy and penalties, plus O(n_vocab) nth_element when top-k is on.
// With top-k off, only the min-p survivors are sorted when min-p is on (the top-p and min-p sets are
// both prefixes of the sorted order, so filtering by min-p first gives the same result); a full sort
// happens only when top-k and min-p are both off and top-p is on.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace polykv {

struct SamplingParams {
  float temperature = 0.8f;   // <= 0: greedy
  int top_k = 40;             // <= 0: off
  float top_p = 0.95f;        // >= 1: off
  float min_p = 0.05f;        // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;     // window of history penalized; 0: off, < 0: whole history
  uint64_t seed = 0x5eed;     // fixed default: runs are reproducible unless a seed is given
};

class Sampler {
 public:
  explicit Sampler(SamplingParams params);

  // Picks the next token id in [0, n_vocab). `history` is the prompt plus generated tokens so far,
  // oldest first; ids outside [0, n_vocab) in it are ignored. Throws Error on n_vocab <= 0 or when
  // no logit is usable.
  int32_t sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };

  double uniform01();  // [0, 1), 53 random bits
  void apply_penalty(std::span<const int32_t> history, int32_t n_vocab);
  int32_t draw_uniform_among_inf();

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cands_;  // reused between calls: no allocation per token at steady state
  std::vector<int32_t> window_;   // scratch for the distinct penalized tokens
  std::vector<double> weights_;   // scratch for the final distribution
};

}  // namespace polykv
