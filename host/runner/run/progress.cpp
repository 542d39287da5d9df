#include "runner/run/progress.hpp"

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

void Progress::step(const std::string& what) {
  ++done_;
  if (sink_) return sink_(done_, total_, what);
  if (quiet_) return;
  const double el = seconds_since(t0_);
  const double eta = done_ > 0 ? el / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0.0;
  std::ostringstream os;
  os.precision(0);
  os << std::fixed << "[" << done_ << "/" << total_ << "] " << what << "  elapsed " << el << " s, ETA " << eta << " s";
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
