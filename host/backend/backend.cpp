// make_backend(): the one place that knows every backend (the runner, C API and CLI see only backend.hpp).
#include "backend/backend.hpp"

#include <unistd.h>

#include <map>
#include <mutex>
#include <utility>

#include "backend/backend_module.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/threads.hpp"
#include "core/errors.hpp"

namespace rkv {

namespace {

struct Override {
  BackendFactory factory;
  std::function<bool()> available;
};

std::mutex& overrides_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, Override>& overrides() {
  static std::map<std::string, Override> m;
  return m;
}

bool find_override(const std::string& kind, Override& out) {
  std::lock_guard<std::mutex> lock(overrides_mutex());
  auto it = overrides().find(kind);
  if (it == overrides().end()) return false;
  out = it->second;
  return true;
}

/// Whether the NVIDIA kernel driver is present, asked without loading any CUDA library: its files in /proc and /dev.
bool nvidia_driver_present() {
  return ::access("/proc/driver/nvidia/version", F_OK) == 0 || ::access("/dev/nvidiactl", F_OK) == 0;
}

/// Why no CUDA backend can be made here, or "" when one can. Loads the CUDA module (libcudart, cuBLAS) only when it
/// must: for "auto" (`probing`) on a machine without the NVIDIA driver the answer needs no CUDA library at all.
std::string cuda_unavailable(bool probing) {
  Override o;
  if (find_override("cuda", o)) return !o.available || o.available() ? "" : "no CUDA device (the registered backend says none)";
  if (probing && !nvidia_driver_present())
    return "no CUDA device (no NVIDIA driver: /proc/driver/nvidia/version and /dev/nvidiactl are absent)";
  const BackendModule* module = nullptr;
  try {
    module = &load_backend_module("cuda");
  } catch (const InputError& e) {
    return e.what();
  }
  if (module->device_count() > 0) return "";
  std::string why = module->unavailable_reason();
  if (!nvidia_driver_present())  // the runtime's own words ("driver version is insufficient") hide the plain cause
    why = "no NVIDIA driver: /proc/driver/nvidia/version and /dev/nvidiactl are absent" + (why.empty() ? "" : "; " + why);
  return "no CUDA device" + (why.empty() ? std::string() : " (" + why + ")");
}

}  // namespace

TensorView::TensorView(void* data, DLDevice device, DLDataType dtype, int32_t ndim, const int64_t* shape,
                       const int64_t* strides) {
  if (ndim < 0 || ndim > 4) throw InputError("TensorView: " + std::to_string(ndim) + " dimensions (at most 4)");
  t_.data = data;
  t_.device = device;
  t_.ndim = ndim;
  t_.dtype = dtype;
  t_.byte_offset = 0;
  for (int32_t i = 0; i < ndim; ++i) {
    shape_[i] = shape[i];
    strides_[i] = strides[i];
  }
}

DLTensor* TensorView::dl() {
  t_.shape = shape_;
  t_.strides = strides_;
  return &t_;
}

void register_backend(const std::string& kind, BackendFactory factory, std::function<bool()> available) {
  std::lock_guard<std::mutex> lock(overrides_mutex());
  if (!factory) {
    overrides().erase(kind);
    return;
  }
  overrides()[kind] = Override{std::move(factory), std::move(available)};
}

std::string resolve_backend_kind(const std::string& kind) {
  if (kind != "auto") return kind;
  return cuda_unavailable(/*probing=*/true).empty() ? "cuda" : "cpu";
}

WeightStorage weights_for_backend(const std::string& kind, WeightStorage requested) {
  return resolve_backend_kind(kind) == "cuda" ? WeightStorage::f32 : requested;
}

int bounded_thread_count(int64_t requested, std::string* warning) {
  return cpu::bounded_thread_count(requested, warning);
}

void check_backend_available(const std::string& kind, const BackendOptions& options) {
  if (kind != "cpu" && kind != "cuda" && kind != "auto")
    throw InputError("model.backend = " + kind + ": unknown backend (expected \"cpu\", \"cuda\" or \"auto\")");
  if (options.dtype != "f32" && options.dtype != "bf16")
    throw InputError("model.dtype = " + options.dtype + ": unknown compute dtype (expected \"f32\" or \"bf16\")");
  if (options.threads < -1)
    throw InputError("threads = " + std::to_string(options.threads) + ": must be >= 0 (0 = every core)");
  const std::string k = resolve_backend_kind(kind);
  if (k == "cuda") {
    const std::string why = cuda_unavailable(/*probing=*/false);
    if (!why.empty()) throw InputError("model.backend = cuda: " + why);
  }
  Override o;
  if (k == "cpu" && !find_override(k, o) && options.dtype != "f32")
    throw InputError("model.dtype = " + options.dtype + ": the cpu backend computes in f32 only (bf16 needs cuda" +
                     (kind == "auto" ? "; model.backend = auto chose cpu: " + cuda_unavailable(true) + ")" : ")"));
}

std::unique_ptr<Backend> make_backend(const std::string& kind, const Model& model, const BackendOptions& options) {
  check_backend_available(kind, options);
  if (options.threads >= 0) cpu::set_num_threads(options.threads);
  const std::string k = resolve_backend_kind(kind);
  Override o;
  if (find_override(k, o)) return o.factory(model, options);
  if (k == "cpu") return std::make_unique<cpu::CpuBackend>(model);
  return load_backend_module("cuda").make_backend(model, options);  // check_backend_available loaded it
}

void check_share_layer(const BackendCache& cache, int64_t layer, int64_t source) {
  const int64_t L = cache.n_layers();
  const std::string what = "share_layer(" + std::to_string(layer) + ", source " + std::to_string(source) + "): ";
  if (layer < 0 || layer >= L || source < 0 || source >= L)
    throw InputError(what + "layers are in [0, " + std::to_string(L) + ")");
  if (source >= layer) throw InputError(what + "the source must be an earlier layer (it runs first in a forward pass)");
  if (cache.shared_source(source) != source)
    throw InputError(what + "the source is itself shared (it reads layer " + std::to_string(cache.shared_source(source)) +
                     "); name that layer");
  if (cache.shared_source(layer) != layer) throw InputError(what + "the layer is already shared");
}

}  // namespace rkv
