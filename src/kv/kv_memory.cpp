#include "kv/kv_memory.h"

#include <cstring>
#include <new>

namespace polykv {
namespace {

class HostKvMemory final : public KvMemory {
 public:
  void* allocate(size_t bytes) override { return ::operator new(bytes, std::nothrow); }
  void release(void* p) override { ::operator delete(p); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  bool host_accessible() const override { return true; }
  const char* name() const override { return "host"; }
};

}  // namespace

KvMemory& host_kv_memory() {
  static HostKvMemory m;
  return m;
}

}  // namespace polykv
