#include "runner/compress/plan_backend.hpp"

#include <iostream>

#include "core/errors.hpp"

namespace rkv {

BackendOptions plan_backend_options(const RunPlan& plan, int64_t threads_override) {
  BackendOptions o;
  // Never narrowed silently (--threads 4294967297 is not 1): bounded to the CPU backend's maximum, with a warning.
  std::string warning;
  o.threads = bounded_thread_count(threads_override > 0 ? threads_override : plan.threads, &warning);
  if (!warning.empty()) std::cerr << "ripplekv: warning: " << warning << "\n";
  o.dtype = plan.dtype;
  return o;
}

void check_plan_backend(const RunPlan& plan, const BackendOptions& options) {
  try {
    check_backend_available(plan.backend, options);
  } catch (const InputError& e) {
    // Name where the setting came from: the command line, or the config file's [model] section.
    throw InputError((plan.backend_from_command_line ? std::string("--backend/--dtype") : plan.config_path + " [model]") +
                     ": " + e.what());
  }
}

}  // namespace rkv
