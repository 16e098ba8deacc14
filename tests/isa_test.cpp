// The one ISA decision (core/isa.h): names, what this CPU supports, forcing in-process and through
// POLYKV_ISA, and that every kernel table and `polykv bench --json` follow it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/cpu/attention.h"
#include "backend/cpu/attention_tile.h"
#include "backend/cpu/kv_row_ops.h"
#include "backend/cpu/matmul.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/isa.h"
#include "test_util.h"

namespace polykv {
namespace {

// The attention kernels (rows and tiles) an ISA runs: its own (neon's: kv_row_ops_neon.cpp,
// attention_tile_neon.cpp).
const char* attention_isa_of(Isa isa) { return isa_name(isa); }

TEST(Isa, NamesRoundTrip) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_FALSE(parse_isa("sse2"));
  EXPECT_FALSE(parse_isa(""));
  EXPECT_FALSE(parse_isa("AVX2"));
}

TEST(Isa, SupportedFollowsCpuFeatures) {
  const CpuFeatures& f = cpu_features();
  EXPECT_TRUE(isa_supported(Isa::Scalar));
#if defined(__x86_64__)
  EXPECT_EQ(isa_supported(Isa::Avx2), f.has_avx2_set());
  EXPECT_EQ(isa_supported(Isa::Avx512), f.has_avx512_set());
  EXPECT_FALSE(isa_supported(Isa::Neon));
  EXPECT_NE(std::string(isa_unsupported_reason(Isa::Neon)).find("ARM64"), std::string::npos);
#elif defined(__aarch64__)
  EXPECT_TRUE(isa_supported(Isa::Neon));  // ASIMD is part of every AArch64 CPU
  EXPECT_EQ(detected_isa(), Isa::Neon);
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    EXPECT_FALSE(isa_supported(isa));
    EXPECT_NE(std::string(isa_unsupported_reason(isa)).find("x86-64"), std::string::npos);
  }
#endif
  const auto all = supported_isas();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front(), Isa::Scalar);
  EXPECT_EQ(all.back(), detected_isa());
}

TEST(Isa, ForcingUnsupportedThrowsAndKeepsTheChoice) {
  const Isa before = active_isa();
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (isa_supported(isa)) continue;
    EXPECT_THROW(force_isa(isa), Error) << isa_name(isa);
    EXPECT_EQ(active_isa(), before);
  }
}

// Every table follows the forced ISA, and the scope restores the previous choice.
TEST(Isa, EveryTableFollowsTheForcedIsa) {
  const Isa before = active_isa();
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    IsaScope scope(isa);
    EXPECT_EQ(active_isa(), isa);
    EXPECT_TRUE(isa_forced());
    EXPECT_STREQ(matmul_isa(), isa_name(isa));
    EXPECT_STREQ(kv_row_isa(), attention_isa_of(isa));
    EXPECT_EQ(&kv_row_kernels(KvType::F16), &kv_row_kernels_for(isa, KvType::F16));
    if (isa == Isa::Scalar) {
      EXPECT_EQ(&kv_row_kernels(KvType::Q8_0), &kv_row_kernels_scalar(KvType::Q8_0));
      EXPECT_EQ(score_tile_kernel(), score_tile_scalar);
      EXPECT_EQ(accumulate_tile_kernel(), accumulate_tile_scalar);
      EXPECT_EQ(softmax_tile_kernel(), softmax_tile_scalar);
      EXPECT_EQ(exp_sum_kernel(), exp_sum_scalar);
    }
    AttentionKernels expected;
    ASSERT_TRUE(attention_kernels_for(attention_isa_of(isa), expected));
    EXPECT_EQ(attention_kernels().score, expected.score);
    EXPECT_EQ(attention_kernels().accumulate, expected.accumulate);
    EXPECT_EQ(attention_kernels().softmax, expected.softmax);
    EXPECT_EQ(attention_kernels().score_q8, expected.score_q8);
    if (isa != Isa::Avx512) EXPECT_EQ(nullptr, attention_kernels().score_q8) << "integer K scores are AVX-512's only";
  }
  EXPECT_EQ(active_isa(), before);
}

// Runs `polykv args` with POLYKV_ISA=value in its environment (this process's choice is made first,
// so the setenv cannot change it).
test::CliResult polykv_with_isa(const char* value, const std::string& args) {
  active_isa();
  const char* old = std::getenv("POLYKV_ISA");
  const std::string saved = old ? old : "";
  setenv("POLYKV_ISA", value, 1);
  test::CliResult r = test::polykv(args);
  if (old) setenv("POLYKV_ISA", saved.c_str(), 1);
  else unsetenv("POLYKV_ISA");
  return r;
}

TEST(Isa, EnvironmentForcesTheBenchIsa) {
  const std::string args = "bench -m " + test::embedded_model() + " -p 8 -n 2 -t 1 --json";
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    const test::CliResult r = polykv_with_isa(isa_name(isa), args);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(j.at("matmul_isa"), isa_name(isa));
    EXPECT_EQ(j.at("attention_isa"), attention_isa_of(isa));
  }
}

TEST(Isa, EnvironmentRejectsUnknownAndUnsupported) {
  const std::string args = "bench -m " + test::embedded_model() + " -p 8 -n 2 -t 1 --json";
  test::CliResult r = polykv_with_isa("sse9", args);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("POLYKV_ISA=sse9 is not one of scalar, avx2, avx512, neon"), std::string::npos) << r.out;
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (isa_supported(isa)) continue;
    r = polykv_with_isa(isa_name(isa), args);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find(std::string("POLYKV_ISA=") + isa_name(isa) + ": " + isa_unsupported_reason(isa)),
              std::string::npos)
        << r.out;
  }
}

}  // namespace
}  // namespace polykv
