// Ablation configs: the TOML a researcher writes, validated into a RunPlan of cells (issue "ablation runner").
//
// Schema (every key optional unless marked; unknown keys are errors naming the line and the closest valid key):
//
//   plugin_paths = ["dir", ...]                 extra plugin folders searched first
//   [model]       path (required), backend = "cpu"|"cuda"|"auto", dtype = "f32"|"bf16" (cuda), threads = 0 (0: all
//                 cores), weights = "quantized"|"f32" (CPU: GGUF matrices kept in blocks, or dequantized at load)
//   [data.calibration] / [data.eval]
//                 files = ["austen:emma", "path/to/text.txt", ...]   ("austen:NAME" is the fetched novel)
//                 examples, prefix_tokens, window_tokens (calibration), seed
//   [signal] / [scorer] / [allocator]
//                 plugin = "id or short id"; each plugin's params in its own table [scorer.snapkv] (short id)
//                 [signal] plugin = "damage" is the host's builtin oracle signal (runner/damage_signal.hpp):
//                 [signal.damage] fraction = 0.2 (float in (0, 1]), compressed with the cell's [scorer]
//   [[scorer.route]]  a route (runner/scorer_route.hpp): which scorer ranks which layers' positions, one entry per
//                 scorer use: layers = "0-9, 12" (ranges and single indices) or [0, 3, 5] (required; no layer in two
//                 entries; each below the model's layer count, checked when the model is loaded), plugin = "id"
//                 (required, a scorer), and its params as a table named after it: knorm = { ... } or [scorer.route.X]
//                 (the params of [scorer.X] do not apply; defaults otherwise). Layers no entry names use [scorer].
//                 Part of the cell (label, group, id, effective key, records); sweepable as "scorer.route" = [[], [{
//                 layers = "0-14", plugin = "knorm" }]] ([] = no route). Not with compression.decode.policy =
//                 "periodic" (it re-scores with one scorer).
//   [budget]      fraction = f in (0, 1] of the layers' spans  |  tokens = N (B = sum_l min(N, span_l), which the
//                 allocator splits: b_l = min(N, T) under uniform only when every span is T)  |  bytes_fraction = x
//                 in (0, 1] of the full float32 cache's bytes (f = min(1, x e_f32 / e_codec) per kept entry);
//                 layers = [] (A; empty: all) or "global" (the layers without a sliding window; cache/budget.hpp)
//   [compression] query_aware = false
//   [compression.decode] policy = "none"|"rolling"|"h2o"|"periodic"; sinks = 4 (rolling), recent (h2o; default half
//                 the budget), interval = 16 and target (periodic; default the budget) -- a cell setting: sweepable
//                 as "compression.decode.policy" etc. (runner/decode_policy.hpp)
//   [compression.codec] format = "none"|"int"|"kivi"|"q8_0"|"q4_0"|"f16", bits = 2|4|8 (int, kivi; default 4),
//                 group = 32 (int: channels per scale; kivi: entries per key group and channels per value group),
//                 symmetric = false (int), residual = newest entries per KV head kept in float32 (default 0; kivi 128),
//                 layer_bits = "uniform"|"profile" (int, kivi: bits per layer from the [signal] profile at the bytes
//                 of uniform `bits`; cache/layer_bits.hpp), bits_ratio = 4.0 (profile: most / least sensitive),
//                 token_bits = [16, 8] and token_shares = [0.05, 0.15] (int, layer_bits "uniform": per KV head the
//                 packed entries ranked as the eviction ranked them, the top 5% at 16 bits (f16), the next 15% at 8,
//                 the rest at `bits`; bits strictly decreasing in {16, 8, 4, 2} above `bits`, shares in [0, 1] summing
//                 to at most 1, a share of 0 drops its class; cache/token_bits.hpp) -- a cell
//                 setting, sweepable as "compression.codec.format" etc.; the kept entries of every layer are stored
//                 packed after compression (cache/codec.hpp); not with a decode policy
//   [compression.share] groups = g (CLA@g: layer l reads layer floor(l/g) g) | map = [[layer, source], ...] | count =
//                 k (the k layers of lowest [signal] profile value share with the nearest earlier unshared layer) --
//                 shared layers hold no cache; the budget is spread over the others (runner/cache_share.hpp); a cell
//                 setting, sweepable as "compression.share.groups" etc.; not with a decode policy
//   [compression.joint] plan = "damage"|"none" (default "damage" when the table is present), fractions = [1.0, 0.5,
//                 0.25, 0.125] (1-16 distinct, in (0, 1]), bits = [32, 8, 4, 2] (1-4 distinct; 32 = float32), share =
//                 false, group = 32, symmetric = false (the integer codec of bits < 32): the joint allocator picks per
//                 layer one (fraction, bits) of the grid or sharing under budget.bytes_fraction, by each option's
//                 damage measured on the calibration split (cache/joint_plan.hpp, runner/joint_allocation.hpp);
//                 replaces the allocator and [compression.codec]; needs bytes_fraction; not with a decode policy,
//                 [compression.share] or a route -- a cell setting, sweepable as "compression.joint.plan" etc.
//   [compression] rerotate = false (true: kept keys re-rotated to positions 0 .. b - 1 of each KV head after compaction,
//                 later tokens continue at the cache length; false: original positions, later tokens at T)
//   [tasks]       run = ["lm_fidelity", "needle", "ruler", "multi_question", "longbench"]
//   [tasks.lm_fidelity] continuation_tokens
//   [tasks.needle]      context_tokens = [..], depths = [..], trials, seed
//   [tasks.ruler]       subtasks = [..] (default all: runner/ruler_subtasks.hpp), context_tokens = [..], examples, seed,
//                       max_new_tokens (0: RULER's per subtask)
//   [tasks.multi_question] context_tokens = [..], questions, examples, seed, max_new_tokens
//   [tasks.longbench]   files = [..], max_context_tokens, [tasks.longbench.datasets.NAME] prompt, max_new_tokens
//   [sweep]       "dotted.key" = [values...]: the run is the cartesian product (e.g. "allocator.plugin",
//                 "budget.fraction", "scorer.snapkv.window", "compression.decode.policy")
//   [output]      dir (relative to the config file; unset: run writes ./runs/<config name>), bootstrap_resamples,
//                 max_cells = 10000 (the largest sweep accepted; at most 100,000)
//
// Integer keys are range-checked where they are read (so `validate` reports them): lengths in tokens at most 2^24,
// counts (examples, trials, questions, task prompts, resamples, sinks, max_new_tokens) at most 1,000,000,
// model.threads at most 4096, budget.layers entries at most 100,000.
//
// Relative paths are relative to the config file's folder; "~" and ${VAR} are expanded; ${RIPPLEKV_CACHE} defaults
// to ~/.cache/ripplekv.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cache/codec.hpp"
#include "model/quant_matrix.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "runner/decode_spec.hpp"
#include "runner/ruler_subtasks.hpp"
#include "runner/joint_spec.hpp"
#include "runner/share_spec.hpp"

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
};

/// One entry of [[scorer.route]] (runner/scorer_route.hpp): the scorer, with its own params, that ranks the positions
/// of `layers` (model layer indices, ascending, each at most once across a route).
struct RouteEntry {
  std::vector<int64_t> layers;
  PluginChoice scorer;
  std::string user_params;  ///< the params the entry set itself, "k=v,..." in key order ("" when none): for labels
};

struct NeedleConfig {
  std::vector<int64_t> context_tokens = {1024};
  std::vector<double> depths = {0.1, 0.3, 0.5, 0.7, 0.9};
  int64_t trials = 2;  ///< passkeys per (length, depth)
  uint64_t seed = 7;
};

/// [tasks.ruler]: RULER's synthetic subtasks (runner/ruler_subtasks.hpp) at each context length.
struct RulerConfig {
  std::vector<std::string> subtasks = ruler_subtask_names();  ///< names; default: every subtask, in table order
  std::vector<int64_t> context_tokens = {1024};  ///< prompt lengths in tokens (chat template and answer prefix included)
  int64_t examples = 4;                          ///< samples per (subtask, context length)
  uint64_t seed = 42;                            ///< RULER's default random_seed
  int64_t max_new_tokens = 0;                    ///< 0: RULER's tokens_to_generate per subtask; else this for all
};

/// [tasks.multi_question]: one context, several questions on it (runner/task_multi_question.hpp).
struct MultiQuestionConfig {
  std::vector<int64_t> context_tokens = {1024};  ///< prompt lengths in tokens with the longest question
  int64_t questions = 4;                         ///< keys hidden in each context, each asked once
  int64_t examples = 4;                          ///< contexts per length
  uint64_t seed = 42;
  int64_t max_new_tokens = 32;                   ///< the answer is one 7-digit number
};

struct LongBenchDatasetConfig {
  std::string prompt;        ///< template with {context} and {input}
  int64_t max_new_tokens = 0;
};

struct LongBenchConfig {
  std::vector<std::string> files;
  int64_t max_context_tokens = 0;  ///< 0: the model's context length
  std::map<std::string, LongBenchDatasetConfig> datasets;  ///< overrides of LongBench's defaults
};

/// The effective configuration of one ablation cell.
struct CellConfig {
  std::optional<PluginChoice> signal;  ///< the configured signal (may be absent when the allocator needs no profile)
  bool uses_profile = false;           ///< the allocator sets RKV_FLAG_NEEDS_PROFILE (only then the signal matters)
  std::optional<PluginChoice> scorer;  ///< absent for the full-cache cell
  /// [[scorer.route]]: the scorers of the routed layers (runner/scorer_route.hpp); layers no entry names use `scorer`.
  /// Empty: every layer uses `scorer` (a homogeneous cell).
  std::vector<RouteEntry> route;
  std::optional<PluginChoice> allocator;
  std::optional<double> budget_fraction;
  std::optional<int64_t> budget_tokens;
  /// budget.bytes_fraction: the kept cache's bytes as a fraction of the full float32 cache's; the run turns it into
  /// a token fraction for the cell's codec (runner/cache_codec.hpp token_fraction)
  std::optional<double> budget_bytes_fraction;
  DecodeSpec decode;      ///< [compression.decode]: the decode policy (the full-cache cell keeps every entry)
  CodecSpec codec;        ///< [compression.codec]: how every layer's kept entries are stored (none: float32)
  ShareSpec share;        ///< [compression.share]: which layers read another layer's cache (none: every layer its own)
  /// [compression.joint]: b_l, bits and sharing chosen together under budget.bytes_fraction (runner/joint_spec.hpp);
  /// when set, `allocator` and `codec` do not apply (codec is none) and `share` is none
  JointSpec joint;
  bool full_cache = false;
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
  std::vector<Cell> cells;        ///< the full-cache reference first, then the sweep's cartesian product
  std::shared_ptr<PluginRegistry> registry;
};

/// Parses and validates `path` (TOML). Checks: syntax (line and column), unknown sections and keys (closest match),
/// types, lengths > 0, budget fraction in (0, 1], sweep keys that exist, plugin ids and their params (against the
/// plugins' own param specs), files that exist and are regular files (a FIFO or a device is refused without
/// blocking; a symbolic-link loop is an error naming the key), calibration and evaluation sets disjoint, and a sweep
/// of at most [output] max_cells cells. Errors are rkv::InputError naming the file, the line and the key; a config
/// file that is not a regular file (a FIFO, /dev/zero, a folder) or is larger than 64 MiB is refused unread.
RunPlan load_run_plan(const std::string& path);

/// Same, from TOML text (`origin` names it in messages; relative paths resolve against `base_dir`).
RunPlan load_run_plan_from_string(const std::string& text, const std::string& origin, const std::string& base_dir);

/// A compression config for `ripplekv generate --compress`: [scorer], [allocator] and [budget] (fraction or tokens,
/// layers) of the run schema, [compression] rerotate and [compression.decode], plus optional plugin_paths; other
/// sections and keys are ignored. No [signal] is needed: an
/// allocator that uses a profile gets it from --profile.
struct CompressionConfig {
  CellConfig cell;
  std::vector<int64_t> compressible_layers;  ///< empty: all
  bool compress_global_only = false;         ///< budget.layers = "global"
  bool rerotate = false;                     ///< [compression] rerotate (compress_prompt)
  std::shared_ptr<PluginRegistry> registry;
};
CompressionConfig load_compression_config(const std::string& path);

/// Expands "~", ${VAR} (RIPPLEKV_CACHE defaults to ~/.cache/ripplekv) and "austen:NAME"; relative paths are joined
/// to base_dir.
std::string resolve_config_path(const std::string& value, const std::string& base_dir);

/// The asset cache folder ($RIPPLEKV_CACHE or ~/.cache/ripplekv).
std::string asset_cache_dir();

}  // namespace rkv
