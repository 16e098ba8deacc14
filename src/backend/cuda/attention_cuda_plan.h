// The launch plan of polykv::cuda::attention (kv_cuda.h): which kernel, how many rows per block, how
// the grid covers (key split, KV head x head part, sequence x query tile), and the kernels' argument
// block. Host-only plain C++ (no kernel code), shared by the launcher (attention_cuda.cu) and the
// CPU emulation test of the kernels (tests/cuda/attention_cuda_emulation_test.cpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <cstdint>

#include "backend/cpu/attention.h"
#include "backend/cuda/kv_cuda.h"
#include "core/error.h"
#include "kv/kv_type.h"

namespace polykv::cuda::attn {

constexpr int kThreads = 128;    // threads per block (4 warps), every kernel
constexpr int kTileKeys = 32;    // keys per tile of the tiled kernel (= warp size: its softmax is one lane per key)
constexpr int kMaxSplits = 256;  // key splits per work item at most (the merge's weight array)
// Sliding-window decode plans (Plan::window_splits): split 0 starts at the block's first visible key aligned down to
// this many keys (a multiple of every decode tile, and the split chunks are multiples of it too).
constexpr int kWindowSplitAlign = 64;
// Whether sliding-window decode plans split the window only (on; POLYKV_CUDA_WINDOW_SPLITS=0: every key of the
// context, as before 2026-12-07f, for A/B runs). Process-wide, read once.
inline bool& window_splits_on() {
  static bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_WINDOW_SPLITS");
    return !(e != nullptr && std::string(e) == "0");
  }();
  return on;
}
constexpr int kDecodeRows = 4;   // rows per block of the decode kernel
constexpr int kDecodeKeys = 2;   // keys a slot of the decode kernel scores per tile
constexpr int kDecodeMaxStages = 8;           // decode kernel: K/V tiles in shared memory at most
constexpr size_t kDecodeSmemCap = 80 * 1024;  // decode kernel: dynamic shared memory at most (bytes)
// The decode kernel's shape (attention_cuda_decode.cuh): key slots per block (hd / 16 lanes per key,
// 32 / (hd / 16) slots per warp) and keys per tile (kDecodeKeys per slot).
constexpr int decode_slots(int hd) { return (kThreads / 32) * (32 / (hd / 16)); }
constexpr int decode_tile_keys(int hd) { return decode_slots(hd) * kDecodeKeys; }
// Bytes of one tile's rows of row_bytes in a stage: 16-byte granules covering any start alignment.
constexpr size_t decode_part_bytes(int hd, size_t row_bytes) {
  return (size_t(decode_tile_keys(hd)) * row_bytes + 15) / 16 * 16 + 16;
}
// Bytes of the slot states folded at the end of a block (they reuse the stages' memory).
constexpr size_t decode_fold_bytes(int hd) {
  return size_t(decode_slots(hd)) * kDecodeRows * (size_t(hd) + 2) * sizeof(float);
}
// The lane-per-8-values decode kernel (attention_cuda_decode8.cuh, head sizes 64 and 128; at 256
// its 2 x 32 score registers per lane leave no room): hd / 8 lanes per key, one (key, row) score per
// lane after the reduction, so hd / 8 / kDecodeRows keys per slot and kThreads / kDecodeRows keys per
// tile. Its shared memory stays under kDecode8SmemCap so that four blocks fit a multiprocessor.
constexpr size_t kDecode8SmemCap = 48 * 1024;
constexpr int decode8_slots(int hd) { return (kThreads / 32) * (32 / (hd / 8)); }
constexpr int decode8_tile_keys() { return kThreads / kDecodeRows; }
constexpr bool decode8_supports(int hd) { return hd == 64 || hd == 128; }
// Bytes of a tile of `keys` rows of row_bytes in a stage (decode_part_bytes for any tile size).
constexpr size_t stage_part_bytes(int keys, size_t row_bytes) { return (size_t(keys) * row_bytes + 15) / 16 * 16 + 16; }
constexpr size_t decode8_fold_bytes(int hd) {
  return size_t(decode8_slots(hd)) * kDecodeRows * (size_t(hd) + 2) * sizeof(float);
}
// Which decode kernel single-token steps use: Slots (attention_cuda_decode.cuh, 16 values per lane,
// every head size), Lanes8 (attention_cuda_decode8.cuh, registers for 3 blocks per multiprocessor;
// head size 64 always gets 4) or Lanes8x4 (the same kernel held to 128 registers for 4 blocks, at the
// price of a few spills at head size 128). Head sizes Lanes8 does not support use Slots.
enum class DecodeVariant { Slots, Lanes8, Lanes8x4 };
// Blocks per multiprocessor the lanes8 kernel's registers must allow (its __launch_bounds__).
constexpr int decode8_min_blocks(DecodeVariant v, int hd) { return v == DecodeVariant::Lanes8x4 || hd == 64 ? 4 : 3; }
// The process-wide choice (benchmarks and tests switch it; not thread-safe against running launches).
// Starts from POLYKV_CUDA_ATTN_DECODE=slots|lanes8|lanes8x4 (unset or other: lanes8). Lanes8 by
// default: 1.3-1.6x faster than slots at 32k-131k keys on the H200, the same at 4096
// (docs/CUDA_ATTENTION.md); every CudaAttention GPU test passes with each variant (2026-12-01c).
inline DecodeVariant& decode_variant() {
  static DecodeVariant v = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_DECODE");
    const std::string s = e ? e : "";
    return s == "slots" ? DecodeVariant::Slots : s == "lanes8x4" ? DecodeVariant::Lanes8x4 : DecodeVariant::Lanes8;
  }();
  return v;
}

// The lanes8 kernel specialized per (K, V) type pair at head size 128 (attention_cuda_decode8_fixed.cuh):
// POLYKV_CUDA_ATTN_D8 = generic (the runtime-dispatch kernel, the old path) | fixed (specialized, decode8s)
// | packed (specialized, packed trellis decoder) | pairs (specialized, the turbo / trellis pair tables of
// kv_decode_pairs.cuh: two values per shared load) | mma (below). Pairs was the default from: on the H200 (call G1,
// 2026-12-01f) kv_store + attention at 32768 keys took 0.80x (q8_0/turbo3t, with the early start) and
// every GPU attention test passed with it. Process-wide, like decode_variant.
//
// Mma (unset or other; the default since 2026-12-02, second session): the tensor-core decode kernel
// (attention_cuda_decode_tc.cuh) for the pairs decode_tc_supports takes, the pairs kernels for the rest. On the
// H200 (call I5) it took 0.56x the time of pairs for q8_0/q8_0 and 0.69x for q8_0/turbo3t at 131072 keys, and
// every CUDA GPU test passed with it (call I4).
enum class Decode8Kernels { Generic, Fixed, Packed, Pairs, Mma };
inline Decode8Kernels& decode8_kernels() {
  static Decode8Kernels k = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_D8");
    const std::string s = e ? e : "";
    return s == "generic" ? Decode8Kernels::Generic
           : s == "fixed"  ? Decode8Kernels::Fixed
           : s == "packed" ? Decode8Kernels::Packed
           : s == "pairs"  ? Decode8Kernels::Pairs
                           : Decode8Kernels::Mma;
  }();
  return k;
}
// The tensor-core decode kernel's tile pipeline (attention_cuda_decode_tc.cuh): true (unset or other): bulk copies
// completing on one mbarrier per stage, each stage refilled by the last warp done with it, no block barrier per
// tile (sm_90; the kernel compiles the cp.async ring below sm_90 either way); false (POLYKV_CUDA_ATTN_TC_PIPE=sync):
// the cp.async ring with one block barrier per tile (the kernel of 2026-12-02, second session).
inline bool& decode_tc_bulk() {
  static bool b = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_TC_PIPE");
    return !(e && std::string(e) == "sync");
  }();
  return b;
}
// The tensor-core decode kernel (attention_cuda_decode_tc.cuh): head sizes 128, 64 (2026-12-07g) and 256
// (2026-12-07h) (decode_tc_head); q8_0 K with V q8_0, turbo3 or turbo3t; turbo3t K with turbo3t V (2026-12-07e:
// before, turbo K took the pairs kernel at every depth, ~1.7x q8_0/q8_0's time at 131072 keys for a third of its
// bytes); q4_0/q4_0 (2026-12-07e, the same reason). The kernel takes K of any type with a pair table
// (kv_decode_pairs.cuh); a pair added here needs a specialized lanes8 kernel too (decode_tc_pairs_are_fixed).
// Tiles of kDecodeTcTileKeys keys (16 per warp). At head size 64 (Llama 3.2, Qwen 2.5 0.5B, gpt-oss) the plans fall
// back to the generic lanes8 kernel, which takes 4 blocks per multiprocessor there as well; at 256 (Gemma 2 / 3,
// Qwen 3.5's attention layers; 2026-12-07h) to the slots kernel (no lanes8 kernel has room for 256 values a lane
// group).
struct Decode8Pair {
  KvType k, v;
};
// f16/f16 (2026-12-08; llama.cpp's default cache): stage rows padded (decode_tc_padded); off until it has run on a GPU
// (decode_tc_f16), when it takes the pairs kernel at head size 128, the generic lanes8 kernel at 64 and the slots
// kernel at 256 as before.
constexpr Decode8Pair kDecodeTcPairs[] = {{KvType::Q8_0, KvType::Turbo3T}, {KvType::Q8_0, KvType::Q8_0},
                                          {KvType::Q8_0, KvType::Turbo3},  {KvType::Turbo3T, KvType::Turbo3T},
                                          {KvType::Q4_0, KvType::Q4_0},    {KvType::F16, KvType::F16}};
constexpr int kDecodeTcCount = int(sizeof(kDecodeTcPairs) / sizeof(kDecodeTcPairs[0]));
constexpr int kDecodeTcTileKeys = 64;
constexpr bool decode_tc_head(int hd) { return hd == 64 || hd == 128 || hd == 256; }
// The index of (k, v) in kDecodeTcPairs; -1 when the kernel does not take it.
constexpr int decode_tc_index(KvType k, KvType v) {
  for (int i = 0; i < kDecodeTcCount; ++i)
    if (kDecodeTcPairs[i].k == k && kDecodeTcPairs[i].v == v) return i;
  return -1;
}
// Blocks per multiprocessor of the tensor-core kernel (its __launch_bounds__; the plans' one-wave splits): 4 at head
// sizes 64 and 128, 3 at 256 (its Q fragments and O^T tiles take ~130 registers).
constexpr int kDecodeTc256MinBlocks = 3;
// Dynamic shared memory of a tensor-core plan at most: kDecode8SmemCap (4 blocks a multiprocessor) at head sizes 64
// and 128; at 256 what 3 blocks leave beside their static arrays (~6 KB each) and the 1 KB the driver reserves a block
// of the 228 KB of an sm_90 multiprocessor: two stages of 64 q8_0 K and V rows (68 KB).
constexpr size_t kDecodeTc256SmemCap = 69 * 1024;
constexpr bool decode_tc_supports(int hd, KvType k, KvType v) {
  return decode_tc_head(hd) && decode_tc_index(k, v) >= 0;
}
constexpr bool decode_tc(int hd, KvType k, KvType v, Decode8Kernels mode) {
  return mode == Decode8Kernels::Mma && decode_tc_supports(hd, k, v);
}
// The mode a plan's lanes8 launch picks its kernel with (decode8_pick): the process-wide mode, except that a
// plan without the tensor-core kernel (Plan::tc false) runs the pairs kernels in mode Mma.
constexpr Decode8Kernels decode_tc_mode(bool plan_tc, Decode8Kernels mode) {
  return mode == Decode8Kernels::Mma && !plan_tc ? Decode8Kernels::Pairs : mode;
}
// The piece decoder of a decode8_kernel instantiation (its DEC parameter).
constexpr int kDec8Plain = 0, kDec8Packed = 1, kDec8Pairs = 2;
constexpr int decode8_dec(Decode8Kernels m) {
  return m == Decode8Kernels::Pairs || m == Decode8Kernels::Mma ? kDec8Pairs
         : m == Decode8Kernels::Packed                          ? kDec8Packed
                                                                : kDec8Plain;
}

// Early start of the lanes8 decode kernel after the step's kv_store (Args::early; attention_cuda_decode8.cuh):
// On by default (POLYKV_CUDA_ATTN_EARLY=0 turns it off): on the H200 (call G1, 2026-12-01f) every GPU
// attention test and CudaAttentionEarly.* passed with it, and decode at 32768 keys went from 184-193 to
// 207-214 tok/s (q8_0/turbo3t, with pairs; q8_0/q8_0 201-211). Process-wide, like decode_variant.
inline bool& attention_early() {
  static bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_EARLY");
    return !(e != nullptr && std::string(e) == "0");
  }();
  return on;
}
// The K / V types the decode kernel encodes itself (kv_encode_scalar.cuh's encode_plain_lane).
constexpr bool self_encodable(KvType t) {
  return t == KvType::F32 || t == KvType::F16 || t == KvType::BF16 || t == KvType::Q8_0 || t == KvType::Q4_0;
}
// The specialized lanes8 pairs that also have a lean kernel (decode8_kernel<..., SELF = 0>, the pairs decoder
// only), taken when the launch does not self-encode (Args::self_kv 0) and the mode is not Off: the pairs whose
// default never self-encodes (K not encodable, or V encodable). Since a714bc7 the self-encoded rows' code raised the
// tile loop's register pressure past the 4-blocks bound's 128 registers: every specialized kernel spilled 48-104
// bytes (ptxas -v), and f16/f16 and q8_0/q8_0 decoded slower at depth 0 on H100s (H42 463 tok/s before, H43 446, H45
// 437: other leases), unseen because H43's A/B ran within the spilling build. The encoders now get the kernel's types
// as constants (the full kernels of q8_0/turbo3t, q8_0/turbo3, f16/f16 and turbo3t/turbo3t spill nothing, q8_0/q8_0 4
// bytes, q4_0/q4_0 56), and the lean kernels hold none of that code. Mode Off keeps the full kernels (A/B runs).
constexpr bool decode8_lean_pair(KvType k, KvType v) { return !self_encodable(k) || self_encodable(v); }
// With the early start, the decode kernel encodes the step's new K rows into its tiles itself and waits for the store
// only before the V products of the tile that holds them (Args::self_kv; 2026-12-07d): for V types it cannot encode
// (turbo, trellis), whose store is the long one. Measured on an H100 (docs/CUDA_DECODE.md, "The attention encodes the
// new K rows itself"): q8_0/turbo3t 1.058x at depth 0; K and V both encoded for plain V types was slower (f16/f16
// 0.969x, q8_0/q8_0 0.957x), so plain V pairs wait for the store as before. POLYKV_CUDA_ATTN_SELF=0: never; =kv: K
// and plain V as well (the measured-slower form, for A/B runs). The same bytes in every form. Process-wide.
enum class SelfEncode { Off, TurboV, All };
inline SelfEncode& attention_self_encode() {
  static SelfEncode mode = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_SELF");
    const std::string s = e != nullptr ? e : "";
    return s == "0" ? SelfEncode::Off : s == "kv" ? SelfEncode::All : SelfEncode::TurboV;
  }();
  return mode;
}
// Whether a lanes8 launch with Args::self_kv = self_kv takes the lean kernel where its pair has one (decode8_pick).
inline bool decode8_lean(int self_kv) { return self_kv == 0 && attention_self_encode() != SelfEncode::Off; }
constexpr Decode8Pair kDecode8FixedPairs[] = {{KvType::Q8_0, KvType::Turbo3T}, {KvType::Q8_0, KvType::Q8_0},
                                              {KvType::Turbo3T, KvType::Turbo3T}, {KvType::F16, KvType::F16},
                                              {KvType::Q8_0, KvType::Turbo3}, {KvType::Q4_0, KvType::Q4_0}};
constexpr int kDecode8FixedCount = int(sizeof(kDecode8FixedPairs) / sizeof(kDecode8FixedPairs[0]));
// Blocks per multiprocessor the specialized kernels' registers allow (their __launch_bounds__; ptxas sm_90:
// no spills at this bound, docs/CUDA_ATTENTION.md), where the generic kernel at head size 128 gets 3.
constexpr int kDecode8FixedMinBlocks = 4;
// Whether a lanes8 plan of head size hd and these types runs a specialized kernel under `mode`.
constexpr bool decode8_fixed(int hd, KvType k, KvType v, Decode8Kernels mode) {
  if (hd != 128 || mode == Decode8Kernels::Generic) return false;
  for (const Decode8Pair& p : kDecode8FixedPairs)
    if (p.k == k && p.v == v) return true;
  return false;
}
// Blocks per multiprocessor of a lanes8 plan's kernel (its splits fill one wave at this occupancy).
inline int decode8_plan_blocks(DecodeVariant v, int hd, KvType k, KvType vt) {
  return v == DecodeVariant::Lanes8 && decode8_fixed(hd, k, vt, decode8_kernels()) ? kDecode8FixedMinBlocks
                                                                                    : decode8_min_blocks(v, hd);
}
// Every pair of the tensor-core kernel has a specialized lanes8 kernel at head size 128 (the plans' fallback in mode
// Mma), so decode8_fixed answers for both and their plans share the 4 blocks per multiprocessor; at head size 64 the
// generic lanes8 kernel's bound is the same 4 blocks.
constexpr bool decode_tc_pairs_are_fixed() {
  for (const Decode8Pair& t : kDecodeTcPairs)
    if (!decode8_fixed(128, t.k, t.v, Decode8Kernels::Mma)) return false;
  return true;
}
static_assert(decode_tc_pairs_are_fixed());
static_assert(decode8_min_blocks(DecodeVariant::Lanes8, 64) == kDecode8FixedMinBlocks);
// Blocks per multiprocessor of the tensor-core kernel at head size hd (its launch bound; the plans' one wave).
constexpr int decode_tc_min_blocks(int hd) { return hd == 256 ? kDecodeTc256MinBlocks : kDecode8FixedMinBlocks; }
// The dynamic shared memory a lanes8 or tensor-core (tc) plan of head size hd may take.
constexpr size_t decode8_smem_cap(int hd, bool tc) { return tc && hd == 256 ? kDecodeTc256SmemCap : kDecode8SmemCap; }
// The stages (as many as fit decode8_smem_cap, at least min_stages) and the dynamic shared memory of a lanes8 or
// tensor-core plan of head size hd over staged K and V rows of kb and vb bytes; false when min_stages do not fit.
inline bool decode8_stages(int hd, size_t kb, size_t vb, bool tc, int& stages, size_t& smem, int min_stages = 2) {
  const int tk = tc ? kDecodeTcTileKeys : decode8_tile_keys();
  const size_t stage = stage_part_bytes(tk, kb) + stage_part_bytes(tk, vb), cap = decode8_smem_cap(hd, tc);
  stages = int(std::clamp<size_t>(cap / stage, size_t(min_stages), kDecodeMaxStages));
  smem = std::max(size_t(stages) * stage, decode8_fold_bytes(hd));
  return size_t(min_stages) * stage <= cap;
}
// The tensor-core kernel stages f16 rows 16 bytes further apart than their size, one bulk copy (or granule run) a row:
// at 128, 256 or 512 bytes every row would start in the same bank, and a fragment load of 8 keys' same dims would
// be an 8-way bank conflict; 16 bytes more puts keys 2g in banks 8g (conflict-free, attention_cuda_decode_tc.cuh).
// The other types' rows (136, 68, 54 bytes ...) are staged back to back.
constexpr bool decode_tc_padded(KvType t) { return t == KvType::F16; }
constexpr size_t kDecodeTcRowPad = 16;  // (the kernel adds it to its f16 rows itself: this header is host code)
// Bytes between two staged rows of type t (row_bytes long) in a tensor-core (tc) or other decode plan's stages.
constexpr size_t decode_stage_row(KvType t, size_t row_bytes, bool tc) {
  return tc && decode_tc_padded(t) ? row_bytes + kDecodeTcRowPad : row_bytes;
}
// Whether the tensor-core kernel may run on one stage (a plan whose two stages do not fit its cap: f16 rows at head
// sizes 128 and 256): only on its bulk pipeline, where the last warp out of the stage refills it; the cp.async ring
// needs two. Set per device by attention_cuda.cu's setup (sm_90 and later: the kernel compiles the ring below, whatever
// decode_tc_bulk says); true for the CPU emulation, which runs the bulk pipeline as written. Process-wide.
inline bool& decode_tc_bulk_device() {
  static bool on = true;
  return on;
}
// The stages and dynamic shared memory of a tensor-core plan of head size hd over K and V of types k and v (rows
// padded where decode_tc_padded says; one stage where decode_tc_bulk_device and decode_tc_bulk allow); false when
// they do not fit its cap. The plans and the launcher's occupancy check (allow_decode_tc256) both ask here.
inline bool decode_tc_stages(int hd, KvType k, KvType v, int& stages, size_t& smem) {
  const int min_stages = decode_tc_bulk() && decode_tc_bulk_device() ? 1 : 2;
  return decode8_stages(hd, decode_stage_row(k, kv_head_bytes(k, hd), true),
                        decode_stage_row(v, kv_head_bytes(v, hd), true), true, stages, smem, min_stages);
}
// Which pairs the device runs the tensor-core decode kernel of head size 256 for at kDecodeTc256MinBlocks blocks a
// multiprocessor at their plans' shared memory: bit i for pair i of kDecodeTcPairs (set once per device by
// attention_cuda.cu's setup, from the occupancy calculator: the H100 / H200's 228 KB a multiprocessor hold every pair;
// sm_80's 164 KB and sm_86 / sm_89's 100 KB none, and their plans keep the slots kernel). Per pair, so that one pair
// that does not fit (f16/f16's 66 KB stage is the largest) sends only its own plans back. Process-wide, like
// tiled_mma256_fits; every bit set until a device is set up (the CPU emulation).
constexpr uint32_t kDecodeTcAllPairs = (1u << kDecodeTcCount) - 1;
inline uint32_t& decode_tc256_fit_pairs() {
  static uint32_t fits = kDecodeTcAllPairs;
  return fits;
}
inline bool decode_tc256_fits(KvType k, KvType v) {
  const int i = decode_tc_index(k, v);
  return i >= 0 && ((decode_tc256_fit_pairs() >> i) & 1u) != 0;
}
// f16/f16 on the tensor-core kernel (2026-12-08): off until it has run on a GPU. It was written and checked in the CPU
// emulation (every shape, both pipelines, NaN-filled shared memory), but no device was lent after it was built, and
// its one-stage plans and row-by-row bulk copies are device behaviour the emulation does not cover; off, f16/f16 takes
// the kernels it took before. POLYKV_CUDA_ATTN_TC_F16=1 turns it on (tests and benchmarks: docs/results/gpu-2026-12-08
// calls/callH56.sh). Process-wide.
inline bool& decode_tc_f16() {
  static bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_TC_F16");
    return e != nullptr && std::string(e) == "1";
  }();
  return on;
}

// Whether prefill plans (the tiled kernel's large shape, head sizes 64 and 128) run the tensor-core
// kernel (attention_cuda_mma.cuh) instead of the f32 tiled kernel. Process-wide, like decode_variant.
// On unless POLYKV_CUDA_ATTN_MMA=0: 2-4x faster than the f32 kernel on the H200 and within the same
// 1e-4 bound of the CPU reference in the CudaAttention GPU tests (docs/CUDA_ATTENTION.md).
inline bool& prefill_mma() {
  static bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_MMA");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}
constexpr bool mma_supports(int hd) { return hd == 64 || hd == 128; }  // the prefix-pass tensor-core kernels
// The tiled tensor-core kernel (attention_mma_kernel, 64 rows per block) also at head size 256 (Gemma, Qwen3.5):
// its O accumulator is 128 floats a thread there, and a block takes ~143 KB of shared memory (one per SM).
constexpr bool tiled_mma_supports(int hd) { return hd == 64 || hd == 128 || hd == 256; }
// Whether the device's opt-in shared memory holds attention_mma_kernel<256> (~143 KB: sm_80 and sm_90 do, sm_86
// and sm_89 with ~99 KB do not; set by the head size's setup in attention_cuda.cu, as prefix256_fits). Head sizes
// 64 and 128 (~40-75 KB) fit every supported GPU. Process-wide, like the other plan switches.
inline bool& tiled_mma256_fits() {
  static bool fits = true;
  return fits;
}
constexpr int kMmaTiledRows = 64;  // rows per block of attention_mma_kernel (4 warps x 16)

// Decode plans whose host bound on the keys (AttentionBatchDevice::max_kv: the CUDA backend's bucket,
// at least 256) is at most this many read all keys in ONE split: the block writes the normalized
// output rows itself, with no partials and no merge launch. Before (2026-12-01), a depth-1 decode
// step of Llama-3.1-8B on the H200 made two splits of 128 keys (the second empty) plus a merge:
// 16.7 + 6.0 us per layer. Process-wide; POLYKV_CUDA_ATTN_ONE_SPLIT=N sets it (0: off, the old plan),
// default 256 (one split for every decode step of the backend's smallest bucket, contexts <= 256).
inline int& one_split_keys() {
  static int v = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_ONE_SPLIT");
    return e && *e ? std::max(0, std::atoi(e)) : 256;
  }();
  return v;
}

// Sequences of at most this many query rows (speculative verify steps, short prompts) run the decode
// kernel in query tiles of its 4 rows instead of the tiled kernel. Verify steps on the H200 (call H3,
// 2026-12-02, synth llama-3.1-8b, cost in one-token steps, tiled -> decode): at depth 0 q4_0 k = 2 1.27 ->
// 1.16, k = 4 1.59 -> 1.50, q8_0 k = 2 1.19 -> 1.10; at 4096 keys q4_0 k = 2 2.34 -> 1.21, k = 4 2.68 ->
// 1.77; but k = 8 at 4096 keys 2.37 -> 3.00 (each query tile reads the keys again), hence 4.
// Process-wide; POLYKV_CUDA_ATTN_SMALL_Q=N sets it (0 or 1: the plan before 2026-12-02, the decode
// kernel only while every sequence's rows fit one block's rows).
inline int& small_step_decode_q() {
  static int v = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_SMALL_Q");
    return e && *e ? std::max(0, std::atoi(e)) : 4;
  }();
  return v;
}

// Whether the attention kernels are launched with programmatic dependent launch (when the context
// allows PDL at all: matmul_cuda.h's pdl_enabled). Process-wide; POLYKV_CUDA_ATTN_PDL=0 turns it off
// (every kernel waits for the previous grid first either way: pdl_enter, attention_cuda_kernels.cuh).
inline bool& attention_pdl() {
  static bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_ATTN_PDL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// The merge's O loop (merge_kernel): grouped (default since 2026-12-02: float4 columns, the splits in G
// interleaved groups) or, with POLYKV_CUDA_MERGE=serial, one thread per value walking every split (the
// kernel before; other bits, for A/B). Process-wide.
inline bool& merge_grouped() {
  static bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_MERGE");
    return !(e && std::strcmp(e, "serial") == 0);
  }();
  return on;
}

// The prefix pass of shared prefixes (plan_prefix): which kernel scores a group's query rows against
// its shared keys. F32: the tiled kernel's f32 shapes (the cascade as first written); Mma: the
// tiled plan's shapes, tensor cores for its large shape (64 rows per block); Wide: as Mma, but when
// a KV head has more than 64 sharing rows the 128-row tensor-core kernel
// (attention_cuda_prefix_mma.cuh), which decodes each K/V tile once per 128 rows instead of per 64;
// Wide256 (default): as Wide, but beyond 128 rows the 256-thread kernel of 256 rows
// (attention_cuda_prefix256.cuh: one decode per tile for all rows, two stages, ldmatrix).
// Starts from POLYKV_CUDA_PREFIX_MMA=0|mma64|wide128 (unset or other: Wide256). Process-wide, like
// decode_variant.
enum class PrefixKernel { F32, Mma, Wide, Wide256 };
inline PrefixKernel& prefix_kernel() {
  static PrefixKernel k = [] {
    const char* e = std::getenv("POLYKV_CUDA_PREFIX_MMA");
    const std::string s = e ? e : "";
    return s == "0"         ? PrefixKernel::F32
           : s == "mma64"   ? PrefixKernel::Mma
           : s == "wide128" ? PrefixKernel::Wide
                            : PrefixKernel::Wide256;
  }();
  return k;
}
constexpr int kPrefixRows = 128;  // rows per block of the wide prefix kernel (4 warps x 2 x 16)
constexpr int kPrefixBlocksPerSm = 2;  // its occupancy (~106 KB of shared memory at head size 128)
constexpr int kPrefix256Rows = 256;     // rows per block of the 256-row prefix kernel (8 warps x 2 x 16)
constexpr int kPrefix256Threads = 256;  // its threads (one block per multiprocessor: ~205 KB at hd 128)
// How the 256-row prefix kernel multiplies (attention_cuda_prefix256.cuh). Scaled (default): when K and V
// are both scaled-exact types (prefix256_scaled_type: each value an f16 times a per-row or per-32-value
// scale), the tiles hold the f16 values and the scales apply in f32 to the scores (K) and the
// probabilities (V): two products per fragment pair, no lo tiles. Split: every value as f16 hi + lo and
// three products (the kernel as first written; f32 and bf16 K or V always take it).
// Starts from POLYKV_CUDA_PREFIX256=split (unset or other: Scaled). Process-wide, like prefix_kernel.
enum class Prefix256Products { Scaled, Split };
inline Prefix256Products& prefix256_products() {
  static Prefix256Products p = [] {
    const char* e = std::getenv("POLYKV_CUDA_PREFIX256");
    return e && std::string(e) == "split" ? Prefix256Products::Split : Prefix256Products::Scaled;
  }();
  return p;
}
// Types whose every value is an f16 value times one float per row (turbo*, trellis: the group norm, one
// group per row at head sizes 64 and 128; f16: 1) or per 32 values (q8_0, q4_0: the block's d).
constexpr bool prefix256_scaled_type(KvType t) {
  return t != KvType::F32 && t != KvType::BF16;
}
// The same for a type known at compile time, as a constant that device code may read.
template <KvType T>
constexpr bool kPrefix256ScaledType = prefix256_scaled_type(T);
// Whether a 256-row prefix launch of (k, v) takes the scaled kernel.
inline bool prefix256_scaled(KvType k, KvType v) {
  return prefix256_products() == Prefix256Products::Scaled && prefix256_scaled_type(k) && prefix256_scaled_type(v);
}
// Whether the device's shared memory per block allows the 256-row kernel (set by the launcher's
// per-device init from cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KB on sm_90, 163 KB on sm_80 and
// 99 KB on sm_86 / sm_89 are too little at head size 128). Process-wide; true until a device says no.
inline bool& prefix256_fits(int hd) {
  static bool fits[2] = {true, true};
  return fits[hd == 64 ? 0 : 1];
}

constexpr int kSmallRows = 16;   // rows per block of the tiled kernel for small multi-token steps
// Rows per block of the tiled kernel for prefill: queries and the K/V tile near 32 KB each.
constexpr int large_rows(int hd) { return hd <= 128 ? 64 : hd == 256 ? 32 : 16; }

// Batch-invariant plans (CudaContext::batch_invariant(), the --batch-invariant switch; docs/CUDA_SPEC.md):
// a query row gets the same bits whatever else the step holds (its own later tokens in a speculative
// verify step, other sequences, their bounds), so row j of a k-row step equals the same token decoded
// alone. Every sequence with at most kInvariantDecodeQ query rows runs the decode kernel (never the
// tiled one), its keys cut into splits of kInvariantChunk keys at fixed positions (split s: keys
// [s * chunk, (s + 1) * chunk), whatever the bound or the grid), normalized as o * (1 / L) (what
// merge_kernel computes for a row with one non-empty split; the default one-split blocks write o / L);
// no shared-prefix pass; and a sliding window's first tile starts at the pool block holding the window's
// first key (Args::invariant).
// Sequences with more query rows (prefill chunks) take the tiled kernel in a second launch, as usual.
constexpr int kInvariantChunk = 512;
constexpr int kInvariantDecodeQ = 32;  // a verify step holds at most 1 + 16 drafts (kMaxSpecNMax)
// Splits per row at most: merge_kernel's arrays hold 2 * kMaxSplits entries (own + prefix splits; this
// mode has no prefix pass): 512 x 512 = 262144 keys.
constexpr int kInvariantMaxSplits = 2 * kMaxSplits;

// The argument block of every kernel.
struct Args {
  // The layer's KV (kv_cuda.h addressing).
  const uint8_t* base;
  size_t block_stride, v_offset, k_row_bytes, v_row_bytes;
  int block_tokens;
  KvType k_type, v_type;
  // Heads and blocks: the rows of a block are r = t * gj + jj, query token qa + t of the sequence with
  // query head g * group + j0 + jj (t < qt, jj < gj; j0 = head part * gj).
  int n_head, group;  // query heads; query heads per KV head
  int gj, hparts;     // heads per block, head parts per KV head (gj * hparts >= group)
  int qt, qtiles;     // tokens per block (qt * gj <= rows), query tiles per sequence (host bound)
  float scale, softcap;
  int window;
  // [n_head] attention sinks (AttentionParams::sinks, device memory) or nullptr: query head h's
  // softmax denominator gets exp(sinks[h]) once, where the row is finalized (row_norm).
  const float* sinks;
  // The batch (device arrays of AttentionBatchDevice).
  const int32_t *tables, *table_start, *pos0, *n_q, *row0;
  const float* q;  // [total_rows][n_head][head_dim], 16-byte aligned
  float* out;      // [total_rows][n_head][head_dim], 16-byte aligned
  // Split-K: split s covers key positions [o + s * chunk, o + (s + 1) * chunk); one split: chunk >= max_kv. o = 0, or
  // with window_splits (decode plans of sliding-window layers) the block's first visible key aligned down to
  // kWindowSplitAlign (split_origin), so the splits cover the window instead of every key of the context.
  int n_splits, chunk;
  int window_splits;
  float* part_o;   // [grid blocks][rows][head_dim]: unnormalized acc of each (block, row)
  float* part_ml;  // [grid blocks][rows][2]: (m, l)
  int partial;     // 1: blocks write partials (several splits, or a shared prefix to merge); 0: outputs
  // Shared prefixes (kv_cuda.h): the groups; the per-sequence pass reads only keys past its group's
  // prefix. prefix_pass = 1: this launch is the prefix pass, whose work item z is (group, query tile
  // of the group's queries in sequence order) and whose keys are the group's prefix.
  int n_prefix;
  const int32_t *prefix_seq0, *prefix_n_seq, *prefix_blocks;
  int prefix_pass;
  int stages;  // decode kernel: K/V tiles in flight in shared memory (2 .. kDecodeMaxStages)
  size_t stage_k_bytes, stage_bytes;  // decode kernel: K part of a stage (decode_part_bytes), whole stage
  // 1: the lanes8 decode kernel starts before the kv_store launched just before it completes and waits
  // for it only before staging keys at or past its sequence's pos0 (attention_early(); set by the
  // launcher for single-sequence decode plans without shared prefixes); 0: it waits first (pdl_enter).
  int early;
  // With early: the step's new K / V rows in f32 ([total_rows][n_head / group][head_dim], the rows kv_store reads),
  // and which of them the decode kernel encodes into its staged tiles itself instead of waiting for the store
  // (bit 0: K, bit 1: V; plain types only: self_encodable). The bytes are kv_store's, so the bits are the same.
  const float* new_k;
  const float* new_v;
  int self_kv;
  // The sequences this launch computes: those with nq_lo <= n_q <= nq_hi (the others' blocks exit at
  // once; a batch-invariant step runs its short and long sequences in two launches).
  int nq_lo, nq_hi;
  // 1 (batch-invariant decode plans): a split's first key is max(split start, the pool block holding
  // the block's first visible key), so tiles start at the same positions whichever token of a
  // multi-token block sets the window's start (0: max(split start, first visible key)); and a block
  // that writes its outputs normalizes them as o * (1 / L), as merge_kernel does (0: o / L).
  int invariant;
};

enum class Kernel { Decode, Tiled };

struct Plan {
  Kernel kernel = Kernel::Tiled;
  int rows = 0;  // rows per block (the kernel's RMAX)
  int group = 0, gj = 0, hparts = 0, qt = 0, qtiles = 0;
  int n_splits = 1, chunk = 1 << 30;
  int grid_y = 0, grid_z = 0;  // grid: (n_splits, grid_y, grid_z); the merge: (rows, grid_y, grid_z)
  DecodeVariant variant = DecodeVariant::Slots;  // decode kernel: which one
  int tile_keys = 0;           // decode kernel: keys per tile (a stage)
  bool tc = false;             // decode kernel: the tensor-core kernel (attention_cuda_decode_tc.cuh; decode_tc_mode)
  bool mma = false;            // tiled plan: the tensor-core kernel (rows = kMmaTiledRows)
  int stages = 0;              // decode kernel: pipeline stages
  size_t smem = 0;             // decode kernel: dynamic shared memory (bytes)
  size_t partial_o_floats = 0, partial_ml_floats = 0;  // scratch for the partials (0 with one split)
  int nq_lo = 0, nq_hi = 1 << 30;  // Args::nq_lo / nq_hi: the sequences of this launch
  bool invariant = false;          // Args::invariant (batch-invariant plans)
  bool window_splits = false;      // Args::window_splits (decode plans of sliding-window layers)
};

// Key splits of a plan whose grid (y, z) is set: about four blocks per multiprocessor, each split at
// least four tiles of keys and at most kMaxSplits splits; none when the work items alone fill the GPU.
// one_wave: blocks_per_sm blocks per multiprocessor at most (the kernel's occupancy: no second,
// mostly idle wave), rounding the splits per item down. reserve: block slots left free for another grid
// running at the same time (the early start's kv_store).
inline void plan_splits(Plan& P, int64_t max_kv, int sm_count, int hd, int blocks_per_sm = 4, bool one_wave = false,
                        int reserve = 0) {
  const int64_t items = int64_t(P.grid_y) * P.grid_z,
                target = std::max<int64_t>(1, blocks_per_sm * int64_t(std::max(sm_count, 1)) - reserve);
  if (items < target && max_kv > 4 * kTileKeys) {
    const int64_t want = one_wave ? std::max<int64_t>(1, target / items) : (target + items - 1) / items;
    int64_t chunk = std::max<int64_t>((max_kv + want - 1) / want, 4 * kTileKeys);
    chunk = std::max<int64_t>(chunk, (max_kv + kMaxSplits - 1) / kMaxSplits);
    chunk = (chunk + 63) / 64 * 64;  // whole tiles, and pool blocks of 64 keys stay whole
    const int64_t n = (max_kv + chunk - 1) / chunk;
    if (n > 1) {
      P.n_splits = int(n);
      P.chunk = int(chunk);
    }
  }
}

// Scratch floats for the partials of a plan's blocks.
inline void plan_partials(Plan& P, int hd) {
  const size_t blocks = size_t(P.grid_y) * size_t(P.grid_z) * size_t(P.n_splits);
  P.partial_o_floats = blocks * size_t(P.rows) * size_t(hd);
  P.partial_ml_floats = blocks * size_t(P.rows) * 2;
}

// Rows, head parts and query tiles of a tiled-kernel plan for up to max_q queries per work item.
// mma: the large shape on tensor cores (attention_mma_kernel: kMmaTiledRows rows; equal to large_rows(hd) up to
// head size 128), when the head size has it; else the f32 kernel's large_rows(hd).
inline void set_tiled_rows(Plan& P, int rows, int max_q) {
  P.rows = rows;
  P.gj = std::min(P.group, P.rows);
  P.hparts = (P.group + P.gj - 1) / P.gj;
  P.qt = P.rows / P.gj;
  P.qtiles = (max_q + P.qt - 1) / P.qt;
}
inline void plan_tiled_rows(Plan& P, int max_q, int hd, bool mma) {
  P.kernel = Kernel::Tiled;
  // The small shape needs hd >= 64 (its accumulation gives each thread 8 values of a row: 16 rows x hd / 8
  // threads must cover the block's 128); head size 32 always takes large_rows.
  const bool small = hd >= 64 && P.group * max_q <= kSmallRows;
  P.mma = !small && mma && tiled_mma_supports(hd) && (hd != 256 || tiled_mma256_fits());
  set_tiled_rows(P, small ? kSmallRows : P.mma ? kMmaTiledRows : large_rows(hd), max_q);
}
inline void plan_tiled_rows(Plan& P, int max_q, int hd) { plan_tiled_rows(P, max_q, hd, prefill_mma()); }

// Long prompt passes on the 256-row kernel (attention_prefix256_kernel, the shared-prefix pass's): each
// K/V tile is decoded once for 256 rows instead of 64, in two stages, with scaled products; per-row masks
// (causal, window) and softcap as in the tiled kernel. It always writes partials, which the merge kernel
// normalizes. Taken when a KV head has at least kPrefill256MinRows rows (64 x 4 queries at GQA 4: the
// 4096-row passes of Backend::default_prompt_rows, not short chunks). On unless POLYKV_CUDA_PREFILL256=0.
constexpr int64_t kPrefill256MinRows = 1024;
inline bool& prefill256() {
  static bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_PREFILL256");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// The decode kernel's rows, head parts, query tiles (for up to max_n_q queries per sequence), variant,
// tile, stages and shared memory (P.group set).
// allow_tc: the tensor-core kernel may run (decode_tc, pool blocks of a multiple of 64 keys). plan_attention
// allows it past one split (at one split, depth <= 256, only its first warp has keys in a 64-key tile, and it
// measured ~1% slower end to end than the pairs kernel at depth 0 for q8_0/turbo3t on the H200, call I5); the
// batch-invariant plans always.
inline void plan_decode_rows(Plan& P, const KvLayerDevice& L, int max_n_q, bool allow_tc) {
  const int hd = L.head_dim;
  P.kernel = Kernel::Decode;
  P.rows = kDecodeRows;
  P.gj = std::min(P.group, P.rows);
  P.hparts = (P.group + P.gj - 1) / P.gj;
  P.qt = P.rows / P.gj;
  P.qtiles = (max_n_q + P.qt - 1) / P.qt;
  P.variant = decode8_supports(hd) ? decode_variant() : DecodeVariant::Slots;
  // lanes8 needs two stages within its 48 KB (its kernels' shared memory limit); wider rows (f32 K
  // or V) take the slots kernel. Without this the launch failed with "invalid argument" on the H200
  // (CudaAttention.EveryKTypeWithTheMainVTypesDecode, 2026-12-01).
  // Pool blocks of a multiple of its 64-key tile only: a tile never crosses a pool block, so blocks of 16 keys
  // would keep three of its four warps idle (the pairs kernel's 32-key tiles lose half their slots there).
  // The tensor-core kernel runs under the process-wide lanes8 variant (head size 256 too, where the other plans take
  // the slots kernel: POLYKV_CUDA_ATTN_DECODE=slots keeps it off there as well).
  P.tc = allow_tc && decode_variant() == DecodeVariant::Lanes8 && L.block_tokens % kDecodeTcTileKeys == 0 &&
         decode_tc(hd, L.k_type, L.v_type, decode8_kernels()) && (L.k_type != KvType::F16 || decode_tc_f16()) &&
         (hd != 256 || decode_tc256_fits(L.k_type, L.v_type));
  if (P.tc) P.variant = DecodeVariant::Lanes8;
  if (P.tc && !decode_tc_stages(hd, L.k_type, L.v_type, P.stages, P.smem)) {
    P.tc = false;  // the lanes8 or slots kernel below, as without the tensor-core kernel
    P.variant = decode8_supports(hd) ? decode_variant() : DecodeVariant::Slots;
  }
  if (P.variant != DecodeVariant::Slots && !P.tc &&
      !decode8_stages(hd, L.k_head_bytes, L.v_head_bytes, false, P.stages, P.smem)) {
    P.variant = DecodeVariant::Slots;
  }
  if (P.variant != DecodeVariant::Slots) {
    P.tile_keys = P.tc ? kDecodeTcTileKeys : decode8_tile_keys();
    return;
  }
  // The slots kernel: as many stages as fit its cap (at least 2: a stage is at most 2 x 32 KB + 32).
  P.tile_keys = decode_tile_keys(hd);
  const size_t stage = stage_part_bytes(P.tile_keys, L.k_head_bytes) + stage_part_bytes(P.tile_keys, L.v_head_bytes);
  P.stages = int(std::clamp<size_t>(kDecodeSmemCap / stage, 2, kDecodeMaxStages));
  P.smem = std::max(size_t(P.stages) * stage, decode_fold_bytes(hd));
}

// Throws Error unless the layer, the parameters and the batch's bounds are ones the kernels take.
inline void check_attention_args(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b) {
  const int hd = L.head_dim;
  check(hd == 32 || hd == 64 || hd == 128 || hd == 256 || hd == 512, "CUDA attention: head size ", hd,
        " is not supported (32, 64, 128, 256 or 512)");
  check(L.head_dim_v == hd, "CUDA attention: V head size ", L.head_dim_v, " differs from K's ", hd);
  check(L.k_head_bytes == kv_head_bytes(L.k_type, hd) && L.v_head_bytes == kv_head_bytes(L.v_type, hd),
        "CUDA attention: row sizes do not match the KV types");
  check(L.n_head_kv > 0 && p.n_head > 0 && p.n_head % L.n_head_kv == 0, "CUDA attention: ", p.n_head,
        " query heads do not split into ", L.n_head_kv, " KV heads");
  check(L.block_tokens > 0 && b.max_kv > 0 && b.max_n_q > 0 && b.n_seq > 0, "CUDA attention: invalid block size or bounds");
}

// Checks the arguments (throws Error) and plans the per-sequence launch. sm_count: multiprocessors of
// the device. With shared prefixes its blocks always write partials (plan_prefix plans the rest).
// reserve_blocks: block slots the lanes8 splits leave free (early start: the kv_store's blocks, which run
// beside the attention's one wave).
// wide_prefill: long prompt passes may take the 256-row kernel (prefill256; not for the batch-invariant plans).
inline Plan plan_attention(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b,
                           int sm_count, int reserve_blocks = 0, bool wide_prefill = true) {
  const int hd = L.head_dim;
  check_attention_args(L, p, b);

  Plan P;
  check(b.n_prefix >= 0 && (b.n_prefix == 0 || (b.max_prefix_q > 0 && b.max_prefix_kv > 0)),
        "CUDA attention: invalid shared-prefix bounds");
  P.group = p.n_head / L.n_head_kv;
  // The decode kernel when every sequence's queries fit the rows of its blocks (one token per step, or
  // a few tokens of a small group) or a few query tiles of them (small_step_decode_q); else the tiled
  // kernel, small for small multi-token steps.
  const int decode_tokens = std::max({1, kDecodeRows / std::min(P.group, kDecodeRows), small_step_decode_q()});
  // The keys one decode block may read: every key up to the bound, or for a sliding-window layer its window (what a
  // block's split_origin .. kv_hi spans at most: the alignment, the window, the block's other query tokens).
  int64_t span = b.max_kv;
  if (b.max_n_q <= decode_tokens && p.window > 0 && window_splits_on()) {
    const int64_t w = int64_t(kWindowSplitAlign - 1) + p.window + (b.max_n_q - 1);
    if (w < span) {
      span = w;
      P.window_splits = true;
    }
  }
  if (b.max_n_q <= decode_tokens) {
    plan_decode_rows(P, L, b.max_n_q, span > one_split_keys());
  } else {
    plan_tiled_rows(P, b.max_n_q, hd);
    if (wide_prefill && P.mma && prefill256() && mma_supports(hd) && prefix256_fits(hd) &&
        int64_t(P.group) * b.max_n_q >= kPrefill256MinRows)
      set_tiled_rows(P, kPrefix256Rows, b.max_n_q);
  }
  const bool w256 = P.kernel == Kernel::Tiled && P.rows == kPrefix256Rows;
  const int64_t grid_y = int64_t(L.n_head_kv) * P.hparts, grid_z = int64_t(b.n_seq) * P.qtiles;
  check(grid_y <= 65535 && grid_z <= 65535, "CUDA attention: batch too large for one launch (", grid_y, " x ",
        grid_z, " blocks)");
  P.grid_y = int(grid_y);
  P.grid_z = int(grid_z);
  if (P.kernel == Kernel::Decode && span <= one_split_keys())
    ;  // one split (n_splits 1, chunk covers every key): the kernel writes the outputs
  else if (P.kernel == Kernel::Decode && P.variant != DecodeVariant::Slots)
    plan_splits(P, span, sm_count, hd,
                P.tc ? decode_tc_min_blocks(hd) : decode8_plan_blocks(P.variant, hd, L.k_type, L.v_type), true,
                reserve_blocks);
  else if (P.kernel == Kernel::Decode)
    plan_splits(P, span, sm_count, hd);
  else if (w256)
    plan_splits(P, b.max_kv, sm_count, hd, 1, true);  // one block per multiprocessor, one wave
  else
    plan_splits(P, b.max_kv, sm_count, hd);
  if (P.n_splits > 1 || b.n_prefix > 0 || w256) plan_partials(P, hd);
  return P;
}

// The batch-invariant plans of a step without shared prefixes (b.n_prefix must be 0; see kInvariantChunk):
// `dec`, the decode kernel for the sequences with at most kInvariantDecodeQ query rows (fixed splits of
// kInvariantChunk keys); and, when b.max_n_q says a sequence may have more, `tiled`, the
// usual plan for those (plan_attention's, restricted to them). Returns the number of plans (1 or 2).
inline int plan_invariant(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b,
                          int sm_count, Plan& dec, Plan& tiled) {
  check_attention_args(L, p, b);
  check(b.n_prefix == 0, "CUDA attention: batch-invariant plans take no shared-prefix groups");
  const int hd = L.head_dim;
  const int64_t n_splits = (int64_t(b.max_kv) + kInvariantChunk - 1) / kInvariantChunk;
  check(n_splits <= kInvariantMaxSplits, "CUDA attention: --batch-invariant supports contexts up to ",
        int64_t(kInvariantMaxSplits) * kInvariantChunk, " keys (this step's bound: ", b.max_kv, ")");
  dec = Plan{};
  dec.group = p.n_head / L.n_head_kv;
  plan_decode_rows(dec, L, std::min(b.max_n_q, kInvariantDecodeQ), true);
  const int64_t grid_y = int64_t(L.n_head_kv) * dec.hparts, grid_z = int64_t(b.n_seq) * dec.qtiles;
  check(grid_y <= 65535 && grid_z <= 65535, "CUDA attention: batch too large for one launch (", grid_y, " x ",
        grid_z, " blocks)");
  dec.grid_y = int(grid_y);
  dec.grid_z = int(grid_z);
  dec.n_splits = int(n_splits);
  dec.chunk = kInvariantChunk;
  dec.invariant = true;
  dec.nq_hi = kInvariantDecodeQ;
  if (n_splits > 1) plan_partials(dec, hd);
  if (b.max_n_q <= kInvariantDecodeQ) return 1;
  tiled = plan_attention(L, p, b, sm_count, 0, false);  // max_n_q > 32 > decode_tokens: the tiled kernel
  tiled.nq_lo = kInvariantDecodeQ + 1;
  return 2;
}

// The prefix pass of shared prefixes (b.n_prefix > 0): the tiled kernel over (group, query tile of
// the group's queries), keys [0, prefix). Its blocks always write partials.
inline Plan plan_prefix(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b,
                        int sm_count) {
  Plan P;
  P.group = p.n_head / L.n_head_kv;
  const int hd = L.head_dim;
  // The kernel by counting: up to 16 rows per KV head the small f32 shape (one 16-row block; a 64-row
  // tensor-core block would compute 4x the products for nothing); up to 64 the 64-row tensor-core
  // block; beyond, 128 rows per block (head sizes 64 and 128): the K/V tile decode and f16 split (the part
  // of a tile's work that does not grow with the rows) and the B-fragment loads are shared by twice the rows.
  const PrefixKernel k = prefix_kernel();
  plan_tiled_rows(P, b.max_prefix_q, hd, k != PrefixKernel::F32);
  const int64_t rows_kv = int64_t(P.group) * b.max_prefix_q;  // rows sharing a KV head's prefix
  // Beyond 128 rows, 256 per block (each K/V tile decoded once for all of them; a block whose rows
  // are fewer skips the MMAs of its empty warps).
  const bool w256 = P.mma && mma_supports(hd) && k == PrefixKernel::Wide256 && rows_kv > kPrefixRows && prefix256_fits(hd);
  const bool wide = !w256 && P.mma && mma_supports(hd) && (k == PrefixKernel::Wide || k == PrefixKernel::Wide256) &&
                    rows_kv > large_rows(hd);
  if (wide || w256) {
    P.rows = w256 ? kPrefix256Rows : kPrefixRows;
    P.gj = std::min(P.group, P.rows);
    P.hparts = (P.group + P.gj - 1) / P.gj;
    P.qt = P.rows / P.gj;
    P.qtiles = (b.max_prefix_q + P.qt - 1) / P.qt;
  }
  const int64_t grid_y = int64_t(L.n_head_kv) * P.hparts, grid_z = int64_t(b.n_prefix) * P.qtiles;
  check(grid_y <= 65535 && grid_z <= 65535, "CUDA attention: shared prefixes too large for one launch (", grid_y,
        " x ", grid_z, " blocks)");
  P.grid_y = int(grid_y);
  P.grid_z = int(grid_z);
  if (w256)
    plan_splits(P, b.max_prefix_kv, sm_count, hd, 1, true);  // one block per multiprocessor, one wave
  else if (wide)
    plan_splits(P, b.max_prefix_kv, sm_count, hd, kPrefixBlocksPerSm, true);
  else
    plan_splits(P, b.max_prefix_kv, sm_count, hd);
  plan_partials(P, L.head_dim);
  return P;
}

// The kernels' arguments of plan P (plan_prefix's when prefix_pass). part: P.partial_o_floats +
// P.partial_ml_floats floats (unused when the plan has none).
inline Args make_args(const KvLayerDevice& L, const AttentionParams& p, const AttentionBatchDevice& b, const Plan& P,
                      const float* q, float* out, float* part, bool prefix_pass = false) {
  Args a{};
  a.base = L.layer_base;
  a.block_stride = L.block_stride;
  a.v_offset = L.v_offset;
  a.k_row_bytes = L.k_head_bytes;
  a.v_row_bytes = L.v_head_bytes;
  a.block_tokens = L.block_tokens;
  a.k_type = L.k_type;
  a.v_type = L.v_type;
  a.n_head = p.n_head;
  a.group = P.group;
  a.gj = P.gj;
  a.hparts = P.hparts;
  a.qt = P.qt;
  a.qtiles = P.qtiles;
  a.scale = p.scale;
  a.softcap = p.softcap;
  a.window = p.window;
  a.sinks = p.sinks;
  a.tables = b.tables;
  a.table_start = b.table_start;
  a.pos0 = b.pos0;
  a.n_q = b.n_q;
  a.row0 = b.row0;
  a.q = q;
  a.out = out;
  a.n_splits = P.n_splits;
  a.chunk = P.chunk;
  a.window_splits = P.window_splits ? 1 : 0;
  a.part_o = part;
  a.part_ml = part ? part + P.partial_o_floats : nullptr;
  a.partial = P.n_splits > 1 || b.n_prefix > 0 || (P.kernel == Kernel::Tiled && P.rows == kPrefix256Rows);
  a.nq_lo = P.nq_lo;
  a.nq_hi = P.nq_hi;
  a.invariant = P.invariant ? 1 : 0;
  a.n_prefix = b.n_prefix;
  a.prefix_seq0 = b.prefix_seq0;
  a.prefix_n_seq = b.prefix_n_seq;
  a.prefix_blocks = b.prefix_blocks;
  a.prefix_pass = prefix_pass;
  a.stages = P.stages;
  const int tk = P.tile_keys > 0 ? P.tile_keys : decode_tile_keys(L.head_dim);
  const bool tc = P.kernel == Kernel::Decode && P.tc;
  a.stage_k_bytes = stage_part_bytes(tk, decode_stage_row(L.k_type, L.k_head_bytes, tc));
  a.stage_bytes = a.stage_k_bytes + stage_part_bytes(tk, decode_stage_row(L.v_type, L.v_head_bytes, tc));
  return a;
}

}  // namespace polykv::cuda::attn
