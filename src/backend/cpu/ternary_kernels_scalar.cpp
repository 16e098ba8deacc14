// Scalar dot kernels for the ternary weight types (the definition the SIMD kernels agree with up to
// float rounding: the integer block sums are the same, exactly), and the ISA dispatch.
#include "backend/cpu/ternary_kernels.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/fp16.h"
#include "quant/ternary.h"

namespace polykv::cpu {
namespace {

// TQ1_0 / TQ2_0 against Q8_K: one activation block per weight block.
template <DType kType>
struct TernaryQ8K {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    constexpr int kBytes = kType == DType::TQ1_0 ? int(sizeof(BlockTQ1_0)) : int(sizeof(BlockTQ2_0));
    const uint8_t* w = static_cast<const uint8_t*>(w_row);
    float acc[NT] = {};
    int8_t t[256];
    for (int64_t b = 0; b < n / 256; ++b, w += kBytes) {
      ternary_block_values(kType, w, t);
      const float d = ternary_block_scale(kType, w);
      for (int k = 0; k < NT; ++k) {
        const int8_t* q = a[k].qs + b * 256;
        int32_t s = 0;
        for (int i = 0; i < 256; ++i) s += int32_t(t[i]) * q[i];
        acc[k] += d * a[k].d[b] * float(s);
      }
    }
    for (int k = 0; k < NT; ++k) out[k] = acc[k];
  }
};

// PTQ1_0 against Q8_32: four activation blocks per weight block; against Q8_K (rows of whole 256s,
// ptq1_0_reads_q8_K): half an activation block per weight block.
struct Ptq1Q8_32 {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockPTQ1_0* w = static_cast<const BlockPTQ1_0*>(w_row);
    float acc[NT] = {};
    int8_t t[kQK_PTQ1_0];
    if (ptq1_0_reads_q8_K(n)) {
      for (int64_t b = 0; b < n / kQK_PTQ1_0; ++b) {
        ternary_block_values(DType::PTQ1_0, &w[b], t);
        const float d = fp16_to_f32(w[b].d);
        for (int k = 0; k < NT; ++k) {
          const int8_t* q = a[k].qs + b * kQK_PTQ1_0;
          int32_t s = 0;
          for (int i = 0; i < kQK_PTQ1_0; ++i) s += int32_t(t[i]) * q[i];
          acc[k] += d * a[k].d[b / 2] * float(s);
        }
      }
      for (int k = 0; k < NT; ++k) out[k] = acc[k];
      return;
    }
    for (int64_t b = 0; b < n / kQK_PTQ1_0; ++b) {
      ternary_block_values(DType::PTQ1_0, &w[b], t);
      const float d = fp16_to_f32(w[b].d);
      for (int k = 0; k < NT; ++k)
        for (int j = 0; j < 4; ++j) {
          const int8_t* q = a[k].qs + b * kQK_PTQ1_0 + 32 * j;
          int32_t s = 0;
          for (int i = 0; i < 32; ++i) s += int32_t(t[32 * j + i]) * q[i];
          acc[k] += d * a[k].d[4 * b + j] * float(s);
        }
    }
    for (int k = 0; k < NT; ++k) out[k] = acc[k];
  }
};

}  // namespace

namespace {
std::atomic<bool>& old_flag() {
  static std::atomic<bool> v{[] {
    const char* e = std::getenv("POLYKV_TQ_OLD");
    return e != nullptr && std::string_view(e) == "1";
  }()};
  return v;
}
}  // namespace

void set_ternary_old_kernels(bool old) { old_flag().store(old, std::memory_order_relaxed); }
bool ternary_old_kernels() { return old_flag().load(std::memory_order_relaxed); }


RowDotFn ternary_row_dot_scalar(DType type) {
  switch (type) {
    case DType::TQ1_0: return by_tokens<TernaryQ8K<DType::TQ1_0>>;
    case DType::TQ2_0: return by_tokens<TernaryQ8K<DType::TQ2_0>>;
    case DType::PTQ1_0: return by_tokens<Ptq1Q8_32>;
    default: return nullptr;
  }
}

namespace {
std::atomic<int>& vbmi_flag() {
  static std::atomic<int> v{[] {
    const char* e = std::getenv("POLYKV_TQ_VBMI");
    return e == nullptr ? -1 : std::string_view(e) == "0" ? 0 : std::string_view(e) == "1" ? 1 : -1;
  }()};
  return v;
}

}  // namespace

void set_ternary_vbmi_kernels(int mode) { vbmi_flag().store(mode, std::memory_order_relaxed); }
int ternary_vbmi_kernels() { return vbmi_flag().load(std::memory_order_relaxed); }

size_t ternary_perm_bytes(DType type, int64_t n_in) {
  if ((type != DType::TQ1_0 && type != DType::PTQ1_0) || n_in % 256 != 0) return 0;
  return size_t(n_in / 256) * 328;
}

bool ternary_wants_perm(Isa isa, DType type, int64_t n_in) {
  return isa == Isa::Avx512 && ternary_perm_bytes(type, n_in) != 0 && !ternary_old_kernels() &&
         ternary_row_dot_avx512vbmi(type) != nullptr;
}

void ternary_permute_act(DType type, const int8_t* qs, const int16_t* bsums, int64_t n_in, int8_t* out) {
  const bool tq1 = type == DType::TQ1_0;
  const int halves = tq1 ? 1 : 2, half_bytes = tq1 ? 64 : 32, half_values = tq1 ? 256 : 128;
  const int64_t nb = n_in / 256;
  int8_t* sums = out + 320 * nb;
  std::memset(sums, 0, size_t(8 * nb));
  for (int64_t b = 0; b < nb; ++b, out += 320) {
    std::memset(out, 0, 320);
    for (int h = 0; h < halves; ++h) {
      const int8_t* q = qs + 256 * b + half_values * h;
      for (int n = 0; n < 5; ++n)
        for (int m = 0; m < half_bytes; ++m) {
          const int v = tq1 ? base3_value_index(48, 4, m, n) : base3_value_index(24, 2, m, n);  // ternary_kernels.h
          if (v >= 0) out[64 * n + half_bytes * h + m] = q[v];
        }
      int32_t s = 0;
      for (int j = 0; j < half_values / 16; ++j) s += bsums[16 * b + (half_values / 16) * h + j];
      const int32_t neg = -s;
      std::memcpy(sums + 8 * b + 4 * h, &neg, 4);
    }
  }
}

RowDotFn ternary_row_dot(Isa isa, DType type) {
  if (!is_ternary(type)) return nullptr;
  RowDotFn f = nullptr;
  if (isa == Isa::Avx512 && !ternary_old_kernels()) f = ternary_row_dot_avx512vbmi(type);
  if (!f && isa == Isa::Avx512) f = ternary_row_dot_avx512(type);
  if (!f && isa_has_avx2(isa)) f = ternary_row_dot_avx2(type);
#if defined(__aarch64__)
  if (!f && isa == Isa::Neon) f = ternary_row_dot_neon(type);
#endif
  return f ? f : ternary_row_dot_scalar(type);
}

}  // namespace polykv::cpu
