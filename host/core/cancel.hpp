// Cancellation that reaches code which takes no cancel flag of its own (tokenization, text windows, model loading).
//
// A long operation that offers cancellation (run_ablation's RunOptions::cancel, compute_profile's
// ProfileRequest::cancel) opens a CancelScope with its flag; code deep below it calls throw_if_cancelled() in its
// loops, which throws rkv::Cancelled once the flag is set. Outside any scope throw_if_cancelled() does nothing.
// Thread rules: a scope belongs to the thread that opened it; the flag may be set from any thread or a signal handler.
#pragma once
#include <atomic>

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

/// Throws rkv::Cancelled when the calling thread's current CancelScope flag is set. Cheap (a thread-local and an
/// atomic load): call it in any loop that can run for more than a fraction of a second.
void throw_if_cancelled();

/// True when the calling thread's current CancelScope flag is set (for code that must stop without throwing).
bool cancellation_requested();

}  // namespace rkv
