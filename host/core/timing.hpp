// Wall time of a step, on the monotonic clock (std::chrono::steady_clock), for records and progress lines.
// Thread rules: pure function.
#pragma once
#include <chrono>

namespace rkv {

using SteadyClock = std::chrono::steady_clock;

/// Seconds elapsed since `t0` (a SteadyClock::now() taken earlier).
inline double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace rkv
