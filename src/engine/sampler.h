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
// temperature == 0 is greedy: the highest penalized logit (lowest id on ties); truncation stages are
// skipped because they cannot change the argmax, and the RNG is not advanced.
// Every truncation stage keeps at least the most probable candidate, so the draw never sees an empty set.
//
// Parameters are checked by validate() (ranges below); the Sampler constructor calls it, so invalid
// parameters throw polykv::Error before any token is drawn. Front ends (CLI flags, HTTP request bodies)
// call validate() themselves to report a usage error / 400 before loading anything.
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

// Valid ranges (validate()); NaN and infinities are rejected everywhere.
struct SamplingParams {
  float temperature = 0.8f;     // >= 0; 0: greedy. No upper bound (large: uniform over the kept set)
  int top_k = 40;               // >= 0; 0: off
  float top_p = 0.95f;          // [0, 1]; 1: off; 0 keeps only the most probable token (OpenAI accepts 0)
  float min_p = 0.05f;          // [0, 1]; 0: off; 1 keeps only the tokens as probable as the best
  float repeat_penalty = 1.0f;  // > 0; 1: off; < 1 favours repetition (allowed, as in llama.cpp)
  int repeat_last_n = 64;       // window of history penalized; >= -1; 0: off, -1: whole history
  // Any value is valid. The default is fixed (documented): a run is reproducible unless a seed is
  // given. Front ends that offer a random seed draw it with random_seed() and report it.
  uint64_t seed = 0x5eed;
};

// Throws polykv::Error naming the first parameter outside its range above, e.g.
// "top_p must be in [0, 1], got 1.5". Names are the JSON field names (temperature, top_k, top_p,
// min_p, repeat_penalty, repeat_last_n) so the server can return the message as is.
void validate(const SamplingParams& params);

// A seed from std::random_device, below 2^53 so that it survives a round trip through JSON numbers
// (doubles) and a signed 64-bit command-line option.
uint64_t random_seed();

class Sampler {
 public:
  explicit Sampler(SamplingParams params);  // throws Error unless validate(params) passes

  // Picks the next token id in [0, n_vocab). `history` is the prompt plus generated tokens so far,
  // oldest first; ids outside [0, n_vocab) in it are ignored. Throws Error on n_vocab <= 0 or when
  // no logit is usable.
  int32_t sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history);

  // The distribution sample() would draw from (stages 1-5, no draw, the RNG untouched): `out` gets
  // the candidate ids with their probabilities (> 0 ... rounding aside, summing to 1), in the order
  // sample() walks them. Greedy: one entry, the argmax, with probability 1. Same errors as sample().
  // Used by speculative decoding (engine/spec/speculative.h) to accept a drafted token with p(d).
  struct TokenProb {
    int32_t id;
    double p;
  };
  void distribution(const float* logits, int32_t n_vocab, std::span<const int32_t> history,
                    std::vector<TokenProb>& out);

  // A uniform number in [0, 1) from the sampler's RNG (the stream sample() draws from).
  double uniform() { return uniform01(); }

  const SamplingParams& params() const { return params_; }

  // Whether sample(logits, n, history) is argmax_first(logits, n) (core/argmax_ref.h; -1 throws): greedy
  // (temperature 0) with no repetition penalty over this history. The engine then asks the backend for
  // the argmax instead of the logit row (Model::BatchSeq::argmax).
  bool plain_argmax(std::span<const int32_t> history) const;
  // plain_argmax for every history (no repetition penalty at all): what a pipelined greedy loop needs,
  // which issues the next step before it knows the history it will have.
  bool always_plain_argmax() const;

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };
  // Stages 1-5 shared by sample() and distribution(). Returns the greedy id (>= 0) when the result
  // is one token without randomness (temperature 0); else -1 and either inf_ is true (uniform over
  // cands_, the +inf tokens) or weights_[i] (unnormalised, sum `total`) belong to cands_[i].
  int32_t prepare(const float* logits, int32_t n_vocab, std::span<const int32_t> history, double& total);
  bool inf_ = false;

  double uniform01();  // [0, 1), 53 random bits
  void apply_penalty(std::span<const int32_t> history, int32_t n_vocab);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cands_;  // reused between calls: no allocation per token at steady state
  std::vector<int32_t> window_;   // scratch for the distinct penalized tokens
  std::vector<double> weights_;   // scratch for the final distribution
};

}  // namespace polykv
