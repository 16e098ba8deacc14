#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/error.h"
#include "core/printable.h"

namespace polykv {
namespace {

constexpr uint64_t kMaxDims = 4;                 // ggml tensors have at most 4 dimensions
constexpr uint64_t kMaxStringBytes = 1ull << 30;  // no metadata string is a GiB
constexpr int kMaxArrayNesting = 4;

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

bool valid_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

// Bounds-checked little-endian reader over [base, base + size).
class Cursor {
 public:
  Cursor(const uint8_t* base, size_t size) : base_(base), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const char* what) const {
    check(n <= remaining(), "truncated file: ", what, " needs ", n, " bytes at offset ", pos_, ", only ",
          remaining(), " left");
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    check(n <= kMaxStringBytes, "corrupt ", what, ": string length ", n, " at offset ", pos_ - 8);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(base_ + pos_), size_t(n));
    pos_ += size_t(n);
    return s;
  }
  const uint8_t* take(uint64_t n, const char* what) {
    need(n, what);
    const uint8_t* p = base_ + pos_;
    pos_ += size_t(n);
    return p;
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
};

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, int depth);

GgufValue read_array(Cursor& c, const std::string& key, int depth) {
  check(depth < kMaxArrayNesting, "metadata '", printable(key), "': arrays nested deeper than ", kMaxArrayNesting);
  GgufValue v;
  v.type = GgufType::ARRAY;
  const uint32_t et = c.read<uint32_t>("array element type");
  check(valid_type(et), "metadata '", printable(key), "': unknown array element type ", et);
  v.elem_type = GgufType(et);
  v.count = c.read<uint64_t>("array length");
  if (const size_t es = scalar_size(v.elem_type)) {
    check(v.count <= c.remaining() / es, "metadata '", printable(key), "': array of ", v.count,
          " elements runs past the end of the file");
    const uint8_t* p = c.take(v.count * es, "array data");
    v.raw.assign(p, p + v.count * es);
  } else if (v.elem_type == GgufType::STRING) {
    check(v.count <= c.remaining() / 8, "metadata '", printable(key), "': array of ", v.count,
          " strings runs past the end of the file");
    v.strs.reserve(size_t(v.count));
    for (uint64_t i = 0; i < v.count; ++i) v.strs.push_back(c.read_string("array string"));
  } else {  // nested arrays: each needs at least 12 bytes of header
    check(v.count <= c.remaining() / 12, "metadata '", printable(key), "': array of ", v.count,
          " arrays runs past the end of the file");
    for (uint64_t i = 0; i < v.count; ++i) v.items.push_back(read_array(c, key, depth + 1));
  }
  return v;
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::U8: v.u = c.read<uint8_t>("u8"); break;
    case GgufType::I8: v.i = c.read<int8_t>("i8"); break;
    case GgufType::U16: v.u = c.read<uint16_t>("u16"); break;
    case GgufType::I16: v.i = c.read<int16_t>("i16"); break;
    case GgufType::U32: v.u = c.read<uint32_t>("u32"); break;
    case GgufType::I32: v.i = c.read<int32_t>("i32"); break;
    case GgufType::U64: v.u = c.read<uint64_t>("u64"); break;
    case GgufType::I64: v.i = c.read<int64_t>("i64"); break;
    case GgufType::F32: v.f = c.read<float>("f32"); break;
    case GgufType::F64: v.f = c.read<double>("f64"); break;
    case GgufType::BOOL: {
      const uint8_t b = c.read<uint8_t>("bool");
      check(b <= 1, "metadata '", printable(key), "': bool value ", int(b), " is neither 0 nor 1");
      v.b = b != 0;
      break;
    }
    case GgufType::STRING: v.str = c.read_string("string value"); break;
    case GgufType::ARRAY: return read_array(c, key, depth);
  }
  return v;
}

template <typename T>
T element(const GgufValue& v, uint64_t i) {
  T x;
  std::memcpy(&x, v.raw.data() + i * sizeof(T), sizeof(T));
  return x;
}

// The value of an integer-typed value as int64 (u64 values past int64's range are refused).
int64_t integer_value(const GgufValue& v, const std::string& key) {
  check(v.is_integer(), "metadata '", printable(key), "' is ", gguf_type_name(v.type), ", expected an integer");
  if (v.type == GgufType::U8 || v.type == GgufType::U16 || v.type == GgufType::U32 || v.type == GgufType::U64) {
    check(v.u <= uint64_t(std::numeric_limits<int64_t>::max()), "metadata '", printable(key), "' = ", v.u, " is too large");
    return int64_t(v.u);
  }
  return v.i;
}

const char* non_regular_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a device";
}

struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr && size) munmap(addr, size);
  }
};

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
                                "u64", "i64", "f64"};
  return valid_type(uint32_t(t)) ? names[uint32_t(t)] : "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16: case GgufType::U32:
    case GgufType::I32: case GgufType::U64: case GgufType::I64: return true;
    default: return false;
  }
}

std::string GgufValue::to_string(size_t max_items) const {
  switch (type) {
    case GgufType::U8: case GgufType::U16: case GgufType::U32: case GgufType::U64: return std::to_string(u);
    case GgufType::I8: case GgufType::I16: case GgufType::I32: case GgufType::I64: return std::to_string(i);
    case GgufType::F32: case GgufType::F64: return cat(f);
    case GgufType::BOOL: return b ? "true" : "false";
    case GgufType::STRING: return "'" + str + "'";
    case GgufType::ARRAY: break;
  }
  std::string out = cat("[", gguf_type_name(elem_type), " × ", count, ": ");
  const uint64_t shown = std::min<uint64_t>(count, max_items);
  for (uint64_t k = 0; k < shown; ++k) {
    if (k) out += ", ";
    if (elem_type == GgufType::STRING) {
      out += "'" + strs[k] + "'";
    } else if (!items.empty()) {
      out += items[k].to_string(max_items);
    } else {
      switch (elem_type) {
        case GgufType::U8: out += std::to_string(element<uint8_t>(*this, k)); break;
        case GgufType::I8: out += std::to_string(element<int8_t>(*this, k)); break;
        case GgufType::U16: out += std::to_string(element<uint16_t>(*this, k)); break;
        case GgufType::I16: out += std::to_string(element<int16_t>(*this, k)); break;
        case GgufType::U32: out += std::to_string(element<uint32_t>(*this, k)); break;
        case GgufType::I32: out += std::to_string(element<int32_t>(*this, k)); break;
        case GgufType::U64: out += std::to_string(element<uint64_t>(*this, k)); break;
        case GgufType::I64: out += std::to_string(element<int64_t>(*this, k)); break;
        case GgufType::F32: out += cat(element<float>(*this, k)); break;
        case GgufType::F64: out += cat(element<double>(*this, k)); break;
        case GgufType::BOOL: out += element<uint8_t>(*this, k) ? "true" : "false"; break;
        default: break;
      }
    }
  }
  if (count > shown) out += ", ...";
  return out + "]";
}

GgufFile GgufFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever. It has no
  // effect on a regular file, the only kind accepted.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  check(fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'", path, "' is ", non_regular_kind(st.st_mode), ", not a regular file (a GGUF file is memory-mapped)");
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = size_t(st.st_size);
  if (mapping->size > 0) {
    void* addr = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    check(addr != MAP_FAILED, "cannot map '", path, "': ", std::strerror(errno));
    mapping->addr = addr;
  } else {
    ::close(fd);
  }
  GgufFile f;
  f.base_ = static_cast<const uint8_t*>(mapping->addr);
  f.size_ = mapping->size;
  f.mapping_ = mapping;
  f.source_ = path;
  try {
    f.parse_all();
  } catch (const Error& e) {
    fail("'", path, "': ", e.what());
  }
  return f;
}

GgufFile GgufFile::parse(const uint8_t* data, size_t size) {
  GgufFile f;
  f.base_ = data;
  f.size_ = size;
  f.source_ = "<memory>";
  f.parse_all();
  return f;
}

void GgufFile::parse_all() {
  Cursor c(base_, size_);
  check(size_ >= 4 && std::memcmp(base_, "GGUF", 4) == 0, "not a GGUF file (bad magic)");
  c.take(4, "magic");
  version_ = c.read<uint32_t>("version");
  check(version_ == 2 || version_ == 3, "unsupported GGUF version ", version_, " (polykv reads 2 and 3)");
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each metadata entry takes at least 13 bytes (key length, type, smallest value) and each tensor
  // info at least 24 (name length, n_dims, type, offset): counts beyond that are corrupt.
  check(n_kv <= c.remaining() / 13, "corrupt header: metadata count ", n_kv, " exceeds the file size");
  check(n_tensors <= c.remaining() / 24, "corrupt header: tensor count ", n_tensors, " exceeds the file size");

  std::unordered_set<std::string> keys;
  kv_.reserve(size_t(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_string("metadata key");
    const uint32_t t = c.read<uint32_t>("metadata value type");
    check(valid_type(t), "metadata '", printable(key), "': unknown value type ", t);
    check(keys.insert(key).second, "duplicate metadata key '", printable(key), "'");
    GgufValue v = read_value(c, GgufType(t), key, 0);
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    check(a->type == GgufType::U32, "general.alignment must be u32, is ", gguf_type_name(a->type));
    check(a->u > 0 && (a->u & (a->u - 1)) == 0, "general.alignment ", a->u, " is not a power of two");
    alignment_ = a->u;
  }

  std::unordered_set<std::string> names;
  tensors_.reserve(size_t(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = c.read_string("tensor name");
    check(names.insert(t.name).second, "duplicate tensor name '", printable(t.name), "'");
    const uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
    check(n_dims >= 1 && n_dims <= kMaxDims, "tensor '", printable(t.name), "' has ", n_dims, " dimensions (1 to 4 allowed)");
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>("tensor dimension");
      check(ne > 0 && ne < (1ull << 40), "tensor '", printable(t.name), "' dimension ", d, " = ", ne, " is invalid");
      check(uint64_t(n) <= (1ull << 50) / ne, "tensor '", printable(t.name), "' has too many elements");
      n *= int64_t(ne);
      t.ne.push_back(int64_t(ne));
    }
    t.n_elements = n;
    const uint32_t type_id = c.read<uint32_t>("tensor type");
    const DTypeInfo* info = dtype_info(type_id);
    check(info != nullptr, "tensor '", printable(t.name), "' has unknown or unsupported type id ", type_id);
    t.type = info->type;
    check(t.ne[0] % info->block_size == 0, "tensor '", printable(t.name), "' row of ", t.ne[0],
          " values is not a multiple of ", info->name, "'s block of ", info->block_size);
    t.n_bytes = uint64_t(n / info->block_size) * uint64_t(info->type_size);
    t.offset = c.read<uint64_t>("tensor offset");
    check(t.offset % alignment_ == 0, "tensor '", printable(t.name), "' offset ", t.offset, " is not aligned to ", alignment_);
    tensors_.push_back(std::move(t));
  }

  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
  if (!tensors_.empty())
    check(size_ >= data_offset_, "truncated file: tensor data section starts at ", data_offset_, " past the end (",
          size_, " bytes)");
  for (auto& t : tensors_) {
    check(t.offset <= data_size && t.n_bytes <= data_size - t.offset, "tensor '", printable(t.name), "' (", t.n_bytes,
          " bytes at data offset ", t.offset, ") runs past the end of the file: truncated or corrupt");
    t.data = base_ + data_offset_ + t.offset;
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

namespace {
const GgufValue& require(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  check(v != nullptr, "missing metadata key '", printable(key), "'");
  return *v;
}
}  // namespace

uint32_t GgufFile::get_u32(const std::string& key) const {
  const int64_t v = integer_value(require(*this, key), key);
  check(v >= 0 && v <= int64_t(UINT32_MAX), "metadata '", printable(key), "' = ", v, " is out of range");
  return uint32_t(v);
}
uint32_t GgufFile::get_u32(const std::string& key, uint32_t def) const { return has(key) ? get_u32(key) : def; }
int64_t GgufFile::get_i64(const std::string& key) const { return integer_value(require(*this, key), key); }

float GgufFile::get_f32(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  check(v.is_float(), "metadata '", printable(key), "' is ", gguf_type_name(v.type), ", expected a float");
  return float(v.f);
}
float GgufFile::get_f32(const std::string& key, float def) const { return has(key) ? get_f32(key) : def; }

bool GgufFile::get_bool(const std::string& key, bool def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  check(v->type == GgufType::BOOL, "metadata '", printable(key), "' is ", gguf_type_name(v->type), ", expected bool");
  return v->b;
}

std::string GgufFile::get_str(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  check(v.type == GgufType::STRING, "metadata '", printable(key), "' is ", gguf_type_name(v.type), ", expected a string");
  return v.str;
}
std::string GgufFile::get_str(const std::string& key, const std::string& def) const {
  return has(key) ? get_str(key) : def;
}

std::vector<std::string> GgufFile::get_str_array(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  check(v.type == GgufType::ARRAY && v.elem_type == GgufType::STRING, "metadata '", printable(key),
        "' is not an array of strings");
  return v.strs;
}

std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  check(v.type == GgufType::ARRAY && (v.elem_type == GgufType::F32 || v.elem_type == GgufType::F64),
        "metadata '", printable(key), "' is not an array of floats");
  std::vector<float> out(size_t(v.count));
  for (uint64_t k = 0; k < v.count; ++k)
    out[k] = v.elem_type == GgufType::F32 ? element<float>(v, k) : float(element<double>(v, k));
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(const std::string& key) const {
  const GgufValue& v = require(*this, key);
  check(v.type == GgufType::ARRAY && v.items.empty() && v.strs.empty() && v.elem_type != GgufType::BOOL &&
            v.elem_type != GgufType::F32 && v.elem_type != GgufType::F64 && scalar_size(v.elem_type) > 0,
        "metadata '", printable(key), "' is not an array of integers");
  std::vector<int32_t> out(size_t(v.count));
  for (uint64_t k = 0; k < v.count; ++k) {
    int64_t x = 0;
    switch (v.elem_type) {
      case GgufType::U8: x = element<uint8_t>(v, k); break;
      case GgufType::I8: x = element<int8_t>(v, k); break;
      case GgufType::U16: x = element<uint16_t>(v, k); break;
      case GgufType::I16: x = element<int16_t>(v, k); break;
      case GgufType::U32: x = element<uint32_t>(v, k); break;
      case GgufType::I32: x = element<int32_t>(v, k); break;
      case GgufType::U64: {
        const uint64_t u = element<uint64_t>(v, k);
        check(u <= uint64_t(INT32_MAX), "metadata '", printable(key), "'[", k, "] is out of range");
        x = int64_t(u);
        break;
      }
      case GgufType::I64: x = element<int64_t>(v, k); break;
      default: break;
    }
    check(x >= INT32_MIN && x <= INT32_MAX, "metadata '", printable(key), "'[", k, "] = ", x, " is out of range");
    out[k] = int32_t(x);
  }
  return out;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const GgufTensor& GgufFile::tensor(const std::string& name) const {
  const GgufTensor* t = find_tensor(name);
  check(t != nullptr, "missing tensor '", name, "' in ", source_);
  return *t;
}

}  // namespace polykv
