// A CPU emulator of the subset of CUDA (device code, runtime API, cuBLAS) that the CUDA backend uses, so that its
// kernels and binding code run -- and are tested against the CPU backend -- on machines without a GPU. Test-only:
// compiled into the `test_gpu_emu` suite with RKV_CUDA_EMU=1 (backend/cuda/ns.hpp), never into libripplekv.
// This header holds the types, the emulator and the device-code vocabulary; runtime_api.hpp the runtime API and
// cublas.hpp the cuBLAS subset (backend/cuda/runtime.hpp includes them all).
//
// Execution model (what real hardware guarantees, no more):
//  - a launch runs its blocks one after another; the threads of a block are fibers on one OS thread, switched only
//    at __syncthreads(), __syncwarp() and warp shuffles. On x86-64 a fiber switch is a few instructions
//    (rkv_emu_switch below: callee-saved registers, MXCSR and the x87 control word, then the stack pointer), not
//    swapcontext(), whose two sigprocmask system calls per switch made whole-model runs in the emulator several times
//    slower; elsewhere the fibers use ucontext. A thread runs until it reaches such a point,
//    so a read of shared memory that another thread has not yet written (a missing barrier) sees stale data and the
//    tests fail, as they would on a GPU;
//  - __syncthreads() waits for every thread of the block that has not exited (as on sm_70 and later); a deadlock
//    (threads waiting at different barriers) aborts with a message;
//  - warp shuffles exchange values among the 32 lanes of a warp (lane = linear thread index % 32); the warp
//    reductions of kernels/common.cuh are replayed in exactly the butterfly order the GPU uses, so results are bitwise
//    those of the device code for the same float operations;
//  - dynamic shared memory is filled with 0xFF bytes (NaN as float) before each block, so reads of unwritten shared
//    memory show up; launch configurations are checked against sm_80 limits (1024 threads, 48 KiB dynamic shared
//    memory unless raised with cudaFuncSetAttribute, at most 163 KiB);
//  - device memory is host memory (cudaMalloc = aligned_alloc); copies are memcpy; streams and events are
//    bookkeeping; cublasGemmEx supports the (CUBLAS_OP_T, CUBLAS_OP_N) products of linear layers on float32/bfloat16
//    with float32 accumulation, through OpenBLAS (cblas_sgemm).
// Floating-point results differ from a GPU's only where the GPU contracts a*b+c into an fma or uses its own expf/logf.
// Not thread-safe: one launch at a time in the process.
#pragma once
#include <ucontext.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include <cblas.h>

// ---- types and error codes ------------------------------------------------------------------------------------------

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
};
struct CUstream_emu;
using cudaStream_t = CUstream_emu*;
struct CUevent_emu {
  double ms = 0.0;
};
using cudaEvent_t = CUevent_emu*;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97, cudaDevAttrMultiProcessorCount = 16 };
constexpr unsigned cudaStreamNonBlocking = 0x01;
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
};

// ---- the emulator -------------------------------------------------------------------------------------------------

#if defined(__x86_64__) && !defined(RKV_EMU_UCONTEXT)
#define RKV_EMU_FAST_SWITCH 1
// rkv_emu_switch(from, to): pushes rbp, rbx, r12-r15 and an 8-byte slot holding MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *from, loads `to` (a stack pointer saved the same way, or a new fiber's
// prepared stack) and pops the same frame from it, returning into that fiber (System V x86-64: everything else is
// caller-saved). Weak, so every translation unit that includes this header may define it.
extern "C" void rkv_emu_switch(void** from, void* to);
__asm__(
    ".text\n"
    ".weak rkv_emu_switch\n"
    ".type rkv_emu_switch,@function\n"
    "rkv_emu_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  subq $8, %rsp\n"
    "  stmxcsr (%rsp)\n"
    "  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n"
    "  fldcw 4(%rsp)\n"
    "  addq $8, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size rkv_emu_switch, .-rkv_emu_switch\n");
#else
#define RKV_EMU_FAST_SWITCH 0
#endif

namespace rkv::emu {

constexpr size_t kStackBytes = 64 * 1024;
constexpr size_t kDefaultDynamicSmem = 48 * 1024;
constexpr size_t kMaxDynamicSmem = 163 * 1024;  // sm_80 opt-in limit (sm_90: 227 KiB)
constexpr size_t kDeviceBytes = size_t(80) << 30;

struct Fiber {
  ucontext_t ctx;
  void* sp = nullptr;  ///< saved stack pointer (fast switch)
  uint3 tid;
  unsigned linear = 0;
  bool done = false;
  int wait_kind = 0;  // 0 running, 1 block barrier, 2 warp barrier
  uint64_t wait_gen = 0;
};

struct BlockRun {
  dim3 grid, block;
  uint3 bidx{0, 0, 0};
  std::vector<Fiber> fibers;
  ucontext_t sched;
  void* sched_sp = nullptr;  ///< the scheduler's saved stack pointer (fast switch)
  int current = -1;
  int alive = 0, arrived = 0;
  uint64_t gen = 0;
  std::vector<int> w_alive, w_arrived;
  std::vector<uint64_t> w_gen;
  std::vector<uint64_t> xbuf;  // warp exchange slots [warps * 32]
  std::vector<unsigned char> dyn_smem;
  const std::function<void()>* body = nullptr;
};

struct State {
  BlockRun run;
  std::vector<std::vector<char>> stacks;
  cudaError_t last_error = cudaSuccess;
  std::map<const void*, size_t> smem_limit;  // cudaFuncAttributeMaxDynamicSharedMemorySize per kernel
  std::map<const void*, size_t> allocations;
  size_t allocated = 0;
  bool reverse_order = false;  // schedule threads in reverse order (tests flip it to shake out races)
};
inline State& state() {
  static State s;
  return s;
}
inline BlockRun& run() { return state().run; }
inline Fiber& cur() { return run().fibers[static_cast<size_t>(run().current)]; }

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "cuda_emu: %s\n", what);
  std::abort();
}

inline void yield() {
  BlockRun& r = run();
#if RKV_EMU_FAST_SWITCH
  rkv_emu_switch(&cur().sp, r.sched_sp);
#else
  swapcontext(&cur().ctx, &r.sched);
#endif
}

inline void syncthreads() {
  BlockRun& r = run();
  if (++r.arrived == r.alive) {
    r.arrived = 0;
    ++r.gen;
    return;
  }
  Fiber& f = cur();
  f.wait_kind = 1;
  f.wait_gen = r.gen;
  while (r.gen == f.wait_gen) yield();
  f.wait_kind = 0;
}

inline void syncwarp() {
  BlockRun& r = run();
  Fiber& f = cur();
  const unsigned w = f.linear / 32;
  if (++r.w_arrived[w] == r.w_alive[w]) {
    r.w_arrived[w] = 0;
    ++r.w_gen[w];
    return;
  }
  f.wait_kind = 2;
  f.wait_gen = r.w_gen[w];
  while (r.w_gen[w] == f.wait_gen) yield();
  f.wait_kind = 0;
}

inline void thread_exit() {
  BlockRun& r = run();
  Fiber& f = cur();
  f.done = true;
  --r.alive;
  if (r.arrived > 0 && r.arrived == r.alive) {
    r.arrived = 0;
    ++r.gen;
  }
  const unsigned w = f.linear / 32;
  --r.w_alive[w];
  if (r.w_arrived[w] > 0 && r.w_arrived[w] == r.w_alive[w]) {
    r.w_arrived[w] = 0;
    ++r.w_gen[w];
  }
}

inline void fiber_entry() {
  (*run().body)();
  thread_exit();
}  // returns through uc_link to the scheduler (ucontext), or see fiber_start

#if RKV_EMU_FAST_SWITCH
/// The first frame of a fiber (fast switch): runs the thread, then hands control back for good (a finished fiber is
/// never switched to again).
[[noreturn]] inline void fiber_start() {
  fiber_entry();
  BlockRun& r = run();
  void* dead = nullptr;
  rkv_emu_switch(&dead, r.sched_sp);
  fail("a finished fiber was resumed");
}

/// A new fiber's stack, laid out as rkv_emu_switch leaves a suspended one: the MXCSR / x87 slot, six zeroed registers
/// and the return address fiber_start, below a zero slot so that fiber_start starts with rsp = 8 mod 16 (as after a
/// call). Returns the stack pointer to switch to.
inline void* prepare_stack(char* base, size_t bytes) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(base) + bytes) & ~uintptr_t(15);
  auto* w = reinterpret_cast<uint64_t*>(top);
  w[-1] = 0;                                                   // fake return address of fiber_start
  w[-2] = reinterpret_cast<uint64_t>(&fiber_start);            // popped by ret
  for (int k = 3; k <= 8; ++k) w[-k] = 0;                      // rbp, rbx, r12, r13, r14, r15
  uint32_t mxcsr = 0;
  uint16_t fcw = 0;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fcw));
  uint64_t slot = mxcsr | (uint64_t(fcw) << 32);
  w[-9] = slot;
  return &w[-9];
}
#endif

inline bool blocked(const BlockRun& r, const Fiber& f) {
  if (f.wait_kind == 1) return r.gen == f.wait_gen;
  if (f.wait_kind == 2) return r.w_gen[f.linear / 32] == f.wait_gen;
  return false;
}

/// Runs one block of the current launch to completion.
inline void run_block() {
  State& s = state();
  BlockRun& r = s.run;
  const unsigned n = r.block.x * r.block.y * r.block.z;
  const unsigned warps = (n + 31) / 32;
  while (s.stacks.size() < n) s.stacks.emplace_back(kStackBytes);
  r.fibers.assign(n, Fiber{});
  r.alive = static_cast<int>(n);
  r.arrived = 0;
  r.w_alive.assign(warps, 0);
  for (unsigned i = 0; i < n; ++i) ++r.w_alive[i / 32];
  r.w_arrived.assign(warps, 0);
  r.w_gen.assign(warps, 0);
  r.xbuf.assign(size_t(warps) * 32, 0);
  std::fill(r.dyn_smem.begin(), r.dyn_smem.end(), static_cast<unsigned char>(0xFF));
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = r.fibers[i];
    f.linear = i;
    f.tid = uint3{i % r.block.x, (i / r.block.x) % r.block.y, i / (r.block.x * r.block.y)};
#if RKV_EMU_FAST_SWITCH
    f.sp = prepare_stack(s.stacks[i].data(), kStackBytes);
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = s.stacks[i].data();
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = &r.sched;
    makecontext(&f.ctx, fiber_entry, 0);
#endif
  }
  unsigned remaining = n;
  while (remaining > 0) {
    bool progressed = false;
    for (unsigned k = 0; k < n; ++k) {
      const unsigned i = s.reverse_order ? n - 1 - k : k;
      Fiber& f = r.fibers[i];
      if (f.done || blocked(r, f)) continue;
      r.current = static_cast<int>(i);
#if RKV_EMU_FAST_SWITCH
      rkv_emu_switch(&r.sched_sp, f.sp);
#else
      swapcontext(&r.sched, &f.ctx);
#endif
      progressed = true;
      if (f.done) --remaining;
    }
    if (!progressed) fail("deadlock: the live threads of a block wait at different barriers");
  }
  r.current = -1;
}

/// Runs a kernel launch: `body` is the kernel call with its arguments bound.
inline void launch(const void* fn, dim3 grid, dim3 block, size_t smem, const std::function<void()>& body) {
  State& s = state();
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  const auto it = s.smem_limit.find(fn);
  const size_t smem_max = it == s.smem_limit.end() ? kDefaultDynamicSmem : it->second;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u || smem > smem_max) {
    std::fprintf(stderr, "cuda_emu: invalid launch grid (%u,%u,%u) block (%u,%u,%u) smem %zu (limit %zu)\n", grid.x,
                 grid.y, grid.z, block.x, block.y, block.z, smem, smem_max);
    s.last_error = cudaErrorInvalidConfiguration;
    return;
  }
  BlockRun& r = s.run;
  r.grid = grid;
  r.block = block;
  r.body = &body;
  r.dyn_smem.assign(smem, 0xFF);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        r.bidx = uint3{x, y, z};
        run_block();
      }
  r.body = nullptr;
}

/// Each lane publishes `v`; returns the 32 values of its warp (lanes past the block's end read 0).
template <class T>
inline void warp_gather(T v, T (&out)[32]) {
  static_assert(sizeof(T) <= 8, "warp exchange of at most 8 bytes");
  BlockRun& r = run();
  const unsigned lin = cur().linear, w = lin / 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  r.xbuf[w * 32 + lin % 32] = bits;
  syncwarp();
  for (unsigned l = 0; l < 32; ++l) std::memcpy(&out[l], &r.xbuf[w * 32 + l], sizeof(T));
  syncwarp();
}

template <class T>
inline T shfl_from(T v, int src) {
  T all[32];
  warp_gather(v, all);
  return all[src & 31];
}

/// The xor butterfly over aligned groups of W lanes with masks 1, 2, ..., W/2, as the device code runs it.
template <int W, class T, class Op>
inline T group_allreduce(T v, Op op) {
  T a[32], b[32];
  warp_gather(v, a);
  for (int m = 1; m < W; m <<= 1) {
    for (int l = 0; l < 32; ++l) b[l] = op(a[l], a[l ^ m]);
    std::memcpy(a, b, sizeof(a));
  }
  return a[cur().linear % 32];
}

inline unsigned lane() { return cur().linear % 32; }

}  // namespace rkv::emu

// ---- device-code vocabulary -----------------------------------------------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

#define threadIdx (::rkv::emu::cur().tid)
#define blockIdx (::rkv::emu::run().bidx)
#define blockDim (static_cast<const dim3&>(::rkv::emu::run().block))
#define gridDim (static_cast<const dim3&>(::rkv::emu::run().grid))

#define RKV_LAUNCH(kernel, grid, block, smem, stream, ...)                                                 \
  ::rkv::emu::launch(reinterpret_cast<const void*>(kernel), dim3(grid), dim3(block), (smem), \
                     [&]() { kernel(__VA_ARGS__); })
#define RKV_DYNAMIC_SMEM(type, name) type* name = reinterpret_cast<type*>(::rkv::emu::run().dyn_smem.data())

inline void __syncthreads() { ::rkv::emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::rkv::emu::syncwarp(); }
template <class T>
inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
  const int l = static_cast<int>(::rkv::emu::lane());
  return ::rkv::emu::shfl_from(v, (l & ~(width - 1)) + (src & (width - 1)));
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  const int l = static_cast<int>(::rkv::emu::lane());
  const int s = l ^ mask;
  return ::rkv::emu::shfl_from(v, (s & ~(width - 1)) == (l & ~(width - 1)) ? s : l);
}
template <class T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int l = static_cast<int>(::rkv::emu::lane());
  const int s = l - static_cast<int>(delta);
  return ::rkv::emu::shfl_from(v, s >= (l & ~(width - 1)) ? s : l);
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int l = static_cast<int>(::rkv::emu::lane());
  const int s = l + static_cast<int>(delta);
  return ::rkv::emu::shfl_from(v, s < (l & ~(width - 1)) + width ? s : l);
}

template <class T>
inline T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T>
inline T atomicMin(T* p, T v) {
  const T old = *p;
  if (v < old) *p = v;
  return old;
}
template <class T>
inline T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __ddiv_rn(double a, double b) { return a / b; }

/// bfloat16 as the upper 16 bits of a binary32; conversions round to nearest even like cuda_bf16.h.
struct __nv_bfloat16 {
  unsigned short x;
};
inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float(static_cast<unsigned>(b.x) << 16); }
inline __nv_bfloat16 __float2bfloat16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{static_cast<unsigned short>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{static_cast<unsigned short>(u >> 16)};
}
