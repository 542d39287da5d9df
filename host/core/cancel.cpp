#include "core/cancel.hpp"

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

}  // namespace rkv
