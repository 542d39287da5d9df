// Finding and loading backend modules (backend_module.hpp): libripplekv-<kind>.so in the folder beside libripplekv.
#include "backend/backend_module.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/errors.hpp"
#include "ripplekv/build_info.hpp"

namespace rkv {

namespace {

using module_get_fn = const BackendModule*();

/// One load per kind per process: the module, or the error its load gave (asked again, the same error, without
/// another dlopen). Never destroyed: a loaded backend library stays mapped until exit.
struct LoadedModule {
  boost::dll::shared_library library;
  const BackendModule* module = nullptr;
  std::string error;
};

std::mutex& modules_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<std::string, LoadedModule>& modules() {
  static auto* m = new std::map<std::string, LoadedModule>();
  return *m;
}

/// $RIPPLEKV_BACKEND_DIR when set and not empty, else "".
std::string backend_dir_env() {
  const char* env = std::getenv("RIPPLEKV_BACKEND_DIR");
  return env && *env ? std::string(env) : std::string();
}

/// Where backend modules are looked for: $RIPPLEKV_BACKEND_DIR when set and not empty, else the folder
/// libripplekv.so was loaded from (this function's own library).
boost::dll::fs::path module_folder() {
  const std::string env = backend_dir_env();
  if (!env.empty()) return boost::dll::fs::path(env);
  return boost::dll::this_line_location().parent_path();
}

/// Throws InputError unless `path` names a regular file (a link to one is followed, as dlopen does): missing, a
/// folder, a FIFO (dlopen would block on it), a device or a link loop are each named.
void check_module_file(const std::string& kind, const boost::dll::fs::path& path, const std::string& name) {
  const std::string where = backend_dir_env().empty()
                                ? "ripplekv was built without it, or it was not installed beside libripplekv"
                                : "RIPPLEKV_BACKEND_DIR = '" + backend_dir_env() + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      if (!backend_dir_env().empty())
        throw InputError(name + " is missing (" + where + (err == ENOTDIR ? " is not a folder" : "") + ")");
      throw InputError("this build has no " + (kind == "cuda" ? std::string("CUDA") : kind) + " backend (" + name +
                       " is missing: " + where + ")");
    }
    throw InputError(name + ": cannot be read: " + std::strerror(err) + " (" + where + ")");
  }
  if (!S_ISREG(st.st_mode))
    throw InputError(name + " is " + (S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file") +
                     ", not a shared library (" + where + ")");
}

/// Loads `path` and checks its entry point and versions; returns the module or throws InputError naming the file.
LoadedModule load_module_file(const std::string& kind, const boost::dll::fs::path& path) {
  const std::string name = "backend module '" + path.string() + "'";
  check_module_file(kind, path, name);
  boost::system::error_code ec;
  LoadedModule out;
  out.library.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    const char* why = ::dlerror();  // Boost.DLL keeps only an errno; the loader's message names the missing library
    throw InputError(name + ": cannot be loaded: " + (why ? std::string(why) : ec.message()));
  }
  if (!out.library.has(RKV_BACKEND_MODULE_ENTRY))
    throw InputError(name + ": has no entry symbol '" RKV_BACKEND_MODULE_ENTRY "' (not a ripplekv backend module)");
  out.module = out.library.get<module_get_fn>(RKV_BACKEND_MODULE_ENTRY)();
  if (!out.module) throw InputError(name + ": its entry point returned no module");
  if (out.module->interface_version != kBackendModuleInterface)
    throw InputError(name + ": backend module interface " + std::to_string(out.module->interface_version) +
                     ", this libripplekv speaks " + std::to_string(kBackendModuleInterface) + " (rebuild both)");
  if (std::string(out.module->version) != RIPPLEKV_VERSION_STRING)
    throw InputError(name + ": built for ripplekv " + out.module->version + ", this libripplekv is " +
                     RIPPLEKV_VERSION_STRING + " (rebuild both)");
  if (std::string(out.module->kind) != kind)
    throw InputError(name + ": serves the backend '" + out.module->kind + "', not '" + kind + "'");
  return out;
}

}  // namespace

std::string backend_module_file(const std::string& kind) { return "libripplekv-" + kind + ".so"; }

const BackendModule& load_backend_module(const std::string& kind) {
  std::lock_guard<std::mutex> lock(modules_mutex());
  auto it = modules().find(kind);
  if (it == modules().end()) {
    LoadedModule loaded;
    try {
      loaded = load_module_file(kind, module_folder() / backend_module_file(kind));
    } catch (const InputError& e) {
      loaded.error = e.what();
    }
    it = modules().emplace(kind, std::move(loaded)).first;
  }
  if (!it->second.module) throw InputError(it->second.error);
  return *it->second.module;
}

}  // namespace rkv
