// Model-level GPU tests against the CPU backend: teacher-forced decode, the CPU's model the reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/sequence_kv.h"
#include "model/model.h"

namespace polykv::cuda_test {

// `steps` single-token steps on both models from token `next`, each step fed the CPU's greedy token (so the GPU sees
// the CPU's inputs every step), the two logit rows compared into r. tag: progress on stderr for the first 3 GPU steps
// (unbuffered: a hang on the device shows where it stopped), none when empty.
inline void teacher_forced_decode(Model& cpu, Model& gpu, KvSequence& kv_cpu, KvSequence& kv_gpu, int32_t next,
                                  int steps, RowCompare& r, const std::string& tag = "") {
  const int n_vocab = cpu.config().n_vocab;
  std::vector<float> c1(static_cast<size_t>(n_vocab)), g1(static_cast<size_t>(n_vocab));
  for (int step = 0; step < steps; ++step) {
    std::fill(g1.begin(), g1.end(), NAN);
    cpu.forward(std::span(&next, 1), kv_cpu, c1.data(), false);
    if (!tag.empty() && step < 3) std::fprintf(stderr, "[%s] gpu decode step %d\n", tag.c_str(), step);
    gpu.forward(std::span(&next, 1), kv_gpu, g1.data(), false);
    compare_rows(c1, g1, n_vocab, r);
    next = int32_t(std::max_element(c1.begin(), c1.end()) - c1.begin());
  }
}

}  // namespace polykv::cuda_test
