// A process-wide record of the plugin calls in flight, for the two faults the host cannot pre-empt
// (docs/ARCHITECTURE.md "Plugin ABI"; README "Decisions"):
//   - a plugin calling exit() inside a call: the first PluginCallScope installs an atexit handler that, when exit()
//     runs while a call is in flight on the exiting thread, prints "ripplekv: plugin <id> called exit() inside
//     <call>" to stderr and ends the process with _exit(kPluginExitStatus) (3). An exit() from the host itself, with no
//     call in flight, keeps its own status;
//   - a call that ignores cancellation: plugin_calls_in_flight() names what is running, for a watchdog
//     (core/cancel.hpp CancelWatchdog, `ripplekv run --cancel-limit`).
// Every plugin call of the host (instance.cpp, scorer_call, allocator_call, signal_call; the conformance kit goes
// through them) opens a PluginCallScope around it.
//
// Thread rules: a scope belongs to the thread that opened it (scopes nest per thread); plugin_calls_in_flight() may
// be called from any thread.
#pragma once
#include <string>

namespace rkv {

/// The exit status of a process whose plugin called exit() inside a call.
constexpr int kPluginExitStatus = 3;

/// While alive, records "plugin `plugin_id` is inside `call`" for this thread. `call` ("score", "allocate",
/// "profile", "requirements", "create", "destroy", "get_interface") must be a string literal (it is read by the
/// atexit handler after the stack may be unwinding). Never throws after construction; cheap (a mutex and a list
/// node).
class PluginCallScope {
 public:
  PluginCallScope(const std::string& plugin_id, const char* call);
  ~PluginCallScope();
  PluginCallScope(const PluginCallScope&) = delete;
  PluginCallScope& operator=(const PluginCallScope&) = delete;

  const std::string& plugin_id() const { return id_; }
  const char* call() const { return call_; }
  double started() const { return started_; }  ///< steady-clock seconds when the call began

 private:
  std::string id_;
  const char* call_;
  const PluginCallScope* previous_;  ///< the thread's enclosing scope (a plugin calling back into the host)
  double started_;                   ///< steady-clock seconds at construction
};

/// The calls in flight on every thread, "plugin 'org.x.y' inside score (for 12.3 s)", joined by "; "; "" when none.
std::string plugin_calls_in_flight();

}  // namespace rkv
