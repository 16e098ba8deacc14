// Weight mixes (quant/weight_mix.h): llama.cpp's q4_K_M / q5_K_M per-matrix choices on name lists shaped like real
// models (Llama 3.1 8B's 33 q6_K matrices, tied embeddings, 8 experts, a hybrid's attention-V count, the fallback of
// rows that do not fit), then `quantize` and `synth` writing them and the CPU running the result.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "quant/quantize_model.h"
#include "quant/weight_mix.h"
#include "test_util.h"

namespace polykv {
namespace {

std::string temp_path(const std::string& tag) {
  const std::string name = "polykv_mix_" + tag + "_" + std::to_string(getpid()) + ".gguf";
  return (std::filesystem::temp_directory_path() / name).string();
}

// A dense Llama's matrices in the converter's order: token_embd, per block q, k, v, o, gate, up, down, then output.
std::vector<std::string> llama_names(int n_layer, bool tied) {
  std::vector<std::string> n = {"token_embd.weight"};
  for (int i = 0; i < n_layer; ++i)
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      n.push_back("blk." + std::to_string(i) + "." + m + ".weight");
  if (!tied) n.push_back("output.weight");
  return n;
}

TEST(WeightMix, NamesParseCaseInsensitivelyAndPlainTypesAreNotMixes) {
  EXPECT_EQ(weight_mix_from_name("q4_K_M"), WeightMix::Q4_K_M);
  EXPECT_EQ(weight_mix_from_name("Q4_K_M"), WeightMix::Q4_K_M);
  EXPECT_EQ(weight_mix_from_name("q5_k_m"), WeightMix::Q5_K_M);
  for (const char* other : {"q4_K", "q4_K_S", "q6_K_M", "", "q4_K_M ", "mxfp4"})
    EXPECT_FALSE(weight_mix_from_name(other).has_value()) << other;
  EXPECT_EQ(weight_mix_base(WeightMix::Q4_K_M), DType::Q4_K);
  EXPECT_EQ(weight_mix_base(WeightMix::Q5_K_M), DType::Q5_K);
  EXPECT_EQ(weight_mix_file_type(WeightMix::Q4_K_M), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(weight_mix_file_type(WeightMix::Q5_K_M), 17u);
}

TEST(WeightMix, Llama31_8BGetsThirtyThreeQ6KMatricesInTheKnownLayers) {
  // llama-quantize's Q4_K_M of Llama 3.1 8B: 193 q4_K and 33 q6_K matrices (output, and attn_v / ffn_down in 16 of
  // the 32 layers: 0-3, 28-31 and 6, 9, ..., 27).
  const auto names = llama_names(32, /*tied=*/false);
  const WeightMixPlan plan(WeightMix::Q4_K_M, names, 32, 0);
  std::map<DType, int> count;
  std::set<int> q6_layers_v, q6_layers_down;
  for (const auto& n : names) {
    const DType t = plan.type_of(n, 4096);
    count[t]++;
    if (t != DType::Q6_K || n.compare(0, 4, "blk.") != 0) continue;
    const int layer = std::stoi(n.substr(4));
    (n.find("attn_v") != std::string::npos ? q6_layers_v : q6_layers_down).insert(layer);
  }
  EXPECT_EQ(count[DType::Q4_K], 193);
  EXPECT_EQ(count[DType::Q6_K], 33);
  EXPECT_EQ(count.size(), 2u);
  const std::set<int> want = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
  EXPECT_EQ(q6_layers_v, want);
  EXPECT_EQ(q6_layers_down, want);
  EXPECT_EQ(plan.type_of("output.weight", 4096), DType::Q6_K);
  EXPECT_EQ(plan.type_of("token_embd.weight", 4096), DType::Q4_K);  // untied: the base type
  const WeightMixPlan plan5(WeightMix::Q5_K_M, names, 32, 0);
  EXPECT_EQ(plan5.type_of("blk.4.attn_q.weight", 4096), DType::Q5_K);
  EXPECT_EQ(plan5.type_of("blk.4.attn_v.weight", 4096), DType::Q5_K);
  EXPECT_EQ(plan5.type_of("blk.6.ffn_down.weight", 4096), DType::Q6_K);
}

TEST(WeightMix, TiedEmbeddingsTakeTheOutputsType) {
  const auto names = llama_names(16, /*tied=*/true);
  const WeightMixPlan plan(WeightMix::Q4_K_M, names, 16, 0);
  EXPECT_EQ(plan.type_of("token_embd.weight", 2048), DType::Q6_K);
  // 16 layers: n/8 = 2, so 0, 1, 14, 15 and 4, 7, 10, 13.
  for (int i = 0; i < 16; ++i) {
    const bool more = i < 2 || i >= 14 || (i - 2) % 3 == 2;
    EXPECT_EQ(plan.type_of("blk." + std::to_string(i) + ".ffn_down.weight", 8192), more ? DType::Q6_K : DType::Q4_K)
        << i;
  }
}

TEST(WeightMix, AttentionVIsCountedAcrossItsKindsInFileOrder) {
  // A hybrid: every fourth layer attention (attn_v), the others a mixer with a fused attn_qkv: one count of 8.
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i)
    names.push_back("blk." + std::to_string(i) + (i % 4 == 3 ? ".attn_v.weight" : ".attn_qkv.weight"));
  const WeightMixPlan plan(WeightMix::Q4_K_M, names, 8, 0);
  // n = 8: n/8 = 1, 7n/8 = 7: indices 0, 7 and (i - 1) % 3 == 2: 3, 6.
  const DType want[8] = {DType::Q6_K, DType::Q4_K, DType::Q4_K, DType::Q6_K,
                         DType::Q4_K, DType::Q4_K, DType::Q6_K, DType::Q6_K};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(plan.type_of(names[size_t(i)], 1024), want[i]) << names[size_t(i)];
}

TEST(WeightMix, EightExpertsPutAttentionOutputInQ5K) {
  std::vector<std::string> names = {"blk.0.attn_output.weight", "blk.0.ffn_down_exps.weight",
                                    "blk.0.ffn_down_shexp.weight", "blk.1.ffn_down_exps.weight"};
  EXPECT_EQ(WeightMixPlan(WeightMix::Q4_K_M, names, 2, 8).type_of(names[0], 1024), DType::Q5_K);
  EXPECT_EQ(WeightMixPlan(WeightMix::Q4_K_M, names, 2, 128).type_of(names[0], 1024), DType::Q4_K);
  EXPECT_EQ(WeightMixPlan(WeightMix::Q5_K_M, names, 2, 8).type_of(names[0], 1024), DType::Q5_K);
  // FFN down by the layer in the name: 2 layers, 7n/8 = 1: layer 1 more bits, layer 0 not.
  const WeightMixPlan plan(WeightMix::Q4_K_M, names, 2, 8);
  EXPECT_EQ(plan.type_of(names[1], 1024), DType::Q4_K);
  EXPECT_EQ(plan.type_of(names[2], 1024), DType::Q4_K);
  EXPECT_EQ(plan.type_of(names[3], 1024), DType::Q6_K);
}

TEST(WeightMix, RowsThatDoNotFitFallBackAsLlamaQuantize) {
  EXPECT_EQ(k_quant_fallback(DType::Q4_K, 4096), DType::Q4_K);
  EXPECT_EQ(k_quant_fallback(DType::Q4_K, 4096 + 32), DType::Q5_0);
  EXPECT_EQ(k_quant_fallback(DType::Q5_K, 4096 + 32), DType::Q5_1);
  EXPECT_EQ(k_quant_fallback(DType::Q6_K, 4096 + 32), DType::Q8_0);
  EXPECT_EQ(k_quant_fallback(DType::Q4_K, 48), DType::F16);
  const auto names = llama_names(2, false);
  const WeightMixPlan plan(WeightMix::Q4_K_M, names, 2, 0);
  EXPECT_EQ(plan.type_of("blk.0.attn_q.weight", 96), DType::Q5_0);
  EXPECT_EQ(plan.planned_type("blk.0.attn_q.weight"), DType::Q4_K);
}

TEST(WeightMix, UnknownTensorsAndLayersOutsideTheModelAreErrors) {
  const auto names = llama_names(2, false);
  const WeightMixPlan plan(WeightMix::Q4_K_M, names, 2, 0);
  EXPECT_THROW(plan.type_of("blk.9.attn_q.weight", 256), Error);
  EXPECT_THROW(WeightMixPlan(WeightMix::Q4_K_M, {"blk.5.ffn_down.weight"}, 2, 0), Error);
  EXPECT_THROW(WeightMixPlan(WeightMix::Q4_K_M, {"ffn_down.weight"}, 2, 0), Error);
  EXPECT_THROW(WeightMixPlan(WeightMix::Q4_K_M, names, 0, 0), Error);
}


// tiny: 2 layers, rows of 256 and 512 values; layer 1 (>= 7n/8) gets more bits, layer 0 not.
void expect_tiny_q4_K_M(const GgufFile& f) {
  EXPECT_EQ(f.get_u32("general.file_type"), 15u);
  EXPECT_EQ(f.tensor("token_embd.weight").type, DType::Q4_K);
  EXPECT_EQ(f.tensor("output.weight").type, DType::Q6_K);
  EXPECT_EQ(f.tensor("blk.0.attn_v.weight").type, DType::Q4_K);
  EXPECT_EQ(f.tensor("blk.1.attn_v.weight").type, DType::Q6_K);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, DType::Q4_K);
  EXPECT_EQ(f.tensor("blk.1.ffn_down.weight").type, DType::Q6_K);
  EXPECT_EQ(f.tensor("blk.1.attn_q.weight").type, DType::Q4_K);
  EXPECT_EQ(f.tensor("blk.1.attn_norm.weight").type, DType::F32);
}

TEST(WeightMixFiles, SynthAndQuantizeWriteTheMixAndTheCpuRunsIt) {
  const std::string f16 = temp_path("f16"), synth = temp_path("synth"), quant = temp_path("quant");
  SynthOptions o;
  set_synth_type(o, "Q4_K_M");
  EXPECT_EQ(o.type, DType::Q4_K);
  o.seed = 3;
  o.n_threads = 2;
  write_synth_model(synth, find_model_shape("tiny"), o);
  expect_tiny_q4_K_M(GgufFile::open(synth));

  SynthOptions of;
  set_synth_type(of, "f16");
  EXPECT_FALSE(of.mix.has_value());
  of.seed = 3;
  of.n_threads = 2;
  write_synth_model(f16, find_model_shape("tiny"), of);
  const QuantizeReport r = quantize_model(f16, quant, WeightMix::Q4_K_M, 2);
  EXPECT_EQ(r.n_quantized, 2 + 2 * 7);  // token_embd, output, 7 matrices a layer
  EXPECT_EQ(r.n_fallback, 0);
  expect_tiny_q4_K_M(GgufFile::open(quant));

  for (const std::string& p : {synth, quant}) {
    const auto logits = test::cpu_last_logits(p);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << p;
  }
  EXPECT_THROW(quantize_model(quant, quant, WeightMix::Q4_K_M, 2), Error);  // never over its input
  EXPECT_THROW(set_synth_type(o, "q4_K_X"), Error);
  for (const std::string& p : {f16, synth, quant}) std::filesystem::remove(p);
}

// The CLI: a mix by name writes the mix (exit 0); an unknown name is a usage error (exit 2) that lists the mixes,
// and the output is never written over the input.
TEST(WeightMixFiles, CliTakesMixNamesAndRefusesUnknownOnes) {
  const std::string out = temp_path("cli"), synth = temp_path("cli_synth");
  test::CliResult r = test::polykv("quantize " + test::embedded_model() + " " + out + " Q4_K_M -t 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("as the mix chose"), std::string::npos) << r.out;
  EXPECT_EQ(GgufFile::open(out).get_u32("general.file_type"), 15u);
  r = test::polykv("synth --shape tiny --type q5_K_M --layers 2 -o " + synth);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(GgufFile::open(synth).get_u32("general.file_type"), 17u);
  for (const std::string& cmd : {"quantize " + test::embedded_model() + " " + out + " q4_K_X",
                                 "synth --shape tiny --type q4_K_X -o " + synth}) {
    r = test::polykv(cmd);
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out;
    EXPECT_NE(r.out.find("weight mixes: q4_K_M, q5_K_M"), std::string::npos) << cmd << ": " << r.out;
  }
  r = test::polykv("quantize " + out + " " + out + " q4_K_M");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("is the input file"), std::string::npos) << r.out;
  EXPECT_EQ(GgufFile::open(out).get_u32("general.file_type"), 15u);  // still the file written above
  std::filesystem::remove(out);
  std::filesystem::remove(synth);
}

}  // namespace
}  // namespace polykv
