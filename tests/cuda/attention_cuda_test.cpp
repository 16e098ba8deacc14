// polykv::cuda::attention (backend/cuda/kv_cuda.h) against the CPU's attention_ref, on the GPU.
//
// Each case fills a KvBlockStore in host memory (the pool layout of kv/kv_block_store.h, two layers,
// attention on layer 1) with rows encoded by the CPU's quantize_head, hands each sequence blocks
// taken from a shuffled free list (tables point all over the pool; sequences may share their first
// blocks), copies the store to the device and runs the CUDA attention on a batch of sequences of
// different lengths. The reference is attention_ref on host views of the same bytes.
//
// Bound: the GPU computes in f32 (K/V decoded exactly as the CPU decodes them; turbo K scored against
// an f32-rotated query, turbo V accumulated in the rotated basis and rotated back), the reference in
// double on the original basis. For every output row (token, head), |got - ref|_2 / |ref|_2 <= 1e-4.
// Outputs are poisoned (NaN bytes) first, so rows never written fail; rows past the batch's rows
// must stay poisoned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/kv_cuda.h"
#include "cuda_test_util.h"
#include "kv/kv_block_store.h"
#include "../test_util.h"

namespace polykv {
namespace {

constexpr double kBound = 1e-4;

template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) { POLYKV_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p); }
  void upload(const T* src, size_t count) { POLYKV_CUDA_CHECK(cudaMemcpy(p, src, count * sizeof(T), cudaMemcpyHostToDevice)); }
  void download(T* dst, size_t count) const {
    POLYKV_CUDA_CHECK(cudaMemcpy(dst, p, count * sizeof(T), cudaMemcpyDeviceToHost));
  }
};

struct SeqSpec {
  int pos0 = 0;          // keys before the queries
  int n_q = 1;           // queries (their K/V are stored too)
  int share_with = -1;   // >= 0: take the first share_blocks blocks of that (earlier) sequence
  int share_blocks = 0;
};

struct Case {
  KvType kt = KvType::F16, vt = KvType::F16;
  int head_dim = 128;
  int n_head_kv = 2;
  int group = 4;
  int block_tokens = 16;
  std::vector<SeqSpec> seqs;
  int window = 0;
  float softcap = 0.0f;
  int extra_kv_bound = 0;  // added to the host bounds (graph-style launch larger than the real batch)
  int extra_nq_bound = 0;
  uint32_t seed = 1;
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "K " << kv_type_name(c.kt) << " V " << kv_type_name(c.vt) << " hd " << c.head_dim << " kv_heads "
    << c.n_head_kv << " group " << c.group << " block " << c.block_tokens << " window " << c.window << " softcap "
    << c.softcap << " seqs [";
  for (const SeqSpec& q : c.seqs)
    s << " (pos0 " << q.pos0 << " n_q " << q.n_q << (q.share_with >= 0 ? " shares " + std::to_string(q.share_blocks) + " blocks" : "")
      << ")";
  s << " ]";
  return s.str();
}

struct Result {
  double worst = 0;  // largest per-row relative L2 error
  std::string where;
};

Result run_case(const Case& c, cuda::CudaContext& ctx) {
  const int hd = c.head_dim, bt = c.block_tokens, n_head = c.n_head_kv * c.group, n_seq = int(c.seqs.size());
  std::mt19937 rng(c.seed);

  // Blocks per sequence; shared blocks are the earlier sequence's.
  std::vector<int> n_pos(static_cast<size_t>(n_seq)), n_blocks(static_cast<size_t>(n_seq));
  int total_blocks = 0;
  for (int s = 0; s < n_seq; ++s) {
    const SeqSpec& q = c.seqs[size_t(s)];
    n_pos[size_t(s)] = q.pos0 + q.n_q;
    n_blocks[size_t(s)] = (n_pos[size_t(s)] + bt - 1) / bt;
    total_blocks += n_blocks[size_t(s)] - (q.share_with >= 0 ? q.share_blocks : 0);
  }
  const int pool_blocks = total_blocks + 5;  // a few never used
  std::vector<int> free_ids(static_cast<size_t>(pool_blocks));
  std::iota(free_ids.begin(), free_ids.end(), 0);
  std::shuffle(free_ids.begin(), free_ids.end(), rng);
  std::vector<std::vector<int>> tables(static_cast<size_t>(n_seq));
  size_t next_free = 0;
  for (int s = 0; s < n_seq; ++s) {
    const SeqSpec& q = c.seqs[size_t(s)];
    for (int i = 0; i < n_blocks[size_t(s)]; ++i) {
      if (q.share_with >= 0 && i < q.share_blocks) {
        EXPECT_LT(q.share_with, s);
        EXPECT_LE((i + 1) * bt, n_pos[size_t(s)]) << "shared blocks are full blocks";
        tables[size_t(s)].push_back(tables[size_t(q.share_with)][size_t(i)]);
      } else {
        tables[size_t(s)].push_back(free_ids[next_free++]);
      }
    }
  }

  // The pool (2 layers, attention on layer 1), every used row encoded from random K/V; layer 0 and
  // unused blocks hold junk bytes that must never be read as values.
  const KvShape shape{2, c.n_head_kv, hd, hd, {}};
  KvBlockStore store(shape, c.kt, c.vt, pool_blocks, bt);
  {
    std::vector<uint8_t> junk(store.block_bytes() * size_t(pool_blocks));
    for (auto& b : junk) b = uint8_t(rng());
    std::memcpy(const_cast<uint8_t*>(store.data()), junk.data(), junk.size());
  }
  constexpr int kLayer = 1;
  const KvTypeOps &kops = kv_type_ops(c.kt), &vops = kv_type_ops(c.vt);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> kx(static_cast<size_t>(hd)), vx(static_cast<size_t>(hd));
  for (int s = 0; s < n_seq; ++s) {
    const SeqSpec& q = c.seqs[size_t(s)];
    const int first = q.share_with >= 0 ? q.share_blocks * bt : 0;  // shared positions are already written
    for (int pos = first; pos < n_pos[size_t(s)]; ++pos) {
      const int blk = tables[size_t(s)][size_t(pos / bt)], slot = pos % bt;
      for (int g = 0; g < c.n_head_kv; ++g) {
        for (int d = 0; d < hd; ++d) {
          kx[size_t(d)] = normal(rng) * (d % 17 == 3 ? 6.0f : 1.0f);  // a few loud key channels
          vx[size_t(d)] = normal(rng);
        }
        kops.quantize_head(kx.data(), store.k_part(blk, kLayer) + (size_t(g) * bt + slot) * store.k_head_bytes(), hd);
        vops.quantize_head(vx.data(), store.v_part(blk, kLayer) + (size_t(g) * bt + slot) * store.v_head_bytes(), hd);
      }
    }
  }
  DevBuf<uint8_t> pool(store.block_bytes() * size_t(pool_blocks));
  pool.upload(store.data(), pool.n);

  // Queries; rows of the sequences in reverse order in q / out (row0 is arbitrary).
  std::vector<int> row0(static_cast<size_t>(n_seq));
  int total_rows = 0;
  for (int s = n_seq - 1; s >= 0; --s) {
    row0[size_t(s)] = total_rows;
    total_rows += c.seqs[size_t(s)].n_q;
  }
  const size_t row_floats = size_t(n_head) * size_t(hd);
  std::vector<float> q(size_t(total_rows) * row_floats);
  for (float& x : q) x = normal(rng);
  constexpr int kPadRows = 3;  // rows past the batch: must stay poisoned
  const size_t out_floats = size_t(total_rows + kPadRows) * row_floats;
  DevBuf<float> dq(q.size()), dout(out_floats);
  dq.upload(q.data(), q.size());
  POLYKV_CUDA_CHECK(cudaMemset(dout.p, 0xFF, out_floats * sizeof(float)));

  std::vector<int32_t> flat, tstart, pos0v, nqv, row0v;
  int max_n_q = 0, max_kv = 0;
  for (int s = 0; s < n_seq; ++s) {
    tstart.push_back(int32_t(flat.size()));
    flat.insert(flat.end(), tables[size_t(s)].begin(), tables[size_t(s)].end());
    pos0v.push_back(c.seqs[size_t(s)].pos0);
    nqv.push_back(c.seqs[size_t(s)].n_q);
    row0v.push_back(row0[size_t(s)]);
    max_n_q = std::max(max_n_q, c.seqs[size_t(s)].n_q);
    max_kv = std::max(max_kv, n_pos[size_t(s)]);
  }
  DevBuf<int32_t> dflat(flat.size()), dtstart(static_cast<size_t>(n_seq)), dpos0(static_cast<size_t>(n_seq)), dnq(static_cast<size_t>(n_seq)),
      drow0(static_cast<size_t>(n_seq));
  dflat.upload(flat.data(), flat.size());
  dtstart.upload(tstart.data(), tstart.size());
  dpos0.upload(pos0v.data(), pos0v.size());
  dnq.upload(nqv.data(), nqv.size());
  drow0.upload(row0v.data(), row0v.size());

  cuda::KvLayerDevice L;
  L.k_type = c.kt;
  L.v_type = c.vt;
  L.block_tokens = bt;
  L.n_head_kv = c.n_head_kv;
  L.head_dim = L.head_dim_v = hd;
  L.k_head_bytes = store.k_head_bytes();
  L.v_head_bytes = store.v_head_bytes();
  L.layer_base = pool.p + size_t(kLayer) * store.layer_bytes();
  L.block_stride = store.block_bytes();
  L.v_offset = store.k_part_bytes();
  cuda::AttentionBatchDevice b;
  b.n_seq = n_seq;
  b.tables = dflat.p;
  b.table_start = dtstart.p;
  b.pos0 = dpos0.p;
  b.n_q = dnq.p;
  b.row0 = drow0.p;
  b.total_rows = total_rows;
  b.max_n_q = max_n_q + c.extra_nq_bound;
  b.max_kv = max_kv + c.extra_kv_bound;
  AttentionParams p;
  p.n_head = n_head;
  p.scale = 1.0f / std::sqrt(float(hd));
  p.softcap = c.softcap;
  p.window = c.window;
  cuda::attention(L, p, b, dq.p, dout.p, ctx);
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  std::vector<float> got(out_floats);
  dout.download(got.data(), got.size());

  Result res;
  const auto fail_at = [&](const std::string& what) {
    res.worst = INFINITY;
    res.where = what;
    return res;
  };
  for (size_t i = size_t(total_rows) * row_floats; i < out_floats; ++i) {
    uint32_t u;
    std::memcpy(&u, &got[i], 4);
    if (u != 0xFFFFFFFFu) return fail_at("wrote past the batch's rows at float " + std::to_string(i));
  }
  std::vector<const uint8_t*> kb, vb;
  std::vector<float> ref;
  double err2 = 0, ref2 = 0;
  for (int s = 0; s < n_seq; ++s) {
    const SeqSpec& sq = c.seqs[size_t(s)];
    kb.clear(), vb.clear();
    for (int blk : tables[size_t(s)]) {
      kb.push_back(store.k_part(blk, kLayer));
      vb.push_back(store.v_part(blk, kLayer));
    }
    KvLayerView view;
    view.k_type = c.kt;
    view.v_type = c.vt;
    view.block_tokens = bt;
    view.n_head_kv = c.n_head_kv;
    view.head_dim = view.head_dim_v = hd;
    view.k_blocks = kb.data();
    view.v_blocks = vb.data();
    view.k_head_bytes = store.k_head_bytes();
    view.v_head_bytes = store.v_head_bytes();
    ref.assign(size_t(sq.n_q) * row_floats, 0.0f);
    attention_ref(p, view, sq.pos0, sq.n_q, q.data() + size_t(row0[size_t(s)]) * row_floats, ref.data());
    for (int t = 0; t < sq.n_q; ++t)
      for (int h = 0; h < n_head; ++h) {
        const float* r = ref.data() + (size_t(t) * n_head + h) * hd;
        const float* o = got.data() + (size_t(row0[size_t(s)] + t) * n_head + h) * hd;
        double e2 = 0, n2 = 0;
        int first_bad = -1;
        for (int d = 0; d < hd; ++d) {
          if (!std::isfinite(o[d]) && first_bad < 0) first_bad = d;
          e2 += double(o[d] - r[d]) * double(o[d] - r[d]);
          n2 += double(r[d]) * double(r[d]);
        }
        err2 += e2, ref2 += n2;
        std::ostringstream at;
        at << "seq " << s << " token " << t << " (pos " << sq.pos0 + t << ") head " << h;
        if (first_bad >= 0) {
          at << ": value " << first_bad << " not written or not finite (" << o[first_bad] << ", expected "
             << r[first_bad] << ")";
          return fail_at(at.str());
        }
        const double rel = std::sqrt(e2 / std::max(n2, 1e-30));
        if (rel > res.worst) {
          int dmax = 0;
          for (int d = 1; d < hd; ++d)
            if (std::abs(o[d] - r[d]) > std::abs(o[dmax] - r[dmax])) dmax = d;
          at << ": rel L2 " << rel << ", worst value " << dmax << " got " << o[dmax] << " expected " << r[dmax];
          res.worst = rel;
          res.where = at.str();
        }
      }
  }
  res.where += "; case NMSE " + std::to_string(err2 / std::max(ref2, 1e-30));
  return res;
}

void expect_ok(const Case& c, cuda::CudaContext& ctx) {
  const Result r = run_case(c, ctx);
  EXPECT_LE(r.worst, kBound) << describe(c) << "\n  worst row: " << r.where;
}

// Decode of several sequences of different lengths (1, 31, 1000 and 5000 keys: no split, and splits
// whose boundaries fall inside sequences) in one call.
std::vector<SeqSpec> decode_batch() { return {{0, 1}, {30, 1}, {999, 1}, {4999, 1}}; }

cuda::CudaContext& context() {
  static cuda::CudaContext ctx(0);
  return ctx;
}

const KvType kVTypes[] = {KvType::F16, KvType::Q8_0, KvType::Turbo3, KvType::Turbo3T};

TEST(CudaAttention, EveryKTypeWithTheMainVTypesDecode) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 1;
  for (KvType kt : kAllKvTypes) {
    std::vector<KvType> vts(std::begin(kVTypes), std::end(kVTypes));
    if (std::find(vts.begin(), vts.end(), kt) == vts.end()) vts.push_back(kt);  // the diagonal
    for (KvType vt : vts) {
      Case c;
      c.kt = kt, c.vt = vt, c.seqs = decode_batch(), c.seed = seed++;
      expect_ok(c, context());
    }
  }
}

TEST(CudaAttention, EveryKTypeWithTheMainVTypesPrefill) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 100;
  for (KvType kt : kAllKvTypes) {
    std::vector<KvType> vts(std::begin(kVTypes), std::end(kVTypes));
    if (std::find(vts.begin(), vts.end(), kt) == vts.end()) vts.push_back(kt);
    for (KvType vt : vts) {
      Case c;
      c.kt = kt, c.vt = vt, c.seed = seed++;
      c.seqs = {{40, 77}, {0, 5}};  // a prefill chunk after 40 keys and a fresh short prompt
      expect_ok(c, context());
    }
  }
}

TEST(CudaAttention, EveryVTypeWithQ8K) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 200;
  for (KvType vt : kAllKvTypes) {
    Case c;
    c.kt = KvType::Q8_0, c.vt = vt, c.seed = seed++;
    c.seqs = {{0, 1}, {1500, 1}, {60, 4}};
    expect_ok(c, context());
  }
}

TEST(CudaAttention, HeadSizes) {
  POLYKV_REQUIRE_GPU();
  const std::pair<KvType, KvType> pairs[] = {{KvType::F16, KvType::F16},       {KvType::Q8_0, KvType::Turbo3},
                                             {KvType::Turbo4T, KvType::Q4_0},   {KvType::BF16, KvType::Turbo2},
                                             {KvType::Turbo3, KvType::Turbo3T}, {KvType::F32, KvType::Q8_0},
                                             {KvType::Turbo2T, KvType::Turbo4}};
  uint32_t seed = 300;
  for (int hd : {64, 256, 512})
    for (const auto& [kt, vt] : pairs) {
      Case c;
      c.kt = kt, c.vt = vt, c.head_dim = hd, c.seed = seed++;
      c.seqs = {{0, 1}, {30, 1}, {2100, 1}, {70, 3}};
      expect_ok(c, context());
      c.seqs = {{33, 77}};
      c.seed = seed++;
      expect_ok(c, context());
    }
}

TEST(CudaAttention, GqaRatiosAndQueryCounts) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 400;
  for (int group : {1, 4, 8})
    for (int n_q : {1, 4, 77})
      for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3}, std::pair{KvType::Turbo3T, KvType::F16}}) {
        Case c;
        c.kt = kt, c.vt = vt, c.group = group, c.seed = seed++;
        c.n_head_kv = group == 1 ? 3 : 2;
        c.seqs = {{1000 - n_q, n_q}, {0, n_q}, {250, n_q}};
        expect_ok(c, context());
      }
  // More query heads per KV head than rows per block: the group is cut into head parts.
  for (int hd : {128, 512}) {
    Case c;
    c.kt = KvType::Q8_0, c.vt = KvType::Turbo3T, c.head_dim = hd, c.group = 32, c.n_head_kv = 1, c.seed = seed++;
    c.seqs = {{700, 1}, {10, 2}};
    expect_ok(c, context());
  }
}

TEST(CudaAttention, LongPrefillAcrossSplits) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 500;
  for (const auto& [kt, vt] : {std::pair{KvType::F16, KvType::F16}, std::pair{KvType::Q8_0, KvType::Turbo3T},
                               std::pair{KvType::Turbo4, KvType::BF16}})
    for (int window : {0, 200}) {
      Case c;
      c.kt = kt, c.vt = vt, c.window = window, c.n_head_kv = 1, c.seed = seed++;
      c.seqs = {{700, 300}};
      expect_ok(c, context());
    }
}

TEST(CudaAttention, WindowAndSoftcap) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 600;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3}, std::pair{KvType::Turbo3T, KvType::Turbo3T},
                               std::pair{KvType::F16, KvType::Q4_0}})
    for (int window : {0, 1, 100, 4096})
      for (float softcap : {0.0f, 30.0f}) {
        Case c;
        c.kt = kt, c.vt = vt, c.window = window, c.softcap = softcap, c.seed = seed++;
        c.seqs = {{0, 1}, {4999, 1}, {130, 77}, {2000, 4}};
        expect_ok(c, context());
      }
}

TEST(CudaAttention, SharedPrefixBlocks) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 700;
  for (const auto& [kt, vt] : {std::pair{KvType::Q8_0, KvType::Turbo3}, std::pair{KvType::F16, KvType::F16}})
    for (int n_q : {1, 4, 40}) {
      Case c;
      c.kt = kt, c.vt = vt, c.seed = seed++;
      // Sequence 0 owns a 2000-token context; 1 and 2 share its first 100 blocks (1600 tokens) and
      // add private suffixes; 3 shares 3 blocks of sequence 1; 4 shares nothing.
      c.seqs = {{2000 - n_q, n_q}, {1700, n_q, 0, 100}, {1600, n_q, 0, 100}, {60, n_q, 1, 3}, {500, n_q}};
      expect_ok(c, context());
    }
}

TEST(CudaAttention, BlockSizesAndLooseBounds) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 800;
  for (int bt : {1, 7, 64, 128})
    for (const auto& [kt, vt] : {std::pair{KvType::Turbo3T, KvType::Q4_0}, std::pair{KvType::Q4_0, KvType::Turbo2T}}) {
      Case c;
      c.kt = kt, c.vt = vt, c.block_tokens = bt, c.head_dim = 64, c.seed = seed++;
      c.seqs = {{0, 1}, {999, 1}, {300, 9}};
      expect_ok(c, context());
      // Host bounds far above the real batch (a graph captured for longer steps): the kernels must
      // take lengths from the device arrays.
      c.extra_kv_bound = 7000, c.extra_nq_bound = 60, c.seed = seed++;
      expect_ok(c, context());
    }
}

// Bandwidth of decode attention for one sequence (head_dim 128, 32 query heads, 8 KV heads): KV bytes
// read per call over the median time of 20 calls. Rows are copies of a few thousand encoded rows
// (encoding 131072 rows with the trellis encoder on the CPU would take minutes).
TEST(CudaAttention, DISABLED_DecodeBandwidth) {
  POLYKV_REQUIRE_GPU();
  cuda::CudaContext& ctx = context();
  constexpr int kHd = 128, kHeadKv = 8, kHeads = 32, kBt = 64, kDistinct = 4096;
  const std::pair<KvType, KvType> pairs[] = {{KvType::F16, KvType::F16},
                                             {KvType::Q8_0, KvType::Q8_0},
                                             {KvType::Q8_0, KvType::Turbo3},
                                             {KvType::Q8_0, KvType::Turbo3T},
                                             {KvType::Turbo3T, KvType::Turbo3T}};
  std::printf("%-18s %8s %10s %10s %9s\n", "K/V", "keys", "KV MB", "us", "GB/s");
  for (const auto& [kt, vt] : pairs)
    for (int n_kv : {32768, 131072}) {
      const size_t kb = kv_head_bytes(kt, kHd), vb = kv_head_bytes(vt, kHd);
      const int n_blocks = n_kv / kBt;
      const size_t k_part = size_t(kHeadKv) * kBt * kb, layer = k_part + size_t(kHeadKv) * kBt * vb;
      std::vector<uint8_t> kr(kDistinct * kb), vr(kDistinct * vb);
      const auto x = test::random_floats(size_t(kDistinct) * kHd, 5);
      for (int i = 0; i < kDistinct; ++i) {
        kv_type_ops(kt).quantize_head(x.data() + size_t(i) * kHd, kr.data() + i * kb, kHd);
        kv_type_ops(vt).quantize_head(x.data() + size_t((i * 7) % kDistinct) * kHd, vr.data() + i * vb, kHd);
      }
      std::vector<uint8_t> host(layer * size_t(n_blocks));
      for (size_t r = 0; r < size_t(n_blocks) * kHeadKv * kBt; ++r) {
        const size_t blk = r / (size_t(kHeadKv) * kBt), in = r % (size_t(kHeadKv) * kBt);
        std::memcpy(&host[blk * layer + in * kb], &kr[(r % kDistinct) * kb], kb);
        std::memcpy(&host[blk * layer + k_part + in * vb], &vr[(r % kDistinct) * vb], vb);
      }
      DevBuf<uint8_t> pool(host.size());
      pool.upload(host.data(), host.size());
      std::vector<int32_t> table(static_cast<size_t>(n_blocks));
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), std::mt19937(3));
      const int32_t zero = 0, pos0 = n_kv - 1, one = 1;
      DevBuf<int32_t> dt(table.size()), dz(1), dp(1), dn(1);
      dt.upload(table.data(), table.size());
      dz.upload(&zero, 1);
      dp.upload(&pos0, 1);
      dn.upload(&one, 1);
      const auto q = test::random_floats(size_t(kHeads) * kHd, 9);
      DevBuf<float> dq(q.size()), dout(q.size());
      dq.upload(q.data(), q.size());
      cuda::KvLayerDevice L{kt, vt, kBt, kHeadKv, kHd, kHd, kb, vb, pool.p, layer, k_part};
      cuda::AttentionBatchDevice b{1, dt.p, dz.p, dp.p, dn.p, dz.p, 1, 1, n_kv};
      AttentionParams p;
      p.n_head = kHeads;
      p.scale = 1.0f / std::sqrt(float(kHd));
      cudaEvent_t e0, e1;
      POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
      POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
      for (int i = 0; i < 3; ++i) cuda::attention(L, p, b, dq.p, dout.p, ctx);
      std::vector<float> ms;
      for (int i = 0; i < 20; ++i) {
        POLYKV_CUDA_CHECK(cudaEventRecord(e0, ctx.stream()));
        cuda::attention(L, p, b, dq.p, dout.p, ctx);
        POLYKV_CUDA_CHECK(cudaEventRecord(e1, ctx.stream()));
        POLYKV_CUDA_CHECK(cudaEventSynchronize(e1));
        float t = 0;
        POLYKV_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
      }
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2] * 1e-3, bytes = double(n_kv) * kHeadKv * double(kb + vb);
      const std::string name = std::string(kv_type_name(kt)) + "/" + kv_type_name(vt);
      std::printf("%-18s %8d %10.1f %10.1f %9.1f\n", name.c_str(), n_kv, bytes / 1e6, med * 1e6, bytes / med / 1e9);
    }
}

}  // namespace
}  // namespace polykv
