// Backends built as loadable modules: the contract between libripplekv and a backend library it dlopens.
//
// The CUDA backend is not linked into libripplekv: it is libripplekv-cuda.so, built beside libripplekv.so (build/lib,
// <prefix>/<libdir> after install) and loaded the first time a config, flag or API call asks for `cuda` -- or `auto`
// on a machine with an NVIDIA driver -- so a CPU-only process never maps libcudart or cuBLAS (issue 36; ggml's
// GGML_BACKEND_DL registry is the model: one shared library per backend, found beside the core library, registered
// through the one factory, make_backend()).
//
// Unlike plugins (abi/ripplekv/plugin.h, a stable C ABI for third parties) a backend module is part of one ripplekv
// build: it links libripplekv and speaks C++ (Model, Backend, exceptions) across the boundary. The host refuses a
// module whose interface version or ripplekv version differs from its own, naming the file.
//
// Thread rules: load_backend_module() is thread-safe (one load per process, under a mutex); the module's functions are
// as thread-safe as the backend they wrap (device_count and unavailable_reason are reentrant; make_backend as
// make_backend()).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.hpp"

namespace rkv {

/// Bumped whenever BackendModule or anything it passes (Backend, Model, BackendOptions) changes layout or meaning.
inline constexpr uint32_t kBackendModuleInterface = 2;  // 2: Backend::clone_selected, truncate, value_output_norms

/// What a backend module gives the host. Static storage in the module; valid while the module is loaded (for the rest
/// of the process: modules are never unloaded).
struct BackendModule {
  uint32_t interface_version;  ///< kBackendModuleInterface of the module's build
  const char* kind;            ///< the backend kind it serves ("cuda")
  const char* version;         ///< RIPPLEKV_VERSION_STRING of the module's build
  /// Usable devices; 0 (never an exception) when the driver, the device or the runtime is missing.
  int (*device_count)() noexcept;
  /// Why device_count() is 0, in words, or "" when a device is present.
  std::string (*unavailable_reason)();
  /// The backend for `model` (which must outlive it); throws as make_backend() documents.
  std::unique_ptr<Backend> (*make_backend)(const Model& model, const BackendOptions& options);
};

/// The file name of backend `kind`'s module: "libripplekv-<kind>.so".
std::string backend_module_file(const std::string& kind);

/// The module of backend `kind`, loaded from $RIPPLEKV_BACKEND_DIR when that is set and not empty, else from the folder
/// that holds libripplekv (once per process; later calls return the same module or throw the same error). Throws rkv::InputError naming the file when it is missing ("this build has no <kind> backend"),
/// cannot be loaded (the dynamic loader's reason: a missing libcudart, an undefined symbol), has no entry point, or
/// was built for another interface or ripplekv version. The returned module is never unloaded.
const BackendModule& load_backend_module(const std::string& kind);

}  // namespace rkv

/// The entry point every backend module exports: `extern "C" const rkv::BackendModule* rkv_backend_module_get()`.
#define RKV_BACKEND_MODULE_ENTRY "rkv_backend_module_get"
