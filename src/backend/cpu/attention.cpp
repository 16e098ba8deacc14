#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/attention_tile.h"
#include "backend/cpu/kv_row_ops.h"
#include "core/error.h"

namespace polykv {
namespace {

constexpr int kTileQueries = 8;      // query tokens per work item: their rows share every K/V row read
constexpr int kKeyTile = 32;         // keys scored between two online-softmax updates
constexpr int kMinChunkKeys = 512;   // a key chunk (flash-decoding split) is at least this long
constexpr int kMaxGroup = 64;        // query heads per KV head handled (checked)

// First key position visible to a query at position qpos.
int first_visible(const AttentionParams& p, int qpos) { return p.window > 0 ? std::max(0, qpos - p.window + 1) : 0; }

struct Plan {
  const AttentionParams& p;
  const KvLayerView& kv;
  int pos0, n_q;
  int group;          // query heads per KV head
  int tile_q;         // query tokens per tile
  int n_tiles;
  int n_chunks;       // key chunks per (tile, KV head)
  int rows_max;       // tile_q * group
  const uint8_t* qp;  // prepared queries [n_q][n_head][q_stride bytes]
  size_t q_stride;
  const KvRowKernels& kk;
  const KvRowKernels& vk;
  ExpSumFn exp_sum;
  const KvRowKernels& vhk;  // the V precision window's type
  AccumulateTileFn accumulate_tile;
  ScoreTileFn score_tile;
  const float* qf;    // queries as f32 in K's basis: [n_q][n_head][qf_stride floats]
  size_t qf_stride;

  const float* query_f32(int i, int g, int h) const {
    return qf + (size_t(i) * size_t(p.n_head) + size_t(g) * size_t(group) + size_t(h)) * qf_stride;
  }

  const uint8_t* query(int i, int g, int h) const {
    return qp + (size_t(i) * size_t(p.n_head) + size_t(g) * size_t(group) + size_t(h)) * q_stride;
  }
  // Floats of one item's partial state: m [rows_max], l [rows_max], acc [rows_max][head_dim_v].
  size_t partial_floats() const { return size_t(rows_max) * (2 + size_t(kv.head_dim_v)); }
};

// Tokens [ta, tb] of the tile starting at query index i0 (nt tokens) that see key p; ta > tb if none.
void visible_tokens(const Plan& c, int i0, int nt, int key, int& ta, int& tb) {
  const int q0 = c.pos0 + i0;           // position of the tile's first query
  ta = std::max(0, key - q0);           // qpos_t >= key
  tb = nt - 1;
  if (c.p.window > 0) tb = std::min(tb, key + c.p.window - 1 - q0);  // qpos_t - window < key
}

// True when every key of [s0, s0 + ns) is visible to every query of the tile (nt tokens from i0).
bool tile_fully_visible(const Plan& c, int i0, int nt, int s0, int ns) {
  int ta, tb;
  visible_tokens(c, i0, nt, s0 + ns - 1, ta, tb);  // the last key: causal limit
  if (ta != 0) return false;
  visible_tokens(c, i0, nt, s0, ta, tb);  // the first key: window limit
  return tb == nt - 1;
}

// The scores of a tile some of whose keys some rows must not see, key by key (masked: -inf).
void score_keys_one_by_one(const Plan& c, int i0, int nt, int g, int s0, int ns, float* S, float* kdec) {
  const int group = c.group, hd = c.kv.head_dim;
  for (int j = 0; j < ns; ++j) {
    int ta, tb;
    visible_tokens(c, i0, nt, s0 + j, ta, tb);
    if (ta > tb) continue;
    const uint8_t* krow = c.kv.k_row(s0 + j, g);
    // A row read by several queries is decoded once when the prepared query is plain f32.
    const bool decode = c.kk.f32_query && (tb - ta + 1) * group > 1;
    if (decode) c.kk.decode(krow, kdec, hd);
    for (int t = ta; t <= tb; ++t) {
      float dots[kMaxGroup];
      if (decode) {  // the group's queries are adjacent, q_stride bytes apart
        c.kk.dot_f32_n(kdec, reinterpret_cast<const float*>(c.query(i0 + t, g, 0)), c.q_stride / sizeof(float), group,
                       dots, hd);
      } else {
        c.kk.dot_n(krow, c.query(i0 + t, g, 0), c.q_stride, group, dots, hd);
      }
      for (int h = 0; h < group; ++h) S[size_t(t * group + h) * kKeyTile + j] = dots[h];
    }
  }
}

// Online-softmax update of m, l and acc by the scores S of one tile; S becomes the weights exp(s - m).
void softmax_update(const Plan& c, int rows, int ns, float* S, float* m, float* l, float* acc) {
  const int hdv = c.kv.head_dim_v;
  for (int r = 0; r < rows; ++r) {
    float* s = S + size_t(r) * kKeyTile;
    float mx = -INFINITY;
    for (int j = 0; j < ns; ++j) {
      if (s[j] == -INFINITY) continue;
      float x = s[j] * c.p.scale;
      if (c.p.softcap > 0) x = c.p.softcap * std::tanh(x / c.p.softcap);
      s[j] = x;
      mx = std::max(mx, x);
    }
    if (mx == -INFINITY) continue;  // no visible key in this tile for this row
    const float m_new = std::max(m[r], mx);
    const float corr = std::exp(m[r] - m_new);  // 0 when m[r] was -inf
    if (corr != 1.0f) {
      l[r] *= corr;
      float* a = acc + size_t(r) * hdv;
      for (int i = 0; i < hdv; ++i) a[i] *= corr;
    }
    l[r] += c.exp_sum(s, ns, m_new);  // exp(-inf) = 0 for masked keys
    m[r] = m_new;
  }
}

// Scores of one key tile, S: [rows][kKeyTile], -inf where masked; then the online-softmax update
// of m, l and acc, leaving S as the weights exp(s - m) of the keys. dense: tile_fully_visible.
// ktile: [kKeyTile][head_dim] scratch.
void score_key_tile(const Plan& c, int i0, int nt, int g, int s0, int ns, bool dense, float* S, float* m, float* l,
                    float* acc, float* kdec, float* ktile) {
  const int group = c.group, hd = c.kv.head_dim, rows = nt * group;
  std::fill(S, S + size_t(rows) * kKeyTile, -INFINITY);
  if (dense) {
    // Every key is seen by every row: decode the tile's K rows once, one register-blocked product.
    for (int j = 0; j < ns; ++j) c.kk.decode(c.kv.k_row(s0 + j, g), ktile + size_t(j) * hd, hd);
    const float* q_rows[kMaxGroup * kTileQueries];
    for (int t = 0; t < nt; ++t)
      for (int h = 0; h < group; ++h) q_rows[t * group + h] = c.query_f32(i0 + t, g, h);
    c.score_tile(ktile, ns, hd, q_rows, rows, S, kKeyTile);
  } else {
    score_keys_one_by_one(c, i0, nt, g, s0, ns, S, kdec);
  }
  softmax_update(c, rows, ns, S, m, l, acc);
}

// acc rows += weights S of one key tile times its V rows. dense: tile_fully_visible.
// vtile: [kKeyTile][head_dim_v] scratch.
void accumulate_values(const Plan& c, int i0, int nt, int g, int s0, int ns, bool dense, const float* S, float* acc,
                       float* vdec, float* vtile) {
  const int group = c.group, hdv = c.kv.head_dim_v;
  if (dense) {
    // Dense tile: decode its rows once, then one register-blocked product for all rows. A position
    // held by the V precision window decodes from its precise copy (kept in V's basis).
    for (int j = 0; j < ns; ++j) {
      const uint8_t* hi = c.kv.v_hi_row(s0 + j, g);
      if (hi) {
        c.vhk.decode(hi, vtile + size_t(j) * hdv, hdv);
      } else {
        c.vk.decode(c.kv.v_row(s0 + j, g), vtile + size_t(j) * hdv, hdv);
      }
    }
    c.accumulate_tile(vtile, ns, hdv, S, kKeyTile, nt * group, acc, size_t(hdv));
    return;
  }
  for (int j = 0; j < ns; ++j) {
    int ta, tb;
    visible_tokens(c, i0, nt, s0 + j, ta, tb);
    if (ta > tb) continue;
    // A position held by the V precision window is read from its precise copy (same basis).
    const uint8_t* hi = c.kv.v_hi_row(s0 + j, g);
    const uint8_t* vrow = hi ? hi : c.kv.v_row(s0 + j, g);
    const KvRowKernels& vk = hi ? c.vhk : c.vk;
    const int r0 = ta * group, n_rows = (tb - ta + 1) * group;
    if (n_rows == 1) {
      vk.axpy(S[size_t(r0) * kKeyTile + j], vrow, acc + size_t(r0) * hdv, hdv);
      continue;
    }
    float w[kMaxGroup * kTileQueries];  // this key's weight for each visible row
    for (int r = 0; r < n_rows; ++r) w[r] = S[size_t(r0 + r) * kKeyTile + j];
    vk.decode(vrow, vdec, hdv);  // once for all the rows
    c.vk.axpy_f32_n(w, vdec, acc + size_t(r0) * hdv, size_t(hdv), n_rows, hdv);
  }
}

// One work item: keys of chunk `chunk` of the tile's key range, for KV head g. Writes its partial
// softmax state (m, l, acc) to part.
void run_item(const Plan& c, int tile, int g, int chunk, float* part, std::vector<float>& scratch) {
  const int i0 = tile * c.tile_q, nt = std::min(c.tile_q, c.n_q - i0), rows = nt * c.group;
  const int key_lo = first_visible(c.p, c.pos0 + i0), key_hi = c.pos0 + i0 + nt - 1;
  const int64_t n_keys = key_hi - key_lo + 1;
  const int k_begin = key_lo + int(n_keys * chunk / c.n_chunks);
  const int k_end = key_lo + int(n_keys * (chunk + 1) / c.n_chunks);
  float* m = part;
  float* l = m + c.rows_max;
  float* acc = l + c.rows_max;  // [rows][head_dim_v]
  std::fill(m, m + rows, -INFINITY);
  std::fill(l, l + rows, 0.0f);
  std::fill(acc, acc + size_t(rows) * c.kv.head_dim_v, 0.0f);
  scratch.resize(size_t(c.rows_max) * kKeyTile + size_t(c.kv.head_dim) * (1 + kKeyTile) +
                 size_t(c.kv.head_dim_v) * (1 + kKeyTile));
  float* S = scratch.data();                            // [rows][kKeyTile]
  float* kdec = S + size_t(c.rows_max) * kKeyTile;      // [head_dim]
  float* vdec = kdec + c.kv.head_dim;                   // [head_dim_v]
  float* vtile = vdec + c.kv.head_dim_v;                // [kKeyTile][head_dim_v]
  float* ktile = vtile + size_t(kKeyTile) * c.kv.head_dim_v;  // [kKeyTile][head_dim]
  for (int s0 = k_begin; s0 < k_end; s0 += kKeyTile) {
    const int ns = std::min(kKeyTile, k_end - s0);
    const bool dense = tile_fully_visible(c, i0, nt, s0, ns);
    score_key_tile(c, i0, nt, g, s0, ns, dense, S, m, l, acc, kdec, ktile);
    accumulate_values(c, i0, nt, g, s0, ns, dense, S, acc, vdec, vtile);
  }
}

// Merges the chunks' partial states of (tile, g) by log-sum-exp, normalizes, returns to the original
// basis and writes out.
void merge_item(const Plan& c, int tile, int g, const float* partials, float* out) {
  const int i0 = tile * c.tile_q, nt = std::min(c.tile_q, c.n_q - i0), hdv = c.kv.head_dim_v;
  const KvTypeOps& vops = kv_type_ops(c.kv.v_type);
  const float* first = partials + size_t(tile * c.kv.n_head_kv + g) * size_t(c.n_chunks) * c.partial_floats();
  for (int t = 0; t < nt; ++t)
    for (int h = 0; h < c.group; ++h) {
      const int r = t * c.group + h;
      float M = -INFINITY;
      for (int ch = 0; ch < c.n_chunks; ++ch) M = std::max(M, first[size_t(ch) * c.partial_floats() + size_t(r)]);
      float* o = out + (size_t(i0 + t) * size_t(c.p.n_head) + size_t(g) * size_t(c.group) + size_t(h)) * size_t(hdv);
      std::fill(o, o + hdv, 0.0f);
      float L = 0;
      for (int ch = 0; ch < c.n_chunks; ++ch) {
        const float* part = first + size_t(ch) * c.partial_floats();
        if (part[c.rows_max + r] == 0.0f) continue;  // the chunk saw no key of this row
        const float w = std::exp(part[r] - M);
        L += w * part[c.rows_max + r];
        c.vk.axpy_f32(w, part + 2 * size_t(c.rows_max) + size_t(r) * hdv, o, hdv);
      }
      const float inv = 1.0f / L;  // L >= 1: the chunk holding the max contributes exp(0) * l >= 1
      for (int i = 0; i < hdv; ++i) o[i] *= inv;
      vops.finish_output(o, hdv);
    }
}

}  // namespace

void attention(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out,
               ThreadPool& pool) {
  check(p.n_head > 0 && kv.n_head_kv > 0 && p.n_head % kv.n_head_kv == 0, "attention: ", p.n_head,
        " query heads do not split into ", kv.n_head_kv, " KV heads");
  const int group = p.n_head / kv.n_head_kv, hd = kv.head_dim;
  check(group <= kMaxGroup, "attention: more than ", kMaxGroup, " query heads per KV head");
  const KvTypeOps& kops = kv_type_ops(kv.k_type);

  // Queries prepared once for K's type (copied, rotated, or quantized to q8_0 for integer dots).
  const size_t q_stride = (kops.query_bytes(hd) + 63) & ~size_t(63);
  std::vector<float> qp_buf(size_t(n_q) * size_t(p.n_head) * q_stride / sizeof(float));  // [n_q][n_head][q_stride]
  uint8_t* qp = reinterpret_cast<uint8_t*>(qp_buf.data());
  pool.parallel_for(int64_t(n_q) * p.n_head, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) kops.prepare_query(q + r * hd, qp + size_t(r) * q_stride, hd);
  });

  const bool f32_prepared = kv_type_f32_query(kv.k_type);
  const int tile_q = std::min(kTileQueries, n_q);
  const int n_tiles = (n_q + tile_q - 1) / tile_q;
  // Enough items to keep every thread busy (8 per thread); each chunk at least kMinChunkKeys keys.
  const int base_items = n_tiles * kv.n_head_kv;
  const int max_keys = p.window > 0 ? std::min(p.window + tile_q - 1, pos0 + n_q) : pos0 + n_q;
  const int want = (8 * pool.size() + base_items - 1) / base_items;
  const int n_chunks = std::max(1, std::min(want, max_keys / kMinChunkKeys));

  const Plan c{p, kv, pos0, n_q, group, tile_q, n_tiles, n_chunks, tile_q * group, qp, q_stride,
               kv_row_kernels(kv.k_type), kv_row_kernels(kv.v_type), exp_sum_kernel(), kv_row_kernels(kv.v_hi_type),
               accumulate_tile_kernel(), score_tile_kernel(),
               // f32 queries in K's basis: the prepared ones when they are f32, else q itself (integer
               // queries are prepared in the original basis).
               f32_prepared ? reinterpret_cast<const float*>(qp) : q,
               f32_prepared ? q_stride / sizeof(float) : size_t(hd)};
  const int64_t n_items = int64_t(base_items) * n_chunks;
  std::vector<float> partials(size_t(n_items) * c.partial_floats());  // [n_tiles][n_head_kv][n_chunks][partial]
  pool.parallel_for(n_items, [&](int64_t b, int64_t e) {
    std::vector<float> scratch;
    for (int64_t it = b; it < e; ++it) {
      const int chunk = int(it % n_chunks), g = int((it / n_chunks) % kv.n_head_kv);
      const int tile = int(it / n_chunks / kv.n_head_kv);
      run_item(c, tile, g, chunk, partials.data() + size_t(it) * c.partial_floats(), scratch);
    }
  });
  pool.parallel_for(base_items, [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) merge_item(c, int(it / kv.n_head_kv), int(it % kv.n_head_kv), partials.data(), out);
  });
}

void attention_ref(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out) {
  const int group = p.n_head / kv.n_head_kv;
  const int hd = kv.head_dim, hdv = kv.head_dim_v;
  const KvTypeOps& kops = kv_type_ops(kv.k_type);
  const KvTypeOps& vops = kv_type_ops(kv.v_type);
  std::vector<float> krow(static_cast<size_t>(hd)), vrow(static_cast<size_t>(hdv));
  for (int i = 0; i < n_q; ++i) {
    const int qpos = pos0 + i, lo = first_visible(p, qpos);
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / group;
      const float* qh = q + (int64_t(i) * p.n_head + h) * hd;
      std::vector<double> s;
      for (int k = lo; k <= qpos; ++k) {
        kops.dequantize_head(kv.k_row(k, g), krow.data(), hd);
        double d = 0;
        for (int c = 0; c < hd; ++c) d += double(qh[c]) * krow[size_t(c)];
        d *= p.scale;
        if (p.softcap > 0) d = p.softcap * std::tanh(d / p.softcap);
        s.push_back(d);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
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
