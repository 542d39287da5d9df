// Sensitivity profiles: run a signal plugin over the calibration set through the host's profiler service, add the
// statistics a reader needs, and cache the result (docs/ARCHITECTURE.md "perturbation_kl", "Plugin ABI": the profile cache key).
//
// compute_profile() gives, per layer l (all L layers of the model):
//   s_l                     what the signal returned (normally mean_i d_{i,l})
//   [ci_low_l, ci_high_l]   95% percentile-bootstrap CI of mean_i d_{i,l} over the N calibration examples
//                           (eval/stats.hpp bootstrap_mean_ci, seeded: same inputs give the same interval)
//   split_half_spearman     Spearman rho between the per-layer means of examples [0, N/2) and [N/2, N) (NaN, written
//                           as null, when N < 2 or a half is constant)
//   per_example             d_{i,l} [N][L]
//
// Cache: <cache_dir>/<key>.json (default cache_dir: <asset cache>/profiles), key = sha256 of the model's sha256, the
// signal id, version and params, the calibration token ids with their prefix/window split, the base scorer's protected
// positions, the backend's kind and compute dtype ("cpu"/"f32" unless the request names a backend; profile_cache_key()),
// and for the builtin damage signal the scorer's id, version and params. Files are written atomically (a temporary
// file in the same folder, then rename). A cache file that cannot be read, is not JSON, carries another key, or has the
// wrong shape or non-finite values is ignored with a warning and recomputed. The CIs and split-half value of a cache
// hit are recomputed from its per-example values with the request's bootstrap settings.
//
// A cache is only as trustworthy as the folder it lives in: the cache folder is opened once without following a link
// (core/folder.hpp) and is used (read and written) only when it is owned by this process's user and writable by no
// one else; a cache file only when it is a regular file of this user's that no one else can write (never a link, a
// FIFO, which would block the run, or a device). Anything else is skipped with a warning (in
// SensitivityProfile::warnings, which `profile`, `run` and `analyze` print) and the profile computed. Where a profile
// came from (computed, or the cache file) and the sha256 of its JSON text are in SensitivityProfile::source, which a
// run records in its manifest.
//
// Thread rules: compute_profile uses the request's backend (or makes a CPU backend with the request's thread count)
// and must not run concurrently with other work on that backend. Everything else here is pure.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/selection.hpp"
#include "model/model.hpp"
#include "runner/plan/run_plan.hpp"
#include "runner/tasks/text_windows.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

/// Everything a profile depends on.
struct ProfileRequest {
  const Model* model = nullptr;      ///< must outlive the call
  Backend* backend = nullptr;        ///< the backend to profile on (its model must be *model); null: a CPU backend
  PluginChoice signal;               ///< the signal plugin and its validated params (its registry must be alive)
  std::vector<TextWindow> examples;  ///< N calibration examples of prefix_tokens + window_tokens ids each
  int64_t prefix_tokens = 0;         ///< P
  int64_t window_tokens = 0;         ///< n_w
  ProtectedSpec protect;             ///< the base scorer's protected positions (never perturbed)
  std::string scorer_id;             ///< the base scorer (for the record; "" for none)
  /// The base scorer with its params: the builtin damage signal (runner/profile/damage_signal.hpp) compresses with it, and
  /// then its id, version and params are part of the cache key. Required for that signal, unused by plugins.
  std::optional<PluginChoice> scorer;
  std::vector<std::string> files;    ///< calibration text files (for the record)
  uint64_t data_seed = 0;            ///< the seed the windows were drawn with (for the record)
  int threads = 0;                   ///< CPU threads of the CPU backend made when `backend` is null (0: all cores)
  bool read_cache = true;            ///< use a cached profile with the same key when there is a valid one
  bool write_cache = true;           ///< store a computed profile in the cache
  std::string cache_dir;             ///< "" : <asset_cache_dir()>/profiles
  uint64_t bootstrap_seed = 0;       ///< seed of the per-layer bootstrap CIs
  int bootstrap_resamples = 2000;    ///< resamples of the per-layer bootstrap CIs
  /// Polled by the signal through the host's is_cancelled() (may be null); must outlive the call.
  const std::atomic<bool>* cancel = nullptr;
  /// Called on the computing thread as calibration examples finish: (done, N), ending with (N, N); not called for a
  /// profile read from the cache. A plugin signal's example counts as done when it prepares the next one (the
  /// profiler sees no other end). May be empty.
  std::function<void(int64_t done, int64_t total)> on_example;
};

/// A computed (or cached) profile.
struct SensitivityProfile {
  std::string model_sha256;
  std::string signal;          ///< plugin id
  std::string signal_version;  ///< plugin version
  nlohmann::json params;       ///< {name: value} of every signal param
  std::vector<int64_t> layers;  ///< 0 .. L-1
  std::vector<double> s, ci_low, ci_high;  ///< [L]
  double split_half_spearman = 0;          ///< NaN when undefined
  std::vector<std::vector<double>> per_example;  ///< [N][L]
  nlohmann::json calibration;  ///< files, examples, prefix/window tokens, seed, windows (file, offset), scorer, ...
  std::string cache_key;
  double seconds = 0;          ///< wall time the signal took when the profile was computed (kept on cache hits)
  bool from_cache = false;     ///< true when read from the cache by this call
  std::vector<std::string> warnings;  ///< the plugin's warnings and cache problems
  /// Provenance: {"from": "cache" | "computed", "path": the cache file read or written ("" when none), "sha256": of
  /// the JSON text read from, or written to, the cache ("" when the cache was not written)}.
  nlohmann::json source;

  /// {"model_sha256", "signal", "params", "layers", "s", "ci_low", "ci_high", "split_half_spearman", "per_example",
  ///  "calibration", "cache_key", "seconds"}; NaN is written as null. `allocate --profile` reads "s".
  nlohmann::json to_json() const;
};

/// The cache key of a request (64 hex characters; see the top of this file). Throws rkv::InputError when the request
/// has no model or signal.
std::string profile_cache_key(const ProfileRequest& request);

/// Computes the profile of `request` (or reads it from the cache). Throws rkv::InputError for an invalid request
/// (no examples, examples of the wrong length, ...) or when the signal fails (naming it); rkv::Cancelled when cancelled.
SensitivityProfile compute_profile(const ProfileRequest& request);

/// Checks that `ripplekv profile --out` may write `path`: missing, or a regular file holding a ripplekv profile (a JSON
/// object with "signal", "s" and "cache_key"). A link, FIFO, device or folder there, or a file of anything else, is
/// rkv::InputError naming it unless `force` (a folder always: nothing is written into or through it; with `force` a
/// link or special file is replaced by the rename, never written through). Reads at most 256 MiB; never blocks.
void check_profile_output(const std::string& path, bool force);

/// Builds the request a run or `ripplekv profile` makes for `cell`: the cell's signal (or `signal_override`, an id or
/// short id of a signal plugin, when not empty) with its params, N windows of P + n_w tokens drawn from the
/// calibration files with the calibration seed (text_windows.hpp), and the protected positions the cell's scorer
/// declares for this model (sinks, recent). Threads from the plan. Throws rkv::InputError when the cell has no signal
/// and no override is given, or as draw_text_windows / the scorer's requirements do.
ProfileRequest make_profile_request(const RunPlan& plan, const CellConfig& cell, const Model& model,
                                    const Tokenizer& tokenizer, const std::string& signal_override = "");

}  // namespace rkv
