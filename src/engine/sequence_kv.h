// The KV of one sequence (run, logits, bench, eval) for a model, where the model's backend can use it:
//  - the backend's KV memory is host memory (CPU): a KvCache, with every feature (V precision window
//    such as "turbo3w", K equalization, sliding-window layers releasing old blocks);
//  - otherwise (a GPU): an OwnedPagedKv in the backend's kv_memory() (kv/owned_paged_kv.h), plain K
//    and V types only; a V precision window or K equalization is refused with an Error.
#pragma once
#include <memory>
#include <string>

#include "kv/kv_sequence.h"
#include "kv/recurrent_state.h"
#include "model/model.h"

namespace polykv {

struct SequenceKvOptions {
  std::string k_type = "q8_0";     // a K type name (kv/kv_type.h)
  std::string v_type = "turbo3t";  // a V type name, or one with a precision window (kv/v_window.h)
  int max_tokens = 0;              // context of the sequence (> 0)
  int block_tokens = 256;
  int rollback_tokens = 0;         // KvCache: positions a sliding-window layer keeps for truncate()
  float k_eq = 0;                  // K equalization strength (kv/k_equalizer.h); 0: off
};

// Throws Error naming an unknown type or a feature the backend's KV memory cannot have.
std::unique_ptr<KvSequence> make_sequence_kv(const Model& model, const SequenceKvOptions& o);

// Rolls a sequence made by make_sequence_kv back to n_tokens positions (rejected speculative tokens,
// bench repetitions). Throws Error for another kind of KvSequence or a rollback a sliding-window
// layer of a KvCache can no longer do (see rollback_tokens).
void truncate_sequence_kv(KvSequence& kv, int n_tokens);

// A position of a sequence to come back to (bench repetitions at a depth). A hybrid model's recurrent state
// cannot be rolled back past its last step, so the mark keeps a copy of the state at the mark (in the
// state's memory: the GPU's for a CUDA sequence); rewind() restores it and truncates the KV to the mark.
class SequenceMark {
 public:
  explicit SequenceMark(KvSequence& kv);
  ~SequenceMark();
  int position() const { return position_; }
  // kv (the sequence marked, at or past the mark) back at the mark.
  void rewind(KvSequence& kv) const;

 private:
  int position_;
  std::unique_ptr<RecurrentState> state_;  // the state at the mark (hybrid models), else null
};

}  // namespace polykv
