#include "gguf/gguf_writer.h"

#include <cstring>

#include "core/atomic_file.h"
#include "core/error.h"

namespace polykv {
namespace {

constexpr uint64_t kAlignment = 32;

template <typename Sink, typename T>
void put(Sink& sink, const T& v) {
  sink(&v, sizeof(T));
}

template <typename Sink>
void put_string(Sink& sink, const std::string& s) {
  put(sink, uint64_t(s.size()));
  sink(s.data(), s.size());
}

template <typename Sink>
void put_value(Sink& sink, const GgufValue& v, bool with_type) {
  if (with_type) put(sink, uint32_t(v.type));
  switch (v.type) {
    case GgufType::U8: put(sink, uint8_t(v.u)); break;
    case GgufType::I8: put(sink, int8_t(v.i)); break;
    case GgufType::U16: put(sink, uint16_t(v.u)); break;
    case GgufType::I16: put(sink, int16_t(v.i)); break;
    case GgufType::U32: put(sink, uint32_t(v.u)); break;
    case GgufType::I32: put(sink, int32_t(v.i)); break;
    case GgufType::U64: put(sink, uint64_t(v.u)); break;
    case GgufType::I64: put(sink, int64_t(v.i)); break;
    case GgufType::F32: put(sink, float(v.f)); break;
    case GgufType::F64: put(sink, double(v.f)); break;
    case GgufType::BOOL: put(sink, uint8_t(v.b ? 1 : 0)); break;
    case GgufType::STRING: put_string(sink, v.str); break;
    case GgufType::ARRAY:
      put(sink, uint32_t(v.elem_type));
      put(sink, uint64_t(v.count));
      if (v.elem_type == GgufType::STRING) {
        for (const auto& s : v.strs) put_string(sink, s);
      } else if (v.elem_type == GgufType::ARRAY) {
        for (const auto& item : v.items) put_value(sink, item, false);
      } else {
        sink(v.raw.data(), v.raw.size());
      }
      break;
  }
}

template <typename T>
GgufValue numeric_array(GgufType elem, const std::vector<T>& xs) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = elem;
  v.count = xs.size();
  v.raw.resize(xs.size() * sizeof(T));
  if (!xs.empty()) std::memcpy(v.raw.data(), xs.data(), v.raw.size());
  return v;
}

}  // namespace

GgufValue gguf_u32(uint32_t x) { GgufValue v; v.type = GgufType::U32; v.u = x; return v; }
GgufValue gguf_i32(int32_t x) { GgufValue v; v.type = GgufType::I32; v.i = x; return v; }
GgufValue gguf_u64(uint64_t x) { GgufValue v; v.type = GgufType::U64; v.u = x; return v; }
GgufValue gguf_f32(float x) { GgufValue v; v.type = GgufType::F32; v.f = x; return v; }
GgufValue gguf_bool(bool x) { GgufValue v; v.type = GgufType::BOOL; v.b = x; return v; }
GgufValue gguf_str(const std::string& x) { GgufValue v; v.type = GgufType::STRING; v.str = x; return v; }

void GgufWriter::set(const std::string& key, const GgufValue& value) {
  for (auto& [k, v] : kv_)
    if (k == key) {
      v = value;
      return;
    }
  kv_.emplace_back(key, value);
}
void GgufWriter::set_u32(const std::string& k, uint32_t v) { set(k, gguf_u32(v)); }
void GgufWriter::set_i32(const std::string& k, int32_t v) { set(k, gguf_i32(v)); }
void GgufWriter::set_u64(const std::string& k, uint64_t v) { set(k, gguf_u64(v)); }
void GgufWriter::set_f32(const std::string& k, float v) { set(k, gguf_f32(v)); }
void GgufWriter::set_bool(const std::string& k, bool v) { set(k, gguf_bool(v)); }
void GgufWriter::set_str(const std::string& k, const std::string& v) { set(k, gguf_str(v)); }
void GgufWriter::set_str_array(const std::string& k, const std::vector<std::string>& xs) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = GgufType::STRING;
  v.count = xs.size();
  v.strs = xs;
  set(k, v);
}
void GgufWriter::set_f32_array(const std::string& k, const std::vector<float>& xs) {
  set(k, numeric_array(GgufType::F32, xs));
}
void GgufWriter::set_i32_array(const std::string& k, const std::vector<int32_t>& xs) {
  set(k, numeric_array(GgufType::I32, xs));
}

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne, const void* data) {
  add_tensor(name, type, ne, [data](uint8_t* dst, size_t n) { std::memcpy(dst, data, n); });
}

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne, Generator gen) {
  check(!ne.empty() && ne.size() <= 4, "tensor '", name, "': 1 to 4 dimensions");
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  const uint64_t n_bytes = row_bytes(type, ne[0]) * uint64_t(rows);
  for (const auto& t : tensors_) check(t.name != name, "duplicate tensor '", name, "'");
  tensors_.push_back({name, type, ne, n_bytes, std::move(gen)});
}

template <typename Sink>
void GgufWriter::emit(Sink& sink) const {
  uint64_t written = 0;
  auto counting = [&](const void* p, size_t n) {
    sink(p, n);
    written += n;
  };
  counting("GGUF", 4);
  put(counting, uint32_t(3));
  put(counting, uint64_t(tensors_.size()));
  put(counting, uint64_t(kv_.size()));
  for (const auto& [k, v] : kv_) {
    put_string(counting, k);
    put_value(counting, v, true);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(counting, t.name);
    put(counting, uint32_t(t.ne.size()));
    for (int64_t d : t.ne) put(counting, uint64_t(d));
    put(counting, uint32_t(t.type));
    put(counting, offset);
    offset += (t.n_bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  static const uint8_t zeros[kAlignment] = {};
  auto pad = [&] { counting(zeros, size_t((kAlignment - written % kAlignment) % kAlignment)); };
  pad();
  std::vector<uint8_t> buf;
  for (const auto& t : tensors_) {
    buf.assign(t.n_bytes, 0);
    t.gen(buf.data(), buf.size());
    counting(buf.data(), buf.size());
    pad();
  }
}

void GgufWriter::write(const std::string& path) const {
  AtomicFileWriter out(path);  // PATH keeps its old contents unless every byte is written
  auto sink = [&](const void* p, size_t n) { out.write(p, n); };
  emit(sink);
  out.commit();
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  auto sink = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  emit(sink);
  return out;
}

}  // namespace polykv
