// Fuzz target for the GGUF reader: any byte string must either parse or throw polykv::Error, and a
// parsed file's tensors must lie inside the buffer. Built into libFuzzer (gguf_fuzz, clang) and into
// the test suite, which replays mutated real files through it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const polykv::GgufFile f = polykv::GgufFile::parse(data, size);
    volatile uint8_t sink = 0;
    for (const auto& t : f.tensors()) {
      if (t.data < data || t.data + t.n_bytes > data + size) std::abort();  // bounds invariant
      if (t.n_bytes > 0) sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
    }
    for (const auto& kv : f.metadata()) (void)kv.second.to_string();
  } catch (const polykv::Error&) {
  }
  return 0;
}
