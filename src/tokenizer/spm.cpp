#include "tokenizer/spm.h"

#include <algorithm>
#include <string>

#include "tokenizer/utf8.h"

namespace polykv {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

// One symbol of the doubly linked list being merged. A symbol covers text[start, start + len); a
// symbol merged into its left neighbour gets len = 0 and leaves the list.
struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t start;
  uint32_t len;
};

// A candidate merge of symbols left and right (adjacent when it was queued). It is stale when either
// symbol changed since: merging only grows symbols, so left.len + right.len != size detects it.
struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;
  int32_t id;
};

struct BigramOrder {  // priority_queue top = highest score, then leftmost
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab) : vocab_(vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const std::string& piece = vocab.pieces[id];
    if (mergeable_id(piece) != id) continue;
    max_piece_bytes_ = std::max<size_t>(max_piece_bytes_, piece.size());
    const size_t first_len = utf8::valid_sequence_length(piece, 0);
    if (first_len == 0 || first_len == piece.size()) continue;  // single character (or not UTF-8)
    for (size_t pos = 0; pos < piece.size();) {
      const size_t len = utf8::valid_sequence_length(piece, pos);
      if (len == 0) break;
      const uint32_t cp = utf8::decode(piece, pos, len);
      if (cp < 128)
        ascii_in_pieces_[cp] = true;
      else
        non_ascii_in_pieces_.insert(cp);
      pos += len;
    }
  }
}

bool SpmEncoder::is_isolated(std::string_view text, size_t pos, size_t len) const {
  if (len == 0) return true;  // an ill-formed byte is in no piece
  const uint32_t cp = utf8::decode(text, pos, len);
  return cp < 128 ? !ascii_in_pieces_[cp] : non_ascii_in_pieces_.count(cp) == 0;
}

int32_t SpmEncoder::mergeable_id(std::string_view text) const {
  const int32_t id = vocab_.find(text);
  if (id == kNoToken) return kNoToken;
  const TokenType t = vocab_.type(id);
  return (t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Undefined) ? id
                                                                                                : kNoToken;
}

void SpmEncoder::append_fallback(std::string_view symbol, std::vector<int32_t>& out) const {
  bool all_bytes = true;
  for (char c : symbol) all_bytes = all_bytes && vocab_.byte_token[static_cast<uint8_t>(c)] != kNoToken;
  if (all_bytes) {
    for (char c : symbol) out.push_back(vocab_.byte_token[static_cast<uint8_t>(c)]);
  } else if (vocab_.unk != kNoToken) {
    out.push_back(vocab_.unk);
  }
}

void SpmEncoder::encode(std::string_view raw, bool starts_segment, std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() + 8);
  if (vocab_.add_space_prefix && starts_segment) text += kSpaceMarker;
  for (char c : raw) {
    if (c == ' ')
      text += kSpaceMarker;
    else
      text += c;
  }
  size_t run_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8::valid_sequence_length(text, pos);
    const size_t step = len ? len : 1;
    if (is_isolated(text, pos, len)) {
      if (pos > run_start) encode_run(std::string_view(text).substr(run_start, pos - run_start), out);
      encode_run(std::string_view(text).substr(pos, step), out);
      run_start = pos + step;
    }
    pos += step;
  }
  if (run_start < text.size()) encode_run(std::string_view(text).substr(run_start), out);
}

void SpmEncoder::encode_run(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;

  // Initial symbols: one per well-formed UTF-8 character; each byte of an ill-formed sequence is a
  // symbol of its own (it cannot be part of any piece, so it ends as a byte-fallback token).
  // Scratch buffers reused across runs and calls (a text is cut into many short runs).
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Bigram> heap;
  symbols.clear();
  heap.clear();
  for (size_t pos = 0; pos < text.size();) {
    size_t len = utf8::valid_sequence_length(text, pos);
    if (len == 0) len = 1;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, index + 1, static_cast<uint32_t>(pos), static_cast<uint32_t>(len)});
    pos += len;
  }
  symbols.back().next = -1;

  const BigramOrder order;  // heap top = highest score, then leftmost
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (l.len + r.len > max_piece_bytes_) return;
    const std::string_view joined(text.data() + l.start, l.len + r.len);  // adjacent in text
    const int32_t id = mergeable_id(joined);
    if (id == kNoToken) return;
    heap.push_back({vocab_.scores[id], left, right, l.len + r.len, id});
    std::push_heap(heap.begin(), heap.end(), order);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), order);
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    const std::string_view piece(text.data() + s.start, s.len);
    // Every merged symbol is a piece; single characters may not be (then: byte fallback).
    const int32_t id = vocab_.find(piece);
    if (id != kNoToken && !vocab_.is_control_like(id))
      out.push_back(id);
    else
      append_fallback(piece, out);
  }
}

}  // namespace polykv
