// `polykv bench --verify-k 1,2,3,4,8`: the cost of a speculative verify step. A verify step is one
// sequence, k tokens, all k rows of logits (Model::forward with all_logits), at a fixed depth; its
// cost is compared with the one-token decode step (k = 1) of the same depth. Repetitions are
// interleaved (rep 0: k = 1, 2, ...; rep 1: k = 1, 2, ...) so that a load change on the machine hits
// every k alike, and each k's ratio is taken within one repetition (t_k / t_1 of that repetition).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_sequence.h"
#include "model/model.h"

namespace polykv::cli {

struct VerifyBenchOptions {
  std::vector<int> ks;  // step widths, each 1..64; the ratios are to the first (use 1 first)
  int steps = 8;        // timed steps per (k, repetition); the step time is their mean
  int reps = 3;         // interleaved repetitions
  int depth = 0;        // tokens in the KV before every step (already there on entry)
};

// Parses "1,2,3,4,8" (each 1..64, no duplicates); throws Error otherwise.
std::vector<int> parse_verify_ks(const std::string& text);

// Runs the steps on kv (holding `depth` tokens; rolled back to it after every step by `rollback`).
// Returns {"verify": [{"k", "step_ms", "step_ms_min", "step_ms_max", "step_ms_reps", "ratio",
// "ratio_min", "ratio_max", "ratio_reps"}...], "verify_steps", "verify_reps"}: step_ms is the median
// over repetitions, ratio the median of the per-repetition ratios, with their min / max.
nlohmann::json bench_verify(Model& model, KvSequence& kv, const std::function<void(int)>& rollback,
                            const VerifyBenchOptions& o, std::mt19937& rng);

// The markdown table of bench_verify's result.
void print_verify_table(const nlohmann::json& r, const std::string& label);

}  // namespace polykv::cli
