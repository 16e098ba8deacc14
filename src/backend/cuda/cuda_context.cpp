#include "backend/cuda/cuda_context.h"

namespace polykv::cuda {

CudaContext::CudaContext(int device) : device_(device) {
  int n = 0;
  POLYKV_CUDA_CHECK(cudaGetDeviceCount(&n));
  check(device >= 0 && device < n, "CUDA device ", device, " does not exist (", n, " visible)");
  POLYKV_CUDA_CHECK(cudaSetDevice(device));
  POLYKV_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  POLYKV_CUBLAS_CHECK(blas::create(&cublas_));
  POLYKV_CUBLAS_CHECK(blas::set_stream(cublas_, stream_));
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&cc_major_, cudaDevAttrComputeCapabilityMajor, device));
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&cc_minor_, cudaDevAttrComputeCapabilityMinor, device));
  scratch_ptr_.assign(size_t(Scratch::Count), nullptr);
  scratch_bytes_.assign(size_t(Scratch::Count), 0);
}

CudaContext::~CudaContext() {
  // Destructors must not throw: errors here are ignored (the process is tearing the device down).
  cudaStreamSynchronize(stream_);
  for (void* p : scratch_ptr_)
    if (p) cudaFree(p);
  if (cublas_) blas::destroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudaContext::scratch(Scratch s, size_t bytes) {
  const size_t i = size_t(s);
  if (bytes <= scratch_bytes_[i]) return scratch_ptr_[i];
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  POLYKV_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
  check(capturing == cudaStreamCaptureStatusNone, "CUDA: scratch buffer ", i, " must grow to ", bytes,
        " bytes while a graph is being recorded (a step's sizes changed between its first run and its recording)");
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(stream_));
  ++scratch_generation_;
  if (scratch_ptr_[i]) POLYKV_CUDA_CHECK(cudaFree(scratch_ptr_[i]));
  scratch_ptr_[i] = nullptr;
  scratch_bytes_[i] = 0;
  const size_t grown = bytes + bytes / 4;  // room to grow a little without reallocating each call
  POLYKV_CUDA_CHECK(cudaMalloc(&scratch_ptr_[i], grown));
  scratch_bytes_[i] = grown;
  return scratch_ptr_[i];
}

}  // namespace polykv::cuda
