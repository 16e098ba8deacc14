// GGUF v3 writer. Metadata in insertion order; tensor data aligned to `general.alignment` (32).
// Tensor payloads are either borrowed (the pointer must stay valid until write()) or produced on
// demand by a generator, so multi-gigabyte synthetic models stream to disk one tensor at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace polykv {

class GgufWriter {
 public:
  void set(const std::string& key, const GgufValue& value);  // replaces an existing key
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_str(const std::string& key, const std::string& v);
  void set_str_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);

  // Fills exactly n_bytes = row_bytes(type, ne[0]) * rows.
  using Generator = std::function<void(uint8_t* dst, size_t n_bytes)>;
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne, const void* data);
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne, Generator gen);

  // Writes through AtomicFileWriter (core/atomic_file.h): on any error, a generator's included, PATH
  // is left as it was. Throws Error on I/O failure.
  void write(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;        // whole file in memory (tests)

 private:
  struct Pending {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes;
    Generator gen;
  };
  template <typename Sink>
  void emit(Sink& sink) const;

  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Pending> tensors_;
};

// Makes scalar/array values (for GgufWriter::set and tests).
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_i32(int32_t v);
GgufValue gguf_u64(uint64_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);
GgufValue gguf_str(const std::string& v);

}  // namespace polykv
