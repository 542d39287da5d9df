#include "runner/profile/profile.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.hpp"
#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/folder.hpp"
#include "core/regular_file.hpp"
#include "core/sha256.hpp"
#include "eval/stats.hpp"
#include "plugin/instance.hpp"
#include "plugin/scorer_call.hpp"
#include "plugin/signal_call.hpp"
#include "runner/plan/config_paths.hpp"
#include "runner/profile/damage_signal.hpp"
#include "runner/profile/profiler.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

nlohmann::json params_json(const ParamSet& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : params.values()) std::visit([&, key = k](const auto& x) { j[key] = x; }, v);
  return j;
}

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

std::string default_cache_dir() { return (fs::path(asset_cache_dir()) / "profiles").string(); }

/// Per-layer CIs and the split-half value from per_example.
void add_statistics(SensitivityProfile& p, uint64_t seed, int resamples) {
  const size_t L = p.s.size(), N = p.per_example.size();
  p.ci_low.assign(L, 0.0);
  p.ci_high.assign(L, 0.0);
  for (size_t l = 0; l < L; ++l) {
    std::vector<double> col(N);
    for (size_t i = 0; i < N; ++i) col[i] = p.per_example[i][l];
    const Interval ci = bootstrap_mean_ci(col, seed + l, resamples);
    p.ci_low[l] = ci.low;
    p.ci_high[l] = ci.high;
  }
  p.split_half_spearman = split_half_spearman(p.per_example);
}

std::string backend_kind(const ProfileRequest& r) { return r.backend ? r.backend->kind() : "cpu"; }
std::string backend_dtype(const ProfileRequest& r) { return r.backend ? r.backend->compute_dtype() : "f32"; }

nlohmann::json calibration_json(const ProfileRequest& r) {
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& w : r.examples) windows.push_back({{"file", w.file}, {"offset", w.offset}});
  const int64_t protected_count = static_cast<int64_t>(protected_positions(r.prefix_tokens, r.protect).size());
  return {{"files", r.files},
          {"examples", r.examples.size()},
          {"prefix_tokens", r.prefix_tokens},
          {"window_tokens", r.window_tokens},
          {"seed", r.data_seed},
          {"windows", windows},
          {"scorer", r.scorer_id},
          {"protected", {{"sinks", r.protect.sinks}, {"recent", r.protect.recent}, {"count", protected_count}}},
          {"backend", backend_kind(r)},
          {"dtype", backend_dtype(r)},
          {"weights", weight_storage_name(r.model->weights)}};
}

/// Reads a double array of length n; false (with `why`) when it is not one of finite numbers.
bool read_row(const nlohmann::json& j, size_t n, std::vector<double>& out, const std::string& name, std::string& why) {
  if (!j.is_array() || j.size() != n) {
    why = "\"" + name + "\" is not an array of " + std::to_string(n) + " numbers";
    return false;
  }
  out.resize(n);
  for (size_t k = 0; k < n; ++k) {
    if (!j[k].is_number() || !std::isfinite(j[k].get<double>())) {
      why = "\"" + name + "\"[" + std::to_string(k) + "] is not a finite number";
      return false;
    }
    out[k] = j[k].get<double>();
  }
  return true;
}

/// Loads a cached profile; false with `why` when the file is unusable.
bool load_cached(const std::string& text, const std::string& key, size_t L, size_t N, SensitivityProfile& p,
                 std::string& why) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    why = std::string("not valid JSON (") + e.what() + ")";
    return false;
  }
  try {
    if (!j.is_object() || j.value("cache_key", std::string()) != key) {
      why = "its cache_key does not match";
      return false;
    }
    if (!read_row(j.at("s"), L, p.s, "s", why)) return false;
    const auto& pe = j.at("per_example");
    if (!pe.is_array() || pe.size() != N) {
      why = "\"per_example\" does not have " + std::to_string(N) + " rows";
      return false;
    }
    p.per_example.resize(N);
    for (size_t i = 0; i < N; ++i)
      if (!read_row(pe[i], L, p.per_example[i], "per_example[" + std::to_string(i) + "]", why)) return false;
    if (!j.at("seconds").is_number()) {
      why = "\"seconds\" is not a number";
      return false;
    }
    p.seconds = j.at("seconds").get<double>();
  } catch (const nlohmann::json::exception& e) {
    why = std::string("missing or malformed field (") + e.what() + ")";
    return false;
  }
  return true;
}

/// Why `st` (of the cache folder or a cache file) cannot be trusted: owned by another user or writable by others;
/// "" when it can.
std::string untrusted_because(const struct stat& st) {
  if (st.st_uid != ::geteuid())
    return "it belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "other users can write it (chmod go-w to trust it)";
  return "";
}

/// The profile cache folder `dir` (created when missing), or nullopt with a warning when it cannot be trusted.
std::optional<Folder> open_cache_folder(const std::string& dir, std::vector<std::string>& warnings) {
  try {
    const bool existed = path_kind(dir) != PathKind::missing;
    Folder f = Folder::open(dir, true, "profile cache folder");
    struct stat st {};
    if (!existed) ::fchmod(f.fd(), 0755);  // ours: never group-writable, whatever the umask
    if (::fstat(f.fd(), &st) != 0) throw InputError("profile cache folder '" + dir + "': cannot stat");
    if (const std::string why = untrusted_because(st); !why.empty()) {
      warnings.push_back("not using the profile cache folder '" + dir + "': " + why);
      return std::nullopt;
    }
    return f;
  } catch (const InputError& e) {
    warnings.push_back(std::string("not using the profile cache: ") + e.what());
    return std::nullopt;
  }
}

/// The text of cache file `name` in `cache`, or nullopt: missing (silently), or not a regular file of this user's
/// that no one else can write, or unreadable (each with a warning). Never blocks (a FIFO is refused unopened).
std::optional<std::string> read_cache_file(const Folder& cache, const std::string& name,
                                           std::vector<std::string>& warnings) {
  struct stat st {};
  if (::fstatat(cache.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  const std::string path = cache.path_of(name);
  std::string why = S_ISREG(st.st_mode) ? untrusted_because(st) : "it is not a regular file (a link, FIFO or device)";
  if (why.empty()) {
    try {
      return cache.read(name, "profile cache file", 256u << 20);
    } catch (const InputError& e) {
      why = e.what();
    }
  }
  warnings.push_back("ignoring the profile cache file '" + path + "': " + why + "; recomputing");
  return std::nullopt;
}

}  // namespace

nlohmann::json SensitivityProfile::to_json() const {
  nlohmann::json ci_lo = nlohmann::json::array(), ci_hi = nlohmann::json::array(), sj = nlohmann::json::array();
  for (size_t l = 0; l < s.size(); ++l) {
    sj.push_back(number_or_null(s[l]));
    ci_lo.push_back(number_or_null(l < ci_low.size() ? ci_low[l] : NAN));
    ci_hi.push_back(number_or_null(l < ci_high.size() ? ci_high[l] : NAN));
  }
  nlohmann::json pe = nlohmann::json::array();
  for (const auto& row : per_example) {
    nlohmann::json r = nlohmann::json::array();
    for (double x : row) r.push_back(number_or_null(x));
    pe.push_back(r);
  }
  return {{"model_sha256", model_sha256},
          {"signal", signal},
          {"params", params},
          {"layers", layers},
          {"s", sj},
          {"ci_low", ci_lo},
          {"ci_high", ci_hi},
          {"split_half_spearman", number_or_null(split_half_spearman)},
          {"per_example", pe},
          {"calibration", calibration},
          {"cache_key", cache_key},
          {"seconds", seconds}};
}

std::string profile_cache_key(const ProfileRequest& r) {
  if (!r.model) throw InputError("profile request without a model");
  if (!r.signal.info) throw InputError("profile request without a signal plugin");
  Sha256 h;
  auto line = [&](const std::string& text) {
    h.update(text.data(), text.size());
    h.update("\n", 1);
  };
  line("ripplekv.profile-cache/1");
  line("model_sha256=" + r.model->sha256);
  line("signal=" + r.signal.id);
  line(std::string("signal_version=") + r.signal.info->descriptor->version);
  line("params=" + params_json(r.signal.params).dump());
  line("prefix_tokens=" + std::to_string(r.prefix_tokens));
  line("window_tokens=" + std::to_string(r.window_tokens));
  line("examples=" + std::to_string(r.examples.size()));
  for (const auto& w : r.examples) {
    // Token ids as little-endian int32, each example prefixed by its length.
    std::string bytes = std::to_string(w.tokens.size()) + ":";
    for (int32_t t : w.tokens) {
      const uint32_t u = static_cast<uint32_t>(t);
      for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((u >> (8 * b)) & 0xFF));
    }
    line(bytes);
  }
  std::string prot = "protected=";
  for (int64_t u : protected_positions(r.prefix_tokens, r.protect)) prot += std::to_string(u) + ",";
  line(prot);
  line("backend=" + backend_kind(r));
  line("dtype=" + backend_dtype(r));
  // Weights kept in ggml blocks give other (not bit-identical) profiles than float32 ones. Only added for them, so
  // keys of profiles computed before model.weights existed (float32) stay valid.
  if (r.model->weights != WeightStorage::f32) line(std::string("weights=") + weight_storage_name(r.model->weights));
  // The damage signal's values depend on the scorer it compresses with (only added for it: plugin keys unchanged).
  if (is_damage_signal(r.signal.info)) {
    if (!r.scorer) throw InputError("profile: the damage signal needs the cell's [scorer]");
    line("scorer=" + r.scorer->id);
    line(std::string("scorer_version=") + r.scorer->info->descriptor->version);
    line("scorer_params=" + params_json(r.scorer->params).dump());
  }
  return h.hex_digest();
}

void check_profile_output(const std::string& path, bool force) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // a new file
  if (S_ISDIR(st.st_mode)) throw InputError("profile --out '" + path + "' is a folder; name a file");
  if (force) return;
  if (!S_ISREG(st.st_mode))
    throw InputError("profile --out '" + path + "' is " +
                     (S_ISLNK(st.st_mode) ? std::string("a symbolic link") : describe_special_file(path)) +
                     ", not a regular file; ripplekv never writes through a link or over another kind of file. "
                     "Choose another file, or pass --force to replace it (the link itself, never its target)");
  const nlohmann::json j = nlohmann::json::parse(read_regular_file(path, "profile --out", 256u << 20), nullptr, false);
  if (!j.is_object() || !j.contains("signal") || !j.contains("s") || !j.contains("cache_key"))
    throw InputError("profile --out '" + path + "' exists and is not a ripplekv profile; it would be overwritten. " +
                     "Choose another file, or pass --force");
}

SensitivityProfile compute_profile(const ProfileRequest& r) {
  const CancelScope cancel_scope(r.cancel);  // reading the cache and the texts polls it too (core/cancel.hpp)
  const std::string key = profile_cache_key(r);
  const Model& model = *r.model;
  const int64_t L = model.config.n_layers, N = static_cast<int64_t>(r.examples.size());
  if (N < 1) throw InputError("profile: no calibration examples");
  if (r.signal.info->descriptor->flags & RKV_FLAG_PER_PROMPT)
    throw InputError("signal '" + r.signal.id + "' is a per-prompt signal: it is computed on each prompt a run "
                     "compresses (its allocator's profile), not on calibration windows; use it in `ripplekv run` or "
                     "`generate --compress`");

  SensitivityProfile p;
  p.model_sha256 = model.sha256;
  p.signal = r.signal.id;
  p.signal_version = r.signal.info->descriptor->version;
  p.params = params_json(r.signal.params);
  for (int64_t l = 0; l < L; ++l) p.layers.push_back(l);
  p.calibration = calibration_json(r);
  p.cache_key = key;

  const std::string dir = r.cache_dir.empty() ? default_cache_dir() : r.cache_dir;
  const std::string name = key + ".json";
  const std::optional<Folder> cache =
      r.read_cache || r.write_cache ? open_cache_folder(dir, p.warnings) : std::optional<Folder>();
  p.source = {{"from", "computed"}, {"path", ""}, {"sha256", ""}};
  if (cache && r.read_cache) {
    if (const std::optional<std::string> text = read_cache_file(*cache, name, p.warnings)) {
      std::string why;
      if (load_cached(*text, key, static_cast<size_t>(L), static_cast<size_t>(N), p, why)) {
        p.from_cache = true;
        p.source = {{"from", "cache"}, {"path", cache->path_of(name)}, {"sha256", sha256_hex(text->data(), text->size())}};
        add_statistics(p, r.bootstrap_seed, r.bootstrap_resamples);
        return p;
      }
      p.warnings.push_back("ignoring the profile cache file '" + cache->path_of(name) + "': " + why + "; recomputing");
      p.s.clear();
      p.per_example.clear();
    }
  }

  std::unique_ptr<Backend> own;
  Backend* backend = r.backend;
  if (!backend) {
    BackendOptions o;
    o.threads = r.threads;
    own = make_backend("cpu", model, o);
    backend = own.get();
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (is_damage_signal(r.signal.info)) {
    p.per_example = damage_per_example(*backend, *r.scorer, r.signal.params, r.examples, r.prefix_tokens,
                                       [&](int64_t i) {
                                         if (r.on_example) r.on_example(i + 1, N);
                                       });
    p.s.assign(static_cast<size_t>(L), 0.0);
    for (const auto& row : p.per_example)
      for (int64_t l = 0; l < L; ++l) p.s[static_cast<size_t>(l)] += row[static_cast<size_t>(l)] / static_cast<double>(N);
  } else {
    std::vector<std::vector<int32_t>> tokens;
    tokens.reserve(static_cast<size_t>(N));
    for (const auto& w : r.examples) tokens.push_back(w.tokens);
    Profiler profiler(*backend, std::move(tokens), r.prefix_tokens, r.window_tokens, r.protect);
    std::set<int64_t> begun;  // examples the signal has prepared: one is done when it moves on to another
    int64_t last = -1;
    profiler.on_prepare_example = [&](int64_t i) {
      if (i == last) return;
      if (last >= 0 && r.on_example && !begun.count(i)) r.on_example(static_cast<int64_t>(begun.size()), N);
      begun.insert(i);
      last = i;
    };
    HostServices host;
    host.watch(r.cancel);
    host.set_service(RKV_SERVICE_PROFILER_V1, profiler.abi());
    const PluginInstance inst = PluginInstance::create(*r.signal.info, r.signal.params, host);
    SignalOutput out = run_signal(inst, L, N, profiler.abi());
    if (r.on_example) r.on_example(N, N);
    p.s = out.s;
    p.per_example = out.per_example;
    for (auto& w : out.warnings) p.warnings.push_back(w);
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A profile computed from weights that changed meanwhile is neither cached nor returned (model/model.hpp).
  model.check_unchanged("computing the " + r.signal.id + " profile");
  add_statistics(p, r.bootstrap_seed, r.bootstrap_resamples);

  if (r.write_cache && cache) {
    try {
      const std::string text = p.to_json().dump(2) + "\n";
      cache->write_atomically(name, text);
      p.source = {{"from", "computed"}, {"path", cache->path_of(name)}, {"sha256", sha256_hex(text.data(), text.size())}};
    } catch (const std::exception& e) {
      p.warnings.push_back(std::string("could not store the profile in the cache: ") + e.what());
    }
  }
  return p;
}

ProfileRequest make_profile_request(const RunPlan& plan, const CellConfig& cell, const Model& model,
                                    const Tokenizer& tokenizer, const std::string& signal_override) {
  ProfileRequest r;
  r.model = &model;
  if (!signal_override.empty()) {
    if (!plan.registry) throw InputError("profile: the run plan has no plugin registry");
    const PluginInfo& info = resolve_plugin_or_builtin(*plan.registry, signal_override, RKV_KIND_SIGNAL);
    r.signal.id = info.id();
    r.signal.info = &info;
    if (cell.signal && cell.signal->id == info.id())
      r.signal.params = cell.signal->params;
    else
      r.signal.params = ParamSet::validate(*info.descriptor, {});
  } else {
    if (!cell.signal)
      throw InputError(plan.config_path + ": no [signal] section with plugin = \"id\" (or give a signal id)");
    r.signal = *cell.signal;
  }
  const DataConfig& cal = plan.calibration;
  r.prefix_tokens = cal.prefix_tokens;
  r.window_tokens = cal.window_tokens;
  r.files = cal.files;
  r.data_seed = cal.seed;
  r.threads = static_cast<int>(plan.threads);
  r.examples = draw_text_windows(tokenizer, cal.files, cal.examples, cal.prefix_tokens + cal.window_tokens, cal.seed);
  if (cell.scorer) {
    HostServices host;
    const PluginInstance scorer = PluginInstance::create(*cell.scorer->info, cell.scorer->params, host);
    rkv_attention_shape shape{};
    shape.struct_size = sizeof shape;
    shape.n_layers = model.config.n_layers;
    shape.n_heads = model.config.n_heads;
    shape.n_kv_heads = model.config.n_kv_heads;
    shape.head_dim = model.config.head_dim;
    const ScorerRequirements req = query_scorer_requirements(scorer, shape);
    r.protect = req.protected_spec();
    r.scorer_id = cell.scorer->id;
    r.scorer = cell.scorer;
  }
  return r;
}

}  // namespace rkv
