// CudaBackend: the Backend of backend/backend.h on one GPU. Everything is issued on the context's one
// stream, in call order; download() and synchronize() wait for it. Weights and float vectors are
// device copies the backend owns; the KV pool is a KvBlockStore in kv_memory() (device memory),
// addressed by block id through the step plan (cuda_backend_plan.h) uploaded once per step.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <vector>

#include "backend/cuda/cuda_async_copies.h"
#include "backend/cuda/cuda_backend_hybrid.h"
#include "backend/cuda/cuda_backend_plan.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/cuda_kv_memory.h"
#include "backend/cuda/kv_cuda.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_norm.h"
#include "backend/cuda/matmul_cuda_prepared.h"
#include "backend/cuda/matmul_cuda_split.h"
#include "backend/cuda/moe_cuda.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/cuda/ops_cuda_acts.h"
#include "backend/cuda/ops_cuda_fused.h"
#include "core/error.h"
#include "quant/ternary.h"
#include "kv/kv_block_store.h"

namespace polykv {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, bool batch_invariant) : ctx_(device), kv_memory_(device, ctx_.stream()) {
    // --batch-invariant (docs/CUDA_SPEC.md): the kernels' choices that a row's bits depend on are fixed
    // by the row alone; the context carries it to every launcher (mat-muls, attention).
    ctx_.set_batch_invariant(batch_invariant);
    const char* g = std::getenv("POLYKV_CUDA_GRAPHS");
    // On unless POLYKV_CUDA_GRAPHS=0. They were opt-in after a hang of the CUDA model tests (2026-11-30);
    // its cause was the CPU ThreadPool (fixed 2026-12-01), and graphs decode 6-7% faster on the H200
    // (265 vs 247 tok/s f16 KV, 228 vs 215 q8_0/turbo3t; docs/PERFORMANCE.md, 2026-12-01).
    graphs_enabled_ = !(g && std::strcmp(g, "0") == 0);
    // POLYKV_CUDA_GRAPH_PDL=0: steps are recorded without programmatic dependent launch (to tell
    // whether the hang above has to do with PDL inside graphs); eager steps keep it.
    const char* gp = std::getenv("POLYKV_CUDA_GRAPH_PDL");
    graph_pdl_ = !(gp && std::strcmp(gp, "0") == 0);
    const char* fu = std::getenv("POLYKV_CUDA_FUSED");
    fused_ = !(fu && std::strcmp(fu, "0") == 0);
    const char* fa = std::getenv("POLYKV_CUDA_FUSED_ACTS");
    // On unless POLYKV_CUDA_FUSED_ACTS=0: since the norms keep their row in registers and quantize their
    // blocks side by side (2026-12-01), the norms writing the next mat-vec's activations decode 1-2%
    // faster on the H200 than each mat-vec quantizing its own (docs/PERFORMANCE.md); before, 2% slower.
    fused_acts_ = fused_ && !(fa && std::strcmp(fa, "0") == 0);
    // POLYKV_CUDA_DEFER_NORM=0: Backend::rmsnorm_into_matmul is the plain fused norm (rmsnorm_acts) instead of
    // rmsnorm_defer + the scale in the mat-vec's epilogue (docs/CUDA_DECODE.md, "Deferred norms").
    const char* dn = std::getenv("POLYKV_CUDA_DEFER_NORM");
    // Not with --batch-invariant: a row's bits would then depend on whether its step had at most
    // kMatvecMaxCols rows (deferred) or more (the plain norm).
    defer_norms_ = fused_acts_ && !batch_invariant && !(dn && std::strcmp(dn, "0") == 0);
    // POLYKV_CUDA_FUSE_ROPE=0: q, k, v mat-vec, add_bias, then rope_qk, instead of the bias and rope in the
    // mat-vec's epilogue; =norm: that for Neox-style models only (the fused launch took Norm style only until
    // 2026-12-06d).
    const char* fr = std::getenv("POLYKV_CUDA_FUSE_ROPE");
    fuse_rope_ = fused_ && !(fr && std::strcmp(fr, "0") == 0);
    fuse_neox_ = !(fr && std::strcmp(fr, "norm") == 0);
    // POLYKV_CUDA_FUSE_QKNORM=0: the head norms of q and k, then rope_qk, in three launches instead of one.
    const char* fq = std::getenv("POLYKV_CUDA_FUSE_QKNORM");
    fuse_qk_norm_ = fused_ && !(fq && std::strcmp(fq, "0") == 0);
    // POLYKV_CUDA_FUSE_POSTNORM=0: a post-norm (Gemma), then the deferred norm after it, in two launches, not one.
    const char* fp = std::getenv("POLYKV_CUDA_FUSE_POSTNORM");
    fuse_post_norm_ = fused_ && !(fp && std::strcmp(fp, "0") == 0);  // (off with fused_ anyway: defer_norms_)
    // POLYKV_CUDA_PDL=0: no programmatic dependent launch (for comparisons; the bits are the same).
    // Process-wide, like cuda::set_pdl_enabled.
    const char* pd = std::getenv("POLYKV_CUDA_PDL");
    if (pd && std::strcmp(pd, "0") == 0) cuda::set_pdl_enabled(false);
    // POLYKV_MATVEC_ROWS=1 / 4: the mat-vec stream kernel's rows per warp forced (1, or the type's
    // widest), for comparisons (the bits are the same); unset: chosen per matrix.
    if (const char* mr = std::getenv("POLYKV_MATVEC_ROWS")) cuda::set_matvec_rows_per_warp(std::atoi(mr));
    // POLYKV_CUDA_GRAPH_ROWS=r: steps of up to r rows are recorded (default kGraphMaxRows; 0: none).
    if (const char* gr = std::getenv("POLYKV_CUDA_GRAPH_ROWS")) graph_max_rows_ = std::max(0, std::atoi(gr));
    const char* cc = std::getenv("POLYKV_CUDA_CASCADE");
    cascade_enabled_ = !(cc && std::strcmp(cc, "0") == 0);
    // POLYKV_CUDA_PROFILE_ROWS=R[:SKIP[:COUNT]]: a profiler window (cudaProfilerStart/Stop) around
    // COUNT (default 2) steps of exactly R rows after SKIP (default 8) such steps, so that
    // `ncu --profile-from-start off` times the kernels of a chosen step kind (e.g. the 64-agent decode step).
    if (const char* pr = std::getenv("POLYKV_CUDA_PROFILE_ROWS")) {
      profile_rows_ = std::atoi(pr);
      if (const char* c1 = std::strchr(pr, ':')) {
        profile_skip_ = std::atoi(c1 + 1);
        if (const char* c2 = std::strchr(c1 + 1, ':')) profile_count_ = std::atoi(c2 + 1);
      }
    }
    cudaDeviceProp prop{};
    POLYKV_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    describe_ = cat("cuda:", device, " ", prop.name, " (sm_", prop.major, prop.minor, ", ",
                    std::lround(double(prop.totalGlobalMem) / double(1ull << 30)), " GiB)");
  }

  ~CudaBackend() override {
    // No throwing here: errors while tearing down are dropped.
    cudaSetDevice(ctx_.device());
    cudaStreamSynchronize(ctx_.stream());
    for (auto& [key, entry] : graphs_)
      if (entry.exec) cudaGraphExecDestroy(entry.exec);
    for (void* p : owned_) cudaFree(p);
    cudaGetLastError();
  }

  DeviceKind kind() const override { return DeviceKind::Cuda; }
  bool batch_invariant() const override { return ctx_.batch_invariant(); }
  bool one_kv_pool_per_step() const override { return true; }
  int default_prompt_rows() const override { return 4096; }
  std::string describe() const override { return describe_; }

  // Device-to-device copy bandwidth, bytes read + written per second (what docs/GPU.md's floors use, as
  // CudaBench.DISABLED_CopyBandwidth): the fastest of 5 copies of 512 MiB after one warm-up; 0 when the two
  // buffers do not fit or a call fails (bench then reports no floor).
  double measure_bandwidth() override {
    bind();
    const size_t n = size_t(512) << 20;
    void *a = nullptr, *b = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    float best_ms = 0;
    bool ok = cudaMalloc(&a, n) == cudaSuccess && cudaMalloc(&b, n) == cudaSuccess &&
              cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess;
    const cudaStream_t s = ctx_.stream();
    ok = ok && cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s) == cudaSuccess;
    for (int i = 0; ok && i < 5; ++i) {
      float ms = 0;
      ok = cudaEventRecord(e0, s) == cudaSuccess && cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s) == cudaSuccess &&
           cudaEventRecord(e1, s) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
           cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
      if (ok && ms > 0 && (best_ms == 0 || ms < best_ms)) best_ms = ms;
    }
    cudaStreamSynchronize(s);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (a) cudaFree(a);
    if (b) cudaFree(b);
    cudaGetLastError();  // a failed allocation or copy is reported as 0, not left pending
    return ok && best_ms > 0 ? 2.0 * double(n) / (double(best_ms) * 1e-3) : 0.0;
  }

  // ---- memory -------------------------------------------------------------------------------
  void* allocate(size_t bytes) override {
    bind();
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      fail("CUDA: cannot allocate ", bytes, " bytes (", bytes >> 20, " MiB) on ", kv_memory_.name(), ": ",
           cudaGetErrorString(err));
    }
    return p;
  }

  void release(void* p) override {
    if (!p) return;
    bind();
    // A recorded graph may hold p (a workspace, a freed model's buffers): no graph recorded before
    // this release is replayed again (replay_step drops them all).
    ++releases_;
    // Called from destructors: report, never throw.
    const cudaError_t err = cudaFree(p);
    if (err != cudaSuccess) {
      cudaGetLastError();
      std::fprintf(stderr, "polykv: cudaFree failed on %s: %s\n", kv_memory_.name(), cudaGetErrorString(err));
    }
  }

  // Ordered after the ops issued before it (same stream) and returns once src_host may be reused
  // (pinned or not: it waits for the copy).
  void upload(void* dst, const void* src_host, size_t bytes) override {
    drop_acts();
    if (bytes == 0) return;
    bind();
    POLYKV_CUDA_CHECK(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, ctx_.stream()));
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
  }

  void* allocate_host(size_t bytes) override {
    bind();
    void* p = nullptr;
    const cudaError_t err = cudaMallocHost(&p, bytes == 0 ? 1 : bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      fail("CUDA: cannot allocate ", bytes, " bytes of page-locked host memory: ", cudaGetErrorString(err));
    }
    return p;
  }
  void release_host(void* p) override {
    if (p) cudaFreeHost(p);
  }

  void download(void* dst_host, const void* src, size_t bytes) override {
    bind();
    if (bytes > 0) POLYKV_CUDA_CHECK(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream()));
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));  // also surfaces faults of earlier kernels
  }

  void synchronize() override {
    bind();
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
  }

  // Stream-ordered, never waiting for earlier work (cuda_async_copies.h).
  void upload_async(void* dst, const void* src_host, size_t bytes) override {
    drop_acts();
    bind();
    async_.upload(dst, src_host, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    drop_acts();
    bind();
    if (bytes > 0) POLYKV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.stream()));
  }
  uint64_t download_async(void* dst_host, const void* src, size_t bytes) override {
    bind();
    return async_.download(dst_host, src, bytes);
  }
  void wait_download(uint64_t ticket) override {
    bind();
    async_.wait(ticket);
  }

  KvMemory& kv_memory() override { return kv_memory_; }

  // ---- weights ------------------------------------------------------------------------------
  WeightMatrix upload_matrix(const WeightMatrix& host) override {
    WeightMatrix d = host;
    d.packed = nullptr;  // the CPU's interleaved copy means nothing on the GPU
    d.data = nullptr;
    check(cuda::has_weight_kernels(host.type), "the CUDA backend ",
          is_ternary(host.type) ? "has its kernels for " : "has no kernels for ", dtype_name(host.type), " weights",
          is_ternary(host.type) ? " turned off (POLYKV_CUDA_TERNARY=0)" : "", "; run this model with --device cpu");
    if (host.n_out == 0) return d;
    const bool split = cuda::split_layout_enabled(host.type) && cuda::split_layout_fits(host) &&
                       host.layout == WeightLayout::Rows;
    // A small f32 matrix (a MoE router or gate in a quantized file: at most 1024 rows) leaves deferred norms
    // on: MoE layers read their norm's output twice, so no deferred norm precedes it; if one ever did, the norm is
    // written first (take_acts: correct, one kernel more). Any other matrix outside the split layout turns them off.
    all_split_ = all_split_ && (split || (host.type == DType::F32 && host.n_out <= 1024));
    const size_t rb = row_bytes(host.type, host.n_in);
    check(host.data != nullptr && host.row_stride >= rb, "upload_matrix: row stride ", host.row_stride,
          " shorter than a row of ", rb, " bytes");
    if (split) {
      // Repacked for the split mat-vec kernel (matmul_cuda_split.h); no ggml copy stays on the device.
      drop_acts();
      void* p = allocate(size_t(host.n_out) * cuda::split_row_stride(host.type, host.n_in));
      owned_.push_back(p);
      return cuda::upload_split(host, p, ctx_.stream());
    }
    // Rows keep their stride; the last one needs only its own bytes.
    const size_t bytes = size_t(host.n_out - 1) * host.row_stride + rb;
    d.data = upload_owned(host.data, bytes, host.type == DType::MXFP4 ? 16 : 0);  // DecMXFP4 reads aligned words
    return d;
  }

  const float* upload_floats(std::span<const float> host) override {
    if (host.empty()) return nullptr;
    return static_cast<const float*>(upload_owned(host.data(), host.size_bytes()));
  }

  // ---- ops ----------------------------------------------------------------------------------
  // Every op but the mat-vecs that read them drops the activations the last op prepared (acts_).
  void embed(const WeightMatrix& table, const int32_t* tokens, int n, float scale, float* x) override {
    drop_acts();
    bind();
    if (n == 0) return;
    cuda::dequantize_rows(table, tokens, n, scale, x, ctx_.stream());
  }
  void matmul(const WeightMatrix& w, const float* x, float* y, int n) override {
    bind();
    if (keeps_acts(w, x, y, n)) {  // a MoE router: x's activations stay for the experts after it
      if (n > 0) cuda::matmul(w, x, y, n, ctx_);
      return;
    }
    cuda::ActsOut a;
    cuda::DeferredNorm dn;
    const bool prepared =
        take_acts(x, w.n_in, n, cuda::prepared_matmul_ok(w, n), a, cuda::deferred_norm_ok(w, n) ? &dn : nullptr);
    if (n == 0) return;
    if (prepared)
      cuda::matmul_prepared(w, a, y, n, ctx_, dn);
    else
      cuda::matmul(w, x, y, n, ctx_);
  }
  void rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps) override {
    drop_acts();
    bind();
    if (acts_for(rows, cols)) {
      norm_with_acts(const_cast<float*>(x), nullptr, w, out, rows, cols, eps);
      return;
    }
    cuda::rmsnorm(x, w, out, rows, cols, eps, ctx_.stream());
  }
  void add_bias(float* x, const float* b, int rows, int cols) override {
    if (writes_acts_x(x, int64_t(rows) * cols)) drop_acts();  // (gpt-oss's router bias leaves h's activations)
    bind();
    cuda::add_bias(x, b, rows, cols, ctx_.stream());
  }
  void add(float* x, const float* y, int64_t n) override {
    drop_acts();
    bind();
    cuda::add(x, y, n, ctx_.stream());
  }
  void rope(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos, const float* inv_freq,
            float scale, RopeStyle style) override {
    drop_acts();
    bind();
    cuda::rope(x, rows, n_heads, head_dim, n_rot, pos, inv_freq, scale, style, ctx_.stream());
  }
  void gated_activation(float* gate, const float* up, int64_t n, Activation act) override {
    drop_acts();
    bind();
    // The down projection's activations too, for up to kMatvecMaxCols rows of n_ff <= kActsMaxCols.
    if (fused_acts_ && n > 0 && cuda::acts_fusable(n) && n <= int64_t(cuda::kMatvecMaxCols) * kActsMaxCols) {
      const cuda::ActsOut o = cuda::fused_acts_buffer(n, ctx_);
      cuda::gated_activation_acts(gate, up, n, act, o, ctx_.stream(), cuda::pdl_enabled(ctx_));
      set_acts(gate, n, o);
      return;
    }
    cuda::gated_activation(gate, up, n, act, ctx_.stream());
  }
  void softcap(float* x, int64_t n, float cap) override {
    drop_acts();
    bind();
    cuda::softcap(x, n, cap, ctx_.stream());
  }
  void gather_rows(const float* src, const int32_t* rows, int n, int cols, float* dst) override {
    drop_acts();
    bind();
    cuda::gather_rows(src, rows, n, cols, dst, ctx_.stream());
  }
  void argmax_rows(const float* x, int rows, int cols, int32_t* out) override {
    drop_acts();
    bind();
    cuda::argmax_rows(x, rows, cols, out, ctx_.stream());
  }

  // ---- mixture of experts (moe_cuda.h) ------------------------------------------------------
  // One allocation per expert tensor, expert e at e * stride, with slack after the last for mxfp4's
  // loads: in the split layout (moe_cuda.h: the v2 kernels, q4_0 / q8_0 / q4_K / q5_K / q6_K) or ggml rows
  // (POLYKV_CUDA_MOE_KERNEL=v1, and every other type).
  std::vector<WeightMatrix> upload_experts(std::span<const WeightMatrix> host) override {
    std::vector<WeightMatrix> out;
    if (host.empty()) return out;
    const WeightMatrix& h0 = host[0];
    check(cuda::has_weight_kernels(h0.type), "the CUDA backend has no kernels for ", dtype_name(h0.type),
          " weights; run this model with --device cpu");
    const size_t rb = row_bytes(h0.type, h0.n_in);
    for (const WeightMatrix& h : host)
      check(h.type == h0.type && h.n_in == h0.n_in && h.n_out == h0.n_out && h.row_stride == h0.row_stride &&
                h.data != nullptr && h.row_stride >= rb && h.n_out > 0,
            "upload_experts: the experts differ in type or shape, or have no rows");
    const bool split = cuda::moe_split_upload(h0);
    const size_t stride = split ? cuda::expert_split_stride(h0) : cuda::expert_stack_stride(h0);
    drop_acts();
    auto* base = static_cast<uint8_t*>(allocate(stride * host.size() + cuda::kExpertStackSlack));
    owned_.push_back(base);
    const size_t bytes = h0.row_stride * size_t(h0.n_out);
    for (size_t e = 0; e < host.size(); ++e) {
      if (split) {
        WeightMatrix hr = host[e];
        hr.layout = WeightLayout::Rows;
        out.push_back(cuda::upload_split(hr, base + e * stride, ctx_.stream()));
        continue;
      }
      upload(base + e * stride, host[e].data, bytes);
      WeightMatrix d = host[e];
      d.packed = nullptr;
      d.data = base + e * stride;
      d.layout = WeightLayout::Rows;
      out.push_back(d);
    }
    return out;
  }
  void moe_route(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights) override {
    drop_acts();
    bind();
    cuda::moe_route(logits, n, r, ids, weights, ctx_);
  }
  void moe_experts(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                   float* out) override {
    bind();
    const cuda::MoeXActs xa = take_x_acts(x, w.n_embd, n);
    cuda::moe_experts(w, x, ids, weights, n, k, out, ctx_, &xa);
  }
  void moe_route_experts(const MoeExperts& w, const float* x, const float* logits, const MoeRouting& r, int n,
                         int32_t* ids, float* weights, float* out) override {
    bind();
    const cuda::MoeXActs xa = take_x_acts(x, w.n_embd, n);
    cuda::moe_route_experts(w, x, logits, r, n, ids, weights, out, ctx_, &xa);
  }
  void add_sigmoid_gated(float* x, const float* y, const float* g, int rows, int cols) override {
    drop_acts();
    bind();
    cuda::add_sigmoid_gated(x, y, g, rows, cols, ctx_.stream());
  }

  // ---- fused ops ----------------------------------------------------------------------------
  // POLYKV_CUDA_FUSED=0: the plain ops (Backend's defaults), for comparisons; the bits are the same.
  void matmul_multi(std::span<const MatmulOut> parts, const float* x, int n) override {
    if (!fused_) return Backend::matmul_multi(parts, x, n);
    bind();
    std::vector<cuda::MatvecPart> mp;
    bool prepared_ok = true, defer_ok = true;
    for (const MatmulOut& p : parts) {
      if (p.w->n_out > 0) mp.push_back({p.w, p.y});  // an empty matrix writes nothing
      prepared_ok = prepared_ok && cuda::prepared_matmul_ok(*p.w, n) && p.w->n_in == parts[0].w->n_in;
      defer_ok = defer_ok && cuda::deferred_norm_ok(*p.w, n);
    }
    cuda::ActsOut a;
    cuda::DeferredNorm dn;
    const bool prepared = !parts.empty() && take_acts(x, parts[0].w->n_in, n, prepared_ok, a, defer_ok ? &dn : nullptr);
    if (n == 0 || mp.empty()) return;
    // Up to kMaxMatvecParts per launch (the kernel's limit): every row as in its own call.
    for (size_t i = 0; i < mp.size(); i += size_t(cuda::kMaxMatvecParts)) {
      const std::span<const cuda::MatvecPart> some(mp.data() + i, std::min(mp.size() - i, size_t(cuda::kMaxMatvecParts)));
      if (prepared)
        cuda::matmul_parts_prepared(some, a, n, ctx_, dn);
      else
        cuda::matmul_parts(some, x, n, ctx_);
    }
  }
  // A decode-sized norm whose only reader is the next mat-vec: x (+= r) * w quantized as its activations and
  // the blocks' sums of squares (rmsnorm_defer); the mat-vec scales its outputs (or materialize_norm writes out).
  void rmsnorm_into_matmul(float* x, const float* r, const float* w, float* out, int rows, int cols,
                           float eps) override {
    if (!defers_norm(rows, cols)) return Backend::rmsnorm_into_matmul(x, r, w, out, rows, cols, eps);
    defer_norm(x, w, out, rows, cols, eps, [&](const cuda::ActsOut& o) {
      cuda::rmsnorm_defer(x, r, w, rows, cols, o, ctx_.stream(), cuda::pdl_enabled(ctx_));
    });
  }
  // Gemma's post-norm and the deferred norm after it in one launch (POLYKV_CUDA_FUSE_POSTNORM=0: two), where the
  // norm would be deferred.
  void post_norm_into_matmul(float* x, float* r, const float* w_post, const float* w, float* out, int rows, int cols,
                             float eps) override {
    if (!fuse_post_norm_ || !defers_norm(rows, cols) || !cuda::post_norm_defer_ok(cols))
      return Backend::post_norm_into_matmul(x, r, w_post, w, out, rows, cols, eps);
    defer_norm(x, w, out, rows, cols, eps, [&](const cuda::ActsOut& o) {
      cuda::post_norm_defer(x, r, w_post, w, rows, cols, eps, o, ctx_.stream(), cuda::pdl_enabled(ctx_));
    });
  }
  void add_rmsnorm(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps) override {
    if (!fused_) return Backend::add_rmsnorm(x, r, w, out, rows, cols, eps);
    drop_acts();
    bind();
    if (acts_for(rows, cols)) {
      norm_with_acts(x, r, w, out, rows, cols, eps);
      return;
    }
    cuda::add_rmsnorm(x, r, w, out, rows, cols, eps, ctx_.stream(), cuda::pdl_enabled(ctx_));
  }
  // One column, q, k, v split: one launch that adds their biases and rotates q and k (Norm or Neox style) in its
  // epilogue (POLYKV_CUDA_FUSE_ROPE=0: the default's matmul_multi, add_bias, then rope_qk; =norm: Norm style only,
  // as before 2026-12-06d).
  void matmul_qkv_rope(std::span<const MatmulOut> qkv, const float* x, int n, int n_head, int n_head_kv, int head_dim,
                       int n_rot, const int32_t* pos, const float* inv_freq, float scale, RopeStyle style,
                       const QkvBias& bias = {}) override {
    std::vector<cuda::MatvecPart> mp;
    for (const MatmulOut& p : qkv) mp.push_back({p.w, p.y});
    if (!fuse_rope_ || n != 1 || (style != RopeStyle::Norm && !fuse_neox_) || qkv.size() != 3 ||
        qkv[0].w->n_out != int64_t(n_head) * head_dim || qkv[1].w->n_out != int64_t(n_head_kv) * head_dim ||
        !cuda::matmul_qkv_rope_ok(mp, head_dim, n_rot))
      return Backend::matmul_qkv_rope(qkv, x, n, n_head, n_head_kv, head_dim, n_rot, pos, inv_freq, scale, style,
                                      bias);
    bind();
    cuda::ActsOut a;
    cuda::DeferredNorm dn;  // matmul_qkv_rope_ok: every part split, so a deferred norm can go with the acts
    const bool prepared = take_acts(x, qkv[0].w->n_in, n, true, a, &dn);
    cuda::matmul_qkv_rope(mp, x, prepared ? &a : nullptr, head_dim, n_rot, pos, inv_freq, scale, style,
                          {bias.q, bias.k, bias.v}, ctx_, dn);
  }
  void rope_qk(float* q, int n_head, float* k, int n_head_kv, int rows, int head_dim, int n_rot, const int32_t* pos,
               const float* inv_freq, float scale, RopeStyle style) override {
    if (!fused_) return Backend::rope_qk(q, n_head, k, n_head_kv, rows, head_dim, n_rot, pos, inv_freq, scale, style);
    drop_acts();
    bind();
    cuda::rope_qk(q, n_head, k, n_head_kv, rows, head_dim, n_rot, pos, inv_freq, scale, style, ctx_.stream(),
                  cuda::pdl_enabled(ctx_));
  }

  // Qwen 3's and Gemma 3's head norms and the rope in one launch, one block a head (POLYKV_CUDA_FUSE_QKNORM=0: the
  // default's three).
  void qk_norm_rope(float* q, const float* q_norm, int n_head, float* k, const float* k_norm, int n_head_kv, int rows,
                    int head_dim, float eps, int n_rot, const int32_t* pos, const float* inv_freq, float scale,
                    RopeStyle style) override {
    if (!fuse_qk_norm_ || !cuda::qk_norm_rope_ok(head_dim))
      return Backend::qk_norm_rope(q, q_norm, n_head, k, k_norm, n_head_kv, rows, head_dim, eps, n_rot, pos,
                                   inv_freq, scale, style);
    drop_acts();
    bind();
    cuda::qk_norm_rope(q, q_norm, n_head, k, k_norm, n_head_kv, rows, head_dim, eps, n_rot, pos, inv_freq, scale,
                       style, ctx_.stream(), cuda::pdl_enabled(ctx_));
  }

  // ---- KV and attention ---------------------------------------------------------------------
  void begin_step(std::span<const StepSeq> seqs) override {
    drop_acts();
    bind();
    plan_ = cuda::plan_step(seqs, kv_memory_);  // throws before anything is issued
    if (profile_rows_ > 0) profile_window();
    hybrid_.begin_step(seqs, kv_memory_);        // hybrid models: the recurrent states (cuda_backend_hybrid.h)
    stepped_ = true;
    batch_ = {};
    slots_ = nullptr;
    if (plan_.total_rows == 0) return;
    // Two uploads per step, shared by every layer, staged in page-locked memory (cuda_async_copies.h):
    // plan_ may change at the next step while the copies are in flight, and neither waits for the
    // previous step (a chained greedy step is issued while that one runs).
    const size_t slot_bytes = plan_.slots.size() * sizeof(int32_t);
    const size_t table_bytes = plan_.tables.size() * sizeof(int32_t);
    auto* slots = static_cast<int32_t*>(ctx_.scratch(cuda::Scratch::KvSlots, slot_bytes));
    auto* tables = static_cast<int32_t*>(ctx_.scratch(cuda::Scratch::AttentionTables, table_bytes));
    async_.upload(slots, plan_.slots.data(), slot_bytes);
    async_.upload(tables, plan_.tables.data(), table_bytes);
    slots_ = slots;
    batch_.n_seq = plan_.n_seq;
    batch_.tables = tables + plan_.tables_at();
    batch_.table_start = tables + plan_.table_start_at();
    batch_.pos0 = tables + plan_.pos0_at();
    batch_.n_q = tables + plan_.n_q_at();
    batch_.row0 = tables + plan_.row0_at();
    batch_.total_rows = plan_.total_rows;
    batch_.max_n_q = plan_.max_n_q;
    // The attention launch is sized from a bucket of max_kv, not max_kv itself (blocks past a
    // sequence's real length exit at once), so a decode step keeps one launch shape, and one
    // recorded graph, for thousands of tokens. Always bucketed, graph or not: results never depend
    // on whether a step was replayed.
    batch_.max_kv = kv_bucket(plan_.max_kv);
    // Batch invariant: no cascade (the prefix pass reads shared keys with other kernels than the
    // per-sequence pass, and whether a sequence shares a prefix depends on its step's companions).
    if (cascade_enabled_ && !ctx_.batch_invariant() && plan_.n_prefix > 0) {
      batch_.n_prefix = plan_.n_prefix;
      batch_.prefix_seq0 = tables + plan_.prefix_seq0_at();
      batch_.prefix_n_seq = tables + plan_.prefix_n_seq_at();
      batch_.prefix_blocks = tables + plan_.prefix_blocks_at();
      batch_.max_prefix_q = plan_.max_prefix_q;
      batch_.max_prefix_kv = plan_.max_prefix_kv;
    }
  }

  // ---- step graphs ----------------------------------------------------------------------------
  // A key is replayed once recorded; recorded the second time it is seen (its first, eager run has
  // grown every scratch buffer it needs, so recording allocates nothing); run eagerly the first time.
  // Only steps of up to graph_max_rows_ rows (decode of up to 128 sequences, speculative verification,
  // short chunks: their ~40 launches a layer cost more than their kernels; a 64-row step ran 1285
  // launches eagerly, ~19 ms of a 60 ms forward, H200 2026-12-01), and never a key whose eager run
  // called cuBLAS (cuBLAS may allocate its workspace while captured): those stay eager.
  bool replay_step(uint64_t model_key) override {
    drop_acts();  // a replay runs ops this bookkeeping never saw
    capturing_ = false;
    eager_first_ = false;
    if (!graphs_enabled_ || plan_.total_rows == 0 || plan_.total_rows > graph_max_rows_) return false;
    if (graphs_releases_ != releases_) {  // device memory was freed since they were recorded
      drop_graphs();
      graphs_releases_ = releases_;
    }
    uint64_t key = model_key;
    auto mix = [&key](uint64_t v) { key = (key ^ v) * 1099511628211ull; };
    mix(uint64_t(batch_.max_kv));
    mix(uint64_t(batch_.n_seq));
    mix(uint64_t(batch_.max_n_q));
    mix(uint64_t(batch_.n_prefix));
    mix(uint64_t(batch_.max_prefix_q));
    mix(uint64_t(batch_.max_prefix_kv));
    // The KV bytes' device address and layout, never the store's host address (cuda_backend_plan.h).
    mix(plan_.store_key);
    mix(ctx_.scratch_generation());
    mix(hybrid_.generation());
    GraphEntry& e = graphs_[key];
    if (e.exec) {
      POLYKV_CUDA_CHECK(cudaGraphLaunch(e.exec, ctx_.stream()));
      return true;
    }
    if (e.eager_only) return false;
    if (e.seen++ == 0) {  // first sight: eager; end_step_ops sees whether it called cuBLAS
      eager_first_ = true;
      eager_key_ = key;
      eager_cublas_ = cuda::cublas_call_count();
      return false;
    }
    if (graphs_.size() > kMaxGraphs) evict_graphs(key);
    POLYKV_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream(), cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    if (!graph_pdl_) {
      pdl_before_capture_ = cuda::pdl_enabled(ctx_);
      cuda::set_pdl_enabled(false);  // until end_step_ops
    }
    capture_key_ = key;
    return false;
  }

  void end_step_ops() override {
    if (eager_first_) {
      eager_first_ = false;
      if (cuda::cublas_call_count() != eager_cublas_) {
        auto it = graphs_.find(eager_key_);
        if (it != graphs_.end()) it->second.eager_only = true;
      }
    }
    if (!capturing_) return;
    capturing_ = false;
    if (!graph_pdl_) cuda::set_pdl_enabled(pdl_before_capture_);
    cudaGraph_t graph = nullptr;
    const cudaError_t err = cudaStreamEndCapture(ctx_.stream(), &graph);
    if (err != cudaSuccess || graph == nullptr) {
      cudaGetLastError();
      graphs_enabled_ = false;  // the recorded ops never ran: the step's results are lost
      fail("CUDA: recording the step as a graph failed (", cudaGetErrorString(err),
           "); graphs are now off for this backend (POLYKV_CUDA_GRAPHS=0 turns them off from the start)");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t ierr = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (ierr != cudaSuccess) {
      cudaGetLastError();
      graphs_enabled_ = false;
      fail("CUDA: instantiating the step's graph failed: ", cudaGetErrorString(ierr));
    }
    graphs_[capture_key_].exec = exec;
    POLYKV_CUDA_CHECK(cudaGraphLaunch(exec, ctx_.stream()));  // the recorded ops run now
  }

  void store_kv(int layer, float* k, const float* v) override {
    drop_acts();
    bind();
    if (!has_rows("store_kv")) return;
    cuda::kv_store(layer_device(layer), slots_, plan_.total_rows, k, v, ctx_.stream(), cuda::pdl_enabled(ctx_));
    store_layer_ = layer;
    store_bind_ = binds_;
    store_k_ = k;
    store_v_ = v;
  }

  void attention(int layer, const AttentionParams& p, float* q, float* out) override {
    drop_acts();
    bind();
    if (!has_rows("attention")) return;
    // The kernel just before is this layer's kv_store when no op bound the device since (cuda::attention's
    // early start).
    const bool after_store = store_layer_ == layer && store_bind_ + 1 == binds_;
    store_layer_ = -1;
    if (p.window > 0 && batch_.n_prefix > 0) {
      // A sliding window may hide part of a shared prefix from some queries: no cascade there.
      cuda::AttentionBatchDevice plain = batch_;
      plain.n_prefix = 0;
      cuda::attention(layer_device(layer), p, plain, q, out, ctx_);
      return;
    }
    // After the store: its f32 rows, so that an early-started decode kernel may encode the new rows itself.
    cuda::attention(layer_device(layer), p, batch_, q, out, ctx_, after_store, after_store ? store_k_ : nullptr,
                    after_store ? store_v_ : nullptr);
  }

  // ---- hybrid models (cuda_backend_hybrid.h) --------------------------------------------------
  void deinterleave(const float* src, int rows, int groups, int a, int b, float* dst_a, float* dst_b) override {
    drop_acts();
    bind();
    hybrid_.deinterleave(src, rows, groups, a, b, dst_a, dst_b);
  }
  void sigmoid_mul(float* x, const float* gate, int64_t n) override {
    drop_acts();
    bind();
    hybrid_.sigmoid_mul(x, gate, n);
  }
  void ssm_conv(int state_layer, const float* w, int kernel, const float* x, float* out, int channels) override {
    drop_acts();
    bind();
    hybrid_.ssm_conv(state_layer, w, kernel, x, out, channels);
  }
  void gated_delta_rule(int state_layer, const GdnParams& p, const float* qkv, const float* alpha,
                        const float* beta_logit, const float* dt_bias, const float* a, float* out) override {
    drop_acts();
    bind();
    hybrid_.gated_delta_rule(state_layer, p, qkv, alpha, beta_logit, dt_bias, a, out);
  }

 private:
  static constexpr int kGraphMaxRows = 128;
  // POLYKV_CUDA_PROFILE_ROWS (constructor): the profiler window over steps of profile_rows_ rows.
  int profile_rows_ = 0, profile_skip_ = 8, profile_count_ = 2, profile_seen_ = 0;
  void profile_window() {
    if (profile_seen_ == profile_skip_ + profile_count_ && profile_count_ >= 0) {
      cudaDeviceSynchronize();
      cudaProfilerStop();
      profile_count_ = -1;  // once
    }
    if (plan_.total_rows != profile_rows_ || profile_count_ < 0) return;
    if (profile_seen_++ == profile_skip_) {
      cudaDeviceSynchronize();
      cudaProfilerStart();
    }
  }
  static constexpr size_t kMaxGraphs = 256;

  // Bucket of a step's largest context for the attention launch: powers of two up to 4096, then
  // multiples of 4096.
  static int kv_bucket(int max_kv) {
    if (max_kv <= 0) return max_kv;
    if (max_kv > 4096) return int((int64_t(max_kv) + 4095) / 4096 * 4096);
    int b = 256;
    while (b < max_kv) b *= 2;
    return b;
  }

  // Drops every recorded graph (none may be running: the stream is drained first).
  void drop_graphs() {
    if (graphs_.empty()) return;
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
    for (auto& [key, entry] : graphs_)
      if (entry.exec) cudaGraphExecDestroy(entry.exec);
    graphs_.clear();
  }

  // Drops every recorded graph but `keep` (the table is small; a workload cycling through more
  // step shapes than kMaxGraphs re-records).
  void evict_graphs(uint64_t keep) {
    for (auto it = graphs_.begin(); it != graphs_.end();) {
      if (it->first == keep) {
        ++it;
        continue;
      }
      if (it->second.exec) cudaGraphExecDestroy(it->second.exec);
      it = graphs_.erase(it);
    }
  }

  // ---- activations prepared by one op for the next mat-vec (ops_cuda_acts.h) ----------------
  // Decode-sized norms (rows <= kMatvecMaxCols, cols a multiple of 32 and <= kActsMaxCols) write them.
  static constexpr int64_t kActsMaxCols = 65536;
  // Whether a norm of rows x cols before a mat-vec is deferred into it (rmsnorm_into_matmul, post_norm_into_matmul).
  bool defers_norm(int rows, int cols) const { return defer_norms_ && all_split_ && acts_for(rows, cols); }
  // A deferred norm of x by w whose output is out: launch(acts) writes the activations and block sums; the mat-vec
  // that reads out takes them (or materialize_norm writes out for another reader).
  template <class Launch>
  void defer_norm(float* x, const float* w, float* out, int rows, int cols, float eps, Launch launch) {
    drop_acts();
    bind();
    const int64_t total = int64_t(rows) * cols;
    const cuda::ActsOut o = cuda::fused_acts_buffer(total, ctx_, /*with_ss=*/true);
    launch(o);
    set_acts(out, total, o);
    pending_norm_ = {x, w, out, rows, cols, eps};
  }
  bool acts_for(int rows, int cols) const {
    return fused_acts_ && rows >= 1 && rows <= cuda::kMatvecMaxCols && cuda::acts_fusable(cols) && cols <= kActsMaxCols;
  }
  void norm_with_acts(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps) {
    const int64_t total = int64_t(rows) * cols;
    const cuda::ActsOut o = cuda::fused_acts_buffer(total, ctx_);
    cuda::rmsnorm_acts(x, r, w, out, rows, cols, eps, o, ctx_.stream(), cuda::pdl_enabled(ctx_), ctx_.cc_major() >= 9);
    set_acts(out, total, o);
  }
  void set_acts(const float* x, int64_t total, const cuda::ActsOut& o) {
    acts_x_ = x;
    acts_total_ = total;
    acts_ = o;
  }
  void drop_acts() {
    if (pending_norm_.x != nullptr) materialize_norm();
    acts_x_ = nullptr;
  }
  // Writes the pending deferred norm's out (its reader is not the mat-vec it was deferred into).
  void materialize_norm() {
    const PendingNorm p = pending_norm_;
    pending_norm_ = {};
    bind();
    cuda::rmsnorm_materialize(p.x, p.w, p.out, p.rows, p.cols, p.eps, acts_.ss, ctx_.stream(), cuda::pdl_enabled(ctx_));
  }
  // The prepared activations, if they are x's ([n][n_in]) and `usable`; drops them either way. A pending
  // deferred norm goes with them only to a caller that passes dn (its mat-vecs scale by it: every matrix
  // cuda::deferred_norm_ok); otherwise out is written first and the caller computes its own activations.
  bool take_acts(const float* x, int64_t n_in, int n, bool usable, cuda::ActsOut& a, cuda::DeferredNorm* dn = nullptr) {
    bool ok = usable && acts_x_ != nullptr && acts_x_ == x && n >= 1 && int64_t(n) * n_in == acts_total_;
    if (pending_norm_.x != nullptr) ok = ok && dn != nullptr;
    if (ok) {
      a = acts_;
      if (dn != nullptr)
        *dn = pending_norm_.x != nullptr ? cuda::DeferredNorm{acts_.ss, pending_norm_.cols, pending_norm_.eps}
                                         : cuda::DeferredNorm{};
      pending_norm_ = {};  // consumed: out stays unwritten (Backend::rmsnorm_into_matmul's contract)
    }
    drop_acts();
    return ok;
  }

  // The MoE experts' x activations: those a norm wrote for x (one token), or none; drops them either way.
  cuda::MoeXActs take_x_acts(const float* x, int64_t n_embd, int n) {
    cuda::ActsOut a;
    cuda::MoeXActs xa;
    if (take_acts(x, n_embd, n, n == 1, a)) {
      xa.qs = a.qs;
      xa.scales = a.scales;
    }
    return xa;
  }
  // Whether an op writing [p, p + count) floats would change what the prepared activations describe (x's
  // values) or a pending deferred norm's out: then they must be dropped first.
  bool writes_acts_x(const float* p, int64_t count) const {
    if (acts_x_ == nullptr) return true;
    if (pending_norm_.x != nullptr) return true;  // drop_acts writes the norm's out first
    return p < acts_x_ + acts_total_ && acts_x_ < p + count;
  }
  // A one-column mat-vec on the small float kernel (a MoE router) reads x as floats and never touches the
  // activation buffer: x's activations (written by the norm before, no deferred norm pending) stay for the
  // next reader of x, unless y overlaps x.
  bool keeps_acts(const WeightMatrix& w, const float* x, const float* y, int n) const {
    return n == 1 && acts_x_ == x && !writes_acts_x(y, w.n_out) && !ctx_.batch_invariant() &&
           cuda::matvec_float_regs_takes(w, 1);
  }

  // Makes this backend's device current on the calling thread (the engine may call from any thread).
  void bind() const {
    ++binds_;  // every op that launches calls bind() first (attention's after_store test)
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != ctx_.device()) POLYKV_CUDA_CHECK(cudaSetDevice(ctx_.device()));
  }

  // `slack`: bytes allocated past the copy (kernels that read whole aligned words around a field).
  void* upload_owned(const void* src, size_t bytes, size_t slack = 0) {
    void* p = allocate(bytes + slack);
    owned_.push_back(p);
    upload(p, src, bytes);
    return p;
  }

  bool has_rows(const char* op) const {
    check(stepped_, "CUDA backend: ", op, " before begin_step");
    return plan_.total_rows > 0;
  }

  // The addressing of one layer of the step's pool (kv_cuda.h): layer L of block b starts at
  // data + (b * n_layer + L) * layer_bytes = (data + L * layer_bytes) + b * block_bytes.
  cuda::KvLayerDevice layer_device(int layer) const {
    const KvBlockStore& s = *plan_.store;
    check(layer >= 0 && layer < s.shape().n_layer, "CUDA backend: layer ", layer, " out of range");
    cuda::KvLayerDevice L;
    L.k_type = s.k_type();
    L.v_type = s.v_type();
    L.block_tokens = s.block_tokens();
    L.n_head_kv = s.shape().n_head_kv;
    L.head_dim = s.shape().head_dim;
    L.head_dim_v = s.shape().head_dim_v;
    L.k_head_bytes = s.k_head_bytes();
    L.v_head_bytes = s.v_head_bytes();
    L.layer_base = const_cast<uint8_t*>(s.data()) + size_t(layer) * s.layer_bytes();
    L.block_stride = s.block_bytes();
    L.v_offset = s.k_part_bytes();
    return L;
  }

  cuda::CudaContext ctx_;  // first member: destroyed last (its stream outlives the rest)
  cuda::AsyncCopies async_{ctx_};  // upload_async, download_async, begin_step's tables
  cuda::CudaKvMemory kv_memory_;
  cuda::CudaHybrid hybrid_{ctx_};
  std::string describe_;
  std::vector<void*> owned_;  // device copies made by upload_matrix / upload_floats

  // The current step (begin_step): its plan and the device copies of it.
  bool stepped_ = false;
  cuda::StepPlan plan_;
  const int32_t* slots_ = nullptr;  // device [total_rows]
  cuda::AttentionBatchDevice batch_;

  struct GraphEntry {
    int seen = 0;
    bool eager_only = false;  // its eager run called cuBLAS: never recorded
    cudaGraphExec_t exec = nullptr;
  };
  bool graphs_enabled_ = false;
  int graph_max_rows_ = kGraphMaxRows;
  bool eager_first_ = false;  // this step is its key's first, eager run
  uint64_t eager_key_ = 0, eager_cublas_ = 0;
  bool cascade_enabled_ = true;  // shared prefixes read once per group (POLYKV_CUDA_CASCADE=0: off)
  bool fused_ = true;  // fused ops (matmul_multi, add_rmsnorm, rope_qk); POLYKV_CUDA_FUSED=0: off
  bool fuse_rope_ = true;  // matmul_qkv_rope in one launch (POLYKV_CUDA_FUSE_ROPE=0: off)
  bool fuse_neox_ = true;  // ... for Neox-style models too (POLYKV_CUDA_FUSE_ROPE=norm: off)
  bool fuse_qk_norm_ = true;  // qk_norm_rope in one launch (POLYKV_CUDA_FUSE_QKNORM=0: off)
  bool fuse_post_norm_ = true;  // post_norm_into_matmul in one launch (POLYKV_CUDA_FUSE_POSTNORM=0: off)
  bool fused_acts_ = true;  // norms / gated activation write the next mat-vec's activations (POLYKV_CUDA_FUSED_ACTS=0: off)
  bool defer_norms_ = true;  // rmsnorm_into_matmul defers the norm into the mat-vec (POLYKV_CUDA_DEFER_NORM=0: off)
  // Every matrix uploaded so far is in the split layout, so every mat-vec after a norm can take a deferred
  // one. A model with other matrices (f16, q5_K, ...) keeps the fused norm: its mat-vec after a deferred norm
  // would need the norm written out first (materialize_norm), one kernel more than the fused norm.
  bool all_split_ = true;
  // The norm rmsnorm_into_matmul deferred (x: nullptr when none is pending): out is not written yet; the
  // next mat-vec of out takes it (take_acts), any other op first writes out (materialize_norm).
  struct PendingNorm {
    const float* x = nullptr;
    const float* w = nullptr;
    float* out = nullptr;
    int rows = 0, cols = 0;
    float eps = 0;
  } pending_norm_;
  const float* acts_x_ = nullptr;  // the input whose activations acts_ holds (nullptr: none)
  int64_t acts_total_ = 0;         // its values (rows x n_in)
  cuda::ActsOut acts_;
  bool capturing_ = false;
  mutable uint64_t binds_ = 0;  // bind() calls so far
  int store_layer_ = -1;        // the layer of the last store_kv, -1 once an attention consumed it
  const float* store_k_ = nullptr;  // that store_kv's f32 k and v rows (device)
  const float* store_v_ = nullptr;
  uint64_t store_bind_ = 0;     // binds_ right after that store_kv
  bool graph_pdl_ = true;            // POLYKV_CUDA_GRAPH_PDL
  bool pdl_before_capture_ = true;   // restored by end_step_ops when !graph_pdl_
  uint64_t capture_key_ = 0;
  uint64_t releases_ = 0, graphs_releases_ = 0;  // release() calls: now, and when graphs_ was last valid
  std::unordered_map<uint64_t, GraphEntry> graphs_;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device, bool batch_invariant) {
  const int n = cuda_device_count();
  check(n > 0, "no CUDA GPU is visible (driver missing or no device)");
  check(device >= 0 && device < n, "CUDA device ", device, " does not exist (", n, " visible)");
  return std::make_unique<CudaBackend>(device, batch_invariant);
}

}  // namespace polykv
