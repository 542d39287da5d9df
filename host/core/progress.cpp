#include "core/progress.hpp"

#include <unistd.h>

#include <iostream>
#include <sstream>

namespace rkv {

Progress::Progress(bool quiet, Sink sink)
    : quiet_(quiet), sink_(std::move(sink)), tty_(::isatty(STDERR_FILENO) != 0), t0_(SteadyClock::now()) {}

void Progress::set_total(int64_t total) {
  total_ = total;
  t0_ = SteadyClock::now();  // the ETA covers the cell loop, not the set-up before it
}

namespace {

/// "[k/N] what  elapsed E s, ETA R s": R = E / k x (N - k), the mean time per step so far times the steps left.
std::string counted_line(const std::string& what, int64_t done, int64_t total, double elapsed) {
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0.0;
  std::ostringstream os;
  os.precision(0);
  os << std::fixed << "[" << done << "/" << total << "] " << what << "  elapsed " << elapsed << " s, ETA " << eta
     << " s";
  return os.str();
}

}  // namespace

void Progress::phase(const std::string& what, int64_t done, int64_t total, SteadyClock::time_point since) const {
  if (quiet_ || sink_) return;
  const std::string line = counted_line(what, done, total, seconds_since(since));
  if (!tty_) {
    std::cerr << line << "\n";
    return;
  }
  std::cerr << "\r" << line << "\033[K";
  if (done >= total) std::cerr << "\n";
}

void Progress::step(const std::string& what) {
  ++done_;
  if (sink_) return sink_(done_, total_, what);
  if (quiet_) return;
  std::ostringstream os;
  os << counted_line(what, done_, total_, seconds_since(t0_));
  if (tty_) {
    const int width = 30;
    const int filled = total_ > 0 ? static_cast<int>(width * done_ / total_) : width;
    std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
              << std::string(static_cast<size_t>(width - filled), '.') << "] " << os.str() << "\033[K";
    if (done_ == total_) std::cerr << "\n";
  } else {
    std::cerr << os.str() << "\n";
  }
}

void Progress::note(const std::string& line) const {
  if (quiet_ || sink_) return;
  if (tty_) std::cerr << "\r\033[K";
  std::cerr << line << "\n";
}

}  // namespace rkv
