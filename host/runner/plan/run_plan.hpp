// The validated plan of a run: the shared (non-swept) settings and the cells of the sweep, each with its effective
// configuration. Plain data, filled by runner/plan/config.hpp's loaders; every value is checked there.
//
// Thread rules: plain data (a RunPlan is read-only once built and may be shared; its registry is thread-safe).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cache/codec.hpp"
#include "model/quant_matrix.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "runner/plan/decode_spec.hpp"
#include "runner/plan/report_baseline.hpp"
#include "runner/plan/joint_spec.hpp"
#include "runner/plan/share_spec.hpp"
#include "runner/plan/task_settings.hpp"

namespace rkv {

struct DataConfig {
  std::vector<std::string> files;  ///< resolved paths
  int64_t examples = 8;
  int64_t prefix_tokens = 1024;
  int64_t window_tokens = 32;
  uint64_t seed = 0;
};

/// One plugin as a cell uses it: resolved id and validated params.
struct PluginChoice {
  std::string id;
  const PluginInfo* info = nullptr;
  ParamSet params;
  /// [allocator] heads = "<id>": the per-head allocator (rkv.allocator/2) that splits each layer's budget over its
  /// KV heads after this (layer) allocator; null when absent or "none" (and for other kinds).
  std::shared_ptr<PluginChoice> heads;

  /// "<id>{<params>}": equal keys name the same plugin with the same params (one instance serves both; their scores
  /// and profiles are the same).
  std::string key() const { return id + "{" + params.to_string() + "}"; }
};

/// One entry of [[scorer.route]] (runner/plan/scorer_route.hpp): the scorer, with its own params, that ranks the positions
/// of `layers` (model layer indices, ascending, each at most once across a route).
struct RouteEntry {
  std::vector<int64_t> layers;
  PluginChoice scorer;
  std::string user_params;  ///< the params the entry set itself, "k=v,..." in key order ("" when none): for labels
};

/// The effective configuration of one ablation cell.
struct CellConfig {
  std::optional<PluginChoice> signal;  ///< the configured signal (may be absent when the allocator needs no profile)
  bool uses_profile = false;           ///< the allocator sets RKV_FLAG_NEEDS_PROFILE (only then the signal matters)
  /// The profile the cell reads comes from a per-prompt signal (RKV_FLAG_PER_PROMPT, rkv.prompt_signal/1): computed
  /// on each prompt from the shared prefill's statistics, not once on calibration windows. Only with uses_profile.
  bool per_prompt_signal = false;
  std::optional<PluginChoice> scorer;  ///< absent for the full-cache cell
  /// [[scorer.route]]: the scorers of the routed layers (runner/plan/scorer_route.hpp); layers no entry names use `scorer`.
  /// Empty: every layer uses `scorer` (a homogeneous cell).
  std::vector<RouteEntry> route;
  std::optional<PluginChoice> allocator;
  std::optional<double> budget_fraction;
  std::optional<int64_t> budget_tokens;
  /// budget.bytes_fraction: the kept cache's bytes as a fraction of the full float32 cache's; the run turns it into
  /// a token fraction for the cell's codec (runner/compress/budgets.hpp token_fraction)
  std::optional<double> budget_bytes_fraction;
  DecodeSpec decode;      ///< [compression.decode]: the decode policy (the full-cache cell keeps every entry)
  CodecSpec codec;        ///< [compression.codec]: how every layer's kept entries are stored (none: float32)
  ShareSpec share;        ///< [compression.share]: which layers read another layer's cache (none: every layer its own)
  /// [compression.joint]: b_l, bits and sharing chosen together under budget.bytes_fraction (runner/plan/joint_spec.hpp);
  /// when set, `allocator` and `codec` do not apply (codec is none) and `share` is none
  JointSpec joint;
  bool full_cache = false;
};

/// [prefill] of a run: how each evaluation prompt is prefilled (runner/compress/chunked_prefill.hpp).
struct PrefillSpec {
  /// C: prefill in chunks of C tokens (the last one shorter when C does not divide T); 0: one shot.
  int64_t chunk_tokens = 0;
  /// Each compressed cell prefills the prompt again in chunks and compresses every layer to its budget after each
  /// chunk, so a chunk's queries see only what earlier chunks kept (vLLM's and SGLang's chunked prefill); false:
  /// the chunks fill the full cache and compression runs once after the prompt, as after a one-shot prefill.
  bool compress_between_chunks = false;
};

/// One cell of the sweep: its swept values, a stable id, and the key of its effective inputs.
struct Cell {
  nlohmann::json values;    ///< {"allocator.plugin": "uniform", "budget.fraction": 0.1, ...}; {} for full cache
  std::string id;           ///< 16 hex digits, a hash of `values` (stable across runs and shards); the full-cache
                            ///< cell's is a hash of the base config (base_sha256)
  std::string label;        ///< human-readable and unique within a run, e.g. "uniform + snapkv(window=16) @ f=0.1"
  std::string group;        ///< the label without its budget: the cells of one line in a metric-vs-budget plot
  std::string effective_key;///< equal for cells that compute the same thing (e.g. uniform under two signals)
  CellConfig config;
};

/// One run of a sweep over run-level keys ([sweep] "model.path" and "data.eval.seed"; runner/plan/run_axes.hpp): each
/// such run is an ordinary run of its own model and examples, in its own folder <out>/runs/<name>/.
struct SweepRun {
  std::string name;         ///< its folder under runs/ and its column heading: "SmolLM2-135M-Instruct.Q4_1_seed-2"
  nlohmann::json values;    ///< its run-level values: {"model.path": "...", "data.eval.seed": 2}
  std::string config_text;  ///< its effective config: these values set, the run-level sweep keys gone (no --set left)
};

/// A validated run: the shared (non-swept) settings and the cells.
struct RunPlan {
  std::string config_path;
  std::string config_text;
  std::string config_sha256;      ///< sha256 of the config file's bytes
  std::string base_sha256;        ///< sha256 of the config without [sweep] (what --resume compares)
  std::string run_id;             ///< hash of the whole config (same for every shard of one sweep)
  std::vector<std::string> plugin_paths;
  std::string model_path;
  std::string backend = "cpu";  ///< model.backend: "cpu" | "cuda" | "auto" (backend/backend.hpp make_backend)
  std::string dtype = "f32";    ///< model.dtype: the backend's compute dtype, "f32" | "bf16" (cuda only)
  bool backend_from_command_line = false;  ///< --backend or --dtype replaced model.backend / model.dtype
  int64_t threads = 0;
  /// model.weights: how the CPU backend holds a GGUF's matrices (model/quant_matrix.hpp); the CUDA backend always
  /// loads float32 (load_weights_for()).
  WeightStorage weights = WeightStorage::quantized;
  DataConfig calibration, eval;
  std::vector<int64_t> compressible_layers;  ///< empty: all layers
  bool compress_global_only = false;  ///< budget.layers = "global": A = the layers without a sliding window
  bool query_aware = false;
  bool rerotate = false;  ///< [compression] rerotate: re-rotate kept keys to contiguous positions (compress_prompt)
  PrefillSpec prefill;    ///< [prefill]: one-shot, or in chunks with or without compression between them
  std::vector<std::string> tasks = {"lm_fidelity"};
  int64_t continuation_tokens = 64;
  NeedleConfig needle;
  RulerConfig ruler;
  MultiQuestionConfig multi_question;
  LongBenchConfig longbench;
  std::string output_dir;  ///< [output] dir, resolved against the config's folder; "" when unset (run: ./runs/<config name>)
  int64_t bootstrap_resamples = 2000;
  /// [output] max_cells: a [sweep] whose cartesian product has more cells is refused at validate time, before any
  /// cell is built (a sweep of millions of cells would exhaust the memory of `validate` itself).
  int64_t max_cells = 10000;
  ReportBaseline report_baseline;  ///< [output] baseline: what the report's paired comparisons compare each cell with
  std::vector<Cell> cells;        ///< the full-cache reference first, then the sweep's cartesian product
  std::shared_ptr<PluginRegistry> registry;
  /// A [sweep] over "model.path" and/or "data.eval.seed": the runs of their cartesian product (first key fastest), each
  /// validated as a whole; empty for an ordinary run. The rest of this plan is then the first run's (its model, its
  /// examples, its cells) except config_text and config_sha256, which are the sweep's own.
  std::vector<SweepRun> runs;
  std::vector<std::string> run_axis_keys;  ///< the run-level keys swept, in [sweep]'s order
  std::string base_dir;  ///< the folder the config's relative paths resolve against (each run's config_text too)
};

/// A compression config (`ripplekv generate --compress`, rkv_generate): one cell of the run schema and the settings
/// its compression reads.
struct CompressionConfig {
  CellConfig cell;
  std::vector<int64_t> compressible_layers;  ///< empty: all
  bool compress_global_only = false;         ///< budget.layers = "global"
  bool rerotate = false;                     ///< [compression] rerotate (compress_prompt)
  std::shared_ptr<PluginRegistry> registry;
};

}  // namespace rkv
