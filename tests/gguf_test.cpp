// GGUF reader/writer: round trip, real fixture files, and malformed files (every truncation, bad
// counts, offsets, types) that must give polykv::Error, never a crash or an out-of-bounds read.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace polykv {
namespace {

std::vector<uint8_t> small_file() {
  GgufWriter w;
  w.set_str("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_str_array("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.set_f32_array("tokenizer.ggml.scores", {0.f, -1.f, -2.5f});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 1, 1});
  static std::vector<float> a(64 * 3), b(32);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i);
  w.add_tensor("a.weight", DType::F32, {64, 3}, a.data());
  w.add_tensor("b.weight", DType::F32, {32}, b.data());
  return w.to_bytes();
}

TEST(Gguf, RoundTrip) {
  const auto bytes = small_file();
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_str("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 2u);
  EXPECT_FLOAT_EQ(f.get_f32("llama.rope.freq_base"), 10000.0f);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token", false));
  EXPECT_EQ(f.get_str_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"<unk>", "a", "bc"}));
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores")[2], -2.5f);
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type")[0], 2);
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensor& a = f.tensor("a.weight");
  EXPECT_EQ(a.ne, (std::vector<int64_t>{64, 3}));
  EXPECT_EQ(a.n_bytes, 64u * 3 * 4);
  EXPECT_EQ(reinterpret_cast<const float*>(a.data)[5], 2.5f);
  EXPECT_EQ((a.data - bytes.data()) % 32, 0);
  const GgufTensor& b = f.tensor("b.weight");
  EXPECT_EQ(reinterpret_cast<const float*>(b.data)[31], -31.0f);
}

TEST(Gguf, TypedGettersRefuseWrongTypes) {
  const auto bytes = small_file();
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size());
  EXPECT_THROW(f.get_u32("general.architecture"), Error);
  EXPECT_THROW(f.get_str("llama.block_count"), Error);
  EXPECT_THROW(f.get_u32("missing.key"), Error);
  EXPECT_EQ(f.get_u32("missing.key", 7), 7u);
  EXPECT_THROW(f.get_f32_array("tokenizer.ggml.tokens"), Error);
  EXPECT_THROW(f.tensor("nope"), Error);
}

TEST(Gguf, EveryTruncationIsAnError) {
  const auto bytes = small_file();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_THROW(GgufFile::parse(cut.data(), cut.size()), Error) << "truncated at " << n;
  }
}

// Offsets of header fields in small_file(): magic 0, version 4, n_tensors 8, n_kv 16, first key 24.
TEST(Gguf, CorruptHeaderFields) {
  const auto good = small_file();
  auto patch = [&](size_t off, uint64_t value, size_t width) {
    auto b = good;
    std::memcpy(b.data() + off, &value, width);
    return b;
  };
  auto expect_error = [](const std::vector<uint8_t>& b, const char* needle) {
    try {
      GgufFile::parse(b.data(), b.size());
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(patch(0, 0x46554748, 4), "magic");  // "HGUF"
  expect_error(patch(4, 99, 4), "version");
  expect_error(patch(8, 1ull << 40, 8), "tensor count");
  expect_error(patch(16, 1ull << 40, 8), "metadata count");
  expect_error(patch(24, 1ull << 50, 8), "string length");
}

TEST(Gguf, CorruptTensorInfo) {
  GgufWriter w;
  static float data[32] = {};
  w.add_tensor("t", DType::F32, {32}, data);
  const auto good = w.to_bytes();
  // Tensor info starts at 24: name (8 + 1), n_dims at 33, ne[0] at 37, type at 45, offset at 49.
  auto with = [&](size_t off, uint64_t value, size_t width) {
    auto b = good;
    std::memcpy(b.data() + off, &value, width);
    return b;
  };
  EXPECT_THROW(GgufFile::parse(with(33, 9, 4).data(), good.size()), Error);        // 9 dims
  EXPECT_THROW(GgufFile::parse(with(37, 0, 8).data(), good.size()), Error);        // zero dim
  EXPECT_THROW(GgufFile::parse(with(37, 1ull << 45, 8).data(), good.size()), Error);
  EXPECT_THROW(GgufFile::parse(with(45, 77, 4).data(), good.size()), Error);       // unknown type id
  EXPECT_THROW(GgufFile::parse(with(49, 7, 8).data(), good.size()), Error);        // misaligned offset
  EXPECT_THROW(GgufFile::parse(with(49, 1ull << 20, 8).data(), good.size()), Error);  // past the end
  try {
    GgufFile::parse(with(45, 77, 4).data(), good.size());
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("type id 77"), std::string::npos) << e.what();
  }
}

TEST(Gguf, DuplicateKeysAndNames) {
  GgufWriter w;
  w.set_u32("k", 1);
  auto b = w.to_bytes();
  // Forge a second identical key by appending a copy of the entry and bumping the count.
  const size_t entry = 8 + 1 + 4 + 4;
  std::vector<uint8_t> two(b.begin(), b.begin() + 24 + entry);
  two.insert(two.end(), b.begin() + 24, b.begin() + 24 + entry);
  uint64_t n_kv = 2;
  std::memcpy(two.data() + 16, &n_kv, 8);
  EXPECT_THROW(GgufFile::parse(two.data(), two.size()), Error);
}

TEST(Gguf, OpenMissingFileNamesIt) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

TEST(Gguf, ReadsEveryFixtureModel) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  for (const char* name : {"llama3_gqa", "qwen2", "qwen3", "gemma2", "gemma3"}) {
    const GgufFile f = GgufFile::open(test::fixtures_dir() + "/models/random/" + name + ".gguf");
    EXPECT_GT(f.tensors().size(), 10u) << name;
    EXPECT_EQ(f.get_str("general.architecture").substr(0, 4), std::string(name).substr(0, 4));
  }
}

// Deterministic mutation fuzzing of real files through the fuzz target (the libFuzzer build runs
// the same target coverage-guided in .ci/run).
TEST(Gguf, MutatedFilesNeverCrash) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const auto seed = small_file();
  const auto real = test::read_file(test::fixtures_dir() + "/tokenizers/ggml-vocab-gpt-2.gguf");
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = (iter % 4 == 0) ? std::vector<uint8_t>(real.begin(), real.begin() + 4096) : seed;
    const int n_mut = 1 + int(rng() % 8);
    for (int m = 0; m < n_mut; ++m) {
      const size_t pos = rng() % b.size();
      switch (rng() % 4) {
        case 0: b[pos] = uint8_t(rng()); break;
        case 1: b[pos] ^= uint8_t(1u << (rng() % 8)); break;
        case 2: b.resize(pos + 1); break;
        default: { uint32_t v = uint32_t(rng()); if (pos + 4 <= b.size()) std::memcpy(&b[pos], &v, 4); }
      }
    }
    LLVMFuzzerTestOneInput(b.data(), b.size());
  }
  SUCCEED();
}

}  // namespace
}  // namespace polykv
