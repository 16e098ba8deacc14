// Verification of drafted tokens: the pure part of speculative decoding, shared by generate()
// (engine/generate.cpp) and the Engine (engine/engine.cpp).
//
// The target has computed logits for the rows [last context token, d1, ..., dk] (row i predicts the
// token after d_i; row 0 the token after the context). verify_drafts() walks the rows in order:
//  - greedy (temperature 0): accept d_{i+1} while the target's own choice on row i equals it; the
//    first disagreement is replaced by the target's choice. Tokens are exactly those of one-token
//    greedy decoding, the repetition penalty included: row i sees history + d_1..d_i.
//  - sampling: drafts are deterministic (q one-hot at d, see drafter.h), so the speculative-sampling
//    rule min(1, p/q) reduces to: accept d_{i+1} with probability p_i(d_{i+1}), p_i the target's
//    distribution after the whole sampling chain (Sampler::distribution); on rejection draw from p_i
//    with d_{i+1} removed, renormalised (= norm(max(0, p - q)) for one-hot q). If all k are accepted,
//    the bonus token is drawn from p_k. The output then follows the target's distribution exactly.
// Randomness comes from the Sampler's own RNG, so a seed reproduces a run (but not the token stream
// of a run without speculation, which draws a different number of uniforms).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"

namespace polykv {

struct VerifyResult {
  int n_accepted = 0;  // drafts accepted, 0..k
  int32_t next = -1;   // the target's token after them (the correction or the bonus)
};

// rows: [k + 1][n_vocab] logits for [last, d_1..d_k]; history: the sequence so far (prompt and
// accepted output, ending with `last`). `history` is used as scratch: on return it is unchanged.
VerifyResult verify_drafts(Sampler& sampler, const float* rows, int32_t n_vocab, std::span<const int32_t> drafts,
                           std::vector<int32_t>& history);

// Running totals of a speculative run (bench, metrics).
struct SpecStats {
  int64_t steps = 0;     // verify steps (target forwards during decode with a drafter)
  int64_t drafted = 0;   // tokens proposed
  int64_t accepted = 0;  // of which accepted
  int64_t emitted = 0;   // tokens the steps produced (accepted + one each)
  double acceptance_rate() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  double tokens_per_step() const { return steps ? double(emitted) / double(steps) : 0.0; }
};

}  // namespace polykv
