// attention_batch: checks, query preparation, the plan (row sets, row blocks, items) and its run on
// the thread pool. The work of an item is in attention_item.cpp.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/attention_plan.h"
#include "core/error.h"
#include "quant/quant.h"

namespace polykv {
namespace {

using attn::kBlockRows;
using attn::kMaxGroup;
using attn::kTileQueries;
using attn::Plan;
using attn::RowBlock;
using attn::RowSet;
using attn::Scratch;

// First key position visible to a query at position qpos.
int first_visible(const AttentionParams& p, int qpos) { return p.window > 0 ? std::max(0, qpos - p.window + 1) : 0; }

void check_batch(const AttentionParams& p, std::span<const AttentionSeq> seqs) {
  const KvLayerView& v0 = seqs[0].kv;
  check(p.n_head > 0 && v0.n_head_kv > 0 && p.n_head % v0.n_head_kv == 0, "attention: ", p.n_head,
        " query heads do not split into ", v0.n_head_kv, " KV heads");
  check(p.n_head / v0.n_head_kv <= kMaxGroup, "attention: more than ", kMaxGroup, " query heads per KV head");
  for (const AttentionSeq& s : seqs) {
    const KvLayerView& v = s.kv;
    check(v.k_type == v0.k_type && v.v_type == v0.v_type && v.n_head_kv == v0.n_head_kv &&
              v.head_dim == v0.head_dim && v.head_dim_v == v0.head_dim_v && v.block_tokens == v0.block_tokens,
          "attention_batch: every sequence must have the same KV types, head sizes and block size");
    check(s.pos0 >= 0 && s.n_q >= 0 && v.block_tokens > 0, "attention_batch: invalid sequence");
  }
}

// Block tables in lexicographic order of their K block pointers: sequences that share a prefix of
// blocks end up next to each other (the prefix tree in depth-first order), so each shared tile is
// read by one run of row sets. Any order gives the same results; this one gives the most sharing.
std::vector<int> sharing_order(const Plan& c) {
  std::vector<int> order(c.seqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const attn::SeqCtx &A = c.seqs[size_t(a)], &B = c.seqs[size_t(b)];
    const int n = std::min(A.n_blocks, B.n_blocks);
    for (int i = 0; i < n; ++i)
      if (A.kv->k_blocks[i] != B.kv->k_blocks[i]) return std::less<const uint8_t*>()(A.kv->k_blocks[i], B.kv->k_blocks[i]);
    return A.n_blocks < B.n_blocks;
  });
  return order;
}

// Row sets of kTileQueries tokens, packed into row blocks of up to kBlockRows rows when they belong
// to one sequence or start with the same block (so that they can share tiles).
void build_blocks(Plan& c) {
  const int group = c.group;
  for (int si : sharing_order(c)) {
    const attn::SeqCtx& sq = c.seqs[size_t(si)];
    for (int i0 = 0; i0 < sq.n_q; i0 += kTileQueries) {
      RowSet rs;
      rs.seq = si;
      rs.i0 = i0;
      rs.nt = std::min(kTileQueries, sq.n_q - i0);
      rs.key_lo = first_visible(c.p, sq.pos0 + i0);
      rs.key_hi = sq.pos0 + i0 + rs.nt - 1;
      const int rows = rs.nt * group;
      bool join = false;
      if (!c.blocks.empty()) {
        const RowBlock& b = c.blocks.back();
        const attn::SeqCtx& head = c.seqs[size_t(c.rowsets[size_t(b.rs_begin)].seq)];
        const bool related = &head == &sq || (head.n_blocks > 0 && sq.n_blocks > 0 && head.kv->k_blocks[0] &&
                                               head.kv->k_blocks[0] == sq.kv->k_blocks[0] && !head.kv->v_hi &&
                                               !sq.kv->v_hi);
        join = related && b.n_rows + rows <= kBlockRows;
      }
      if (!join) {
        RowBlock b;
        b.rs_begin = b.rs_end = int(c.rowsets.size());
        b.n_rows = 0;
        b.key_lo = rs.key_lo;
        b.key_hi = rs.key_hi;
        c.blocks.push_back(b);
      }
      RowBlock& b = c.blocks.back();
      rs.row0 = b.n_rows;
      b.n_rows += rows;
      b.key_lo = std::min(b.key_lo, rs.key_lo);
      b.key_hi = std::max(b.key_hi, rs.key_hi);
      b.rs_end = int(c.rowsets.size()) + 1;
      c.rowsets.push_back(rs);
    }
  }
  for (RowBlock& b : c.blocks) {
    b.chunk_lo = b.key_lo / kAttentionChunkKeys;
    b.chunk_hi = b.key_hi / kAttentionChunkKeys;
    c.max_rows = std::max(c.max_rows, b.n_rows);
  }
}

// Which row blocks run one item per chunk (flash-decoding) rather than one item for all their
// chunks: enough items to keep every thread busy and no block much longer than the others. This
// only moves work between threads; results do not depend on it.
size_t choose_splits(Plan& c, int n_threads) {
  double total = 0;
  for (const RowBlock& b : c.blocks) total += double(b.n_rows) * c.n_chunks(b);
  const size_t items = c.blocks.size() * size_t(c.n_head_kv);
  const double limit = items >= size_t(8 * n_threads) ? 4.0 * total / double(c.blocks.size())
                                                       : total * c.n_head_kv / (4.0 * n_threads);
  size_t floats = 0;
  for (RowBlock& b : c.blocks) {
    b.split = c.n_chunks(b) > 1 && double(b.n_rows) * c.n_chunks(b) > limit;
    if (!b.split) continue;
    b.partial_offset = floats;
    floats += size_t(c.n_head_kv) * size_t(c.n_chunks(b)) * c.partial_floats(b.n_rows);
  }
  return floats;
}

struct Item {
  int block, g, chunk;  // chunk < 0: all the block's chunks
};

void run_plan(Plan& c, ThreadPool& pool) {
  // Per split block: [n_head_kv][n_chunks][partial]; every partial is written before it is read.
  const std::unique_ptr<float[]> partials(new float[choose_splits(c, pool.size())]);
  std::vector<Item> items;
  for (int bi = 0; bi < int(c.blocks.size()); ++bi) {
    const RowBlock& b = c.blocks[size_t(bi)];
    for (int g = 0; g < c.n_head_kv; ++g) {
      if (!b.split) {
        items.push_back({bi, g, -1});
        continue;
      }
      for (int ch = b.chunk_lo; ch <= b.chunk_hi; ++ch) items.push_back({bi, g, ch});
    }
  }
  const auto partial_at = [&](const RowBlock& b, int g, int ch) {
    return partials.get() + b.partial_offset +
           (size_t(g) * size_t(c.n_chunks(b)) + size_t(ch - b.chunk_lo)) * c.partial_floats(b.n_rows);
  };
  pool.parallel_for(int64_t(items.size()), [&](int64_t begin, int64_t end) {
    thread_local Scratch s;
    s.bind(c);
    float* state = s.state;
    float* part = s.part;
    for (int64_t it = begin; it < end; ++it) {
      const Item& item = items[size_t(it)];
      const RowBlock& b = c.blocks[size_t(item.block)];
      attn::bind_rows(c, b, item.g, s);
      if (item.chunk >= 0) {
        attn::chunk_partial(c, b, item.g, item.chunk, partial_at(b, item.g, item.chunk), s);
        continue;
      }
      // All chunks in order: the first's partial is the state, the others fold into it (the same
      // result as folding every partial into an empty state, as the split blocks' merge does).
      attn::chunk_partial(c, b, item.g, b.chunk_lo, state, s);
      for (int ch = b.chunk_lo + 1; ch <= b.chunk_hi; ++ch) {
        attn::chunk_partial(c, b, item.g, ch, part, s);
        attn::fold_partial(b.n_rows, c.hdv, part, state);
      }
      attn::write_rows(c, b, item.g, state);
    }
  });
  // Split blocks: fold their chunks' partials in chunk order, then write.
  std::vector<std::pair<int, int>> merges;  // (block, g)
  for (int bi = 0; bi < int(c.blocks.size()); ++bi)
    if (c.blocks[size_t(bi)].split)
      for (int g = 0; g < c.n_head_kv; ++g) merges.emplace_back(bi, g);
  if (merges.empty()) return;
  pool.parallel_for(int64_t(merges.size()), [&](int64_t begin, int64_t end) {
    thread_local Scratch s;
    s.bind(c);
    for (int64_t it = begin; it < end; ++it) {
      const auto [bi, g] = merges[size_t(it)];
      const RowBlock& b = c.blocks[size_t(bi)];
      const int n = b.n_rows;
      std::fill(s.state, s.state + n, -INFINITY);                  // m
      std::fill(s.state + n, s.state + c.partial_floats(n), 0.0f);  // l, acc
      for (int ch = b.chunk_lo; ch <= b.chunk_hi; ++ch) attn::fold_partial(n, c.hdv, partial_at(b, g, ch), s.state);
      attn::write_rows(c, b, g, s.state);
    }
  });
}

const KvRowKernels& avx2_rows(KvType t) { return kv_row_kernels_for(Isa::Avx2, t); }
const KvRowKernels& avx512_rows(KvType t) { return kv_row_kernels_for(Isa::Avx512, t); }
#if defined(__aarch64__)
const KvRowKernels& neon_rows(KvType t) { return kv_row_kernels_for(Isa::Neon, t); }
#endif

AttentionKernels kernels_or_scalar(const char* isa) {
  AttentionKernels k;
  if (!attention_kernels_for(isa, k)) attention_kernels_for("scalar", k);
  return k;
}

}  // namespace

const AttentionKernels& attention_kernels() {
  static const AttentionKernels by_isa[] = {kernels_or_scalar("scalar"), kernels_or_scalar("avx2"),
                                            kernels_or_scalar("avx512"), kernels_or_scalar("neon")};
  const Isa isa = active_isa();
  return by_isa[isa_has_avx512(isa) ? 2 : isa_has_avx2(isa) ? 1 : isa == Isa::Neon ? 3 : 0];
}

bool attention_kernels_for(const char* isa, AttentionKernels& out) {
  const std::string name = isa;
  if (name == "avx512") {
    if (!score_tile_avx512() || !accumulate_tile_avx512() || !softmax_tile_avx512() ||
        !kv_row_kernels_avx512(KvType::F16))
      return false;
    out = {score_tile_avx512(), accumulate_tile_avx512(), softmax_tile_avx512(), avx512_rows, score_tile_q8_avx512()};
    return true;
  }
  if (name == "avx2") {
    if (!score_tile_avx2() || !accumulate_tile_avx2() || !kv_row_kernels_avx2(KvType::F16) || !softmax_tile_avx2())
      return false;
    out = {score_tile_avx2(), accumulate_tile_avx2(), softmax_tile_avx2(), avx2_rows};
    return true;
  }
#if defined(__aarch64__)
  if (name == "neon") {
    out = {score_tile_neon(), accumulate_tile_neon(), softmax_tile_neon(), neon_rows};
    return true;
  }
#endif
  if (name == "scalar") {
    out = {score_tile_scalar, accumulate_tile_scalar, softmax_tile_scalar, kv_row_kernels_scalar};
    return true;
  }
  return false;
}

void attention_batch(const AttentionParams& p, std::span<const AttentionSeq> seqs, ThreadPool& pool) {
  attention_batch(p, seqs, pool, attention_kernels());
}

bool attention_uses_q8_scores(const AttentionKernels& kernels, KvType k_type, int hd) {
  return k_type == KvType::Q8_0 && kernels.score_q8 && attention_q8_enabled() && hd % 32 == 0 && hd <= kQ8ScoreMaxHd;
}

void attention_batch(const AttentionParams& p, std::span<const AttentionSeq> seqs, ThreadPool& pool,
                     const AttentionKernels& kernels) {
  if (seqs.empty()) return;
  check_batch(p, seqs);
  const KvLayerView& v0 = seqs[0].kv;
  const int hd = v0.head_dim;
  const bool q8 = attention_uses_q8_scores(kernels, v0.k_type, hd);
  Plan c{p, kernels, p.n_head / v0.n_head_kv, hd, v0.head_dim_v, v0.n_head_kv, &kernels.rows(v0.k_type),
         &kernels.rows(v0.v_type), &kv_type_ops(v0.v_type), q8, 0, {}, {}, {}};

  // Queries in K's form: rotated once for turbo K; quantized once to prepared q8 rows for q8_0 K
  // scored in integers; else q itself (a float K type's prepared query is a plain copy; q8_0/q4_0 K
  // rows decoded to f32 are dotted with q as it is).
  const bool rotated = kv_type_rotated(v0.k_type);
  const KvTypeOps& kops = kv_type_ops(v0.k_type);
  const bool prepared = rotated || q8;
  const size_t q_bytes = q8 ? q8_prepared_bytes(hd) : (kops.query_bytes(hd) + 63) / 64 * 64;
  const size_t q_stride = prepared ? q_bytes / sizeof(float) : size_t(hd);
  std::vector<size_t> q_offset(seqs.size() + 1, 0);  // rows of the prepared queries before each sequence
  for (size_t i = 0; i < seqs.size(); ++i) q_offset[i + 1] = q_offset[i] + size_t(seqs[i].n_q) * size_t(p.n_head);
  std::vector<float> q_rot(prepared ? q_offset.back() * q_stride : 0);  // [rows][q_stride], bytes inside
  if (prepared) {
    pool.parallel_for(int64_t(q_offset.back()), [&](int64_t b, int64_t e) {
      size_t si = size_t(std::upper_bound(q_offset.begin(), q_offset.end(), size_t(b)) - q_offset.begin()) - 1;
      for (int64_t r = b; r < e; ++r) {
        while (size_t(r) >= q_offset[si + 1]) ++si;
        const float* x = seqs[si].q + (size_t(r) - q_offset[si]) * size_t(hd);
        uint8_t* out = reinterpret_cast<uint8_t*>(q_rot.data() + size_t(r) * q_stride);
        if (q8) {
          q8_prepare_query(x, out, hd);
        } else {
          kops.prepare_query(x, out, hd);
        }
      }
    });
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AttentionSeq& s = seqs[i];
    const int n_pos = s.pos0 + s.n_q;
    c.seqs.push_back({&s.kv, s.pos0, s.n_q, (n_pos + s.kv.block_tokens - 1) / s.kv.block_tokens,
                      prepared ? q_rot.data() + q_offset[i] * q_stride : s.q, q_stride, s.out,
                      &kernels.rows(s.kv.v_hi_type)});
  }
  build_blocks(c);
  if (c.blocks.empty()) return;
  run_plan(c, pool);
}

void attention(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out,
               ThreadPool& pool) {
  const AttentionSeq seq{kv, pos0, n_q, q, out};
  attention_batch(p, std::span<const AttentionSeq>(&seq, 1), pool);
}

void attention_ref(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out,
                   bool q8_query) {
  const int group = p.n_head / kv.n_head_kv;
  const int hd = kv.head_dim, hdv = kv.head_dim_v;
  const KvTypeOps& kops = kv_type_ops(kv.k_type);
  const KvTypeOps& vops = kv_type_ops(kv.v_type);
  std::vector<float> krow(static_cast<size_t>(hd)), vrow(static_cast<size_t>(hdv)), qrow(static_cast<size_t>(hd));
  std::vector<uint8_t> qblocks(q8_query ? size_t(hd / 32) * 34 : 0);
  for (int i = 0; i < n_q; ++i) {
    const int qpos = pos0 + i, lo = first_visible(p, qpos);
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / group;
      const float* qh = q + (int64_t(i) * p.n_head + h) * hd;
      if (q8_query) {  // the values the integer scores dot with: d * round(x / d) per block of 32
        quantize_row_ref(DType::Q8_0, qh, qblocks.data(), hd);
        dequantize_row_ref(DType::Q8_0, qblocks.data(), qrow.data(), hd);
        qh = qrow.data();
      }
      std::vector<double> s;
      for (int k = lo; k <= qpos; ++k) {
        kops.dequantize_head(kv.k_row(k, g), krow.data(), hd);
        double d = 0;
        for (int c = 0; c < hd; ++c) d += double(qh[c]) * krow[size_t(c)];
        d *= p.scale;
        if (p.softcap > 0) d = p.softcap * std::tanh(d / p.softcap);
        s.push_back(d);
      }
      double mx = *std::max_element(s.begin(), s.end());
      if (p.sinks) mx = std::max(mx, double(p.sinks[h]));
      double sum = p.sinks ? std::exp(double(p.sinks[h]) - mx) : 0.0;  // the sink's weight, no value
      for (double& x : s) sum += (x = std::exp(x - mx));
      std::vector<double> acc(size_t(hdv), 0.0);
      for (int k = lo; k <= qpos; ++k) {
        if (const uint8_t* hi = kv.v_hi_row(k, g)) {  // precise copy, held in V's basis
          kv_type_ops(kv.v_hi_type).dequantize_head(hi, vrow.data(), hdv);
          vops.finish_output(vrow.data(), hdv);
        } else {
          vops.dequantize_head(kv.v_row(k, g), vrow.data(), hdv);
        }
        for (int c = 0; c < hdv; ++c) acc[size_t(c)] += s[size_t(k - lo)] / sum * vrow[size_t(c)];
      }
      float* o = out + (int64_t(i) * p.n_head + h) * hdv;
      for (int c = 0; c < hdv; ++c) o[c] = float(acc[size_t(c)]);
    }
  }
}

}  // namespace polykv
