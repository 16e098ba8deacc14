// A host KvMemory that refuses allocations once `left` are out (a GPU out of memory), for tests of what
// the KV and recurrent-state code does when memory runs out.
#pragma once
#include "kv/kv_memory.h"

namespace polykv::test {

class ScarceMemory : public KvMemory {
 public:
  explicit ScarceMemory(int left) : left_(left) {}
  void* allocate(size_t bytes) override {
    if (left_ <= 0) return nullptr;
    --left_;
    return host_kv_memory().allocate(bytes);
  }
  void release(void* p) override {
    if (!p) return;
    ++left_;
    host_kv_memory().release(p);
  }
  void copy(void* d, const void* s, size_t n) override { host_kv_memory().copy(d, s, n); }
  bool host_accessible() const override { return true; }
  const char* name() const override { return "scarce host"; }
  void set_left(int n) { left_ = n; }

 private:
  int left_;
};

}  // namespace polykv::test
