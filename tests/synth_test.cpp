// synth: tiny shapes written to temp files read back with GgufFile; shapes, types, value statistics,
// determinism; the real shapes' parameter counts against the published models; the CLI's exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/rope_freqs.h"
#include "model/synth.h"
#include "model/synth_layout.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"
#include "quant/ternary.h"
#include "test_util.h"

namespace polykv {
namespace {

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("polykv_synth_" + tag + "_" + std::to_string(getpid()) + ".gguf"))
      .string();
}

struct Stats {
  double mean, std;
};

Stats stats_of(const GgufTensor& t) {
  std::vector<float> v(size_t(t.n_elements));
  const size_t rb = row_bytes(t.type, t.ne[0]);
  for (int64_t r = 0; r < t.rows(); ++r)
    dequantize_row_ref(t.type, t.data + size_t(r) * rb, v.data() + size_t(r * t.ne[0]), t.ne[0]);
  double s = 0, s2 = 0;
  for (float x : v) s += x;
  const double mean = s / double(v.size());
  for (float x : v) s2 += (x - mean) * (x - mean);
  return {mean, std::sqrt(s2 / double(v.size()))};
}

std::vector<uint8_t> synth_bytes(const std::string& shape, const SynthOptions& o) {
  GgufWriter w;
  add_synth_model(w, find_model_shape(shape), o);
  return w.to_bytes();
}

TEST(Synth, TinyReadsBackWithRightShapesTypesAndStatistics) {
  const std::string path = temp_path("tiny");
  SynthOptions o;
  o.type = DType::Q8_0;
  o.seed = 7;
  write_synth_model(path, find_model_shape("tiny"), o);
  const GgufFile f = GgufFile::open(path);

  EXPECT_EQ(f.get_str("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 2u);
  EXPECT_EQ(f.get_u32("llama.embedding_length"), 256u);
  EXPECT_EQ(f.get_u32("llama.feed_forward_length"), 512u);
  EXPECT_EQ(f.get_u32("llama.attention.head_count"), 4u);
  EXPECT_EQ(f.get_u32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_u32("llama.attention.key_length"), 64u);
  EXPECT_EQ(f.get_u32("llama.vocab_size"), 320u);
  EXPECT_FLOAT_EQ(f.get_f32("llama.rope.freq_base"), 500000.0f);
  EXPECT_EQ(f.get_u32("general.file_type"), 7u);
  EXPECT_EQ(f.get_str("tokenizer.ggml.model"), "llama");
  const auto tokens = f.get_str_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 320u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size()) << "tokens unique";
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type")[100], 6);
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores").size(), 320u);

  const auto layout = synth_tensor_layout(find_model_shape("tiny"));
  ASSERT_EQ(f.tensors().size(), layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    EXPECT_EQ(t.name, layout[i].name);
    EXPECT_EQ(t.ne, layout[i].ne) << t.name;
    EXPECT_EQ(t.type, layout[i].init == SynthInit::Weight ? DType::Q8_0 : DType::F32) << t.name;
  }
  EXPECT_EQ(f.tensor("blk.1.attn_k.weight").ne, (std::vector<int64_t>{256, 128}));
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").ne, (std::vector<int64_t>{512, 256}));

  for (const char* name : {"token_embd.weight", "blk.0.ffn_down.weight", "blk.1.attn_q.weight"}) {
    const Stats s = stats_of(f.tensor(name));
    EXPECT_NEAR(s.mean, 0.0, 0.002) << name;
    EXPECT_NEAR(s.std, 0.02, 0.001) << name;
  }
  const Stats n = stats_of(f.tensor("blk.0.attn_norm.weight"));
  EXPECT_NEAR(n.mean, 1.0, 0.005);
  EXPECT_GT(n.std, 0.0);
  EXPECT_LT(n.std, 0.05);
  std::filesystem::remove(path);
}

TEST(Synth, EveryTypeRoundTripsWithStd002) {
  for (DType type : synth_types()) {
    SynthOptions o;
    o.type = type;
    o.n_layer = 1;
    const auto bytes = synth_bytes("tiny", o);
    const GgufFile f = GgufFile::parse(bytes.data(), bytes.size());
    const GgufTensor& t = f.tensor("blk.0.ffn_gate.weight");
    EXPECT_EQ(t.type, type == DType::MXFP4 ? mxfp4_moe_type(false) : type);  // mxfp4: experts only
    const Stats s = stats_of(t);
    // Ternary types (max-abs scale times -1/0/+1) keep the std only roughly (measured 0.0217..0.0223).
    EXPECT_NEAR(s.std, 0.02, is_ternary(type) ? 0.004 : 0.0015) << dtype_name(type);
    EXPECT_NEAR(s.mean, 0.0, 0.002) << dtype_name(type);
  }
}

TEST(Synth, DeterministicBySeedAndIndependentOfThreads) {
  SynthOptions o;
  o.type = DType::Q4_0;
  o.seed = 42;
  o.n_threads = 1;
  const auto a = synth_bytes("tiny", o);
  o.n_threads = 3;
  EXPECT_EQ(synth_bytes("tiny", o), a);
  o.seed = 43;
  const auto c = synth_bytes("tiny", o);
  ASSERT_EQ(c.size(), a.size());
  EXPECT_NE(c, a);
}

TEST(Synth, LayersOverrideKeepsEachBlocksData) {
  SynthOptions o;
  o.type = DType::F16;
  o.seed = 5;
  const auto full = synth_bytes("tiny", o);
  o.n_layer = 1;
  const auto one = synth_bytes("tiny", o);
  const GgufFile f2 = GgufFile::parse(full.data(), full.size());
  const GgufFile f1 = GgufFile::parse(one.data(), one.size());
  EXPECT_EQ(f1.get_u32("llama.block_count"), 1u);
  EXPECT_EQ(f1.find_tensor("blk.1.attn_q.weight"), nullptr);
  const GgufTensor& a = f1.tensor("blk.0.attn_q.weight");
  const GgufTensor& b = f2.tensor("blk.0.attn_q.weight");
  ASSERT_EQ(a.n_bytes, b.n_bytes);
  EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0);
}

TEST(Synth, Llama3RopeFreqsMatchConverterFixture) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  // llama3_gqa: rope_type llama3, factor 8, low 1, high 4, original context 64, theta 500000, head_dim 64.
  const GgufFile f = GgufFile::open(test::fixtures_dir() + "/models/random/llama3_gqa.gguf");
  const GgufTensor& t = f.tensor("rope_freqs.weight");
  const auto ours = llama3_rope_freqs(Llama3RopeScaling{8.0, 1.0, 4.0, 64.0}, 500000.0, 64);
  ASSERT_EQ(int64_t(ours.size()), t.n_elements);
  const auto* ref = reinterpret_cast<const float*>(t.data);
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_FLOAT_EQ(ours[i], ref[i]) << i;
}

TEST(Synth, Llama32RopeFreqsEndpoints) {
  const auto& s = find_model_shape("llama-3.2-1b");
  const auto r = llama3_rope_freqs(s.llama3_rope, s.rope_theta, s.head_dim);
  ASSERT_EQ(r.size(), 32u);
  EXPECT_FLOAT_EQ(r.front(), 1.0f);   // highest frequency: unscaled
  EXPECT_FLOAT_EQ(r.back(), 32.0f);   // lowest frequency: scaled by the full factor
  for (size_t i = 1; i < r.size(); ++i) EXPECT_GE(r[i], r[i - 1]);
}

TEST(Synth, RealShapesHaveThePublishedParameterCounts) {
  // Hugging Face parameter counts (tied embeddings counted once; rope_freqs is not a parameter there).
  const std::pair<const char*, int64_t> expected[] = {
      {"llama-3.2-1b", 1235814400}, {"llama-3.1-8b", 8030261248},
      {"qwen2.5-0.5b", 494032768},  {"qwen2.5-7b", 7615616512},  {"qwen3-8b", 8190735360},
  };
  for (const auto& [name, count] : expected) {
    int64_t n = 0;
    for (const auto& t : synth_tensor_layout(find_model_shape(name))) {
      if (t.init == SynthInit::RopeFreqs) continue;
      int64_t e = 1;
      for (int64_t d : t.ne) e *= d;
      n += e;
    }
    EXPECT_EQ(n, count) << name;
  }
}

TEST(Synth, Gemma3AndQwenSpecificTensorsAndKeys) {
  SynthOptions o;
  o.type = DType::F16;
  const auto g = synth_bytes("tiny-gemma3", o);
  const GgufFile fg = GgufFile::parse(g.data(), g.size());
  EXPECT_EQ(fg.get_u32("gemma3.attention.sliding_window"), 16u);
  EXPECT_FLOAT_EQ(fg.get_f32("gemma3.rope.freq_base_swa"), 10000.0f);
  EXPECT_EQ(fg.tensor("blk.5.attn_q_norm.weight").ne, (std::vector<int64_t>{256}));
  EXPECT_NE(fg.find_tensor("blk.0.post_ffw_norm.weight"), nullptr);
  EXPECT_EQ(fg.find_tensor("output.weight"), nullptr);  // tied
  EXPECT_EQ(fg.find_tensor("rope_freqs.weight"), nullptr);

  const auto q = synth_bytes("tiny-qwen2", o);
  const GgufFile fq = GgufFile::parse(q.data(), q.size());
  EXPECT_EQ(fq.get_str("general.architecture"), "qwen2");
  EXPECT_EQ(fq.tensor("blk.1.attn_k.bias").ne, (std::vector<int64_t>{128}));
  EXPECT_EQ(fq.tensor("blk.1.attn_k.bias").type, DType::F32);
  EXPECT_EQ(fq.tensor("blk.0.attn_q.bias").ne, (std::vector<int64_t>{256}));

  const auto q3 = synth_bytes("tiny-qwen3", o);  // Qwen 3: head norms, no biases
  const GgufFile f3 = GgufFile::parse(q3.data(), q3.size());
  EXPECT_EQ(f3.get_str("general.architecture"), "qwen3");
  EXPECT_EQ(f3.tensor("blk.1.attn_q_norm.weight").ne, (std::vector<int64_t>{64}));
  EXPECT_EQ(f3.tensor("blk.1.attn_k_norm.weight").ne, (std::vector<int64_t>{64}));
  EXPECT_EQ(f3.find_tensor("blk.0.attn_q.bias"), nullptr);

  const auto& g4 = find_model_shape("gemma-3-4b");
  EXPECT_EQ(g4.n_layer, 34);
  EXPECT_EQ(g4.sliding_window, 1024);
  EXPECT_EQ(g4.swa_pattern, 6);
}

TEST(Synth, RejectsUnknownShapeAndUnsupportedType) {
  try {
    find_model_shape("llama-9");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny"), std::string::npos) << e.what();
  }
  try {
    synth_type_from_name("q8_1");  // a GGUF type with no quantizer
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(synth_type_from_name("int3"), Error);
  EXPECT_THROW(synth_type_from_name("q8_K"), Error);  // not a weight type
}

int run_cli(const std::string& args) {
  const int rc = std::system((std::string(POLYKV_BINARY) + " synth " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(Synth, CliExitCodes) {
  const std::string path = temp_path("cli");
  EXPECT_EQ(run_cli("--shape tiny --type q4_0 --layers 1 --seed 3 -o " + path), 0);
  EXPECT_EQ(GgufFile::open(path).get_u32("llama.block_count"), 1u);
  EXPECT_EQ(run_cli("--shape tiny -o " + path), 2);                       // missing --type
  EXPECT_EQ(run_cli("--shape tiny --type f16 --frobnicate -o " + path), 2);
  EXPECT_EQ(run_cli("--shape tiny --type f16 --layers 0 -o " + path), 2);
  EXPECT_EQ(run_cli("--shape nope --type f16 -o " + path), 2);   // unknown names are usage errors
  EXPECT_EQ(run_cli("--shape tiny --type q8_1 -o " + path), 2);  // no q8_1 quantizer
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace polykv
