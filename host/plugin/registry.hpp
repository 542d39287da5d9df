// The plugin registry: finds plugin libraries, loads them with Boost.DLL (rtld_now, never unloaded), negotiates the
// ABI version and indexes their descriptors by id (docs/ARCHITECTURE.md "Plugin ABI").
//
// Search path, in order: the config's `plugin_paths`, then $RIPPLEKV_PLUGIN_PATH (':'-separated), then the plugin
// folder beside libripplekv (build/lib/ripplekv/plugins in the build tree, <prefix>/lib/ripplekv/plugins installed).
// Every `*.so` file in those folders is loaded; a path may also name a single library file.
//
// Thread rules: a PluginRegistry is built on one thread; after that its const methods are thread-safe. Libraries
// stay loaded for the life of the process (no unload while a CUDA context may live), even after the registry dies.
#pragma once
#include <ripplekv/plugin.h>

#include <memory>
#include <string>
#include <vector>

namespace rkv {

/// A descriptor copied into host-owned, full-size structs: fields beyond the plugin's struct_size read as zero, so the
/// rest of the host reads every field without checking struct_size again.
struct NormalizedDescriptor {
  rkv_plugin_descriptor descriptor{};
  std::vector<rkv_param_spec> specs;
  std::vector<const rkv_param_spec*> spec_ptrs;  ///< NULL-terminated, points into `specs`
};

/// One loaded plugin library.
struct PluginLibrary {
  std::string path;                         ///< canonical path of the .so
  const rkv_plugin_library* abi = nullptr;  ///< what its entry point returned
  std::vector<std::unique_ptr<NormalizedDescriptor>> descriptors;
};

/// One plugin: a descriptor and the library that serves it.
struct PluginInfo {
  const rkv_plugin_descriptor* descriptor = nullptr;
  const PluginLibrary* library = nullptr;
  std::string id() const { return descriptor->id; }
};

/// Kind names as the CLI and JSON show them: "signal", "scorer", "allocator".
const char* plugin_kind_name(rkv_plugin_kind kind);

/// The default search path: $RIPPLEKV_PLUGIN_PATH entries, then the plugin folder beside libripplekv.
std::vector<std::string> default_plugin_search_path();

class PluginRegistry {
 public:
  /// Loads every library found in `extra_paths` (config plugin_paths) followed by default_plugin_search_path().
  /// Throws rkv::InputError for a library that cannot be loaded (no entry symbol, NULL library, ABI major mismatch)
  /// or when two libraries claim the same id (the message names both paths).
  static PluginRegistry discover(const std::vector<std::string>& extra_paths = {});

  /// Loads one library file and adds its plugins. Errors as discover().
  void load_library(const std::string& path);

  const std::vector<PluginInfo>& plugins() const { return plugins_; }

  /// Finds a plugin by full id, or by its last dot-separated component when that is unambiguous. When `kind` is
  /// nonzero the plugin must be of that kind. Throws rkv::InputError naming the id, the known ids of that kind and
  /// the closest match.
  const PluginInfo& resolve(const std::string& id_or_short, rkv_plugin_kind kind = 0) const;

 private:
  std::vector<std::unique_ptr<PluginLibrary>> libraries_;
  std::vector<PluginInfo> plugins_;
};

/// The short id of a plugin id: its last dot-separated component ("org.ripplekv.scorer.snapkv" -> "snapkv"), the
/// whole id when it has no dot. PluginRegistry::resolve accepts it when it is unambiguous. Thread-safe.
std::string short_id(const std::string& id);

}  // namespace rkv
