// Test cases of polykv::cuda::attention shared by the GPU test (attention_cuda_test.cpp) and the CPU
// emulation of the kernels (attention_cuda_emulation_test.cpp): a Case describes a batch; build()
// makes it in host memory; check() compares outputs with the CPU's attention_ref.
//
// build() fills a KvBlockStore in host memory (the pool layout of kv/kv_block_store.h, two layers,
// attention on layer 1) with rows encoded by the CPU's quantize_head, hands each sequence blocks taken
// from a shuffled free list (tables point all over the pool; a sequence may share its first blocks
// with an earlier one), and describes it with a KvLayerDevice / AttentionBatchDevice whose pointers
// are host pointers (the GPU test uploads and swaps them).
//
// Bound: the kernels compute in f32 (K/V decoded exactly as the CPU decodes them; turbo K scored
// against an f32-rotated query, turbo V accumulated in the rotated basis and rotated back), the
// reference in double on the original basis. For every output row (token, head):
// |got - ref|_2 / |ref|_2 <= kBound. Outputs are poisoned (NaN bytes) first, so rows never written
// fail, and rows past the batch must stay poisoned.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cuda/attention_cuda_plan.h"
#include "backend/cuda/kv_cuda.h"
#include "core/error.h"
#include "kv/kv_block_store.h"

namespace polykv::attn_test {

constexpr double kBound = 1e-4;
constexpr int kLayer = 1;    // the layer attended (layer 0 holds junk)
constexpr int kPadRows = 3;  // output rows past the batch: must stay poisoned

struct SeqSpec {
  int pos0 = 0;         // keys before the queries
  int n_q = 1;          // queries (their K/V are stored too)
  int share_with = -1;  // >= 0: take the first share_blocks blocks of that (earlier) sequence
  int share_blocks = 0;
};

// A shared-prefix group for the cascade (kv_cuda.h): sequences seq0 .. seq0 + n_seq - 1 share their
// first `blocks` blocks (the cases' share_with / share_blocks must make that true).
struct PrefixGroup {
  int seq0 = 0, n_seq = 0, blocks = 0;
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
  int extra_kv_bound = 0;  // added to the host bounds (a launch sized for a larger batch, as a graph)
  int extra_nq_bound = 0;
  std::vector<PrefixGroup> prefix;  // shared prefixes passed to the kernels (empty: none)
  int extra_prefix_groups = 0;      // empty groups added after them (a graph sized for more)
  uint32_t seed = 1;
  bool sinks = false;  // attention sinks (gpt-oss): one random logit per query head (make_sinks)
};

inline std::string describe(const Case& c) {
  std::ostringstream s;
  s << "K " << kv_type_name(c.kt) << " V " << kv_type_name(c.vt) << " hd " << c.head_dim << " kv_heads "
    << c.n_head_kv << " group " << c.group << " block " << c.block_tokens << " window " << c.window << " softcap "
    << c.softcap << (c.sinks ? " sinks" : "") << " bounds +" << c.extra_kv_bound << "/+" << c.extra_nq_bound << " seqs [";
  for (const SeqSpec& q : c.seqs)
    s << " (pos0 " << q.pos0 << " n_q " << q.n_q
      << (q.share_with >= 0 ? " shares " + std::to_string(q.share_blocks) + " blocks of " + std::to_string(q.share_with)
                            : "")
      << ")";
  s << " ]";
  if (!c.prefix.empty()) {
    s << " prefix groups [";
    for (const PrefixGroup& g : c.prefix) s << " (seqs " << g.seq0 << ".." << g.seq0 + g.n_seq - 1 << ", " << g.blocks << " blocks)";
    s << " ] + " << c.extra_prefix_groups << " empty";
  }
  return s.str();
}

// Attention sinks for n_head query heads: mostly in the range of the scores (-3 .. 6: the sink takes
// from a few percent to most of a row's weight, the more so at small depths), and three extremes:
// head 0 far above every score (its output is tiny: the overflow-safe formula), head 1 far below
// (no effect), head 2 exactly 0.
inline std::vector<float> make_sinks(int n_head, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-3.0f, 6.0f);
  std::vector<float> s(static_cast<size_t>(n_head));
  for (float& x : s) x = u(rng);
  if (n_head > 0) s[0] = 30.0f;
  if (n_head > 1) s[1] = -40.0f;
  if (n_head > 2) s[2] = 0.0f;
  return s;
}

// A case in host memory.
struct Fixture {
  Case c;
  int n_head = 0, total_rows = 0;
  size_t row_floats = 0;  // n_head * head_dim
  std::unique_ptr<KvBlockStore> store;
  int pool_blocks = 0;
  std::vector<std::vector<int>> tables;
  std::vector<int32_t> flat, table_start, pos0, n_q, row0;  // the AttentionBatchDevice arrays
  std::vector<int32_t> prefix_seq0, prefix_n_seq, prefix_blocks;
  std::vector<float> q;                                     // [total_rows][n_head][head_dim]
  std::vector<float> new_k, new_v;  // [total_rows][n_head_kv][head_dim]: the f32 K / V of the query rows' own keys
  std::vector<float> sinks;                                 // [n_head] when c.sinks (p.sinks points here)
  cuda::KvLayerDevice L;                                    // host pointers into *store
  cuda::AttentionBatchDevice b;                             // host pointers into the vectors above
  AttentionParams p;
  size_t out_floats() const { return size_t(total_rows + kPadRows) * row_floats; }
};

inline std::unique_ptr<Fixture> build(const Case& c) {
  auto f = std::make_unique<Fixture>();
  f->c = c;
  const int hd = c.head_dim, bt = c.block_tokens, n_seq = int(c.seqs.size());
  f->n_head = c.n_head_kv * c.group;
  f->row_floats = size_t(f->n_head) * size_t(hd);
  std::mt19937 rng(c.seed);

  // Blocks per sequence; shared blocks are the earlier sequence's.
  std::vector<int> n_pos, n_blocks;
  int own_blocks = 0;
  for (const SeqSpec& q : c.seqs) {
    n_pos.push_back(q.pos0 + q.n_q);
    n_blocks.push_back((n_pos.back() + bt - 1) / bt);
    own_blocks += n_blocks.back() - (q.share_with >= 0 ? q.share_blocks : 0);
  }
  f->pool_blocks = own_blocks + 5;  // a few never used
  std::vector<int> free_ids(static_cast<size_t>(f->pool_blocks));
  std::iota(free_ids.begin(), free_ids.end(), 0);
  std::shuffle(free_ids.begin(), free_ids.end(), rng);
  f->tables.resize(static_cast<size_t>(n_seq));
  size_t next_free = 0;
  for (int s = 0; s < n_seq; ++s) {
    const SeqSpec& q = c.seqs[size_t(s)];
    for (int i = 0; i < n_blocks[size_t(s)]; ++i) {
      if (q.share_with >= 0 && i < q.share_blocks) {
        check(q.share_with < s && (i + 1) * bt <= n_pos[size_t(s)], "test case: bad sharing");
        f->tables[size_t(s)].push_back(f->tables[size_t(q.share_with)][size_t(i)]);
      } else {
        f->tables[size_t(s)].push_back(free_ids[next_free++]);
      }
    }
  }

  // The pool, every used row encoded from random K/V; layer 0 and unused blocks hold junk bytes that
  // must never be read as values.
  const KvShape shape{2, c.n_head_kv, hd, hd, {}};
  f->store = std::make_unique<KvBlockStore>(shape, c.kt, c.vt, f->pool_blocks, bt);
  KvBlockStore& store = *f->store;
  {
    uint8_t* all = const_cast<uint8_t*>(store.data());
    for (size_t i = 0; i < store.block_bytes() * size_t(f->pool_blocks); ++i) all[i] = uint8_t(rng());
  }
  // The sequences' rows in reverse order in q / out (row0 is arbitrary); no random draws here.
  f->row0.assign(static_cast<size_t>(n_seq), 0);
  for (int s = n_seq - 1; s >= 0; --s) {
    f->row0[size_t(s)] = f->total_rows;
    f->total_rows += c.seqs[size_t(s)].n_q;
  }
  f->new_k.assign(size_t(f->total_rows) * size_t(c.n_head_kv) * size_t(hd), 0.0f);
  f->new_v.assign(f->new_k.size(), 0.0f);
  const KvTypeOps &kops = kv_type_ops(c.kt), &vops = kv_type_ops(c.vt);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> kx(static_cast<size_t>(hd)), vx(static_cast<size_t>(hd));
  for (int s = 0; s < n_seq; ++s) {
    const SeqSpec& q = c.seqs[size_t(s)];
    const int first = q.share_with >= 0 ? q.share_blocks * bt : 0;  // shared positions are already written
    for (int pos = first; pos < n_pos[size_t(s)]; ++pos) {
      const int blk = f->tables[size_t(s)][size_t(pos / bt)], slot = pos % bt;
      for (int g = 0; g < c.n_head_kv; ++g) {
        for (int d = 0; d < hd; ++d) {
          kx[size_t(d)] = normal(rng) * (d % 17 == 3 ? 6.0f : 1.0f);  // a few loud key channels
          vx[size_t(d)] = normal(rng);
        }
        kops.quantize_head(kx.data(), store.k_part(blk, kLayer) + (size_t(g) * bt + slot) * store.k_head_bytes(), hd);
        vops.quantize_head(vx.data(), store.v_part(blk, kLayer) + (size_t(g) * bt + slot) * store.v_head_bytes(), hd);
        if (pos >= q.pos0) {  // a query row's own key: the f32 rows a step's kv_store reads
          const size_t at = (size_t(f->row0[size_t(s)] + pos - q.pos0) * size_t(c.n_head_kv) + size_t(g)) * size_t(hd);
          std::copy(kx.begin(), kx.end(), f->new_k.begin() + std::ptrdiff_t(at));
          std::copy(vx.begin(), vx.end(), f->new_v.begin() + std::ptrdiff_t(at));
        }
      }
    }
  }

  // Queries.
  f->q.resize(size_t(f->total_rows) * f->row_floats);
  for (float& x : f->q) x = normal(rng);

  int max_n_q = 0, max_kv = 0;
  for (int s = 0; s < n_seq; ++s) {
    f->table_start.push_back(int32_t(f->flat.size()));
    f->flat.insert(f->flat.end(), f->tables[size_t(s)].begin(), f->tables[size_t(s)].end());
    f->pos0.push_back(c.seqs[size_t(s)].pos0);
    f->n_q.push_back(c.seqs[size_t(s)].n_q);
    max_n_q = std::max(max_n_q, c.seqs[size_t(s)].n_q);
    max_kv = std::max(max_kv, n_pos[size_t(s)]);
  }

  cuda::KvLayerDevice& L = f->L;
  L.k_type = c.kt;
  L.v_type = c.vt;
  L.block_tokens = bt;
  L.n_head_kv = c.n_head_kv;
  L.head_dim = L.head_dim_v = hd;
  L.k_head_bytes = store.k_head_bytes();
  L.v_head_bytes = store.v_head_bytes();
  L.layer_base = const_cast<uint8_t*>(store.data()) + size_t(kLayer) * store.layer_bytes();
  L.block_stride = store.block_bytes();
  L.v_offset = store.k_part_bytes();
  cuda::AttentionBatchDevice& b = f->b;
  b.n_seq = n_seq;
  b.tables = f->flat.data();
  b.table_start = f->table_start.data();
  b.pos0 = f->pos0.data();
  b.n_q = f->n_q.data();
  b.row0 = f->row0.data();
  b.total_rows = f->total_rows;
  b.max_n_q = max_n_q + c.extra_nq_bound;
  b.max_kv = max_kv + c.extra_kv_bound;
  for (const PrefixGroup& g : c.prefix) {
    for (int s = g.seq0; s < g.seq0 + g.n_seq; ++s) {
      check(s < n_seq && g.blocks <= int(f->tables[size_t(s)].size()), "test case: bad prefix group");
      for (int i = 0; i < g.blocks; ++i)
        check(f->tables[size_t(s)][size_t(i)] == f->tables[size_t(g.seq0)][size_t(i)], "test case: group not shared");
    }
    int q = 0;
    for (int s = g.seq0; s < g.seq0 + g.n_seq; ++s) q += c.seqs[size_t(s)].n_q;
    f->prefix_seq0.push_back(g.seq0);
    f->prefix_n_seq.push_back(g.n_seq);
    f->prefix_blocks.push_back(g.blocks);
    b.max_prefix_q = std::max(b.max_prefix_q, q);
    b.max_prefix_kv = std::max(b.max_prefix_kv, g.blocks * bt);
  }
  for (int i = 0; i < c.extra_prefix_groups; ++i) {
    f->prefix_seq0.push_back(0);
    f->prefix_n_seq.push_back(0);
    f->prefix_blocks.push_back(0);
  }
  b.n_prefix = int(f->prefix_seq0.size());
  b.prefix_seq0 = f->prefix_seq0.data();
  b.prefix_n_seq = f->prefix_n_seq.data();
  b.prefix_blocks = f->prefix_blocks.data();
  if (b.n_prefix > 0) {  // bounds a little above the real ones, as a graph's would be
    b.max_prefix_q += c.extra_nq_bound;
    b.max_prefix_kv += c.extra_kv_bound;
  }
  f->p.n_head = f->n_head;
  f->p.scale = 1.0f / std::sqrt(float(hd));
  f->p.softcap = c.softcap;
  f->p.window = c.window;
  if (c.sinks) {
    f->sinks = make_sinks(f->n_head, rng);
    f->p.sinks = f->sinks.data();
  }
  return f;
}

// Sets the tensor-core decode kernel's tile pipeline (cuda::attn::decode_tc_bulk) for a scope.
struct TcPipeScope {
  bool saved = cuda::attn::decode_tc_bulk();
  explicit TcPipeScope(bool bulk) { cuda::attn::decode_tc_bulk() = bulk; }
  ~TcPipeScope() { cuda::attn::decode_tc_bulk() = saved; }
};
// Turns f16/f16 on the tensor-core decode kernel (cuda::attn::decode_tc_f16) on or off for a scope.
struct TcF16Scope {
  bool saved = cuda::attn::decode_tc_f16();
  explicit TcF16Scope(bool on) { cuda::attn::decode_tc_f16() = on; }
  ~TcF16Scope() { cuda::attn::decode_tc_f16() = saved; }
};

// NaN bytes for the outputs before the call.
inline void poison(float* out, size_t n) { std::memset(out, 0xFF, n * sizeof(float)); }

struct Result {
  double worst = 0;  // largest per-row relative L2 error (infinity: a row not written, or written past)
  std::string where;
};

// Compares got [total_rows + kPadRows][n_head][head_dim] with attention_ref per sequence.
inline Result check_outputs(const Fixture& f, const std::vector<float>& got) {
  const Case& c = f.c;
  const int hd = c.head_dim, n_head = f.n_head;
  const KvBlockStore& store = *f.store;
  Result res;
  const auto fail_at = [&](const std::string& what) {
    res.worst = INFINITY;
    res.where = what;
    return res;
  };
  for (size_t i = size_t(f.total_rows) * f.row_floats; i < f.out_floats(); ++i) {
    uint32_t u;
    std::memcpy(&u, &got[i], 4);
    if (u != 0xFFFFFFFFu) return fail_at("wrote past the batch's rows at float " + std::to_string(i));
  }
  std::vector<const uint8_t*> kb, vb;
  std::vector<float> ref;
  double err2 = 0, ref2 = 0;
  for (int s = 0; s < int(c.seqs.size()); ++s) {
    const SeqSpec& sq = c.seqs[size_t(s)];
    kb.clear(), vb.clear();
    for (int blk : f.tables[size_t(s)]) {
      kb.push_back(store.k_part(blk, kLayer));
      vb.push_back(store.v_part(blk, kLayer));
    }
    KvLayerView view;
    view.k_type = c.kt;
    view.v_type = c.vt;
    view.block_tokens = c.block_tokens;
    view.n_head_kv = c.n_head_kv;
    view.head_dim = view.head_dim_v = hd;
    view.k_blocks = kb.data();
    view.v_blocks = vb.data();
    view.k_head_bytes = store.k_head_bytes();
    view.v_head_bytes = store.v_head_bytes();
    const int r0 = f.row0[size_t(s)];
    ref.assign(size_t(sq.n_q) * f.row_floats, 0.0f);
    attention_ref(f.p, view, sq.pos0, sq.n_q, f.q.data() + size_t(r0) * f.row_floats, ref.data());
    for (int t = 0; t < sq.n_q; ++t)
      for (int h = 0; h < n_head; ++h) {
        const float* r = ref.data() + (size_t(t) * n_head + h) * hd;
        const float* o = got.data() + (size_t(r0 + t) * n_head + h) * hd;
        double e2 = 0, n2 = 0;
        int first_bad = -1;
        for (int d = 0; d < hd; ++d) {
          if (!std::isfinite(o[d]) && first_bad < 0) first_bad = d;
          e2 += double(o[d] - r[d]) * double(o[d] - r[d]);
          n2 += double(r[d]) * double(r[d]);
        }
        err2 += e2, ref2 += n2;
        std::ostringstream at;
        at << "seq " << s << " token " << t << " (pos " << sq.pos0 + t << ", out row " << r0 + t << ") head " << h;
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

}  // namespace polykv::attn_test
