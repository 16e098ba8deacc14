// KV cache element types and their per-type operations. K and V types are chosen independently.
//
// A cache row of one (token, KV head) is `kv_head_bytes(type, head_dim)` bytes:
//   f32/f16/bf16: head_dim plain values;
//   q8_0/q4_0:    head_dim / 32 ggml blocks (quant/blocks.h), head_dim a multiple of 32;
//   turbo4/3/2:   TurboQuant codes of quant/turbo.h (norm + b-bit indices per group of 128, or of
//                 head_dim when it is 64 or 32), stored in the rotated basis.
//   turbo4t/3t/2t: turbo4/3/2's size and rotation with trellis-coded indices (quant/turbo_trellis.h).
//
// Attention uses a type through KvTypeOps, in a "prepared" basis:
//   score = dot(k_row, prepare_query(q))          equals q·k up to the type's rounding;
//   acc  += a * v_row  via axpy in the type's basis, and finish_output(acc) returns to the original
//   basis once at the end (identity for all but turbo, whose basis is rotated: H·S per group).
// The functions here are the scalar reference; backend/cpu/kv_row_ops.h has the fast versions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace polykv {

enum class KvType { F32, F16, BF16, Q8_0, Q4_0, Turbo4, Turbo3, Turbo2, Turbo4T, Turbo3T, Turbo2T };

inline constexpr KvType kAllKvTypes[] = {KvType::F32,    KvType::F16,    KvType::BF16,    KvType::Q8_0,
                                         KvType::Q4_0,   KvType::Turbo4, KvType::Turbo3,  KvType::Turbo2,
                                         KvType::Turbo4T, KvType::Turbo3T, KvType::Turbo2T};

const char* kv_type_name(KvType t);  // "f32", "f16", "bf16", "q8_0", "q4_0", "turbo4", "turbo3", "turbo2", "turbo4t", "turbo3t", "turbo2t"
std::string kv_type_names();         // the valid names, comma-separated, for error messages
// Parses a name (case-insensitive); throws Error listing the valid names if unknown.
KvType parse_kv_type(const std::string& name);

// Throws Error unless rows of head_dim values can be stored in type t (block multiple, turbo groups).
void check_kv_head_dim(KvType t, int head_dim);
// Exact bytes of one (token, KV head) row; head_dim must pass check_kv_head_dim.
size_t kv_head_bytes(KvType t, int head_dim);
// True if rows are held in a rotated basis (queries rotated, outputs unrotated).
bool kv_type_rotated(KvType t);
// True if prepare_query writes head_dim f32 values in the rows' basis; false for q8_0/q4_0, whose
// prepared query is q8_0 blocks (integer dots) in the original basis.
bool kv_type_f32_query(KvType t);

struct KvTypeOps {
  // Bytes of a prepared query of head_dim values (a multiple of 4; f32-aligned buffers work).
  size_t (*query_bytes)(int head_dim);
  // dst: one row (kv_head_bytes) <- x: [head_dim] f32, original basis.
  void (*quantize_head)(const float* x, uint8_t* dst, int head_dim);
  // x: [head_dim] <- the row decoded to the original basis (the reference decoder).
  void (*dequantize_head)(const uint8_t* src, float* x, int head_dim);
  // qp: query_bytes <- q: [head_dim] f32. f32/f16/bf16: f32 copy; q8_0/q4_0: q8_0 blocks (integer
  // dots); turbo: f32 rotated.
  void (*prepare_query)(const float* q, uint8_t* qp, int head_dim);
  // ≈ q·k for the query qp was prepared from.
  float (*dot)(const uint8_t* k, const uint8_t* qp, int head_dim);
  // acc[i] += a * v[i] in the type's basis; acc: [head_dim].
  void (*axpy)(float a, const uint8_t* v, float* acc, int head_dim);
  // acc: [head_dim] in the type's basis -> original basis, in place.
  void (*finish_output)(float* acc, int head_dim);
};

// The scalar reference operations of type t.
const KvTypeOps& kv_type_ops(KvType t);

}  // namespace polykv
