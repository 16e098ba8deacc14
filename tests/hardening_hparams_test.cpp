// Corrupt hyperparameters and vocabularies are refused with an error naming the key: each case
// takes a tiny synthetic model (model/synth.h), changes one metadata value with GgufWriter::set and
// loads it back. Unchanged, the same models load.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "hardening_util.h"
#include "model/config.h"
#include "model/synth.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

namespace polykv {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A writer holding a tiny synthetic model, ready for one change. The model is generated once per
// shape (generating is the slow part); writers borrow its tensor data.
GgufWriter tiny_writer(const std::string& shape) {
  static std::map<std::string, std::vector<uint8_t>> generated;
  std::vector<uint8_t>& bytes = generated[shape];
  if (bytes.empty()) {
    GgufWriter w;
    SynthOptions o;
    o.type = DType::Q8_0;
    o.n_threads = 1;
    add_synth_model(w, find_model_shape(shape), o);
    bytes = w.to_bytes();
  }
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size());
  GgufWriter w;
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  for (const GgufTensor& t : f.tensors()) w.add_tensor(t.name, t.type, t.ne, t.data);
  return w;
}

// The error config_from_gguf throws for the model, or "" if it loads.
std::string config_error(const GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.to_bytes();
  try {
    config_from_gguf(GgufFile::parse(bytes.data(), bytes.size()));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string vocab_error(const GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.to_bytes();
  try {
    Vocab::from_gguf(GgufFile::parse(bytes.data(), bytes.size()));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Case {
  std::string key;
  GgufValue value;
};

void expect_refused(const std::string& shape, const std::vector<Case>& cases, const std::string& extra_key = "",
                    const GgufValue& extra_value = {}) {
  for (const Case& c : cases) {
    GgufWriter w = tiny_writer(shape);
    if (!extra_key.empty()) w.set(extra_key, extra_value);
    w.set(c.key, c.value);
    const std::string err = config_error(w);
    EXPECT_NE(err.find(c.key), std::string::npos)
        << shape << ": " << c.key << " = " << c.value.to_string() << " gave: '" << err << "'";
  }
}

TEST(CorruptHparams, UnchangedTinyModelsLoad) {
  for (const char* shape : {"tiny", "tiny-qwen2", "tiny-gemma3"}) {
    EXPECT_EQ(config_error(tiny_writer(shape)), "") << shape;
    EXPECT_EQ(vocab_error(tiny_writer(shape)), "") << shape;
  }
}

TEST(CorruptHparams, FloatsMustBeFiniteAndInRange) {
  expect_refused("tiny", {
                             {"llama.attention.layer_norm_rms_epsilon", gguf_f32(kNaN)},
                             {"llama.attention.layer_norm_rms_epsilon", gguf_f32(0.0f)},
                             {"llama.attention.layer_norm_rms_epsilon", gguf_f32(-1e-5f)},
                             {"llama.attention.layer_norm_rms_epsilon", gguf_f32(kInf)},
                             {"llama.rope.freq_base", gguf_f32(0.0f)},
                             {"llama.rope.freq_base", gguf_f32(kInf)},
                             {"llama.rope.freq_base", gguf_f32(-10000.0f)},
                             {"llama.rope.freq_base", gguf_f32(kNaN)},
                         });
  // rope.scaling.factor is read for linear scaling only, but a corrupt one is refused in any case.
  expect_refused("tiny", {{"llama.rope.scaling.factor", gguf_f32(kNaN)}, {"llama.rope.scaling.factor", gguf_f32(0.0f)},
                          {"llama.rope.scaling.factor", gguf_f32(-2.0f)}},
                 "llama.rope.scaling.type", gguf_str("linear"));
  expect_refused("tiny-gemma3", {
                                    {"gemma3.rope.freq_base_swa", gguf_f32(kNaN)},
                                    {"gemma3.rope.freq_base_swa", gguf_f32(0.0f)},
                                    {"gemma3.attn_logit_softcapping", gguf_f32(kNaN)},
                                    {"gemma3.attn_logit_softcapping", gguf_f32(-50.0f)},
                                    {"gemma3.final_logit_softcapping", gguf_f32(kInf)},
                                });
  // An f64 that does not fit a float becomes inf: refused as well.
  GgufValue huge;
  huge.type = GgufType::F64;
  huge.f = 1e300;
  expect_refused("tiny", {{"llama.rope.freq_base", huge}});
}

TEST(CorruptHparams, IntegersMustBeInRangeAndConsistent) {
  expect_refused("tiny", {
                             {"llama.block_count", gguf_u32(0)},
                             {"llama.block_count", gguf_u32(100000)},
                             {"llama.feed_forward_length", gguf_u32(0)},
                             {"llama.feed_forward_length", gguf_u32(3000000000u)},  // negative as an int
                             {"llama.embedding_length", gguf_u32(0)},
                             {"llama.attention.head_count", gguf_u32(0)},
                             {"llama.attention.head_count_kv", gguf_u32(3)},  // does not divide 4 heads
                             {"llama.attention.head_count_kv", gguf_u32(8)},  // more than 4 heads
                             {"llama.attention.head_count_kv", gguf_i32(-2)},
                             {"llama.attention.key_length", gguf_u32(0)},
                             {"llama.attention.key_length", gguf_u32(1u << 20)},
                             {"llama.attention.value_length", gguf_u32(0)},
                             {"llama.rope.dimension_count", gguf_u32(33)},  // odd
                             {"llama.rope.dimension_count", gguf_u32(128)},  // more than the head size
                             {"llama.context_length", gguf_u32(0)},
                         });
  expect_refused("tiny-gemma3", {{"gemma3.attention.sliding_window", gguf_u32(0)},
                                 {"gemma3.attention.sliding_window", gguf_u32(4000000000u)}});
}

TEST(CorruptHparams, VocabTokenTypesAndScoresAreChecked) {
  const std::vector<uint8_t> clean = tiny_writer("tiny").to_bytes();
  const GgufFile f = GgufFile::parse(clean.data(), clean.size());
  for (int32_t bad_type : {99, 7, -1}) {
    std::vector<int32_t> types = f.get_i32_array("tokenizer.ggml.token_type");
    types[5] = bad_type;
    GgufWriter w = tiny_writer("tiny");
    w.set_i32_array("tokenizer.ggml.token_type", types);
    const std::string err = vocab_error(w);
    EXPECT_NE(err.find("tokenizer.ggml.token_type[5]"), std::string::npos) << bad_type << ": '" << err << "'";
  }
  for (float bad_score : {kNaN, kInf, -kInf}) {
    std::vector<float> scores = f.get_f32_array("tokenizer.ggml.scores");
    scores[300] = bad_score;
    GgufWriter w = tiny_writer("tiny");
    w.set_f32_array("tokenizer.ggml.scores", scores);
    const std::string err = vocab_error(w);
    EXPECT_NE(err.find("tokenizer.ggml.scores[300]"), std::string::npos) << bad_score << ": '" << err << "'";
  }
}

TEST(CorruptHparams, NamesFromTheFileAreEscaped) {
  using namespace std::string_literals;
  GgufWriter w = tiny_writer("tiny");
  w.set_str("general.architecture", "lla\0ma\x1b[31m"s);
  const std::string err = config_error(w);
  EXPECT_NE(err.find("'lla\\x00ma\\x1b[31m'"), std::string::npos) << err;
  GgufWriter v = tiny_writer("tiny");
  v.set_str("tokenizer.ggml.model", "ll\0ama"s);
  const std::string verr = vocab_error(v);
  EXPECT_NE(verr.find("'ll\\x00ama'"), std::string::npos) << verr;
}

// The reported case end to end: a NaN epsilon used to generate garbage and exit 0.
TEST(CorruptHparams, RunRefusesNanEpsilonWithExitOne) {
  test::ScratchDir dir("hparams_cli");
  GgufWriter w = tiny_writer("tiny");
  w.set("llama.attention.layer_norm_rms_epsilon", gguf_f32(kNaN));
  const std::string path = dir / "nan_eps.gguf";
  w.write(path);
  const test::CliResult r = test::polykv("run -m " + path + " -p hello -n 4");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("llama.attention.layer_norm_rms_epsilon"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace polykv
