#include "plugin/instance.hpp"

#include <cstring>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "plugin/call_guard.hpp"

namespace rkv {

const char* status_name(rkv_status s) {
  switch (s) {
    case RKV_OK: return "ok";
    case RKV_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case RKV_ERROR_INTERNAL: return "internal error";
    case RKV_ERROR_CANCELLED: return "cancelled";
    case RKV_ERROR_UNSUPPORTED: return "unsupported";
    case RKV_ERROR_OUT_OF_MEMORY: return "out of memory";
  }
  return "unknown status";
}

DiagnosticLog::DiagnosticLog() : abi_{sizeof(rkv_diagnostics), this, &DiagnosticLog::report} {}

void DiagnosticLog::report(void* ctx, rkv_diag_level level, const char* message) {
  auto* self = static_cast<DiagnosticLog*>(ctx);
  const std::string m = message ? message : "";
  if (level == RKV_DIAG_ERROR) self->errors_.push_back(m);
  else if (level == RKV_DIAG_WARNING) self->warnings_.push_back(m);
}

std::string DiagnosticLog::error_text() const {
  if (errors_.empty()) return "no message";
  std::string s;
  for (const auto& e : errors_) s += (s.empty() ? "" : "; ") + e;
  return s;
}

HostServices::HostServices()
    : abi_{sizeof(rkv_host), RKV_ABI_VERSION_MAJOR, RKV_ABI_VERSION_MINOR, this, &HostServices::is_cancelled,
           &HostServices::get_service} {}

int32_t HostServices::is_cancelled(void* ctx) { return static_cast<HostServices*>(ctx)->cancelled() ? 1 : 0; }

const void* HostServices::get_service(void* ctx, const char* id) {
  auto* self = static_cast<HostServices*>(ctx);
  if (!id) return nullptr;
  for (const auto& [name, table] : self->services_)
    if (name == id) return table;
  return nullptr;
}

void HostServices::set_service(const std::string& id, const void* table) {
  for (auto& s : services_)
    if (s.first == id) {
      s.second = table;
      return;
    }
  services_.emplace_back(id, table);
}

PluginInstance PluginInstance::create(const PluginInfo& info, const ParamSet& params, const HostServices& host) {
  DiagnosticLog log;
  rkv_plugin_instance* inst = nullptr;
  if (!info.library)  // a host builtin such as the damage signal (runner/profile/damage_signal.hpp) is never instantiated
    throw InputError("plugin '" + info.id() + "' is built into the host and has no plugin instance");
  throw_if_cancelled();
  const rkv_status s = [&] {
    const PluginCallScope in_flight(info.id(), "create");
    return info.library->abi->create(info.descriptor->id, host.abi(), params.abi(), log.abi(), &inst);
  }();
  if (s != RKV_OK)
    throw InputError("plugin '" + info.id() + "': create failed (" + status_name(s) + "): " + log.error_text());
  if (!inst) throw InputError("plugin '" + info.id() + "': create returned RKV_OK but no instance");
  if (!RKV_HAS_FIELD(inst, rkv_plugin_instance, destroy) || !inst->get_interface || !inst->destroy)
    throw InputError("plugin '" + info.id() + "': instance struct lacks get_interface/destroy");
  return PluginInstance(info, inst);
}

PluginInstance::PluginInstance(PluginInstance&& o) noexcept : info_(o.info_), inst_(o.inst_) { o.inst_ = nullptr; }

PluginInstance& PluginInstance::operator=(PluginInstance&& o) noexcept {
  if (this != &o) {
    destroy();
    info_ = o.info_;
    inst_ = o.inst_;
    o.inst_ = nullptr;
  }
  return *this;
}

PluginInstance::~PluginInstance() { destroy(); }

void PluginInstance::destroy() {
  if (!inst_) return;
  const PluginCallScope in_flight(id(), "destroy");
  inst_->destroy(inst_);
  inst_ = nullptr;
}

const void* PluginInstance::interface(const char* interface_id) const {
  const void* vt = nullptr;
  {
    const PluginCallScope in_flight(id(), "get_interface");
    vt = inst_->get_interface(inst_, interface_id);
  }
  if (!vt)
    throw InputError("plugin '" + id() + "' does not serve interface '" + interface_id + "' (its kind is " +
                     plugin_kind_name(info_.descriptor->kind) + ")");
  return vt;
}

bool PluginInstance::serves(const char* interface_id) const {
  const PluginCallScope in_flight(id(), "get_interface");
  return inst_->get_interface(inst_, interface_id) != nullptr;
}

}  // namespace rkv
