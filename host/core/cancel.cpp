#include "core/cancel.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/errors.hpp"

namespace rkv {

namespace {
thread_local const std::atomic<bool>* t_flag = nullptr;
}  // namespace

CancelScope::CancelScope(const std::atomic<bool>* flag) : previous_(t_flag) {
  if (flag) t_flag = flag;
}

CancelScope::~CancelScope() { t_flag = previous_; }

bool cancellation_requested() { return t_flag && t_flag->load(std::memory_order_relaxed); }

void throw_if_cancelled() {
  if (cancellation_requested()) throw Cancelled();
}

CancelWatchdog::CancelWatchdog(const std::atomic<bool>* flag, double limit_seconds,
                               std::function<void(double)> overdue)
    : overdue_(std::move(overdue)) {
  if (flag && limit_seconds >= 0) thread_ = std::thread([this, flag, limit_seconds] { watch(flag, limit_seconds); });
}

CancelWatchdog::~CancelWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CancelWatchdog::watch(const std::atomic<bool>* flag, double limit_seconds) {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto tick = std::chrono::milliseconds(50);
  while (!stop_ && !flag->load()) wake_.wait_for(lock, tick);  // a signal handler sets the flag: poll it
  if (stop_) return;
  const auto seen = Clock::now();
  const auto deadline = seen + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_seconds));
  while (!stop_ && Clock::now() < deadline) wake_.wait_until(lock, std::min(deadline, Clock::now() + tick));
  if (stop_) return;
  lock.unlock();
  if (overdue_) overdue_(std::chrono::duration<double>(Clock::now() - seen).count());
}

}  // namespace rkv
