// engine/argmax.h: every ISA kernel gives exactly the scalar reference's answer (first maximum in id
// order, NaN and -inf never win, -1 for none) on awkward sizes, ties within and across chunks, NaN,
// ±inf and signed zeros; and the sampler's greedy path uses it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/isa.h"
#include "engine/argmax.h"
#include "engine/sampler.h"

namespace polykv {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// The definition, written independently of argmax_first_scalar.
int32_t first_max_definition(const std::vector<float>& x) {
  float m = -kInf;
  for (float v : x)
    if (!std::isnan(v) && v > m) m = v;
  if (m == -kInf) return -1;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] == m) return int32_t(i);
  return -1;
}

struct Kernel {
  std::string name;
  ArgmaxFn fn;
};

// The scalar reference, every ISA kernel this CPU runs, and the dispatcher under each forced ISA.
std::vector<Kernel> kernels() {
  std::vector<Kernel> k{{"scalar", argmax_first_scalar}};
  if (isa_supported(Isa::Avx2) && argmax_avx2()) k.push_back({"avx2", argmax_avx2()});
  if (isa_supported(Isa::Avx512) && argmax_avx512()) k.push_back({"avx512", argmax_avx512()});
  return k;
}

void expect_all(const std::vector<float>& x, const std::string& what) {
  const int32_t want = first_max_definition(x);
  EXPECT_EQ(argmax_first_scalar(x.data(), int32_t(x.size())), want) << "scalar: " << what << " n=" << x.size();
  for (const Kernel& k : kernels())
    EXPECT_EQ(k.fn(x.data(), int32_t(x.size())), want) << k.name << ": " << what << " n=" << x.size();
  for (Isa isa : supported_isas()) {
    IsaScope scope(isa);
    EXPECT_EQ(argmax_first(x.data(), int32_t(x.size())), want)
        << "dispatch under " << isa_name(isa) << ": " << what << " n=" << x.size();
  }
  // Backend::argmax_rows (what greedy decoding reads on a GPU): the CPU backend's and the default
  // (download, scan, upload), on the row and on it repeated as a second row.
  static CpuBackend be(1);
  std::vector<float> two(x);
  two.insert(two.end(), x.begin(), x.end());
  int32_t out[2] = {-7, -7};
  be.argmax_rows(two.data(), 2, int(x.size()), out);
  EXPECT_TRUE(out[0] == want && out[1] == want) << "CpuBackend::argmax_rows: " << what << " n=" << x.size();
  out[0] = out[1] = -7;
  be.Backend::argmax_rows(two.data(), 2, int(x.size()), out);
  EXPECT_TRUE(out[0] == want && out[1] == want) << "Backend::argmax_rows: " << what << " n=" << x.size();
}

const std::vector<int> kSizes = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                                 2047, 2048, 2049, 2111, 4096, 4160, 4177, 6143, 128256};

TEST(EngineStepArgmax, KernelsAreCompared) {
  // Not a vacuous comparison on this machine: at least one SIMD kernel besides the reference where the
  // CPU has AVX2 (every x86 CI machine does).
  if (isa_supported(Isa::Avx2)) EXPECT_GE(kernels().size(), 2u);
  EXPECT_EQ(argmax_first_scalar(nullptr, 0), -1);
}

TEST(EngineStepArgmax, RandomRowsEverySize) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int n : kSizes)
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = nd(rng);
      expect_all(x, "random");
    }
}

TEST(EngineStepArgmax, TiesTakeTheLowestId) {
  std::mt19937 rng(11);
  for (int n : kSizes) {
    if (n < 2) continue;
    // Ties inside one vector, across vectors, across chunks (2048), and in the scalar tail.
    for (int rep = 0; rep < 12; ++rep) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = float(int(rng() % 64)) * 0.25f;  // many exact duplicates
      const int a = int(rng() % uint32_t(n)), b = int(rng() % uint32_t(n));
      x[size_t(a)] = x[size_t(b)] = 100.0f;  // two equal maxima (one if a == b)
      expect_all(x, "tie");
    }
    std::vector<float> flat(static_cast<size_t>(n), 1.5f);  // every element equal: 0
    expect_all(flat, "flat");
    std::vector<float> last(static_cast<size_t>(n), -2.0f);
    last[size_t(n - 1)] = 5.0f;  // the maximum in the last element (the tail for most sizes)
    expect_all(last, "last");
    std::vector<float> zeros(static_cast<size_t>(n), -0.0f);  // -0 == +0: the first zero wins, whatever its sign
    zeros[size_t(n / 2)] = 0.0f;
    expect_all(zeros, "signed zeros");
    zeros[0] = 0.0f;
    zeros[size_t(n / 2)] = -0.0f;
    expect_all(zeros, "signed zeros 2");
  }
}

TEST(EngineStepArgmax, NanAndInfinities) {
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int n : kSizes) {
    if (n == 0) continue;
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    // NaN sprinkled everywhere, the first element included: never wins.
    for (int i = 0; i < n; i += 1 + int(rng() % 5)) x[size_t(i)] = kNaN;
    x[0] = kNaN;
    expect_all(x, "nan sprinkled");
    // NaN right where the maximum would be.
    std::vector<float> y(static_cast<size_t>(n), 0.0f);
    y[size_t(n - 1)] = kNaN;
    if (n > 1) y[size_t(n / 3)] = 1.0f;
    expect_all(y, "nan at the end");
    // All NaN, all -inf, NaN and -inf mixed: -1.
    expect_all(std::vector<float>(static_cast<size_t>(n), kNaN), "all nan");
    expect_all(std::vector<float>(static_cast<size_t>(n), -kInf), "all -inf");
    std::vector<float> mixed(static_cast<size_t>(n), -kInf);
    for (int i = 0; i < n; i += 2) mixed[size_t(i)] = kNaN;
    expect_all(mixed, "nan and -inf");
    // One finite value among NaN / -inf, at each awkward place.
    for (int at : {0, n / 2, n - 1}) {
      std::vector<float> one = mixed;
      one[size_t(at)] = -1e30f;
      expect_all(one, "one finite");
    }
    // +inf wins, the first of several.
    std::vector<float> pinf(static_cast<size_t>(n));
    for (float& v : pinf) v = nd(rng);
    pinf[size_t(n - 1)] = kInf;
    if (n > 2) pinf[size_t(n / 2)] = kInf;
    expect_all(pinf, "+inf");
    // Largest finite values and -inf / NaN around them.
    std::vector<float> big(static_cast<size_t>(n), -std::numeric_limits<float>::max());
    big[size_t(n / 2)] = std::numeric_limits<float>::max();
    big[0] = -kInf;
    expect_all(big, "max float");
  }
}

TEST(EngineStepArgmax, ChunkMaximaIncreasingAndDecreasing) {
  // The chunk rescan path: every chunk beats the previous one (increasing), or only the first does.
  for (int n : {2048 * 5 + 37, 128256}) {
    std::vector<float> inc(static_cast<size_t>(n)), dec(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      inc[size_t(i)] = float(i / 100);  // plateaus: ties inside each run of 100
      dec[size_t(i)] = float((n - i) / 100);
    }
    expect_all(inc, "increasing");
    expect_all(dec, "decreasing");
  }
}

TEST(EngineStepArgmax, GreedySamplerMatchesTheReference) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int n : {1, 33, 4177, 128256}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    if (n > 4) x[size_t(n / 4)] = x[size_t(n / 2)] = 50.0f;  // a tie: the lower id
    EXPECT_EQ(s.sample(x.data(), n, {}), first_max_definition(x)) << n;
  }
  std::vector<float> none(100, kNaN);
  EXPECT_THROW(s.sample(none.data(), 100, {}), std::exception);
}

}  // namespace
}  // namespace polykv
