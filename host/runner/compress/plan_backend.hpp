// The backend a run plan asks for (model.backend, model.dtype, model.threads; --backend, --dtype and --threads have
// already been applied to the plan by the CLI), checked up front so that a backend that cannot be had stops a command
// before it loads a model or writes anything.
#pragma once
#include <cstdint>

#include "backend/backend.hpp"
#include "runner/plan/config.hpp"

namespace rkv {

/// BackendOptions of `plan`: its dtype, and `threads_override` CPU threads when > 0, else model.threads, bounded to
/// cpu::max_threads() (a warning on stderr says when it was lowered).
BackendOptions plan_backend_options(const RunPlan& plan, int64_t threads_override = 0);

/// check_backend_available() for the plan's backend and `options`; the rkv::InputError says where the setting came
/// from first ("<config> [model]: model.backend = cuda: no CUDA device (...)", or "--backend/--dtype: ...").
void check_plan_backend(const RunPlan& plan, const BackendOptions& options);

}  // namespace rkv
