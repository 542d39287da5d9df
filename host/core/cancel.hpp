// Cancellation that reaches code which takes no cancel flag of its own (tokenization, text windows, model loading).
//
// A long operation that offers cancellation (run_ablation's RunOptions::cancel, compute_profile's
// ProfileRequest::cancel) opens a CancelScope with its flag; code deep below it calls throw_if_cancelled() in its
// loops, which throws rkv::Cancelled once the flag is set. Outside any scope throw_if_cancelled() does nothing.
// Thread rules: a scope belongs to the thread that opened it; the flag may be set from any thread or a signal handler.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace rkv {

/// While alive, `flag` (may be null: no cancellation) is the calling thread's cancellation flag; scopes nest (the
/// innermost one counts; a null inner flag keeps the outer one). The flag must outlive the scope.
class CancelScope {
 public:
  explicit CancelScope(const std::atomic<bool>* flag);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

/// While alive, nothing below it on the calling thread is cancelled (a scope whose flag is never set): for a short
/// part that must run to its end once started (writing a finished run's outputs, a cancelled run's partial report).
class CancelShield {
 public:
  CancelShield() : scope_(&never_) {}

 private:
  static inline const std::atomic<bool> never_{false};
  CancelScope scope_;
};

/// Throws rkv::Cancelled when the calling thread's current CancelScope flag is set. Cheap (a thread-local and an
/// atomic load): call it in any loop that can run for more than a fraction of a second.
void throw_if_cancelled();

/// True when the calling thread's current CancelScope flag is set (for code that must stop without throwing).
bool cancellation_requested();

/// Bounds how long a process may take to stop once `*flag` is set: a thread watches the flag (polling every 50 ms);
/// when it has been set for `limit_seconds` and this object still lives, it calls `overdue(seconds since the flag
/// was seen set)` on the watchdog thread, which is meant to report what is still running and end the process
/// (_exit): the host cannot pre-empt a plugin call that ignores cancellation. Destroying the watchdog (the work ended
/// in time) stops the thread without calling `overdue`. `flag` must outlive the watchdog; `limit_seconds` < 0
/// disables it (no thread). Thread rules: construct and destroy on one thread; `overdue` runs on the watchdog's.
class CancelWatchdog {
 public:
  CancelWatchdog(const std::atomic<bool>* flag, double limit_seconds, std::function<void(double)> overdue);
  ~CancelWatchdog();
  CancelWatchdog(const CancelWatchdog&) = delete;
  CancelWatchdog& operator=(const CancelWatchdog&) = delete;

 private:
  void watch(const std::atomic<bool>* flag, double limit_seconds);
  std::function<void(double)> overdue_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rkv
