// Floats in a backend's host memory (Backend::allocate_host: page-locked on CUDA, so a download into
// them is one copy at the bus's speed), grown on demand and reused. Contents are not kept when it grows.
#pragma once
#include <cstddef>

#include "backend/backend.h"

namespace polykv {

class HostFloats {
 public:
  HostFloats() = default;
  HostFloats(const HostFloats&) = delete;
  HostFloats& operator=(const HostFloats&) = delete;
  ~HostFloats() {
    if (p_) be_->release_host(p_);
  }

  // At least n floats of be's host memory. The buffer belongs to the first backend asked; be must outlive it.
  float* get(Backend& be, size_t n) {
    if (n > cap_ || !p_) {
      if (p_) be_->release_host(p_);
      p_ = nullptr;
      cap_ = 0;
      be_ = &be;
      p_ = static_cast<float*>(be.allocate_host((n == 0 ? 1 : n) * sizeof(float)));
      cap_ = n;
    }
    return p_;
  }

 private:
  Backend* be_ = nullptr;
  float* p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace polykv
