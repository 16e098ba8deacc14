// MtpHead (model/mtp_head.h) against a plain-loop reference of the nextn semantics, on a random
// MTP block appended to the embedded model (tests/mtp_test_model.h): rows fed in chunks through the
// head's own KV must give the reference's logits and block outputs (positions, causal attention over
// earlier rows, the embedding half first, each norm in its place).
#include <gtest/gtest.h>

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "mtp_test_model.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

std::vector<float> deq(const GgufFile& f, const std::string& name) {
  const GgufTensor& t = f.tensor(name);
  std::vector<float> out(size_t(t.n_elements));
  dequantize_row_ref(t.type, t.data, out.data(), t.n_elements);
  return out;
}

// y[o] = sum_i w[o][i] x[i]
void mv(const std::vector<float>& w, const float* x, float* y, int n_out, int n_in) {
  for (int o = 0; o < n_out; ++o) {
    double s = 0;
    for (int i = 0; i < n_in; ++i) s += double(w[size_t(o) * size_t(n_in) + size_t(i)]) * x[i];
    y[o] = float(s);
  }
}

std::vector<float> rms(const float* x, const std::vector<float>& w, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss / n + eps);
  std::vector<float> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[size_t(i)] = float(x[i] * r * w[size_t(i)]);
  return out;
}

// The nextn semantics of ../shared/fixtures/README.md, for a llama-style block (ggml "normal" rope),
// all rows at positions 0..n-1, causal over the rows. logits: [n][V], y: [n][E].
void reference(const Model& m, const std::vector<int32_t>& next_ids, const std::vector<float>& hidden,
               std::vector<float>& logits, std::vector<float>& y) {
  const ModelConfig& c = m.config();
  const GgufFile& f = m.gguf();
  const int E = c.n_embd, H = c.n_head, Hk = c.n_head_kv, D = c.head_dim, F = c.n_ff, V = c.n_vocab;
  const int n = int(next_ids.size());
  const std::string p = "blk." + std::to_string(c.n_layer) + ".";
  const auto embd = deq(f, "token_embd.weight"), out_w = deq(f, "output.weight");
  const auto eh = deq(f, p + "nextn.eh_proj.weight"), enorm = deq(f, p + "nextn.enorm.weight"),
             hnorm = deq(f, p + "nextn.hnorm.weight"), shn = deq(f, p + "nextn.shared_head_norm.weight");
  const auto an = deq(f, p + "attn_norm.weight"), wq = deq(f, p + "attn_q.weight"), wk = deq(f, p + "attn_k.weight"),
             wv = deq(f, p + "attn_v.weight"), wo = deq(f, p + "attn_output.weight"), fn = deq(f, p + "ffn_norm.weight"),
             wg = deq(f, p + "ffn_gate.weight"), wu = deq(f, p + "ffn_up.weight"), wd = deq(f, p + "ffn_down.weight");
  std::vector<float> x(size_t(n) * E), q(size_t(n) * H * D), k(size_t(n) * Hk * D), v(size_t(n) * Hk * D);
  for (int t = 0; t < n; ++t) {
    const auto e = rms(embd.data() + size_t(next_ids[size_t(t)]) * E, enorm, E, c.rms_eps);
    const auto h = rms(hidden.data() + size_t(t) * E, hnorm, E, c.rms_eps);
    std::vector<float> cat(e);
    cat.insert(cat.end(), h.begin(), h.end());
    mv(eh, cat.data(), x.data() + size_t(t) * E, E, 2 * E);
    const auto hn = rms(x.data() + size_t(t) * E, an, E, c.rms_eps);
    mv(wq, hn.data(), q.data() + size_t(t) * H * D, H * D, E);
    mv(wk, hn.data(), k.data() + size_t(t) * Hk * D, Hk * D, E);
    mv(wv, hn.data(), v.data() + size_t(t) * Hk * D, Hk * D, E);
    for (float* r : {q.data() + size_t(t) * H * D, k.data() + size_t(t) * Hk * D})
      for (int hh = 0; hh < (r == q.data() + size_t(t) * H * D ? H : Hk); ++hh)
        for (int i = 0; i < D / 2; ++i) {
          const double a = t * std::pow(double(c.layers[0].rope_base), -2.0 * i / D);
          float* z = r + size_t(hh) * D;
          const double z0 = z[2 * i], z1 = z[2 * i + 1];
          z[2 * i] = float(z0 * std::cos(a) - z1 * std::sin(a));
          z[2 * i + 1] = float(z0 * std::sin(a) + z1 * std::cos(a));
        }
  }
  logits.assign(size_t(n) * V, 0);
  y.assign(size_t(n) * E, 0);
  for (int t = 0; t < n; ++t) {
    std::vector<float> att(size_t(H) * D, 0);
    for (int hh = 0; hh < H; ++hh) {
      const int kh = hh / (H / Hk);
      std::vector<double> s(size_t(t) + 1);
      double mx = -1e300;
      for (int j = 0; j <= t; ++j) {
        double d = 0;
        for (int i = 0; i < D; ++i) d += double(q[(size_t(t) * H + hh) * D + i]) * k[(size_t(j) * Hk + kh) * D + i];
        s[size_t(j)] = d / std::sqrt(double(D));
        mx = std::max(mx, s[size_t(j)]);
      }
      double z = 0;
      for (double& e : s) z += (e = std::exp(e - mx));
      for (int j = 0; j <= t; ++j)
        for (int i = 0; i < D; ++i) att[size_t(hh) * D + i] += float(s[size_t(j)] / z * v[(size_t(j) * Hk + kh) * D + i]);
    }
    float* xt = x.data() + size_t(t) * E;
    std::vector<float> o(static_cast<size_t>(E));
    mv(wo, att.data(), o.data(), E, H * D);
    for (int i = 0; i < E; ++i) xt[i] += o[size_t(i)];
    const auto hn = rms(xt, fn, E, c.rms_eps);
    std::vector<float> g(static_cast<size_t>(F)), u(static_cast<size_t>(F));
    mv(wg, hn.data(), g.data(), F, E);
    mv(wu, hn.data(), u.data(), F, E);
    for (int i = 0; i < F; ++i) g[size_t(i)] = g[size_t(i)] / (1.0f + std::exp(-g[size_t(i)])) * u[size_t(i)];
    mv(wd, g.data(), o.data(), E, F);
    for (int i = 0; i < E; ++i) xt[i] += o[size_t(i)];
    std::copy(xt, xt + E, y.data() + size_t(t) * E);
    const auto hh = rms(xt, shn, E, c.rms_eps);
    mv(out_w, hh.data(), logits.data() + size_t(t) * V, V, E);
  }
}

// max |a - b| / max |b|
float rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    m = std::max(m, std::fabs(b[i]));
  }
  return d / m;
}

TEST(MtpHead, NoNextnLayersLoadsNothing) {
  CpuBackend backend(2);
  auto model = Model::load(test::embedded_model(), backend);
  EXPECT_EQ(model->config().n_nextn, 0);
  EXPECT_EQ(MtpHead::load(*model), nullptr);
}

TEST(MtpHead, NextnLayersMustLeaveMainLayers) {
  const GgufFile base = GgufFile::open(test::embedded_model());
  GgufWriter w;
  for (const auto& [k, v] : base.metadata()) w.set(k, v);
  w.set_u32("llama.nextn_predict_layers", base.get_u32("llama.block_count"));
  for (const GgufTensor& t : base.tensors()) w.add_tensor(t.name, t.type, t.ne, t.data);
  const std::string path = testing::TempDir() + "polykv_mtp_bad_nextn.gguf";
  w.write(path);
  CpuBackend backend(2);
  std::string error;
  try {
    Model::load(path, backend);
  } catch (const Error& e) {
    error = e.what();
  }
  std::remove(path.c_str());
  EXPECT_NE(error.find("nextn_predict_layers"), std::string::npos) << (error.empty() ? "no error" : error);
}

TEST(MtpHead, MatchesThePlainLoopReferenceInChunks) {
  CpuBackend backend(2);
  auto model = Model::load(test::mtp_test_model(), backend);
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.n_layer, 6);  // block_count 7 - 1 nextn
  ASSERT_EQ(c.n_nextn, 1);
  auto head = MtpHead::load(*model);
  ASSERT_NE(head, nullptr);
  const int E = c.n_embd, V = c.n_vocab, n = 13;
  // The target's own hidden states of a token sequence (Model::BatchSeq::hidden).
  std::vector<int32_t> ids(size_t(n) + 1);
  for (int i = 0; i <= n; ++i) ids[size_t(i)] = 5 + (i * 977 + 31) % 7900;
  std::vector<float> hidden(size_t(n) * E);
  {
    KvCache tkv(model->kv_shape(), KvType::F32, KvType::F32, 64);
    const Model::BatchSeq b{std::span(ids).first(size_t(n)), &tkv, nullptr, false, hidden.data()};
    model->forward_batch(std::span(&b, 1));
  }
  const std::vector<int32_t> next(ids.begin() + 1, ids.end());  // row t: hidden h_t, token t + 1
  std::vector<float> ref_logits, ref_y;
  reference(*model, next, hidden, ref_logits, ref_y);

  KvCache kv(head->kv_shape(), KvType::F32, KvType::F32, 64);
  std::vector<float> logits(size_t(n) * V), y(size_t(n) * E);
  const int split[] = {0, 5, 6, n};  // chunks of 5, 1 and 7 rows
  for (int s = 0; s < 3; ++s) {
    const int r0 = split[s], r1 = split[s + 1];
    head->forward(std::span(next).subspan(size_t(r0), size_t(r1 - r0)), hidden.data() + size_t(r0) * E, kv,
                  logits.data() + size_t(r0) * V, y.data() + size_t(r0) * E);
    EXPECT_EQ(kv.n_tokens(), r1);
  }
  const float e_logits = rel_err(logits, ref_logits), e_y = rel_err(y, ref_y);
  // The output matrix is q8_0: the CPU kernel (AVX-512 VNNI) multiplies 8-bit activations, ~0.5% here;
  // a wrong half, norm or position is off by order 1.
  EXPECT_LT(e_logits, 1e-2f) << "logits: max |polykv - reference| / max |reference|";
  EXPECT_LT(e_y, 2e-3f) << "block output y";
  int same_top = 0;
  for (int t = 0; t < n; ++t) {
    const float* a = logits.data() + size_t(t) * V;
    const float* b = ref_logits.data() + size_t(t) * V;
    same_top += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
  }
  EXPECT_EQ(same_top, n);
}

TEST(MtpHead, LogitsOrHiddenAloneAndChunkingGiveTheSameBits) {
  CpuBackend backend(2);
  auto model = Model::load(test::mtp_test_model(), backend);
  auto head = MtpHead::load(*model);
  ASSERT_NE(head, nullptr);
  const int E = model->config().n_embd, V = model->config().n_vocab, n = 9;
  const std::vector<float> hidden = test::random_floats(size_t(n) * E, 3);
  std::vector<int32_t> next(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) next[size_t(i)] = 100 + 37 * i;
  KvCache kv1(head->kv_shape(), KvType::F16, KvType::F16, 32), kv2(head->kv_shape(), KvType::F16, KvType::F16, 32);
  std::vector<float> l1(size_t(n) * V), y1(size_t(n) * E), l2(size_t(n) * V), y2(size_t(n) * E);
  head->forward(next, hidden.data(), kv1, l1.data(), y1.data());
  for (int i = 0; i < n; ++i) {  // one row at a time, logits and y in separate calls on copies of the KV
    head->forward(std::span(next).subspan(size_t(i), 1), hidden.data() + size_t(i) * E, kv2, l2.data() + size_t(i) * V,
                  nullptr);
    kv2.truncate(i);
    head->forward(std::span(next).subspan(size_t(i), 1), hidden.data() + size_t(i) * E, kv2, nullptr,
                  y2.data() + size_t(i) * E);
  }
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(y1, y2);
}

}  // namespace
}  // namespace polykv
