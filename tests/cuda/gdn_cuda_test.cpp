// The CUDA backend's hybrid ops (backend/cuda/gdn_cuda.h via CudaBackend) against the CPU backend on
// random inputs: deinterleave, sigmoid_mul, and ssm_conv + gated_delta_rule over several sequences
// per step (uneven lengths: 1, 5, 17 (past the 16-row log), 40 rows; then short steps continuing the
// states), d in {32, 128} (register kernels) and 48 (run-time d), uneven head counts. Then GPU-only
// invariants: one 40-row step equals 40 single-row steps bit for bit (same token-sequential kernel),
// and truncate() inside a logged step replays to the very bits of a run that stopped there.
// Failures print the op, the shape, the first bad index, got/expected and the NMSE.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "kv/kv_block_store.h"
#include "kv/kv_cache.h"
#include "kv/paged_kv.h"
#include "kv/recurrent_state.h"
#include "../scoped_env.h"

namespace polykv {
namespace {

constexpr int kBlockTokens = 16, kMaxTokens = 528, kBlocksPerSeq = kMaxTokens / kBlockTokens;

struct Case {
  int d, nk, nv, K;
};

std::string name(const Case& c) {
  return "d " + std::to_string(c.d) + " n_k " + std::to_string(c.nk) + " n_v " + std::to_string(c.nv) + " K " +
         std::to_string(c.K);
}

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// got vs want: relative NMSE bound and a per-element bound; prints the first bad index.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double e2 = 0, r2 = 0;
  long first_bad = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": element " << i << " is " << got[i];
    const double e = double(got[i]) - want[i];
    e2 += e * e;
    r2 += double(want[i]) * want[i];
    if (first_bad < 0 && std::abs(e) > tol * (1.0 + std::abs(want[i]))) first_bad = long(i);
  }
  const double nmse = e2 / std::max(r2, 1e-30);
  EXPECT_LT(first_bad, 0) << what << ": first bad element " << first_bad << " got "
                          << (first_bad >= 0 ? got[size_t(first_bad)] : 0.f) << " expected "
                          << (first_bad >= 0 ? want[size_t(first_bad)] : 0.f) << " (NMSE " << nmse << ", "
                          << got.size() << " elements)";
  EXPECT_LT(nmse, tol * tol) << what;
}

void expect_bits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      double worst = 0;
      for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(double(a[k]) - b[k]));
      FAIL() << what << ": first differing element " << i << " (" << a[i] << " vs " << b[i] << "), max |diff| " << worst;
    }
}

// Device buffer of floats owned by the test.
struct Dev {
  Backend& be;
  float* p = nullptr;
  size_t n = 0;
  Dev(Backend& b, size_t count) : be(b), n(count) { p = static_cast<float*>(be.allocate(std::max<size_t>(n, 1) * 4)); }
  Dev(Backend& b, const std::vector<float>& h) : Dev(b, h.size()) { be.upload(p, h.data(), h.size() * 4); }
  ~Dev() { be.release(p); }
  std::vector<float> get() const {
    std::vector<float> h(n);
    be.download(h.data(), p, n * 4);
    return h;
  }
};

// A layer's weights and a step's inputs for one shape.
struct Inputs {
  std::vector<float> x, alpha, beta;  // [rows][C], [rows][n_v] x2
};

class Harness {
 public:
  Harness(const Case& c, int n_seq, int n_state_layers, uint32_t seed)
      : c_(c), rng_(seed), gpu_(make_backend({"cuda", 0})), cpu_(make_backend({"cpu", 2})) {
    shape_.n_layer = 1;
    shape_.n_head_kv = 1;
    shape_.head_dim = 32;
    shape_.head_dim_v = 32;
    shape_.recurrent = RecurrentShape{n_state_layers, c.K, c.nk, c.nv, c.d};
    C_ = shape_.recurrent.conv_channels();
    store_ = std::make_unique<KvBlockStore>(shape_, KvType::F16, KvType::F16, n_seq * kBlocksPerSeq, kBlockTokens,
                                            gpu_->kv_memory());
    for (int i = 0; i < n_seq; ++i) {
      auto g = std::make_unique<PagedKv>(*store_, kMaxTokens);
      std::vector<BlockId> table;
      for (int b = 0; b < kBlocksPerSeq; ++b) table.push_back(BlockId(i * kBlocksPerSeq + b));
      g->set_blocks(table);
      gpu_seq_.push_back(std::move(g));
      cpu_seq_.push_back(std::make_unique<KvCache>(shape_, KvType::F16, KvType::F16, kMaxTokens, kBlockTokens));
    }
    for (int l = 0; l < n_state_layers; ++l) {
      w_.push_back(randn(size_t(C_) * c.K, rng_, 0.5f));
      w_dev_.push_back(std::make_unique<Dev>(*gpu_, w_.back()));
    }
    dt_ = randn(size_t(c.nv), rng_, 0.5f);
    a_ = randn(size_t(c.nv), rng_, 0.5f);
    for (float& v : a_) v = -std::abs(v) - 0.05f;  // a decay: -exp(A_log) < 0
    dt_dev_ = std::make_unique<Dev>(*gpu_, dt_);
    a_dev_ = std::make_unique<Dev>(*gpu_, a_);
    p_.n_k_heads = c.nk;
    p_.n_v_heads = c.nv;
    p_.head_dim = c.d;
    p_.q_scale = 1.0f / std::sqrt(float(c.d));
  }

  Backend& gpu() { return *gpu_; }
  PagedKv& gpu_seq(int i) { return *gpu_seq_[size_t(i)]; }
  int channels() const { return C_; }

  // One step: rows[i] rows of sequence seq_ids[i] on the chosen backends; returns (per backend) the conv
  // and rule outputs of every state layer, concatenated. on_cpu: also run the CPU reference.
  struct Out {
    std::vector<float> conv, rule;
  };
  std::pair<Out, Out> step(const std::vector<int>& seq_ids, const std::vector<int>& rows, bool on_cpu = true) {
    int total = 0;
    for (int r : rows) total += r;
    std::vector<Inputs> in(w_.size());
    for (auto& i : in) {
      i.x = randn(size_t(total) * C_, rng_);
      i.alpha = randn(size_t(total) * c_.nv, rng_);
      i.beta = randn(size_t(total) * c_.nv, rng_);
    }
    return {run(*gpu_, seq_ids, rows, in, true), on_cpu ? run(*cpu_, seq_ids, rows, in, false) : Out{}};
  }

  // The current state of a sequence (host copy): [n_layer][layer_floats].
  std::vector<float> gpu_state(int i) {
    RecurrentState& r = *gpu_seq_[size_t(i)]->recurrent_state();
    std::vector<float> h(size_t(r.shape().n_layer) * r.layer_floats());
    gpu_->download(h.data(), r.conv(0), h.size() * 4);
    return h;
  }
  std::vector<float> cpu_state(int i) {
    RecurrentState& r = *cpu_seq_[size_t(i)]->recurrent_state();
    return std::vector<float>(r.conv(0), r.conv(0) + size_t(r.shape().n_layer) * r.layer_floats());
  }

 private:
  Out run(Backend& be, const std::vector<int>& seq_ids, const std::vector<int>& rows, const std::vector<Inputs>& in,
          bool gpu) {
    std::vector<StepSeq> seqs;
    int row0 = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      KvSequence* kv = gpu ? static_cast<KvSequence*>(gpu_seq_[size_t(seq_ids[i])].get())
                           : static_cast<KvSequence*>(cpu_seq_[size_t(seq_ids[i])].get());
      seqs.push_back({kv, kv->n_tokens(), rows[i], row0});
      row0 += rows[i];
    }
    const int total = row0;
    be.begin_step(seqs);
    Out o;
    for (size_t l = 0; l < in.size(); ++l) {
      std::vector<float> conv(size_t(total) * C_), rule(size_t(total) * c_.nv * c_.d);
      if (gpu) {
        Dev x(be, in[l].x), al(be, in[l].alpha), bl(be, in[l].beta), cv(be, conv.size()), ru(be, rule.size());
        be.ssm_conv(int(l), w_dev_[l]->p, c_.K, x.p, cv.p, C_);
        be.gated_delta_rule(int(l), p_, cv.p, al.p, bl.p, dt_dev_->p, a_dev_->p, ru.p);
        conv = cv.get();
        rule = ru.get();
      } else {
        be.ssm_conv(int(l), w_[l].data(), c_.K, in[l].x.data(), conv.data(), C_);
        be.gated_delta_rule(int(l), p_, conv.data(), in[l].alpha.data(), in[l].beta.data(), dt_.data(), a_.data(),
                            rule.data());
      }
      o.conv.insert(o.conv.end(), conv.begin(), conv.end());
      o.rule.insert(o.rule.end(), rule.begin(), rule.end());
    }
    for (const StepSeq& s : seqs) s.kv->commit(s.pos0 + s.n);
    return o;
  }

  Case c_;
  std::mt19937 rng_;
  std::unique_ptr<Backend> gpu_, cpu_;
  KvShape shape_;
  int C_ = 0;
  std::unique_ptr<KvBlockStore> store_;
  std::vector<std::unique_ptr<PagedKv>> gpu_seq_;
  std::vector<std::unique_ptr<KvCache>> cpu_seq_;
  std::vector<std::vector<float>> w_;
  std::vector<std::unique_ptr<Dev>> w_dev_;
  std::vector<float> dt_, a_;
  std::unique_ptr<Dev> dt_dev_, a_dev_;
  GdnParams p_;
};

const Case kCases[] = {{32, 2, 4, 4}, {128, 1, 2, 4}, {48, 2, 2, 3}, {64, 3, 6, 4}, {128, 2, 4, 2}};

TEST(GdnCuda, ConvAndRuleMatchCpuOverSeveralSequences) {
  POLYKV_REQUIRE_GPU();
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    std::printf("[%s]\n", name(c).c_str());
    Harness h(c, 4, 2, 1234u + uint32_t(c.d));
    // Prompt-like step (one sequence past the 16-row log), then decode / verification-like steps.
    const std::vector<std::vector<int>> steps = {{1, 5, 17, 40}, {1, 1, 16, 3}, {2, 1, 1, 1}, {1, 7, 1, 1}};
    for (size_t st = 0; st < steps.size(); ++st) {
      const auto [g, cpu] = h.step({0, 1, 2, 3}, steps[st]);
      const std::string at = name(c) + " step " + std::to_string(st);
      expect_close(g.conv, cpu.conv, 1e-5, at + " ssm_conv output");
      expect_close(g.rule, cpu.rule, 2e-4, at + " gated_delta_rule output");
      for (int i = 0; i < 4; ++i)
        expect_close(h.gpu_state(i), h.cpu_state(i), 2e-4, at + " state of sequence " + std::to_string(i));
      if (HasFailure()) return;
    }
  }
}

// With POLYKV_CUDA_GDN=tokens (every step token by token), a sequence's rows give the same results whatever
// shares the step and however its prompt is cut: one 40-row step == 40 single-row steps (and == 13 + 27),
// bit for bit. The 40- and 27-row steps also run the row-parallel convolution, the single rows the
// sequential one: the same bits.
TEST(GdnCuda, PrefillEqualsTokenByTokenBitForBit) {
  POLYKV_REQUIRE_GPU();
  const test::ScopedEnv tokens{{"POLYKV_CUDA_GDN", "tokens"}};
  for (const Case& c : {kCases[0], kCases[1], kCases[2]}) {
    SCOPED_TRACE(name(c));
    Harness h(c, 3, 1, 99u);
    std::mt19937 rng(5);
    const int n = 40, C = h.channels();
    // The same inputs for three sequences, cut differently (the backend driven directly).
    Backend& be = h.gpu();
    const auto x = randn(size_t(n) * C, rng), al = randn(size_t(n) * c.nv, rng), bl = randn(size_t(n) * c.nv, rng);
    const auto w = randn(size_t(C) * c.K, rng, 0.5f), dt = randn(size_t(c.nv), rng);
    std::vector<float> a(size_t(c.nv));
    for (size_t j = 0; j < a.size(); ++j) a[j] = -0.1f - 0.2f * float(j);
    Dev wd(be, w), dtd(be, dt), ad(be, a), xd(be, x), ald(be, al), bld(be, bl), cv(be, x.size()),
        out0(be, size_t(n) * c.nv * c.d), out1(be, out0.n), out2(be, out0.n);
    GdnParams p;
    p.n_k_heads = c.nk;
    p.n_v_heads = c.nv;
    p.head_dim = c.d;
    p.q_scale = 1.0f / std::sqrt(float(c.d));
    // Runs rows [r0, r0 + m) of the inputs as one step of sequence i, writing out rows [r0, r0 + m).
    auto run = [&](int i, int r0, int m, float* out) {
      PagedKv& kv = h.gpu_seq(i);
      const StepSeq s{&kv, kv.n_tokens(), m, 0};
      be.begin_step(std::span(&s, 1));
      be.ssm_conv(0, wd.p, c.K, xd.p + size_t(r0) * C, cv.p, C);
      be.gated_delta_rule(0, p, cv.p, ald.p + size_t(r0) * c.nv, bld.p + size_t(r0) * c.nv, dtd.p, ad.p,
                          out + size_t(r0) * c.nv * c.d);
      kv.commit(s.pos0 + m);
    };
    run(0, 0, n, out0.p);
    for (int t = 0; t < n; ++t) run(1, t, 1, out1.p);
    run(2, 0, 13, out2.p);
    run(2, 13, 27, out2.p);
    expect_bits(out1.get(), out0.get(), name(c) + ": 40 single-row steps vs one 40-row step (outputs)");
    expect_bits(out2.get(), out0.get(), name(c) + ": 13 + 27 rows vs one 40-row step (outputs)");
    expect_bits(h.gpu_state(1), h.gpu_state(0), name(c) + ": state after 40 single-row steps vs one step");
    expect_bits(h.gpu_state(2), h.gpu_state(0), name(c) + ": state after 13 + 27 rows vs one step");
  }
}

// The chunked delta rule (prompt steps of more than 16 rows, the default) against the token-sequential
// kernel (POLYKV_CUDA_GDN=tokens) on the same inputs: steps of one sequence of 17..300 rows (one chunk
// boundary and more, a last chunk of 1 row), from a zero and from a non-zero state, in steps that mix them
// with short sequences; outputs and states close, and the state of sequence 2, always short (token by
// token in both), bit-identical.
TEST(GdnCuda, ChunkedMatchesTokenByToken) {
  POLYKV_REQUIRE_GPU();
  for (const Case& c : {kCases[0], kCases[1], kCases[3], kCases[4]}) {
    SCOPED_TRACE(name(c));
    std::printf("[%s]\n", name(c).c_str());
    Harness chunked(c, 4, 2, 4321u + uint32_t(c.d));
    std::unique_ptr<Harness> tokens;
    {
      const test::ScopedEnv env{{"POLYKV_CUDA_GDN", "tokens"}};
      tokens = std::make_unique<Harness>(c, 4, 2, 4321u + uint32_t(c.d));
    }
    // Rows per sequence and step (both harnesses draw the same inputs); 0: not in the step.
    const std::vector<std::vector<int>> steps = {{65, 0, 3, 0}, {129, 17, 1, 64}, {1, 200, 16, 1}, {2, 1, 5, 100}};
    for (size_t st = 0; st < steps.size(); ++st) {
      std::vector<int> ids, rows;
      for (int i = 0; i < 4; ++i)
        if (steps[st][size_t(i)] > 0) {
          ids.push_back(i);
          rows.push_back(steps[st][size_t(i)]);
        }
      const auto g = chunked.step(ids, rows, false).first;
      const auto t = tokens->step(ids, rows, false).first;
      const std::string at = name(c) + " step " + std::to_string(st);
      expect_bits(g.conv, t.conv, at + " ssm_conv output");
      expect_close(g.rule, t.rule, 2e-4, at + " gated_delta_rule output (chunked vs token by token)");
      for (int i = 0; i < 4; ++i) {
        const std::string which = at + " state of sequence " + std::to_string(i);
        if (i == 2)
          expect_bits(chunked.gpu_state(i), tokens->gpu_state(i), which);
        else
          expect_close(chunked.gpu_state(i), tokens->gpu_state(i), 2e-4, which);
      }
      if (HasFailure()) return;
    }
  }
}

// truncate() inside the last (logged) step replays on the device to the bits of a run that stopped
// there; the state before the step (truncate(pos0)) and truncate(0) work too; earlier: Error.
TEST(GdnCuda, RollbackReplaysToTheSameBits) {
  POLYKV_REQUIRE_GPU();
  for (const Case& c : {kCases[0], kCases[1], kCases[2]}) {
    SCOPED_TRACE(name(c));
    for (int keep : {0, 3, 6}) {
      SCOPED_TRACE(keep);
      Harness h(c, 2, 2, 77u);
      // Sequence 0: 20 rows, then a 7-row verification-like step, rolled back to 20 + keep; sequence 1:
      // the same 20 rows, then only the first `keep` rows of that step.
      std::mt19937 rng(3);
      Backend& be = h.gpu();
      const int C = h.channels(), total = 27;
      const auto x = randn(size_t(total) * C, rng), al = randn(size_t(total) * c.nv, rng),
                 bl = randn(size_t(total) * c.nv, rng);
      const auto w = randn(size_t(C) * c.K, rng, 0.5f), dt = randn(size_t(c.nv), rng);
      std::vector<float> a(size_t(c.nv), -0.3f);
      Dev wd(be, w), dtd(be, dt), ad(be, a), xd(be, x), ald(be, al), bld(be, bl), cv(be, x.size()),
          out(be, size_t(total) * c.nv * c.d);
      GdnParams p;
      p.n_k_heads = c.nk;
      p.n_v_heads = c.nv;
      p.head_dim = c.d;
      p.q_scale = 1.0f / std::sqrt(float(c.d));
      auto run = [&](int i, int r0, int m) {
        PagedKv& kv = h.gpu_seq(i);
        const StepSeq s{&kv, kv.n_tokens(), m, 0};
        be.begin_step(std::span(&s, 1));
        for (int l = 0; l < 2; ++l) {
          be.ssm_conv(l, wd.p, c.K, xd.p + size_t(r0) * C, cv.p, C);
          be.gated_delta_rule(l, p, cv.p, ald.p + size_t(r0) * c.nv, bld.p + size_t(r0) * c.nv, dtd.p, ad.p, out.p);
        }
        kv.commit(s.pos0 + m);
      };
      run(0, 0, 20);
      run(0, 20, 7);
      h.gpu_seq(0).reset(20 + keep);  // the rollback: replays `keep` logged rows on the device
      run(1, 0, 20);
      if (keep > 0) run(1, 20, keep);
      expect_bits(h.gpu_state(0), h.gpu_state(1), name(c) + ": state rolled back to " + std::to_string(20 + keep));
      EXPECT_THROW(h.gpu_seq(0).reset(10), Error);  // before the last step: gone
      h.gpu_seq(0).reset(0);                          // a new sequence: all zero
      const auto z = h.gpu_state(0);
      EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](float v) { return v == 0.0f; })) << "truncate(0) left a state";
    }
  }
}

TEST(GdnCuda, DeinterleaveAndSigmoidMulMatchCpu) {
  POLYKV_REQUIRE_GPU();
  auto gpu = make_backend({"cuda", 0});
  auto cpu = make_backend({"cpu", 1});
  std::mt19937 rng(21);
  for (auto [rows, groups, a, b] : {std::array<int, 4>{1, 4, 64, 64}, {7, 3, 33, 5}, {130, 16, 256, 256}, {3, 1, 1, 1}}) {
    const std::string what = "deinterleave rows " + std::to_string(rows) + " groups " + std::to_string(groups) + " a " +
                             std::to_string(a) + " b " + std::to_string(b);
    const auto src = randn(size_t(rows) * groups * (a + b), rng);
    std::vector<float> ca(size_t(rows) * groups * a), cb(size_t(rows) * groups * b);
    cpu->deinterleave(src.data(), rows, groups, a, b, ca.data(), cb.data());
    Dev s(*gpu, src), da(*gpu, ca.size()), db(*gpu, cb.size());
    gpu->deinterleave(s.p, rows, groups, a, b, da.p, db.p);
    expect_bits(da.get(), ca, what + " (first part)");
    expect_bits(db.get(), cb, what + " (second part)");
  }
  for (int64_t n : {1, 31, 1000, 300001}) {
    auto x = randn(size_t(n), rng, 3.0f);
    const auto g = randn(size_t(n), rng, 4.0f);
    Dev xd(*gpu, x), gd(*gpu, g);
    gpu->sigmoid_mul(xd.p, gd.p, n);
    cpu->sigmoid_mul(x.data(), g.data(), n);
    expect_close(xd.get(), x, 1e-6, "sigmoid_mul n " + std::to_string(n));
  }
}

// Timing at Qwen3.5-9B's GDN shape (16 key / 32 value heads of 128, K = 4), one layer: decode steps
// of 1, 8 and 64 sequences (state bytes read + written per step: 2 x 32 x 128^2 x 4 B per sequence)
// and one 512-row prompt step (chunked, and token by token). Prints; asserts nothing. Run by name
// (--gtest_also_run_disabled_tests --gtest_filter='GdnCuda.DISABLED_*').
TEST(GdnCuda, DISABLED_DecodeAndPrefillSpeed) {
  POLYKV_REQUIRE_GPU();
  const Case c{128, 16, 32, 4};
  for (int n_seq : {1, 8, 64}) {
    Harness h(c, n_seq, 1, 5u);
    Backend& be = h.gpu();
    const int C = h.channels();
    std::mt19937 rng(1);
    const auto w = randn(size_t(C) * c.K, rng, 0.5f);
    std::vector<float> a(size_t(c.nv), -0.5f), dt(size_t(c.nv), 0.1f);
    Dev wd(be, w), ad(be, a), dtd(be, dt), x(be, randn(size_t(n_seq) * C, rng)), cv(be, size_t(n_seq) * C),
        al(be, randn(size_t(n_seq) * c.nv, rng)), bl(be, randn(size_t(n_seq) * c.nv, rng)),
        out(be, size_t(n_seq) * c.nv * c.d);
    GdnParams p;
    p.n_k_heads = c.nk;
    p.n_v_heads = c.nv;
    p.head_dim = c.d;
    p.q_scale = 1.0f / std::sqrt(float(c.d));
    auto step = [&] {
      std::vector<StepSeq> seqs;
      for (int i = 0; i < n_seq; ++i) seqs.push_back({&h.gpu_seq(i), h.gpu_seq(i).n_tokens(), 1, i});
      be.begin_step(seqs);
      be.ssm_conv(0, wd.p, c.K, x.p, cv.p, C);
      be.gated_delta_rule(0, p, cv.p, al.p, bl.p, dtd.p, ad.p, out.p);
      for (auto& s : seqs) s.kv->commit(s.pos0 + 1);
    };
    for (int i = 0; i < 3; ++i) step();
    be.synchronize();
    const int iters = 50;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) step();
    be.synchronize();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    const double bytes = 2.0 * n_seq * c.nv * double(c.d) * c.d * 4;
    std::printf("decode, %d sequences: %.1f us per layer step (host begin_step included), state %.1f MB -> %.0f GB/s\n",
                n_seq, us, bytes / 1e6, bytes / us / 1e3);
  }
  for (const char* mode : {"chunked", "tokens"}) {
    std::unique_ptr<test::ScopedEnv> env;
    if (std::string(mode) == "tokens") env = std::make_unique<test::ScopedEnv>(std::initializer_list<std::pair<const char*, const char*>>{{"POLYKV_CUDA_GDN", "tokens"}});
    Harness h(c, 1, 1, 6u);
    Backend& be = h.gpu();
    const int C = h.channels(), n = 512;
    std::mt19937 rng(2);
    std::vector<float> a(size_t(c.nv), -0.5f), dt(size_t(c.nv), 0.1f);
    Dev wd(be, randn(size_t(C) * c.K, rng, 0.5f)), ad(be, a), dtd(be, dt), x(be, randn(size_t(n) * C, rng)),
        cv(be, size_t(n) * C), al(be, randn(size_t(n) * c.nv, rng)), bl(be, randn(size_t(n) * c.nv, rng)),
        out(be, size_t(n) * c.nv * c.d);
    GdnParams p;
    p.n_k_heads = c.nk;
    p.n_v_heads = c.nv;
    p.head_dim = c.d;
    p.q_scale = 1.0f / std::sqrt(float(c.d));
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      PagedKv& kv = h.gpu_seq(0);
      kv.reset(0);
      const StepSeq s{&kv, 0, n, 0};
      be.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      be.begin_step(std::span(&s, 1));
      be.ssm_conv(0, wd.p, c.K, x.p, cv.p, C);
      be.gated_delta_rule(0, p, cv.p, al.p, bl.p, dtd.p, ad.p, out.p);
      be.synchronize();
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      kv.commit(n);
    }
    std::printf("prefill, one sequence of %d rows: %.0f us per layer (%s), %.2f us per row\n", n, best, mode,
                best / n);
  }
}

}  // namespace
}  // namespace polykv
