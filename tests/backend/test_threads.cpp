// The CPU backend's thread pool (backend/cpu/threads.hpp): parallel_for covers every index exactly once, in the same
// chunks every time, really runs chunks on two threads at once, rethrows a chunk's exception, runs nested and
// concurrent calls serially, and survives thousands of back-to-back jobs (the shape of a decode step) and thread-count
// changes between them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cpu/threads.hpp"

namespace {

/// Sets the thread count for one test, restores every core afterwards.
class ThreadCount {
 public:
  explicit ThreadCount(int n) { rkv::cpu::set_num_threads(n); }
  ~ThreadCount() { rkv::cpu::set_num_threads(0); }
};

/// The chunks parallel_for made, sorted by begin.
std::vector<std::pair<int64_t, int64_t>> chunks_of(int64_t n, int64_t min_chunk) {
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  rkv::cpu::parallel_for(n, min_chunk, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lk(m);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(Threads, EveryIndexExactlyOnceInFixedContiguousChunks) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadCount tc(threads);
    for (int64_t n : {1, 2, 7, 16, 17, 100, 576, 3072, 49152}) {
      for (int64_t min_chunk : {1, 16, 64}) {
        const auto chunks = chunks_of(n, min_chunk);
        ASSERT_FALSE(chunks.empty());
        int64_t next = 0;  // contiguous, in order, covering [0, n)
        for (const auto& [b, e] : chunks) {
          EXPECT_EQ(b, next) << "threads " << threads << " n " << n << " min_chunk " << min_chunk;
          EXPECT_LT(b, e);
          next = e;
        }
        EXPECT_EQ(next, n);
        // At most 4 per thread and at most ceil(n / min_chunk); one chunk with one thread.
        const int64_t most = std::min<int64_t>(4 * threads, (n + min_chunk - 1) / min_chunk);
        EXPECT_LE(static_cast<int64_t>(chunks.size()), threads == 1 ? 1 : most);
        EXPECT_EQ(chunks, chunks_of(n, min_chunk)) << "the same chunks on a second call";
      }
    }
  }
}

TEST(Threads, TwoThreadsRunChunksAtTheSameTime) {
  ThreadCount tc(2);
  // Chunk 0 waits for chunk 1: only a second thread can finish chunk 1 while chunk 0 waits.
  std::atomic<bool> second_done{false};
  std::atomic<bool> waited_out{false};
  std::thread::id ids[2];
  rkv::cpu::parallel_for(2, 1, [&](int64_t b, int64_t) {
    ids[b] = std::this_thread::get_id();
    if (b == 1) {
      second_done = true;
      return;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!second_done && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    waited_out = !second_done;
  });
  EXPECT_FALSE(waited_out) << "chunk 1 never ran while chunk 0 waited";
  EXPECT_NE(ids[0], ids[1]);
}

TEST(Threads, AChunksExceptionIsRethrownAndThePoolStaysUsable) {
  ThreadCount tc(2);
  for (int64_t bad : {0, 63}) {  // a chunk the caller is likely to run, and the last one
    EXPECT_THROW(rkv::cpu::parallel_for(64, 1,
                                        [&](int64_t b, int64_t e) {
                                          if (b <= bad && bad < e) throw std::runtime_error("chunk failed");
                                        }),
                 std::runtime_error);
  }
  std::atomic<int64_t> sum{0};
  rkv::cpu::parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(Threads, NestedCallsRunSeriallyOnTheirThread) {
  ThreadCount tc(2);
  std::atomic<int64_t> inner_calls{0}, inner_items{0}, outer_items{0};
  rkv::cpu::parallel_for(8, 1, [&](int64_t b, int64_t e) {
    outer_items += e - b;
    const std::thread::id me = std::this_thread::get_id();
    rkv::cpu::parallel_for(100, 1, [&](int64_t ib, int64_t ie) {
      ++inner_calls;
      inner_items += ie - ib;
      EXPECT_EQ(std::this_thread::get_id(), me);
    });
  });
  EXPECT_EQ(outer_items.load(), 8);
  EXPECT_EQ(inner_items.load(), 8 * 100);
  EXPECT_EQ(inner_calls.load(), 8);  // one serial fn(0, 100) per outer index
}

TEST(Threads, ManyShortJobsFromTwoCallersAndThreadCountChanges) {
  ThreadCount tc(2);
  // Back-to-back short jobs (a decode step makes ~150), from two calling threads at once: each sum must be exact.
  auto caller = [](int64_t jobs, int64_t* wrong) {
    for (int64_t j = 0; j < jobs; ++j) {
      std::vector<int> hits(static_cast<size_t>(j % 97 + 1), 0);
      rkv::cpu::parallel_for(static_cast<int64_t>(hits.size()), 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      *wrong += std::count_if(hits.begin(), hits.end(), [](int h) { return h != 1; });
    }
  };
  int64_t wrong_a = 0, wrong_b = 0;
  std::thread other(caller, 5000, &wrong_b);
  caller(5000, &wrong_a);
  other.join();
  EXPECT_EQ(wrong_a, 0);
  EXPECT_EQ(wrong_b, 0);
  for (int threads : {3, 1, 2, 4}) {
    rkv::cpu::set_num_threads(threads);
    int64_t wrong = 0;
    caller(500, &wrong);
    EXPECT_EQ(wrong, 0) << threads << " threads";
  }
}

}  // namespace
