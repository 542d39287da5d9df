// Progress of a long command (run, analyze, profile) on stderr: a bar with elapsed time and ETA on a terminal, plain
// lines elsewhere, or the caller's sink (the C API's callback). A run's counted part is its example loop (each step:
// one example prefilled, its full-cache reference and every pending cell run on it); phases before it (profiles)
// count their own steps.
//
// Thread rules: one Progress per command, used from its thread.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/timing.hpp"

namespace rkv {

class Progress {
 public:
  using Sink = std::function<void(int64_t done, int64_t total, const std::string& what)>;
  /// `quiet`: print nothing; `sink` (may be empty): receives every step instead of stderr.
  Progress(bool quiet, Sink sink);
  /// Starts the counted part (the cell loop): its total, and the clock the ETA is measured from.
  void set_total(int64_t total);
  /// One more step of the counted part is done: "[k/N] what  elapsed E s, ETA R s".
  void step(const std::string& what);
  /// A line about the set-up (not counted); nothing when quiet or when a sink receives the steps.
  void note(const std::string& line) const;
  /// A counted phase before the cell loop (a sensitivity profile's calibration examples): "[k/N] what  elapsed E s,
  /// ETA R s" with the elapsed time measured from `since`, the phase's start; on a terminal one line rewritten in
  /// place (ended when done == total), else one plain line per call. Nothing when quiet or when a sink receives the
  /// steps (the sink counts the cell loop only).
  void phase(const std::string& what, int64_t done, int64_t total, SteadyClock::time_point since) const;

 private:
  bool quiet_;
  Sink sink_;
  bool tty_;
  SteadyClock::time_point t0_;
  int64_t done_ = 0, total_ = 0;
};

}  // namespace rkv
