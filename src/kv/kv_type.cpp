#include "kv/kv_type.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kv/kv_type_turbo.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace polykv {
namespace {

struct NameEntry {
  KvType type;
  const char* name;
};
constexpr NameEntry kNames[] = {
    {KvType::F32, "f32"},       {KvType::F16, "f16"},       {KvType::BF16, "bf16"},     {KvType::Q8_0, "q8_0"},
    {KvType::Q4_0, "q4_0"},     {KvType::Turbo4, "turbo4"}, {KvType::Turbo3, "turbo3"}, {KvType::Turbo2, "turbo2"},
    {KvType::Turbo4T, "turbo4t"}, {KvType::Turbo3T, "turbo3t"}, {KvType::Turbo2T, "turbo2t"},
};

int turbo_bits(KvType t) { return t == KvType::Turbo4 ? 4 : t == KvType::Turbo3 ? 3 : t == KvType::Turbo2 ? 2 : 0; }
int trellis_bits(KvType t) {
  return t == KvType::Turbo4T ? 4 : t == KvType::Turbo3T ? 3 : t == KvType::Turbo2T ? 2 : 0;
}

// ---- plain float rows: f32 / f16 / bf16. The prepared query is an f32 copy. ----

size_t f32_query_bytes(int hd) { return size_t(hd) * sizeof(float); }
void f32_prepare(const float* q, uint8_t* qp, int hd) { std::memcpy(qp, q, size_t(hd) * sizeof(float)); }
void identity_finish(float*, int) {}

template <KvType T>
float load(const uint8_t* p, int i) {
  if constexpr (T == KvType::F32) {
    float f;
    std::memcpy(&f, p + 4 * size_t(i), 4);
    return f;
  } else {
    uint16_t h;
    std::memcpy(&h, p + 2 * size_t(i), 2);
    return T == KvType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
  }
}

template <KvType T>
void float_quantize(const float* x, uint8_t* dst, int hd) {
  for (int i = 0; i < hd; ++i) {
    if constexpr (T == KvType::F32) {
      std::memcpy(dst + 4 * size_t(i), &x[i], 4);
    } else {
      const uint16_t h = T == KvType::F16 ? f32_to_fp16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(dst + 2 * size_t(i), &h, 2);
    }
  }
}

template <KvType T>
void float_dequantize(const uint8_t* src, float* x, int hd) {
  for (int i = 0; i < hd; ++i) x[i] = load<T>(src, i);
}

template <KvType T>
float float_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  const float* q = reinterpret_cast<const float*>(qp);
  float s = 0;
  for (int i = 0; i < hd; ++i) s += load<T>(k, i) * q[i];
  return s;
}

template <KvType T>
void float_axpy(float a, const uint8_t* v, float* acc, int hd) {
  for (int i = 0; i < hd; ++i) acc[i] += a * load<T>(v, i);
}

// ---- q8_0 / q4_0 rows (ggml blocks of 32). The prepared query is q8_0 blocks: integer block dots. ----

// q8_0 blocks are 34 bytes; rounded up so prepared queries stay f32-aligned when packed together.
size_t q8_query_bytes(int hd) { return (size_t(hd / kQK32) * sizeof(BlockQ8_0) + 3) & ~size_t(3); }
void q8_prepare(const float* q, uint8_t* qp, int hd) { quantize_row_ref(DType::Q8_0, q, qp, hd); }

void q8_quantize(const float* x, uint8_t* dst, int hd) { quantize_row_ref(DType::Q8_0, x, dst, hd); }
void q8_dequantize(const uint8_t* src, float* x, int hd) { dequantize_row_ref(DType::Q8_0, src, x, hd); }
void q4_quantize(const float* x, uint8_t* dst, int hd) { quantize_row_ref(DType::Q4_0, x, dst, hd); }
void q4_dequantize(const uint8_t* src, float* x, int hd) { dequantize_row_ref(DType::Q4_0, src, x, hd); }

BlockQ8_0 q8_block(const uint8_t* p, int b) {
  BlockQ8_0 blk;
  std::memcpy(&blk, p + size_t(b) * sizeof(BlockQ8_0), sizeof blk);
  return blk;
}
BlockQ4_0 q4_block(const uint8_t* p, int b) {
  BlockQ4_0 blk;
  std::memcpy(&blk, p + size_t(b) * sizeof(BlockQ4_0), sizeof blk);
  return blk;
}
// Value j of a q4_0 block, -8..7: low nibbles are values 0..15, high nibbles 16..31.
int q4_value(const BlockQ4_0& b, int j) { return (j < 16 ? (b.qs[j] & 0x0F) : (b.qs[j - 16] >> 4)) - 8; }

float q8_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  float s = 0;
  for (int b = 0; b < hd / kQK32; ++b) {
    const BlockQ8_0 kb = q8_block(k, b), qb = q8_block(qp, b);
    int32_t isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += int32_t(kb.qs[j]) * int32_t(qb.qs[j]);
    s += fp16_to_f32(kb.d) * fp16_to_f32(qb.d) * float(isum);
  }
  return s;
}

float q4_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  float s = 0;
  for (int b = 0; b < hd / kQK32; ++b) {
    const BlockQ4_0 kb = q4_block(k, b);
    const BlockQ8_0 qb = q8_block(qp, b);
    int32_t isum = 0;
    for (int j = 0; j < kQK32; ++j) isum += q4_value(kb, j) * int32_t(qb.qs[j]);
    s += fp16_to_f32(kb.d) * fp16_to_f32(qb.d) * float(isum);
  }
  return s;
}

void q8_axpy(float a, const uint8_t* v, float* acc, int hd) {
  for (int b = 0; b < hd / kQK32; ++b) {
    const BlockQ8_0 vb = q8_block(v, b);
    const float ad = a * fp16_to_f32(vb.d);
    for (int j = 0; j < kQK32; ++j) acc[b * kQK32 + j] += ad * float(vb.qs[j]);
  }
}

void q4_axpy(float a, const uint8_t* v, float* acc, int hd) {
  for (int b = 0; b < hd / kQK32; ++b) {
    const BlockQ4_0 vb = q4_block(v, b);
    const float ad = a * fp16_to_f32(vb.d);
    for (int j = 0; j < kQK32; ++j) acc[b * kQK32 + j] += ad * float(q4_value(vb, j));
  }
}

template <KvType T>
constexpr KvTypeOps float_ops{f32_query_bytes, float_quantize<T>, float_dequantize<T>, f32_prepare,
                              float_dot<T>,    float_axpy<T>,     identity_finish};
constexpr KvTypeOps q8_ops{q8_query_bytes, q8_quantize, q8_dequantize, q8_prepare, q8_dot, q8_axpy, identity_finish};
constexpr KvTypeOps q4_ops{q8_query_bytes, q4_quantize, q4_dequantize, q8_prepare, q4_dot, q4_axpy, identity_finish};

}  // namespace

const char* kv_type_name(KvType t) {
  for (const auto& e : kNames)
    if (e.type == t) return e.name;
  return "?";
}

std::string kv_type_names() {
  std::string s;
  for (const auto& e : kNames) s += std::string(s.empty() ? "" : ", ") + e.name;
  return s;
}

KvType parse_kv_type(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const auto& e : kNames)
    if (lower == e.name) return e.type;
  fail("unknown KV cache type '", name, "' (valid: ", kv_type_names(), ")");
}

bool kv_type_rotated(KvType t) { return turbo_bits(t) != 0 || trellis_bits(t) != 0; }

bool kv_type_f32_query(KvType t) { return t != KvType::Q8_0 && t != KvType::Q4_0; }

void check_kv_head_dim(KvType t, int hd) {
  check(hd > 0, "invalid head size ", hd);
  if (t == KvType::Q8_0 || t == KvType::Q4_0)
    check(hd % kQK32 == 0, "KV type ", kv_type_name(t), " needs a head size that is a multiple of 32 (the model has ",
          hd, "); use f16 or bf16");
  if (kv_type_rotated(t)) {
    check(hd % 128 == 0 || hd == 64 || hd == 32, "KV type ", kv_type_name(t),
          " needs a head size of 32, 64 or a multiple of 128 (the model has ", hd, "); use q8_0 or f16");
  }
}

size_t kv_head_bytes(KvType t, int hd) {
  check_kv_head_dim(t, hd);
  switch (t) {
    case KvType::F32: return size_t(hd) * 4;
    case KvType::F16:
    case KvType::BF16: return size_t(hd) * 2;
    case KvType::Q8_0: return size_t(hd / kQK32) * sizeof(BlockQ8_0);
    case KvType::Q4_0: return size_t(hd / kQK32) * sizeof(BlockQ4_0);
    case KvType::Turbo4T:
    case KvType::Turbo3T:
    case KvType::Turbo2T: return turbo_trellis_kv_head_bytes(trellis_bits(t), hd);
    default: return turbo_kv_head_bytes(turbo_bits(t), hd);
  }
}

const KvTypeOps& kv_type_ops(KvType t) {
  switch (t) {
    case KvType::F32: return float_ops<KvType::F32>;
    case KvType::F16: return float_ops<KvType::F16>;
    case KvType::BF16: return float_ops<KvType::BF16>;
    case KvType::Q8_0: return q8_ops;
    case KvType::Q4_0: return q4_ops;
    case KvType::Turbo4T:
    case KvType::Turbo3T:
    case KvType::Turbo2T: return *turbo_trellis_kv_ops(trellis_bits(t));
    default: return *turbo_kv_ops(turbo_bits(t));
  }
}

}  // namespace polykv
