// Ablation configs: the TOML a researcher writes, validated into a RunPlan of cells.
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
//                 [signal] plugin = "damage" is the host's builtin oracle signal (runner/profile/damage_signal.hpp):
//                 [signal.damage] fraction = 0.2 (float in (0, 1]), compressed with the cell's [scorer]
//                 [allocator] heads = "adakv" | "global_topk" | "none" (default): a per-head allocator
//                 (rkv.allocator/2) that splits each layer's budget over its KV heads; a per-head allocator may also
//                 be the plugin alone (it then splits the whole budget over layers and heads)
//   [[scorer.route]]  a route (runner/plan/scorer_route.hpp): which scorer ranks which layers' positions, one entry per
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
//                 as "compression.decode.policy" etc. (runner/decode/policy.hpp)
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
//                 shared layers hold no cache; the budget is spread over the others (runner/compress/share.hpp); a cell
//                 setting, sweepable as "compression.share.groups" etc.; not with a decode policy
//   [compression.joint] plan = "damage"|"none" (default "damage" when the table is present), fractions = [1.0, 0.5,
//                 0.25, 0.125] (1-16 distinct, in (0, 1]), bits = [32, 8, 4, 2] (1-4 distinct; 32 = float32), share =
//                 false, group = 32, symmetric = false (the integer codec of bits < 32): the joint allocator picks per
//                 layer one (fraction, bits) of the grid or sharing under budget.bytes_fraction, by each option's
//                 damage measured on the calibration split (cache/joint_plan.hpp, runner/compress/joint.hpp);
//                 replaces the allocator and [compression.codec]; needs bytes_fraction; not with a decode policy,
//                 [compression.share] or a route -- a cell setting, sweepable as "compression.joint.plan" etc.
//   [compression] rerotate = false (true: kept keys re-rotated to positions 0 .. b - 1 of each KV head after compaction,
//                 later tokens continue at the cache length; false: original positions, later tokens at T)
//   [tasks]       run = ["lm_fidelity", "needle", "ruler", "multi_question", "longbench"]
//   [tasks.lm_fidelity] continuation_tokens
//   [tasks.needle]      context_tokens = [..], depths = [..], trials, seed
//   [tasks.ruler]       subtasks = [..] (default all: eval/ruler_subtasks.hpp), context_tokens = [..], examples, seed,
//                       max_new_tokens (0: RULER's per subtask), length_includes_answer (false), haystack
//                       ("paul_graham" | "eval_text"), word_pool ("wonderwords" | "eval_text"); RULER's own sources
//                       must be in the asset cache (scripts/fetch-assets)
//   [tasks.multi_question] context_tokens = [..], questions, examples, seed, max_new_tokens
//   [tasks.longbench]   files = [..], max_context_tokens, [tasks.longbench.datasets.NAME] prompt, max_new_tokens
//   [prefill]     chunk_tokens = C (0: one shot; else the prompt in chunks of C tokens, the same cache and statistics),
//                 compress_between_chunks = false (true: each compressed cell prefills again in chunks and evicts to its
//                 budgets after every chunk; chunk-capable scorers only) -- run-level, not sweepable
//   [sweep]       "dotted.key" = [values...]: the run is the cartesian product (e.g. "allocator.plugin",
//                 "budget.fraction", "scorer.snapkv.window", "compression.decode.policy"); methods = [{...}, ...] is
//                 one axis whose tables each set several dotted keys together (named methods; sweep.hpp);
//                 "model.path" = [..] and "data.eval.seed" = [..] are run-level: each value (each combination) is a run
//                 of its own, side by side in one report (run_axes.hpp; runner/run/sweep_of_runs.hpp)
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
#include <string>

#include "runner/plan/config_paths.hpp"
#include "runner/plan/run_plan.hpp"

namespace rkv {

/// Parses and validates `path` (TOML). Checks: syntax (line and column), unknown sections and keys (closest match),
/// types, lengths > 0, budget fraction in (0, 1], sweep keys that exist, plugin ids and their params (against the
/// plugins' own param specs), files that exist and are regular files (a FIFO or a device is refused without
/// blocking; a symbolic-link loop is an error naming the key), calibration and evaluation sets disjoint, and a sweep
/// of at most [output] max_cells cells. Errors are rkv::InputError naming the file, the line and the key; a config
/// file that is not a regular file (a FIFO, /dev/zero, a folder) or is larger than 64 MiB is refused unread.
/// `overrides` ("KEY=VALUE", the CLI's --set; runner/plan/config_overrides.hpp) are applied to the parsed file before
/// any check, so the effective config is validated as a whole (an override's errors name the key and "--set"), and
/// RunPlan::config_text is then the effective config (a comment naming the file and the overrides, then the TOML).
RunPlan load_run_plan(const std::string& path, const std::vector<std::string>& overrides = {});

/// Same, from TOML text (`origin` names it in messages; relative paths resolve against `base_dir`).
RunPlan load_run_plan_from_string(const std::string& text, const std::string& origin, const std::string& base_dir,
                                  const std::vector<std::string>& overrides = {});

/// Run k of a sweep over run-level keys (`sweep.runs[k]`, runner/plan/run_axes.hpp): its plan, built from its config
/// text as any config is, with the sweep's backend and dtype (which --backend / --dtype may have set). Errors as
/// load_run_plan_from_string's (none for a sweep that loaded: each run was validated then).
RunPlan load_sweep_run(const RunPlan& sweep, size_t k);

/// Reads a compression config: the cell sections of the run schema ([scorer] with its routes, [allocator], [budget],
/// [compression.decode], .codec, .share, .joint), [compression] rerotate and plugin_paths; the other sections of the
/// run schema are allowed and ignored, a misspelt one is an error. No [signal] is needed: a cell that uses a profile
/// gets it from the caller (--profile). Errors as load_run_plan's; the file must be a regular file of at most 64 MiB.
CompressionConfig load_compression_config(const std::string& path);

}  // namespace rkv
