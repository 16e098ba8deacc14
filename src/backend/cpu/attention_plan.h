// Internal to attention*.cpp: the plan of one attention_batch call and the work of one item.
//
// Rows: a query row is (sequence, query token, query head of one KV head g). Row sets are up to
// kTileQueries consecutive query tokens of one sequence with all the group's heads (row index
// t * group + h inside the set). Row blocks are consecutive row sets (in plan order, which puts
// sequences that share prefix blocks next to each other) of at most max_rows rows; a work item is
// (row block, KV head g, one chunk or all of the block's chunks).
//
// Per row and chunk the item computes a partial softmax state over the chunk's 32-key tiles in
// order; inside a tile, consecutive row sets whose keys come from the same blocks form a group that
// decodes the tile once (the cascade). How rows are grouped, blocked or split never changes a row's
// arithmetic (attention.h, Invariance).
#pragma once
#include <cstddef>
#include <vector>

#include "backend/cpu/attention.h"

namespace polykv::attn {

constexpr int kKeyTile = 32;       // keys per tile: decoded together, one online-softmax update
constexpr int kTileQueries = 8;    // query tokens per row set
constexpr int kMaxGroup = 64;      // query heads per KV head handled (checked)
constexpr int kBlockRows = 64;     // rows per row block when row sets are packed together
static_assert(kAttentionChunkKeys % kKeyTile == 0 && kKeyTile == kSoftmaxKeys);

struct SeqCtx {
  const KvLayerView* kv;
  int pos0, n_q;
  int n_blocks;        // entries of kv.k_blocks that hold positions < pos0 + n_q
  const float* qf;     // f32 queries in K's basis: [n_q][n_head][qf_stride] (Plan::q8: prepared q8 rows)
  size_t qf_stride;
  float* out;          // [n_q][n_head][head_dim_v]
  const KvRowKernels* vhk;  // the V precision window's type (when kv.v_hi)
};

struct RowSet {
  int seq;             // index into Plan::seqs
  int i0, nt;          // query tokens i0 .. i0 + nt - 1 of the sequence
  int key_lo, key_hi;  // keys some row of the set sees: [first visible of token i0, position of the last]
  int row0;            // first row inside its row block
};

struct RowBlock {
  int rs_begin, rs_end;      // row sets [rs_begin, rs_end)
  int n_rows;
  int key_lo, key_hi;        // hull of its row sets' keys
  int chunk_lo, chunk_hi;    // chunks it reads, inclusive
  bool split = false;        // one item per chunk (partials merged later) instead of one for all
  size_t partial_offset = 0; // split: floats into Plan::partials of [n_head_kv][n_chunks][partial]
};

struct Plan {
  const AttentionParams& p;
  const AttentionKernels& k;
  int group, hd, hdv, n_head_kv;
  const KvRowKernels* kk;    // K rows
  const KvRowKernels* vk;    // V rows
  const KvTypeOps* vops;     // V's finish_output
  bool q8 = false;           // K q8_0 scored in integers (k.score_q8); SeqCtx::qf holds prepared rows
  int max_rows = 0;          // largest row block
  std::vector<SeqCtx> seqs;
  std::vector<RowSet> rowsets;
  std::vector<RowBlock> blocks;

  int n_chunks(const RowBlock& b) const { return b.chunk_hi - b.chunk_lo + 1; }
  // Floats of one row block's partial state: m [n], l [n], acc [n][hdv].
  size_t partial_floats(int n_rows) const { return size_t(n_rows) * (2 + size_t(hdv)); }
};

// Per-thread scratch of items (kept by each thread across calls, grown as needed).
struct Scratch {
  std::vector<float> buf;
  std::vector<const float*> q_rows;  // [rows] query row pointers
  std::vector<const uint8_t*> qb_rows;  // [rows] the same as bytes (Plan::q8: prepared q8 rows)
  std::vector<int> lo, hi;           // [rows] first and last visible key
  std::vector<int> ta, te;           // [rows] visible keys of the current tile, relative to it
  // Views into buf, set by bind:
  float* S = nullptr;      // [max_rows][kKeyTile] scores, then weights
  float* ktile = nullptr;  // [kKeyTile][hd] decoded K rows
  float* vtile = nullptr;  // [kKeyTile][hdv] decoded V rows
  float* state = nullptr;  // partial_floats(max_rows): the folded state of an item
  float* part = nullptr;   // partial_floats(max_rows): one chunk's partial
  void bind(const Plan& c);  // sizes everything for c
};

// The chunk partial of every row of block b for KV head g: part = m [n], l [n], acc [n][hdv].
void chunk_partial(const Plan& c, const RowBlock& b, int g, int chunk, float* part, Scratch& s);
// state <- state folded with part (log-sum-exp; state with l = 0 is empty), every row of n.
void fold_partial(int n_rows, int hdv, const float* part, float* state);
// Normalizes the folded state of block b's rows, returns them to V's original basis, writes out.
void write_rows(const Plan& c, const RowBlock& b, int g, const float* state);
// Sets s.q_rows, s.lo, s.hi for block b and KV head g.
void bind_rows(const Plan& c, const RowBlock& b, int g, Scratch& s);

}  // namespace polykv::attn
