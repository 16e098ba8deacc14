// A minimal but valid SentencePiece-style ("llama") vocabulary for synthetic models, laid out as the
// converter writes tiny test models: 0 <unk> (UNKNOWN), 1 <s> (CONTROL, bos), 2 </s> (CONTROL, eos),
// 3..258 the byte tokens <0x00>..<0xFF> (BYTE), then unique filler pieces (NORMAL) up to n_vocab:
// "a", "▁a", "b", "▁b", ..., "z", "▁z", "aa", "▁aa", ... with scores -1, -2, ... (shorter first).
#pragma once
#include "gguf/gguf_writer.h"

namespace polykv {

constexpr int kSynthMinVocab = 3 + 256;

// Writes tokenizer.ggml.* keys. n_vocab >= kSynthMinVocab.
void add_synth_tokenizer(GgufWriter& w, int n_vocab);

}  // namespace polykv
