// Repacking into the x16 layout (packed_weights.h) and the scalar reference of the group kernel.
#include "backend/cpu/packed_weights.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string_view>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "backend/cpu/matmul_kernels.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/mxfp4.h"

namespace polykv::cpu {

// q4_K, q5_K (packed_q4k.cpp).
std::unique_ptr<PackedMatrix> pack_matrix_q4_K(const void* data, int64_t n_in, int64_t n_out, size_t row_stride);
PackedDotFn packed_dot_q4_K_scalar();
std::unique_ptr<PackedMatrix> pack_matrix_q5_K(const void* data, int64_t n_in, int64_t n_out, size_t row_stride);
PackedDotFn packed_dot_q5_K_scalar();
// q6_K (packed_q6k.cpp).
std::unique_ptr<PackedMatrix> pack_matrix_q6_K(const void* data, int64_t n_in, int64_t n_out, size_t row_stride);
PackedDotFn packed_dot_q6_K_scalar();

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

// POLYKV_THP=0 in the environment: no huge-page advice (the same layout, ordinary pages; for A/B runs and
// for hosts where THP misbehaves). Read once.
bool huge_pages_wanted() {
  static const bool on = [] {
    const char* e = std::getenv("POLYKV_THP");
    return e == nullptr || std::string_view(e) != "0";
  }();
  return on;
}

// size: a multiple of align. The first `advise` bytes (a multiple of kHugePage) are advised for huge pages;
// the rest stays in 4 KiB pages, so that a buffer's partial last 2 MiB is not made resident whole.
void* alloc_huge(size_t align, size_t size, size_t advise) {
  void* p = std::aligned_alloc(align, size);
  check(p != nullptr, "out of memory: cannot allocate ", size, " bytes for packed weights");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (huge_pages_wanted() && advise > 0) madvise(p, advise, MADV_HUGEPAGE);  // advice only
#endif
  return p;
}

// Buffers under 2 MiB (a MoE model's experts: 6144 matrices of 0.6 MB in an 8-layer qwen3.5-35b-a3b cut) are
// carved from shared huge-page chunks of kChunk bytes, kChunk-aligned so that a buffer finds its chunk's
// header by masking its address. The header counts the chunk's live buffers plus one while it is the chunk
// being carved; the last release frees it. Invariant: every carved buffer lies inside its chunk, after the
// 64-byte header.
constexpr size_t kChunk = size_t(64) << 20;
struct ChunkHeader {
  std::atomic<int64_t> refs;
};
static_assert(sizeof(ChunkHeader) <= 64);

void release_chunk(ChunkHeader* h) {
  if (h->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    h->~ChunkHeader();
    std::free(h);
  }
}

void free_carved(void* p) {
  release_chunk(reinterpret_cast<ChunkHeader*>(reinterpret_cast<uintptr_t>(p) & ~(uintptr_t(kChunk) - 1)));
}

struct Carver {
  std::mutex mu;
  ChunkHeader* chunk = nullptr;  // holds one reference while set
  size_t used = 0;               // bytes of chunk handed out, header included
  void* carve(size_t size) {     // size: a multiple of 64, < kChunk - 64
    std::lock_guard<std::mutex> lock(mu);
    if (chunk == nullptr || used + size > kChunk) {
      if (chunk != nullptr) release_chunk(chunk);
      chunk = new (alloc_huge(kChunk, kChunk, kChunk)) ChunkHeader{{1}};
      used = 64;
    }
    void* p = reinterpret_cast<uint8_t*>(chunk) + used;
    used += size;
    chunk->refs.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  ~Carver() {
    if (chunk != nullptr) release_chunk(chunk);
  }
};

}  // namespace

std::unique_ptr<uint8_t, void (*)(void*)> alloc_packed_bytes(size_t bytes) {
  if (bytes >= kHugePage) {
    const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;  // aligned_alloc wants a multiple
    return {static_cast<uint8_t*>(alloc_huge(kHugePage, size, bytes / kHugePage * kHugePage)), std::free};
  }
  static Carver carver;
  return {static_cast<uint8_t*>(carver.carve((std::max<size_t>(bytes, 1) + 63) / 64 * 64)), free_carved};
}

bool packable(DType type) {
  return type == DType::Q4_0 || type == DType::Q8_0 || type == DType::MXFP4 || type == DType::Q4_K ||
         type == DType::Q5_K || type == DType::Q6_K;
}

std::unique_ptr<PackedMatrix> pack_matrix(DType type, const void* data, int64_t n_in, int64_t n_out,
                                          size_t row_stride) {
  if (type == DType::Q4_K) return pack_matrix_q4_K(data, n_in, n_out, row_stride);
  if (type == DType::Q5_K) return pack_matrix_q5_K(data, n_in, n_out, row_stride);
  if (type == DType::Q6_K) return pack_matrix_q6_K(data, n_in, n_out, row_stride);
  if (!packable(type) || n_in % 32 != 0 || n_out < kPackRows) return nullptr;
  auto p = std::make_unique<PackedMatrix>();
  p->type = type;
  p->n_in = n_in;
  p->n_groups = n_out / kPackRows;
  const int64_t nb = p->n_blocks();
  const size_t qs_bytes = size_t(p->n_groups * nb) * p->qs_block_bytes();  // a multiple of 256
  p->qs = alloc_packed_bytes(qs_bytes);
  p->d = std::make_unique<uint16_t[]>(size_t(p->n_groups * nb * kPackRows));
  const uint8_t* base = static_cast<const uint8_t*>(data);
  const bool mx = type == DType::MXFP4;
  const size_t block_bytes = type == DType::Q4_0 ? sizeof(BlockQ4_0) : mx ? sizeof(BlockMXFP4) : sizeof(BlockQ8_0);
  const size_t qs_offset = mx ? 1 : 2;  // after the e byte (mxfp4) or the fp16 d (q4_0, q8_0)
  const int chunks = type == DType::Q8_0 ? 8 : 4;  // 64-byte vectors per group and block
  for (int64_t g = 0; g < p->n_groups; ++g)
    for (int r = 0; r < kPackRows; ++r) {
      const uint8_t* row = base + size_t(g * kPackRows + r) * row_stride;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + size_t(b) * block_bytes;
        uint16_t d = blk[0];                // mxfp4: the exponent byte
        if (!mx) std::memcpy(&d, blk, 2);  // q4_0 / q8_0 start with the fp16 d
        p->d[size_t((g * nb + b) * kPackRows + r)] = d;
        uint8_t* dst = p->qs.get() + size_t(g * nb + b) * p->qs_block_bytes();
        const uint8_t* src = blk + qs_offset;
        const uint32_t flip = type == DType::Q8_0 ? 0x80808080u : 0u;  // q8_0: q -> q + 128
        for (int c = 0; c < chunks; ++c) {
          uint32_t v;
          std::memcpy(&v, src + 4 * c, 4);
          v ^= flip;
          std::memcpy(dst + c * 64 + 4 * r, &v, 4);
        }
      }
    }
  return p;
}

namespace {

// Exact integer dot of one packed block of row r with one token's block, in the stored quants:
// q4_0 Σ (u - 8) * a, q8_0 Σ (u - 128) * a, mxfp4 Σ kMxfp4Values[u] * a.
int32_t block_dot(const PackedMatrix& p, const uint8_t* qs, int r, const int8_t* a) {
  int32_t s = 0;
  if (p.type == DType::MXFP4) {
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 4; ++i) {
        const uint8_t v = qs[c * 64 + 4 * r + i];
        s += kMxfp4Values[v & 0x0F] * a[4 * c + i] + kMxfp4Values[v >> 4] * a[16 + 4 * c + i];
      }
  } else if (p.type == DType::Q4_0) {
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 4; ++i) {
        const uint8_t v = qs[c * 64 + 4 * r + i];
        s += (int32_t(v & 0x0F) - 8) * a[4 * c + i] + (int32_t(v >> 4) - 8) * a[16 + 4 * c + i];
      }
  } else {
    for (int c = 0; c < 8; ++c)
      for (int i = 0; i < 4; ++i) s += (int32_t(qs[c * 64 + 4 * r + i]) - 128) * a[4 * c + i];
  }
  return s;
}

void packed_dot_ref(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  for (int t = 0; t < n_tok; ++t)
    for (int r = 0; r < kPackRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < p.n_blocks(); ++b) {
        const uint16_t d = p.d_at(g, b)[r];
        const float dw = p.type == DType::MXFP4 ? mxfp4_scale(uint8_t(d)) : fp16_to_f32(d);
        acc += dw * act[t].d[b] * float(block_dot(p, p.qs_at(g, b), r, act[t].qs + 32 * b));
      }
      y[t * ldy + r] = acc;
    }
}

}  // namespace

PackedDotFn packed_dot_scalar(DType type) {
  if (type == DType::Q4_K) return packed_dot_q4_K_scalar();
  if (type == DType::Q5_K) return packed_dot_q5_K_scalar();
  if (type == DType::Q6_K) return packed_dot_q6_K_scalar();
  return packable(type) ? packed_dot_ref : nullptr;
}

}  // namespace polykv::cpu
