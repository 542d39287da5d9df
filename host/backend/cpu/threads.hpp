// Threads of the CPU backend: one process-wide setting used by OpenBLAS (matrix products on f32 weights) and by a pool
// that runs the rest in parallel: the quantized matrix-vector products of decode, attention blocks, norms, softmax.
//
// A decode step is ~150 short parallel loops (a few tens of microseconds each), so the pool is built for fork/join
// latency: idle workers poll for the next job for a short while (pause, then sched_yield) before they sleep on a
// condition variable, and each loop is split into a few chunks per thread that the workers and the caller claim
// from a shared counter, so a worker that wakes late (or shares its core with another process) costs at most one
// chunk, not a wait for it. (ggml's thread pool also polls before it sleeps.)
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace rkv::cpu {

/// Number of CPUs this process may run on (sched_getaffinity), at least 1.
int available_cores();

/// The most CPU threads the backend runs: kThreadsPerCore x available_cores(). More threads than that only add
/// contention, and thousands of them (`--threads 10000`) make the machine appear hung.
constexpr int kThreadsPerCore = 4;
int max_threads();

/// `requested` bounded to [0, max_threads()] (0 stays 0: every core). When it is lowered, `*warning` (when given)
/// gets one sentence saying so; otherwise it is left alone.
int bounded_thread_count(int64_t requested, std::string* warning = nullptr);

/// Sets the thread count for OpenBLAS and the backend pool (n >= 1; n = 0 means available_cores()). A count above
/// max_threads() is lowered to it with a warning on stderr (once per requested count). Process-wide; call it between
/// forward passes, not while one runs on another thread.
void set_num_threads(int n);

/// The current thread count (available_cores() until set_num_threads is called).
int num_threads();

/// Runs fn(begin, end) over [0, n) split into c = min(4 x num_threads(), ceil(n / min_chunk)) contiguous chunks of
/// ceil(n / c) items (the last ones shorter or absent; the same chunks for the same n, min_chunk and thread count), on
/// the pool's threads and the calling thread, in no fixed assignment of chunks to threads (the chunks are claimed in
/// order by whichever thread is free); returns when all chunks are done. fn must be safe to run
/// concurrently on disjoint ranges. With one thread, a single chunk, or a call made while the pool is busy (from
/// another thread, or nested inside fn), fn(0, n) runs on the calling thread. Exceptions thrown by fn are rethrown on
/// the calling thread (the first one).
void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t begin, int64_t end)>& fn);

/// While alive, OpenBLAS runs every call on the calling thread (openblas_set_num_threads(1)), so several pool threads
/// can each run their own sgemm; the destructor restores num_threads(). Process-wide: other threads' BLAS calls made
/// meanwhile also run single-threaded. Used inside parallel_for-based kernels; not nestable across threads.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;
};

}  // namespace rkv::cpu
