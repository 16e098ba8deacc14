// Where the bytes of a KV block store live. Host memory by default (kv/kv_memory.cpp); a device
// backend (CUDA) gives its own, and then only that backend's kernels read or write the bytes: the
// host-side code of kv/ (store_kv_rows, views dereferenced by CPU attention) must not touch them.
// kv/ never includes a device header: a device memory is only this interface.
#pragma once
#include <cstddef>

namespace polykv {

class KvMemory {
 public:
  virtual ~KvMemory() = default;
  // Uninitialized bytes, or nullptr when the memory cannot hold them.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // Copies bytes between two regions of this memory (copy-on-write of a shared block).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // True if host code may read and write the bytes directly.
  virtual bool host_accessible() const = 0;
  virtual const char* name() const = 0;  // "host", "cuda:0", ... for messages
};

// The process's host memory (operator new / delete; pages are touched only as blocks are written).
KvMemory& host_kv_memory();

}  // namespace polykv
