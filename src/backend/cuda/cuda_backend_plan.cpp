#include "backend/cuda/cuda_backend_plan.h"

#include <algorithm>

#include "core/error.h"
#include "kv/kv_block_store.h"

namespace polykv::cuda {

uint64_t store_key(const KvBlockStore& s) {
  uint64_t key = 1469598103934665603ull;  // FNV-1a over the fields
  auto mix = [&key](uint64_t v) { key = (key ^ v) * 1099511628211ull; };
  mix(uint64_t(reinterpret_cast<uintptr_t>(s.data())));
  mix(uint64_t(s.k_type()));
  mix(uint64_t(s.v_type()));
  mix(uint64_t(s.n_blocks()));
  mix(uint64_t(s.block_tokens()));
  mix(uint64_t(s.shape().n_layer));
  mix(uint64_t(s.shape().n_head_kv));
  mix(uint64_t(s.shape().head_dim));
  mix(uint64_t(s.shape().head_dim_v));
  mix(uint64_t(s.k_head_bytes()));
  mix(uint64_t(s.v_head_bytes()));
  mix(uint64_t(s.k_part_bytes()));
  mix(uint64_t(s.layer_bytes()));
  return key == 0 ? 1 : key;
}

StepPlan plan_step(std::span<const StepSeq> seqs, const KvMemory& device_memory) {
  StepPlan plan;
  std::vector<int32_t> starts, pos0, n_q, row0, tables;
  int next_row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const StepSeq& s = seqs[i];
    check(s.kv != nullptr, "CUDA backend: step sequence ", i, " has no KV");
    check(s.n >= 0 && s.pos0 >= 0, "CUDA backend: step sequence ", i, " has pos0 ", s.pos0, " and ", s.n, " rows");
    check(s.row0 == next_row, "CUDA backend: step sequence ", i, " starts at row ", s.row0, ", expected ", next_row,
          " (sequences are contiguous, in order)");
    next_row += s.n;
    const KvBlockStore* store = s.kv->block_store();
    if (store == nullptr || &store->memory() != &device_memory)
      fail("CUDA backend: step sequence ", i, " needs a KV pool in GPU memory (", device_memory.name(),
           "); its KV is ", store ? "a pool in " + std::string(store->memory().name()) + " memory" : "a private cache");
    check(!s.kv->k_equalizer().enabled(), "CUDA backend: step sequence ", i,
          " uses K equalization, which the CUDA backend does not support");
    if (s.n == 0) continue;
    check(plan.store == nullptr || plan.store == store, "CUDA backend: step sequence ", i,
          " is in another KV pool than the step's first sequence");
    plan.store = store;
    const int end = s.pos0 + s.n;  // positions 0 .. end - 1 are read; pos0 .. end - 1 are written
    check(end <= s.kv->max_tokens(), "context full: positions up to ", end, " exceed the context of ",
          s.kv->max_tokens());
    const int bt = store->block_tokens();
    const size_t n_blocks = size_t((end + bt - 1) / bt);
    const std::span<const BlockId> table = s.kv->block_table();
    check(table.size() >= n_blocks, "CUDA backend: step sequence ", i, " has ", table.size(), " blocks for ", end,
          " positions (", n_blocks, " needed)");
    starts.push_back(int32_t(tables.size()));
    for (size_t b = 0; b < n_blocks; ++b) {
      check(table[b] >= 0 && table[b] < store->n_blocks(), "CUDA backend: step sequence ", i, ": block id ",
            table[b], " out of range");
      tables.push_back(int32_t(table[b]));
    }
    for (int p = s.pos0; p < end; ++p) {
      // block * block_tokens + offset < n_blocks * block_tokens: fits an int32 for any pool a GPU holds
      // (2^31 slots of even one f16 row of 64 dims are 256 GiB per layer).
      const int64_t slot = int64_t(table[size_t(p / bt)]) * bt + p % bt;
      check(slot <= INT32_MAX, "CUDA backend: KV slot ", slot, " does not fit 32 bits");
      plan.slots.push_back(int32_t(slot));
    }
    pos0.push_back(s.pos0);
    n_q.push_back(s.n);
    row0.push_back(s.row0);
    plan.max_n_q = std::max(plan.max_n_q, s.n);
    plan.max_kv = std::max(plan.max_kv, end);
  }
  plan.n_seq = int(pos0.size());
  plan.total_rows = next_row;
  if (plan.store != nullptr) plan.store_key = store_key(*plan.store);
  plan.tables_len = tables.size();

  // Shared prefixes: a run of consecutive sequences whose tables agree on their first k blocks, k
  // limited so that every shared key lies before each member's first query (so all its queries see
  // all of them, causally). Runs of one sequence or k = 0 are no groups.
  std::vector<int32_t> g_seq0(size_t(plan.n_seq), 0), g_n(size_t(plan.n_seq), 0), g_blocks(size_t(plan.n_seq), 0);
  if (plan.store != nullptr) {
    const int bt = plan.store->block_tokens();
    auto table_len = [&](int i) {
      return int((size_t(i) + 1 < starts.size() ? size_t(starts[size_t(i) + 1]) : tables.size()) - size_t(starts[size_t(i)]));
    };
    auto visible_blocks = [&](int i) { return std::min(table_len(i), pos0[size_t(i)] / bt); };
    for (int i = 0; i < plan.n_seq;) {
      int k = visible_blocks(i), j = i + 1;
      while (j < plan.n_seq && k > 0) {
        int common = 0;
        const int lim = std::min(k, visible_blocks(j));
        while (common < lim && tables[size_t(starts[size_t(i)] + common)] == tables[size_t(starts[size_t(j)] + common)])
          ++common;
        if (common == 0) break;
        k = common;
        ++j;
      }
      if (j - i >= 2 && k > 0) {
        const int g = plan.n_prefix++;
        g_seq0[size_t(g)] = i;
        g_n[size_t(g)] = j - i;
        g_blocks[size_t(g)] = k;
        int q = 0;
        for (int m = i; m < j; ++m) q += n_q[size_t(m)];
        plan.max_prefix_q = std::max(plan.max_prefix_q, q);
        plan.max_prefix_kv = std::max(plan.max_prefix_kv, k * bt);
        i = j;
      } else {
        ++i;
      }
    }
  }
  for (const auto* v : {&starts, &pos0, &n_q, &row0, &g_seq0, &g_n, &g_blocks, &tables})
    plan.tables.insert(plan.tables.end(), v->begin(), v->end());
  return plan;
}

}  // namespace polykv::cuda
