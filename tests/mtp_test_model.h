// A test model with an MTP (nextn) block: the embedded model's file plus a random block N = n_layer
// (blk.N.nextn.{eh_proj, enorm, hnorm, shared_head_norm} and an attention + FFN block blk.N.*, f16
// matrices, f32 norms), block_count n_layer + 1 and llama.nextn_predict_layers = 1 -- the layout
// tools/train_draft.py writes and llama.cpp uses for Qwen3.5 / GLM-4.5.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv::test {

// The files mtp_test_model wrote in this process, removed when it exits (each is a ~35 MB copy of the
// embedded model; they were left behind in /tmp before 2026-12-04d, a hundred after a few test runs).
struct MtpTestModelFiles {
  std::vector<std::string> paths;
  ~MtpTestModelFiles() {
    for (const std::string& p : paths) std::remove(p.c_str());
  }
};
inline MtpTestModelFiles& mtp_test_model_files() {
  static MtpTestModelFiles files;
  return files;
}

// Writes the model to a temporary file (once per process and seed) and returns its path.
// weight_std: the random matrices' N(0, std); norms are 1 + N(0, 0.2) so that enorm, hnorm and
// shared_head_norm differ (a test then sees which one went where).
inline std::string mtp_test_model(uint32_t seed = 7, float weight_std = 0.05f) {
  const std::string path = testing::TempDir() + "polykv_mtp_test_" + std::to_string(getpid()) + "_" +
                           std::to_string(seed) + ".gguf";
  if (access(path.c_str(), R_OK) == 0) return path;
  const GgufFile base = GgufFile::open(embedded_model());
  GgufWriter w;
  for (const auto& [k, v] : base.metadata()) w.set(k, v);
  const uint32_t n_layer = base.get_u32("llama.block_count");
  w.set_u32("llama.block_count", n_layer + 1);
  w.set_u32("llama.nextn_predict_layers", 1);
  for (const GgufTensor& t : base.tensors()) w.add_tensor(t.name, t.type, t.ne, t.data);
  const std::string p = "blk." + std::to_string(n_layer) + ".";
  const int64_t E = base.get_u32("llama.embedding_length");
  std::mt19937 rng(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> ne, bool norm) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::normal_distribution<float> dist(norm ? 1.0f : 0.0f, norm ? 0.2f : weight_std);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(rng);
    const DType type = norm ? DType::F32 : DType::F16;
    w.add_tensor(name, type, ne, [v, type](uint8_t* dst, size_t) { quantize_row_ref(type, v.data(), dst, int64_t(v.size())); });
  };
  add(p + "nextn.eh_proj.weight", {2 * E, E}, false);
  add(p + "nextn.enorm.weight", {E}, true);
  add(p + "nextn.hnorm.weight", {E}, true);
  add(p + "nextn.shared_head_norm.weight", {E}, true);
  for (const GgufTensor& t : base.tensors()) {  // the block: blk.0's names and shapes
    if (t.name.rfind("blk.0.", 0) != 0) continue;
    add(p + t.name.substr(6), t.ne, t.ne.size() == 1);
  }
  w.write(path);
  mtp_test_model_files().paths.push_back(path);
  return path;
}

}  // namespace polykv::test
