#include "plugin/call_guard.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/format.hpp"

namespace rkv {

namespace {

/// The innermost scope of this thread. A plain pointer (trivially destructible), so it is still readable in the
/// atexit handler after exit() has destroyed this thread's thread_local objects.
thread_local const PluginCallScope* t_current = nullptr;

/// Every open scope of every thread, for plugin_calls_in_flight(). Leaked on purpose (used from atexit handlers and a
/// watchdog thread during static destruction).
std::mutex& scopes_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::vector<const PluginCallScope*>& open_scopes() {
  static auto* v = new std::vector<const PluginCallScope*>();
  return *v;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Runs inside exit(): a call in flight on the exiting thread means the plugin called exit().
extern "C" void rkv_plugin_exit_guard() {
  const PluginCallScope* s = t_current;
  if (!s) return;  // the host's own exit(): keep its status
  // fprintf to an unbuffered stderr; no allocation of our own.
  std::fprintf(stderr, "ripplekv: plugin %s called exit() inside %s\n", s->plugin_id().c_str(), s->call());
  std::fflush(stderr);
  ::_exit(kPluginExitStatus);
}

void install_exit_guard() {
  static std::once_flag once;
  // Registered at the first plugin call, after the host's statics: it runs before their destructors.
  std::call_once(once, [] { std::atexit(rkv_plugin_exit_guard); });
}

}  // namespace

PluginCallScope::PluginCallScope(const std::string& plugin_id, const char* call)
    : id_(plugin_id), call_(call), previous_(t_current), started_(now_seconds()) {
  install_exit_guard();
  {
    std::lock_guard<std::mutex> lock(scopes_mutex());
    open_scopes().push_back(this);
  }
  t_current = this;
}

PluginCallScope::~PluginCallScope() {
  t_current = previous_;
  std::lock_guard<std::mutex> lock(scopes_mutex());
  auto& v = open_scopes();
  v.erase(std::remove(v.begin(), v.end(), this), v.end());
}

std::string plugin_calls_in_flight() {
  std::lock_guard<std::mutex> lock(scopes_mutex());
  std::string out;
  const double now = now_seconds();
  for (const PluginCallScope* s : open_scopes())
    out += (out.empty() ? "" : "; ") + std::string("plugin '") + s->plugin_id() + "' inside " + s->call() +
           " (for " + fmt(now - s->started(), 3) + " s)";
  return out;
}

}  // namespace rkv
