#include "backend/cpu/threads.hpp"

#include <cblas.h>
#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

namespace rkv::cpu {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

/// How long an idle worker polls for the next job before it sleeps, and how long a caller polls for the last chunks
/// before it starts yielding its core: longer than the serial gaps between the parallel loops of a decode step (an
/// RMSNorm or the int8 quantization of one row: a few microseconds), so that a decode step's ~150 loops wake nobody
/// through the kernel, and short enough that a pool left idle gives its core back almost at once.
constexpr auto kPollTime = std::chrono::microseconds(200);
/// Of which the first part is spent in pause instructions only; afterwards the poller also yields its core every 32
/// polls, so that another runnable thread there (OpenBLAS's workers during a prefill's sgemm, another process) is not held off.
constexpr auto kPauseTime = std::chrono::microseconds(20);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

/// Polls `ready` (cheap, thread-safe) for up to kPollTime: pause instructions first, then also sched_yield.
/// Returns whether it became true.
template <typename Ready>
bool poll(const Ready& ready) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 31) == 31) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > kPollTime) return false;
      if (waited > kPauseTime) std::this_thread::yield();
    }
    cpu_relax();
  }
}

/// Persistent worker threads and the caller share each job's chunks through one atomic job word: the job's number
/// (32 bits), its chunk count (16 bits) and the next unclaimed chunk (16 bits). A thread claims a chunk by
/// compare-and-swap on the whole word, so it can only ever claim a chunk of the job it read, however late it wakes;
/// the caller runs chunks too, and returns once the finished-chunk count reaches the chunk count. A late or
/// descheduled worker therefore costs at most the chunk it holds, never a wait for it to wake up.
/// Idle workers poll the word for kPollTime, then sleep on a condition variable (pools with more threads than cores
/// sleep at once: polling would take the cores their peers need).
class Pool {
 public:
  static constexpr int kMaxChunks = 0xFFFF;

  ~Pool() { resize(0); }

  /// Stops the workers and starts `workers` new ones. Call only while no job runs.
  void resize(int workers) {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    stop_ = false;
    poll_ = workers + 1 <= available_cores();
    // Each worker starts from the job number current now, so a job posted before it first runs is not missed.
    const uint32_t current = job_number(word_.load());
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, current] { loop(current); });
  }

  /// Runs chunks 0..n_chunks-1 (n_chunks <= kMaxChunks) of job on the workers and the caller, in claim order.
  void run(int n_chunks, const std::function<void(int)>& job) {
    job_ = &job;
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    const uint32_t number = job_number(word_.load()) + 1;
    word_.store(uint64_t{number} << 32 | uint64_t(n_chunks) << 16);  // publishes job_, error_, done_
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lk(m_); }  // a worker between its last check and its wait has reached the wait
      cv_.notify_all();
    }
    run_chunks(number);
    if (!poll([&] { return done_.load(std::memory_order_acquire) == n_chunks; })) {
      while (done_.load(std::memory_order_acquire) != n_chunks) std::this_thread::yield();  // a worker's last chunk
    }
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  std::mutex busy;  ///< held by the thread currently using the pool

 private:
  static uint32_t job_number(uint64_t word) { return static_cast<uint32_t>(word >> 32); }

  /// Claims the next chunk of job `number` into *chunk; false when that job has no unclaimed chunk (or is over).
  bool claim(uint32_t number, int* chunk) {
    uint64_t w = word_.load(std::memory_order_acquire);
    for (;;) {
      const int n = static_cast<int>((w >> 16) & 0xFFFF), next = static_cast<int>(w & 0xFFFF);
      if (job_number(w) != number || next >= n) return false;
      if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        *chunk = next;
        return true;
      }
    }
  }

  /// Runs chunks of job `number` until none is left; the job stays alive while one of its chunks is unfinished.
  void run_chunks(uint32_t number) {
    int chunk = 0;
    while (claim(number, &chunk)) {
      try {
        (*job_)(chunk);
      } catch (...) {
        std::lock_guard<std::mutex> lk(error_m_);
        if (!error_) error_ = std::current_exception();
      }
      done_.fetch_add(1, std::memory_order_release);
    }
  }

  void loop(uint32_t seen) {
    for (;;) {
      auto posted = [&] { return stop_.load() || job_number(word_.load()) != seen; };
      if (!poll_ || !poll(posted)) {
        std::unique_lock<std::mutex> lk(m_);
        ++sleepers_;
        cv_.wait(lk, posted);
        --sleepers_;
      }
      if (stop_) return;
      seen = job_number(word_.load());
      run_chunks(seen);
    }
  }

  std::atomic<uint64_t> word_{0};  ///< job number << 32 | chunk count << 16 | next unclaimed chunk
  std::atomic<int> done_{0};       ///< chunks of the current job finished
  const std::function<void(int)>* job_ = nullptr;
  std::exception_ptr error_;
  std::mutex error_m_;
  std::atomic<bool> stop_{false};
  bool poll_ = false;
  std::mutex m_;  ///< guards sleeping: workers wait on cv_ for a new job number or stop_
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
  std::vector<std::thread> threads_;
};

/// Chunks per thread of a parallel_for: more than one, so that a thread that starts late (woken late, or sharing its
/// core with another process) leaves its share to the others instead of holding up the join.
constexpr int64_t kChunksPerThread = 4;

struct State {
  std::mutex m;
  int threads = 0;  // 0: not initialised yet
  Pool pool;
};

State& state() {
  static State s;
  return s;
}

int ensure_init() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  if (s.threads == 0) {
    s.threads = available_cores();
    openblas_set_num_threads(s.threads);
    s.pool.resize(s.threads - 1);
  }
  return s.threads;
}

}  // namespace

int max_threads() { return kThreadsPerCore * available_cores(); }

int bounded_thread_count(int64_t requested, std::string* warning) {
  if (requested <= 0) return 0;
  const int most = max_threads();
  if (requested <= most) return static_cast<int>(requested);
  if (warning)
    *warning = std::to_string(requested) + " CPU threads requested (--threads / model.threads), more than " +
               std::to_string(kThreadsPerCore) + " per core on the " + std::to_string(available_cores()) +
               " cores this process may use: using " + std::to_string(most);
  return most;
}

void set_num_threads(int n) {
  {
    std::string warning;
    const int bounded = bounded_thread_count(n, &warning);
    static std::atomic<int> warned_for{0};
    if (!warning.empty() && warned_for.exchange(n) != n) std::cerr << "ripplekv: warning: " << warning << "\n";
    n = bounded;
  }
  if (n <= 0) n = available_cores();
  State& s = state();
  std::lock_guard<std::mutex> busy(s.pool.busy);
  std::lock_guard<std::mutex> lk(s.m);
  if (n == s.threads) return;
  s.threads = n;
  openblas_set_num_threads(n);
  s.pool.resize(n - 1);
}

int num_threads() { return ensure_init(); }

SingleThreadedBlas::SingleThreadedBlas() {
  ensure_init();
  openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() { openblas_set_num_threads(num_threads()); }

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int threads = ensure_init();
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t chunks = std::min<int64_t>({int64_t{threads} * kChunksPerThread, (n + min_chunk - 1) / min_chunk,
                                            Pool::kMaxChunks});
  State& s = state();
  if (threads <= 1 || chunks <= 1 || !s.pool.busy.try_lock()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> hold(s.pool.busy, std::adopt_lock);
  const int64_t per = (n + chunks - 1) / chunks;
  s.pool.run(static_cast<int>(chunks), [&](int c) {
    const int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) fn(b, e);
  });
}

}  // namespace rkv::cpu
