#include "plugin/registry.hpp"

#include <dlfcn.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>

#include "core/errors.hpp"
#include "plugin/params.hpp"

namespace fs = std::filesystem;

namespace rkv {

const char* plugin_kind_name(rkv_plugin_kind kind) {
  switch (kind) {
    case RKV_KIND_SIGNAL: return "signal";
    case RKV_KIND_SCORER: return "scorer";
    case RKV_KIND_ALLOCATOR: return "allocator";
  }
  return "unknown";
}

namespace {

/// Loaded libraries live for the process lifetime: this map (one handle per path) is never destroyed. Loading a path
/// again reuses its handle, so repeated discovery (every config validation) does not grow the process.
std::map<std::string, boost::dll::shared_library>& process_libraries() {
  static auto* libs = new std::map<std::string, boost::dll::shared_library>();
  return *libs;
}
std::mutex& process_libraries_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

/// Loads `path` (rtld_now) and returns its entry point; throws InputError naming the path.
rkv_plugin_library_get_fn load_entry(const std::string& path) {
  std::lock_guard<std::mutex> lock(process_libraries_mutex());
  auto it = process_libraries().find(path);
  if (it == process_libraries().end()) {
    boost::dll::shared_library lib;
    boost::system::error_code ec;
    lib.load(boost::dll::fs::path(path), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
    if (ec) {
      // Boost.DLL reports only an errno ("Bad file descriptor"); the dynamic loader's own message says why
      // ("invalid ELF header", a missing dependency, an undefined symbol). dlerror() is per thread in glibc.
      const char* why = ::dlerror();
      throw InputError("plugin library '" + path + "': cannot be loaded: " + (why ? std::string(why) : ec.message()));
    }
    if (!lib.has(RKV_PLUGIN_ENTRY_SYMBOL))
      throw InputError("plugin library '" + path + "': has no entry symbol '" RKV_PLUGIN_ENTRY_SYMBOL
                       "' (is it a ripplekv plugin built with RKV_PLUGIN / RKV_PLUGIN_LIBRARY?)");
    it = process_libraries().emplace(path, std::move(lib)).first;
  }
  return &it->second.get<const rkv_plugin_library*(uint32_t, uint32_t)>(RKV_PLUGIN_ENTRY_SYMBOL);
}

void add_library_files(const std::string& entry, std::vector<std::string>& files) {
  std::error_code ec;
  const fs::path p(entry);
  if (fs::is_regular_file(p, ec)) {
    files.push_back(fs::weakly_canonical(p, ec).string());
    return;
  }
  if (!fs::is_directory(p, ec)) return;  // a missing search folder is not an error
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".so") found.push_back(fs::weakly_canonical(e.path(), ec).string());
  std::sort(found.begin(), found.end());
  files.insert(files.end(), found.begin(), found.end());
}

/// Copies the first min(src_size, sizeof(T)) bytes of `src` into a zeroed T whose struct_size is the host's.
template <typename T>
T copy_within_struct_size(const T* src) {
  T out;
  std::memset(&out, 0, sizeof out);
  const size_t n = std::min<size_t>(src->struct_size, sizeof(T));
  std::memcpy(&out, src, n);
  out.struct_size = sizeof(T);
  return out;
}

std::unique_ptr<NormalizedDescriptor> normalize(const rkv_plugin_descriptor* d, const std::string& path) {
  auto n = std::make_unique<NormalizedDescriptor>();
  n->descriptor = copy_within_struct_size(d);
  if (n->descriptor.params) {
    for (const rkv_param_spec* const* p = n->descriptor.params; *p; ++p) {
      if ((*p)->struct_size < offsetof(rkv_param_spec, doc) + sizeof(void*) || !(*p)->name)
        throw InputError("plugin library '" + path + "': plugin '" + d->id + "' has a malformed param spec");
      n->specs.push_back(copy_within_struct_size(*p));
      // A spec that could never validate its own default (NaN, min > max, default out of range, a name that is no
      // TOML key) is refused here, at load, so `plugins check` and every config see it (plugin/params.hpp).
      const std::string problem = param_spec_problem(n->specs.back());
      if (!problem.empty())
        throw InputError("plugin library '" + path + "': plugin '" + d->id + "', " + problem);
      for (size_t i = 0; i + 1 < n->specs.size(); ++i)
        if (std::strcmp(n->specs[i].name, (*p)->name) == 0)
          throw InputError("plugin library '" + path + "': plugin '" + d->id + "', parameter '" + (*p)->name +
                           "': name is declared twice");
    }
  }
  for (auto& s : n->specs) n->spec_ptrs.push_back(&s);
  n->spec_ptrs.push_back(nullptr);
  n->descriptor.params = n->spec_ptrs.data();
  return n;
}

}  // namespace

std::vector<std::string> default_plugin_search_path() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("RIPPLEKV_PLUGIN_PATH"); env && *env) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) out.push_back(item);
  }
  // The folder beside this library: <libdir>/ripplekv/plugins.
  const fs::path self = boost::dll::this_line_location().string();
  out.push_back((self.parent_path() / "ripplekv" / "plugins").string());
  return out;
}

PluginRegistry PluginRegistry::discover(const std::vector<std::string>& extra_paths) {
  std::vector<std::string> search = extra_paths;
  for (auto& p : default_plugin_search_path()) search.push_back(p);
  std::vector<std::string> files;
  for (const auto& entry : search) add_library_files(entry, files);
  PluginRegistry reg;
  std::vector<std::string> seen;
  for (const auto& f : files) {
    if (std::find(seen.begin(), seen.end(), f) != seen.end()) continue;  // the same file reached twice
    seen.push_back(f);
    reg.load_library(f);
  }
  return reg;
}

void PluginRegistry::load_library(const std::string& path) {
  rkv_plugin_library_get_fn entry = load_entry(path);
  const rkv_plugin_library* abi = entry ? entry(RKV_ABI_VERSION_MAJOR, RKV_ABI_VERSION_MINOR) : nullptr;
  if (!abi) throw InputError("plugin library '" + path + "': " RKV_PLUGIN_ENTRY_SYMBOL " returned NULL");
  if (!RKV_HAS_FIELD(abi, rkv_plugin_library, abi_minor))
    throw InputError("plugin library '" + path + "': library struct too small (struct_size " +
                     std::to_string(abi->struct_size) + ")");
  if (abi->abi_major != RKV_ABI_VERSION_MAJOR) {
    throw InputError("plugin library '" + path + "': built for plugin ABI " + std::to_string(abi->abi_major) + "." +
                     std::to_string(abi->abi_minor) + ", but this host speaks ABI " +
                     std::to_string(RKV_ABI_VERSION_MAJOR) + "." + std::to_string(RKV_ABI_VERSION_MINOR) +
                     " (major versions must match; rebuild the plugin against this ripplekv)");
  }
  if (!RKV_HAS_FIELD(abi, rkv_plugin_library, create) || !abi->descriptor_count || !abi->descriptor_at || !abi->create)
    throw InputError("plugin library '" + path + "': library struct lacks descriptor_count/descriptor_at/create");

  auto lib = std::make_unique<PluginLibrary>();
  lib->path = path;
  lib->abi = abi;
  const uint32_t n = abi->descriptor_count();
  std::vector<PluginInfo> added;
  for (uint32_t i = 0; i < n; ++i) {
    const rkv_plugin_descriptor* d = abi->descriptor_at(i);
    if (!d || !RKV_HAS_FIELD(d, rkv_plugin_descriptor, description) || !d->id || !d->version)
      throw InputError("plugin library '" + path + "': descriptor " + std::to_string(i) + " is missing or incomplete");
    if (d->id[0] == '\0')
      throw InputError("plugin library '" + path + "': descriptor " + std::to_string(i) + " has an empty id");
    if (d->kind != RKV_KIND_SIGNAL && d->kind != RKV_KIND_SCORER && d->kind != RKV_KIND_ALLOCATOR)
      throw InputError("plugin library '" + path + "': plugin '" + d->id + "' has unknown kind " + std::to_string(d->kind));
    for (const auto& p : plugins_)
      if (p.id() == d->id)
        throw InputError("plugin id '" + std::string(d->id) + "' is claimed by two libraries: '" + p.library->path +
                         "' and '" + path + "'");
    for (const auto& p : added)
      if (p.id() == d->id)
        throw InputError("plugin id '" + std::string(d->id) + "' appears twice in library '" + path + "'");
    lib->descriptors.push_back(normalize(d, path));
    added.push_back(PluginInfo{&lib->descriptors.back()->descriptor, lib.get()});
  }
  plugins_.insert(plugins_.end(), added.begin(), added.end());
  libraries_.push_back(std::move(lib));
}

std::string short_id(const std::string& id) {
  const auto dot = id.rfind('.');
  return dot == std::string::npos ? id : id.substr(dot + 1);
}

const PluginInfo& PluginRegistry::resolve(const std::string& name, rkv_plugin_kind kind) const {
  const PluginInfo* exact = nullptr;
  std::vector<const PluginInfo*> by_short;
  std::vector<std::string> known;
  for (const auto& p : plugins_) {
    if (kind && p.descriptor->kind != kind) continue;
    known.push_back(p.id());
    const std::string id = p.id();
    if (id == name) exact = &p;
    if (short_id(id) == name) by_short.push_back(&p);
  }
  if (exact) return *exact;
  if (by_short.size() == 1) return *by_short[0];
  const std::string what = kind ? std::string(plugin_kind_name(kind)) + " plugin" : std::string("plugin");
  if (by_short.size() > 1) {
    std::string ids;
    for (auto* p : by_short) ids += (ids.empty() ? "" : ", ") + p->id();
    throw InputError(what + " '" + name + "' is ambiguous; give the full id: " + ids);
  }
  std::string msg = "no " + what + " '" + name + "'";
  if (known.empty()) {
    msg += "; no plugins of that kind are loaded (check RIPPLEKV_PLUGIN_PATH and plugin_paths)";
  } else {
    std::vector<std::string> candidates = known;
    for (const auto& k : known) candidates.push_back(short_id(k));
    std::string list;
    for (auto& k : known) list += (list.empty() ? "" : ", ") + k;
    msg += "; known: " + list + "; did you mean '" + closest_match(name, candidates) + "'?";
  }
  throw InputError(msg);
}

}  // namespace rkv
