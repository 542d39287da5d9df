#include "backend/cpu/threads.hpp"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <atomic>
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

/// Persistent worker threads that sleep on a condition variable between jobs (no spinning, so they never steal a
/// core from OpenBLAS's threads).
class Pool {
 public:
  ~Pool() { resize(0); }

  void resize(int workers) {
    {
      std::unique_lock<std::mutex> lk(m_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    stop_ = false;
    // Each worker starts from the generation current now, so a job posted before it first runs is not missed.
    const uint64_t start = generation_;
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i, start] { loop(i + 1, start); });
  }

  int workers() const { return static_cast<int>(threads_.size()); }

  /// Runs chunks 0..n_chunks-1 of job; chunk 0 on the caller.
  void run(int n_chunks, const std::function<void(int)>& job) {
    {
      std::unique_lock<std::mutex> lk(m_);
      job_ = &job;
      n_chunks_ = n_chunks;
      pending_ = n_chunks - 1;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    try {
      job(0);
    } catch (...) {
      std::unique_lock<std::mutex> lk(m_);
      if (!error_) error_ = std::current_exception();
    }
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [this] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  std::mutex busy;  ///< held by the thread currently using the pool

 private:
  void loop(int index, uint64_t seen) {
    for (;;) {
      const std::function<void(int)>* job = nullptr;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (index >= n_chunks_ || !job_) continue;
        job = job_;
      }
      std::exception_ptr err;
      try {
        (*job)(index);
      } catch (...) {
        err = std::current_exception();
      }
      std::unique_lock<std::mutex> lk(m_);
      if (err && !error_) error_ = err;
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int n_chunks_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

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
  const int64_t chunks = std::min<int64_t>(threads, (n + min_chunk - 1) / min_chunk);
  State& s = state();
  if (chunks <= 1 || !s.pool.busy.try_lock()) {
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
