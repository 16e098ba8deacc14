// The work of one attention item (attention_plan.h): chunk partials over 32-key tiles, the
// log-sum-exp fold of partials, and the final normalized rows.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "backend/cpu/attention_plan.h"

namespace polykv::attn {
namespace {

// Keys of tile [t0, t0 + 32) that some row of rs sees, as bits (bit j: key t0 + j); 0 if none.
uint32_t key_mask(const RowSet& rs, int t0) {
  const int a = std::max(rs.key_lo, t0), e = std::min(rs.key_hi, t0 + kKeyTile - 1);
  if (a > e) return 0;
  const int w = e - a + 1;
  return (w == 32 ? ~0u : ((1u << w) - 1)) << (a - t0);
}

// True when the keys `mask` of tile t0 that row set b sees are the same bytes in b's view as in
// first's: the same sequence, or the same (present) K and V block pointers for every block those
// keys lie in. Shared blocks are read-only, so the same pointer means the same content. Views with a
// V precision window are never shared across sequences (their precise V copies are per sequence).
bool same_keys(const Plan& c, const RowSet& first, const RowSet& b, int t0, uint32_t mask) {
  if (first.seq == b.seq) return true;
  const SeqCtx& A = c.seqs[size_t(first.seq)];
  const SeqCtx& B = c.seqs[size_t(b.seq)];
  if (A.kv->v_hi || B.kv->v_hi) return false;
  const int bt = A.kv->block_tokens;
  const int k_first = t0 + std::countr_zero(mask), k_last = t0 + 31 - std::countl_zero(mask);
  for (int bi = k_first / bt; bi <= k_last / bt; ++bi) {
    if (bi >= A.n_blocks || bi >= B.n_blocks) return false;
    const uint8_t* kb = A.kv->k_blocks[bi];
    if (!kb || kb != B.kv->k_blocks[bi] || A.kv->v_blocks[bi] != B.kv->v_blocks[bi]) return false;
  }
  return true;
}

// One group of row sets [first, last] that read tile t0 from the same blocks: K and V rows of the
// keys `mask` decoded once from first's view (the others' slots zero), scores for all the group's
// rows, their online-softmax update, and their values. m, l, acc: the block's chunk partial.
void tile_group(const Plan& c, const RowSet& first, const RowSet& last, int g, int t0, uint32_t mask, Scratch& s,
                float* m, float* l, float* acc) {
  const KvLayerView& kv = *c.seqs[size_t(first.seq)].kv;
  const int hd = c.hd, hdv = c.hdv;
  float* S = s.S;
  float* ktile = s.ktile;
  float* vtile = s.vtile;
  const int r0 = first.row0, nr = last.row0 + last.nt * c.group - r0;
  float* Sg = S + size_t(r0) * kKeyTile;
  if (c.q8) {  // scored from the stored blocks; a masked key reads the zero row
    const uint8_t* rows[kKeyTile];
    for (int j = 0; j < kKeyTile; ++j) rows[j] = mask >> j & 1 ? kv.k_row(t0 + j, g) : q8_zero_row();
    c.k.score_q8(rows, hd, s.qb_rows.data() + r0, nr, Sg, kKeyTile);
  } else {
    for (int j = 0; j < kKeyTile; ++j) {
      float* kj = ktile + size_t(j) * hd;
      if (mask >> j & 1) {
        c.kk->decode(kv.k_row(t0 + j, g), kj, hd);
      } else {
        std::fill(kj, kj + hd, 0.0f);
      }
    }
    c.k.score(ktile, kKeyTile, hd, s.q_rows.data() + r0, nr, Sg, kKeyTile);
  }
  for (int r = r0; r < r0 + nr; ++r) {  // each row's visible keys of the tile, [ta, te] (ta > te: none)
    s.ta[size_t(r)] = std::max(s.lo[size_t(r)], t0) - t0;
    s.te[size_t(r)] = std::min(s.hi[size_t(r)], t0 + kKeyTile - 1) - t0;
  }
  c.k.softmax(Sg, nr, s.ta.data() + r0, s.te.data() + r0, c.p.scale, c.p.softcap, m + r0, l + r0,
              acc + size_t(r0) * hdv, hdv);
  const KvRowKernels* vhk = c.seqs[size_t(first.seq)].vhk;
  for (int j = 0; j < kKeyTile; ++j) {
    float* vj = vtile + size_t(j) * hdv;
    if (!(mask >> j & 1)) {
      std::fill(vj, vj + hdv, 0.0f);
    } else if (const uint8_t* hi = kv.v_hi_row(t0 + j, g)) {  // the precise copy, in V's basis
      vhk->decode(hi, vj, hdv);
    } else {
      c.vk->decode(kv.v_row(t0 + j, g), vj, hdv);
    }
  }
  c.k.accumulate(vtile, kKeyTile, hdv, Sg, kKeyTile, nr, acc + size_t(r0) * hdv, size_t(hdv));
}

}  // namespace

void Scratch::bind(const Plan& c) {
  const size_t rows = size_t(c.max_rows), partial = c.partial_floats(c.max_rows);
  const size_t need = rows * kKeyTile + size_t(kKeyTile) * size_t(c.hd + c.hdv) + 2 * partial;
  if (buf.size() < need) buf.resize(need);  // grows only: no clearing on the hot path
  if (q_rows.size() < rows) {
    q_rows.resize(rows);
    qb_rows.resize(rows);
    lo.resize(rows);
    hi.resize(rows);
    ta.resize(rows);
    te.resize(rows);
  }
  S = buf.data();
  ktile = S + rows * kKeyTile;
  vtile = ktile + size_t(kKeyTile) * size_t(c.hd);
  state = vtile + size_t(kKeyTile) * size_t(c.hdv);
  part = state + partial;
}

void bind_rows(const Plan& c, const RowBlock& b, int g, Scratch& s) {
  for (int i = b.rs_begin; i < b.rs_end; ++i) {
    const RowSet& rs = c.rowsets[size_t(i)];
    const SeqCtx& sq = c.seqs[size_t(rs.seq)];
    for (int t = 0; t < rs.nt; ++t) {
      const int qpos = sq.pos0 + rs.i0 + t;
      for (int h = 0; h < c.group; ++h) {
        const size_t r = size_t(rs.row0 + t * c.group + h);
        s.q_rows[r] = sq.qf + (size_t(rs.i0 + t) * size_t(c.p.n_head) + size_t(g * c.group + h)) * sq.qf_stride;
        s.qb_rows[r] = reinterpret_cast<const uint8_t*>(s.q_rows[r]);
        s.lo[r] = c.p.window > 0 ? std::max(0, qpos - c.p.window + 1) : 0;
        s.hi[r] = qpos;
      }
    }
  }
}

void chunk_partial(const Plan& c, const RowBlock& b, int g, int chunk, float* part, Scratch& s) {
  const int n = b.n_rows;
  float* m = part;
  float* l = m + n;
  float* acc = l + n;  // [n][hdv]
  std::fill(m, m + n, -INFINITY);
  std::fill(l, l + n, 0.0f);
  std::fill(acc, acc + size_t(n) * size_t(c.hdv), 0.0f);
  const int c0 = chunk * kAttentionChunkKeys;
  const int k_begin = std::max(c0, b.key_lo), k_end = std::min(c0 + kAttentionChunkKeys - 1, b.key_hi);
  for (int t0 = k_begin / kKeyTile * kKeyTile; t0 <= k_end; t0 += kKeyTile) {
    // Groups: runs of consecutive row sets that see the tile and read it from the same blocks.
    for (int i = b.rs_begin; i < b.rs_end;) {
      const RowSet& first = c.rowsets[size_t(i)];
      uint32_t mask = key_mask(first, t0);
      int end = i + 1;
      if (mask) {
        for (; end < b.rs_end; ++end) {
          const uint32_t mb = key_mask(c.rowsets[size_t(end)], t0);
          if (!mb || !same_keys(c, first, c.rowsets[size_t(end)], t0, mb)) break;
          mask |= mb;
        }
        tile_group(c, first, c.rowsets[size_t(end - 1)], g, t0, mask, s, m, l, acc);
      }
      i = end;
    }
  }
}

void fold_partial(int n_rows, int hdv, const float* part, float* state) {
  const float* pm = part;
  const float* pl = pm + n_rows;
  const float* pacc = pl + n_rows;
  float* sm = state;
  float* sl = sm + n_rows;
  float* sacc = sl + n_rows;
  for (int r = 0; r < n_rows; ++r) {
    if (pl[r] == 0.0f) continue;  // the chunk held no key of this row
    const float* pa = pacc + size_t(r) * hdv;
    float* sa = sacc + size_t(r) * hdv;
    if (sl[r] == 0.0f) {  // empty state: take the partial as it is
      sm[r] = pm[r];
      sl[r] = pl[r];
      std::copy(pa, pa + hdv, sa);
      continue;
    }
    const float M = std::max(sm[r], pm[r]);
    const float a = std::exp(sm[r] - M), w = std::exp(pm[r] - M);
    sl[r] = sl[r] * a + pl[r] * w;
    for (int i = 0; i < hdv; ++i) sa[i] = sa[i] * a + pa[i] * w;
    sm[r] = M;
  }
}

void write_rows(const Plan& c, const RowBlock& b, int g, const float* state) {
  const int n = b.n_rows, hdv = c.hdv;
  const float* l = state + n;
  const float* acc = l + n;
  for (int i = b.rs_begin; i < b.rs_end; ++i) {
    const RowSet& rs = c.rowsets[size_t(i)];
    const SeqCtx& sq = c.seqs[size_t(rs.seq)];
    for (int t = 0; t < rs.nt; ++t)
      for (int h = 0; h < c.group; ++h) {
        const int r = rs.row0 + t * c.group + h;
        float* o = sq.out + (size_t(rs.i0 + t) * size_t(c.p.n_head) + size_t(g * c.group + h)) * size_t(hdv);
        // l >= 1 for every row: its own position is always visible, and the max's key adds exp(0).
        float inv = 1.0f / l[r];
        if (c.p.sinks) {  // acc / (l + exp(sink - m)), computed against max(m, sink) so nothing overflows
          const float s = c.p.sinks[g * c.group + h], M = std::max(state[r], s);
          const float a = std::exp(state[r] - M);
          inv = a / (l[r] * a + std::exp(s - M));
        }
        const float* a = acc + size_t(r) * hdv;
        for (int k = 0; k < hdv; ++k) o[k] = a[k] * inv;
        c.vops->finish_output(o, hdv);
      }
  }
}

}  // namespace polykv::attn
