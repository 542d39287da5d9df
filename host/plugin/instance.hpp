// Host-side handles for plugin instances: the diagnostics sink, the host services table and the instance itself.
//
// Thread rules: a PluginInstance is used from one thread at a time (the ABI's rule); DiagnosticLog is not
// thread-safe and belongs to the one call it is passed to; HostServices::cancel() may be called from any thread.
#pragma once
#include <ripplekv/plugin.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "plugin/params.hpp"
#include "plugin/registry.hpp"

namespace rkv {

/// Collects what a plugin reports through rkv_diagnostics during one or more calls.
class DiagnosticLog {
 public:
  DiagnosticLog();
  DiagnosticLog(const DiagnosticLog&) = delete;
  DiagnosticLog& operator=(const DiagnosticLog&) = delete;
  const rkv_diagnostics* abi() const { return &abi_; }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// The errors joined by "; " (or "no message" when the plugin gave none).
  std::string error_text() const;

 private:
  static void report(void* ctx, rkv_diag_level level, const char* message);
  rkv_diagnostics abi_;
  std::vector<std::string> errors_, warnings_;
};

/// The host services (rkv_host) one run offers its plugins: cancellation and service tables by id.
class HostServices {
 public:
  HostServices();
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;
  const rkv_host* abi() const { return &abi_; }
  /// Ask every plugin call polling is_cancelled() to stop. Thread-safe.
  void cancel() { cancelled_.store(true); }
  /// Also report cancelled once `*flag` is true (e.g. a run's RunOptions::cancel, set by Ctrl-C or the C API's
  /// cancel callback). `flag` (may be null: nothing to watch) must outlive this object. Call before handing abi() out.
  void watch(const std::atomic<bool>* flag) { external_ = flag; }
  bool cancelled() const { return cancelled_.load() || (external_ && external_->load()); }
  /// Offer a service table under `id` (e.g. RKV_SERVICE_PROFILER_V1); `table` must outlive the instances using it.
  void set_service(const std::string& id, const void* table);

 private:
  static int32_t is_cancelled(void* ctx);
  static const void* get_service(void* ctx, const char* id);
  rkv_host abi_;
  std::atomic<bool> cancelled_{false};
  const std::atomic<bool>* external_ = nullptr;
  std::vector<std::pair<std::string, const void*>> services_;
};

/// A created plugin; destroys it on destruction. Move-only.
class PluginInstance {
 public:
  /// Creates `info`'s plugin with validated `params`. Throws rkv::InputError naming the plugin id and its message
  /// when create() fails. `host` must outlive the instance.
  static PluginInstance create(const PluginInfo& info, const ParamSet& params, const HostServices& host);
  PluginInstance(PluginInstance&& o) noexcept;
  PluginInstance& operator=(PluginInstance&& o) noexcept;
  PluginInstance(const PluginInstance&) = delete;
  ~PluginInstance();

  const PluginInfo& info() const { return info_; }
  std::string id() const { return info_.id(); }
  /// The vtable for `interface_id`; throws rkv::InputError naming the plugin when it is not served.
  const void* interface(const char* interface_id) const;
  /// True when the plugin serves `interface_id` (its get_interface returns a table).
  bool serves(const char* interface_id) const;
  rkv_plugin_instance* raw() const { return inst_; }

 private:
  PluginInstance(const PluginInfo& info, rkv_plugin_instance* inst) : info_(info), inst_(inst) {}
  void destroy();  ///< calls the plugin's destroy() once (inside a PluginCallScope); no-op when already destroyed
  PluginInfo info_;
  rkv_plugin_instance* inst_ = nullptr;
};

/// Text of an rkv_status ("invalid argument", ...).
const char* status_name(rkv_status s);

}  // namespace rkv
