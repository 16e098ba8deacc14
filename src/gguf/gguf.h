// GGUF v3 (and v2) reader, memory-mapped. Layout (little-endian):
//   magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
//   n_kv × {string key, u32 value_type, value}, n_tensors × {string name, u32 n_dims, u64 ne[n_dims],
//   u32 ggml_type, u64 offset}, padding to `general.alignment` (default 32), tensor data.
// Every read is bounds-checked: a truncated, corrupt or unsupported file throws polykv::Error with a
// message naming the problem; nothing reads outside the mapping.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace polykv {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Scalars: integers in `i` (signed types) or `u` (unsigned), floats in `f`,
// bool in `b`, strings in `str`. Arrays: elem_type, then `raw` (numeric/bool elements, packed
// little-endian), `strs` (string elements) or `items` (nested arrays); `count` elements in all.
struct GgufValue {
  GgufType type = GgufType::U8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string str;
  GgufType elem_type = GgufType::U8;
  uint64_t count = 0;
  std::vector<uint8_t> raw;
  std::vector<std::string> strs;
  std::vector<GgufValue> items;

  bool is_integer() const;
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
  std::string to_string(size_t max_array_items = 6) const;  // for `inspect`
};

struct GgufTensor {
  std::string name;
  DType type;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the fastest-varying (row length)
  uint64_t offset = 0;      // relative to the data section
  uint64_t n_bytes = 0;
  int64_t n_elements = 0;
  const uint8_t* data = nullptr;  // inside the mapping; valid while the GgufFile lives

  int64_t rows() const { return ne.empty() ? 1 : n_elements / ne[0]; }
};

class GgufFile {
 public:
  // Maps a file read-only. Throws Error (naming path and problem) if it cannot be opened or parsed.
  static GgufFile open(const std::string& path);
  // Parses a buffer in memory; the buffer must outlive the GgufFile (used by tests and the fuzzer).
  static GgufFile parse(const uint8_t* data, size_t size);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }
  // True for open(): the tensor data is a read-only private map of the file, so its pages may be
  // dropped from memory (madvise) and are re-read from the file if touched again. False for parse().
  bool is_file_mapped() const { return mapping_ != nullptr; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  // Typed getters. Without a default, a missing key throws; a value of the wrong type always throws.
  // Integer getters accept any integer type whose value fits; float getters accept f32/f64.
  uint32_t get_u32(const std::string& key) const;
  uint32_t get_u32(const std::string& key, uint32_t def) const;
  int64_t get_i64(const std::string& key) const;
  float get_f32(const std::string& key) const;
  float get_f32(const std::string& key, float def) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_str(const std::string& key) const;
  std::string get_str(const std::string& key, const std::string& def) const;
  std::vector<std::string> get_str_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;    // f32/f64 elements
  std::vector<int32_t> get_i32_array(const std::string& key) const;  // any integer elements that fit

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(const std::string& name) const;
  const GgufTensor& tensor(const std::string& name) const;  // throws if missing

 private:
  GgufFile() = default;
  void parse_all();

  std::shared_ptr<void> mapping_;  // owns the mmap (or nothing, for parse())
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::string source_;  // path, for messages
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensor> tensors_;
};

}  // namespace polykv
