#include "runner/plan/config.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "core/sha256.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/scorer_call.hpp"
#include "runner/plan/cell_config.hpp"
#include "runner/plan/cell_labels.hpp"
#include "runner/plan/compression_sections.hpp"
#include "runner/plan/config_overrides.hpp"
#include "runner/plan/report_baseline.hpp"
#include "runner/plan/run_axes.hpp"
#include "runner/plan/sweep.hpp"
#include "runner/plan/task_settings.hpp"
#include "runner/plan/toml_reader.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

/// What fetches a missing model: the asset that file name is (scripts/fetch-assets' own names), else what it fetches.
std::string missing_model_hint(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  if (name == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    return " (scripts/fetch-assets --model qwen2.5-coder-1.5b fetches it; it is not fetched by default)";
  if (name == "SmolLM2-135M-Instruct.Q4_1.gguf" || name == "gemma-3-270m-q4_k_m.gguf")
    return " (scripts/fetch-assets fetches it)";
  return " (scripts/fetch-assets fetches SmolLM2-135M and Gemma 3 270M; --model qwen2.5-coder-1.5b adds Qwen2.5-Coder-"
         "1.5B)";
}

/// The smallest [prefill] chunk_tokens but 0: near-equal chunks of at most C are then at least 8 tokens long
/// (runner/compress/chunked_prefill.hpp chunk_bounds), above the CPU backend's few-row matmul path.
constexpr int64_t kMinChunkTokens = 16;
/// The keys of [compression], in run configs and compression configs alike.
const std::vector<std::string> kCompressionKeys = {"query_aware", "rerotate", "decode", "codec", "share", "joint"};
/// The top-level keys of the run schema (config.hpp).
const std::vector<std::string> kRunSections = {"plugin_paths", "model",  "data",  "signal", "scorer", "allocator", "budget",
                                               "compression",  "prefill", "tasks", "sweep",  "output"};

/// plugin_paths (resolved against the config's folder), and the registry of every plugin they and the default search
/// path hold.
std::shared_ptr<PluginRegistry> read_plugin_paths(const TomlContext& c, const toml::table& root,
                                                  std::vector<std::string>* paths) {
  for (const auto& p : get_string_list(c, root, "plugin_paths", "plugin_paths"))
    paths->push_back(resolve_config_path(c, *root.get("plugin_paths"), "plugin_paths", p));
  return std::make_shared<PluginRegistry>(PluginRegistry::discover(*paths));
}

DataConfig parse_data(const TomlContext& c, const toml::table& t, const std::string& name, bool calibration) {
  std::vector<std::string> keys = {"files", "examples", "prefix_tokens", "seed"};
  if (calibration) keys.push_back("window_tokens");
  check_keys(c, t, name, keys);
  DataConfig d;
  for (const auto& f : get_string_list(c, t, "files", name + ".files")) {
    const std::string p = resolve_config_path(c, *t.get("files"), name + ".files", f);
    if (const std::string problem = input_file_problem(p); !problem.empty())
      throw InputError(where(c, *t.get("files"), name + ".files") + ": file '" + f + "' (" + p + ") " + problem +
                       (f.rfind("austen:", 0) == 0 && problem == "does not exist" ? "; fetch it with scripts/fetch-assets" : ""));
    d.files.push_back(p);
  }
  if (d.files.empty()) throw InputError(where_table(c, t, name) + " needs files = [...] (e.g. \"austen:emma\")");
  d.examples = get_int(c, t, "examples", name + ".examples", 8, 1, kMaxCount);
  d.prefix_tokens = get_int(c, t, "prefix_tokens", name + ".prefix_tokens", 1024, 1, kMaxTokens);
  if (calibration) d.window_tokens = get_int(c, t, "window_tokens", name + ".window_tokens", 32, 1, kMaxTokens);
  d.seed = static_cast<uint64_t>(get_int(c, t, "seed", name + ".seed", calibration ? 0 : 1, 0, INT64_MAX));
  return d;
}

/// [model]: path (a .gguf file or a Hugging Face folder; a FIFO or device is refused), backend, dtype, threads, weights.
void read_model_section(const TomlContext& c, const toml::table& root, RunPlan& plan) {
  const toml::table* m = sub_table(c, root, "model", "model");
  if (!m) throw InputError(c.origin + ": a [model] section with path = \"...\" is required");
  check_keys(c, *m, "model", {"path", "backend", "dtype", "threads", "weights"});
  const std::string mp = get_string(c, *m, "path", "model.path", "");
  if (mp.empty()) throw InputError(where_table(c, *m, "model") + " needs path = \"model.gguf or HF folder\"");
  plan.model_path = resolve_config_path(c, *m->get("path"), "model.path", mp);
  {
    std::string why;
    const PathKind kind = path_kind(plan.model_path, &why);
    if (kind == PathKind::missing)
      throw InputError(where(c, *m->get("path"), "model.path") + ": '" + plan.model_path + "' does not exist" +
                       missing_model_hint(plan.model_path));
    if (kind == PathKind::error)
      throw InputError(where(c, *m->get("path"), "model.path") + ": '" + plan.model_path + "' cannot be read: " + why);
    if (kind == PathKind::other)  // a FIFO would block the run in open() until someone writes to it
      throw InputError(where(c, *m->get("path"), "model.path") + ": '" + plan.model_path + "' is " +
                       describe_special_file(plan.model_path) + "; expected a .gguf file or a Hugging Face model folder");
  }
  plan.backend = get_string(c, *m, "backend", "model.backend", "cpu");
  if (plan.backend != "cpu" && plan.backend != "cuda" && plan.backend != "auto")
    throw InputError(where(c, *m->get("backend"), "model.backend") + " must be \"cpu\", \"cuda\" or \"auto\"");
  plan.dtype = get_string(c, *m, "dtype", "model.dtype", "f32");
  if (plan.dtype != "f32" && plan.dtype != "bf16")
    throw InputError(where(c, *m->get("dtype"), "model.dtype") + " must be \"f32\" or \"bf16\" (bf16: cuda only)");
  plan.threads = get_int(c, *m, "threads", "model.threads", 0, 0, kMaxThreads);
  const std::string weights = get_string(c, *m, "weights", "model.weights", "quantized");
  if (weights != "quantized" && weights != "f32")
    throw InputError(where(c, *m->get("weights"), "model.weights") +
                     " must be \"quantized\" (GGUF blocks, the fast CPU path) or \"f32\" (dequantized at load, exact)");
  plan.weights = weights == "f32" ? WeightStorage::f32 : WeightStorage::quantized;

}

/// [data.calibration] and [data.eval], disjoint by content (a symlink or a copy of a calibration text is the same text).
void read_data_sections(const TomlContext& c, const toml::table& root, RunPlan& plan) {
  const toml::table* d = sub_table(c, root, "data", "data");
  if (!d) throw InputError(c.origin + ": a [data] section with [data.calibration] and [data.eval] is required");
  check_keys(c, *d, "data", {"calibration", "eval"});
  const toml::table* cal = sub_table(c, *d, "calibration", "data.calibration");
  const toml::table* ev = sub_table(c, *d, "eval", "data.eval");
  if (!cal || !ev) throw InputError(c.origin + ": both [data.calibration] and [data.eval] are required");
  plan.calibration = parse_data(c, *cal, "data.calibration", true);
  plan.eval = parse_data(c, *ev, "data.eval", false);
  // Disjoint by content, not by name: a symlink or a copy of a calibration text is the same text.
  std::map<std::string, std::string> calibration_by_sha256;
  for (const auto& f : plan.calibration.files) calibration_by_sha256.emplace(sha256_file(f), f);
  for (const auto& f : plan.eval.files) {
    const auto same = calibration_by_sha256.find(sha256_file(f));
    if (same == calibration_by_sha256.end()) continue;
    throw InputError(where_table(c, *ev, "data.eval") + ": file '" + f + "'" +
                     (same->second == f ? std::string(" is also a calibration file")
                                        : " has the same content as calibration file '" + same->second + "'") +
                     "; calibration and evaluation sets must be disjoint");
  }

}

/// The run-level settings: [compression] query_aware and rerotate, [tasks], [output] and budget.layers.
void read_run_settings(const TomlContext& c, const toml::table& root, RunPlan& plan) {
  if (const toml::table* cp = sub_table(c, root, "compression", "compression")) {
    check_keys(c, *cp, "compression", kCompressionKeys);
    plan.query_aware = get_bool(c, *cp, "query_aware", "compression.query_aware", false);
    plan.rerotate = get_bool(c, *cp, "rerotate", "compression.rerotate", false);
  }
  if (const toml::table* pf = sub_table(c, root, "prefill", "prefill")) {
    check_keys(c, *pf, "prefill", {"chunk_tokens", "compress_between_chunks"});
    plan.prefill.chunk_tokens = get_int(c, *pf, "chunk_tokens", "prefill.chunk_tokens", 0, 0, kMaxTokens);
    if (plan.prefill.chunk_tokens > 0 && plan.prefill.chunk_tokens < kMinChunkTokens)
      throw InputError(where(c, *pf->get("chunk_tokens"), "prefill.chunk_tokens") + " must be 0 (one shot) or at least " +
                       std::to_string(kMinChunkTokens) + " (chunks of a few tokens take the CPU's few-row matmul path, "
                       "which rounds differently), got " + std::to_string(plan.prefill.chunk_tokens));
    plan.prefill.compress_between_chunks =
        get_bool(c, *pf, "compress_between_chunks", "prefill.compress_between_chunks", false);
    if (plan.prefill.compress_between_chunks && plan.prefill.chunk_tokens == 0)
      throw InputError(where(c, *pf->get("compress_between_chunks"), "prefill.compress_between_chunks") +
                       ": compression between chunks needs prefill.chunk_tokens >= 1");
  }
  if (const toml::table* t = sub_table(c, root, "tasks", "tasks")) read_tasks_section(c, *t, plan);
  if (const toml::table* o = sub_table(c, root, "output", "output")) {
    check_keys(c, *o, "output", {"dir", "bootstrap_resamples", "max_cells", "baseline"});
    const std::string dir = get_string(c, *o, "dir", "output.dir", "");
    if (!dir.empty()) plan.output_dir = resolve_config_path(c, *o->get("dir"), "output.dir", dir);
    plan.bootstrap_resamples = get_int(c, *o, "bootstrap_resamples", "output.bootstrap_resamples", 2000, 100, kMaxCount);
    // At most 100,000: validate holds every cell's config (about 3 KB each; a million took 3.4 GB and two minutes).
    plan.max_cells = get_int(c, *o, "max_cells", "output.max_cells", plan.max_cells, 1, kMaxCells);
  }
  if (const toml::table* b = sub_table(c, root, "budget", "budget"))
    plan.compressible_layers = compressible_layers(c, *b, &plan.compress_global_only);
}

/// The plan's identity: run_id hashes the whole config (the same for every shard of one sweep), base_sha256 the config
/// without [sweep] (what --resume compares). Removes [sweep] from `root`, which each cell then edits in place.
void set_plan_identity(toml::table& root, RunPlan& plan) {
  std::ostringstream all;
  all << root;
  const std::string all_text = all.str();
  plan.run_id = sha256_hex(all_text.data(), all_text.size()).substr(0, 16);
  root.erase("sweep");
  std::ostringstream os;
  os << root;
  const std::string base_text = os.str();
  plan.base_sha256 = sha256_hex(base_text.data(), base_text.size());
}

/// The requirements `scorer` declares on the nominal shape of validate time (30 layers, H 8 over H_kv 2, d 64; no
/// model is loaded here), or std::nullopt when the plugin cannot be created or refuses that shape (the run checks
/// both again on the real model). What it declares is checked as the run checks it (query_scorer_requirements), so
/// a refusal that does not depend on the shape (an unknown statistic, a prefill-only statistic at decode time) is
/// reported here.
std::optional<ScorerRequirements> nominal_requirements(const PluginChoice& scorer, const HostServices& host) {
  std::optional<PluginInstance> inst;
  try {
    inst.emplace(PluginInstance::create(*scorer.info, scorer.params, host));
  } catch (const InputError&) {
    return std::nullopt;
  }
  return query_scorer_requirements(*inst, rkv_attention_shape{sizeof(rkv_attention_shape), 30, 8, 2, 64}, true);
}

/// A decode policy that re-scores (periodic) does so with the cell's scorer while decoding, so the scorer must declare
/// decode-time scoring (rkv_scorer_requirements.decode_scoring). Checked at validate time on a nominal model shape
/// (30 layers, H 8 over H_kv 2, d 64; no model is loaded here): a scorer that refuses that shape is left to the run's
/// own check on the real one.
void check_decode_scoring(const TomlContext& c, const Cell& cell, const HostServices& host) {
  const PluginChoice& scorer = *cell.config.scorer;
  const std::optional<ScorerRequirements> req = nominal_requirements(scorer, host);
  if (!req || req->decode_scoring) return;
  const std::string params = scorer.params.to_string();
  throw InputError(c.origin + ": compression.decode.policy = \"" + cell.config.decode.policy +
                   "\" re-scores with the cell's scorer while decoding, and scorer '" + scorer.id + "'" +
                   (params.empty() ? "" : " with " + params) + " does not support decode-time scoring" +
                   (cell.values.empty() ? "" : " (in sweep cell " + cell.values.dump() + ")"));
}

/// The cell's per-head allocator: allocator.heads, or allocator.plugin alone when it serves only rkv.allocator/2
/// (asked of an instance: the allocators hold no state); empty when the cell's budgets are per layer only.
std::string per_head_allocator(const CellConfig& cc, const HostServices& host) {
  if (!cc.allocator) return "";
  if (cc.allocator->heads) return cc.allocator->heads->id;
  const PluginInstance a = PluginInstance::create(*cc.allocator->info, cc.allocator->params, host);
  return serves_layer_budgets(a) ? "" : cc.allocator->id;
}

/// A per-head allocator takes one protected mask for every layer, so the scorers of a route must protect the same
/// positions: the route's scorers, and the [scorer] one when the route leaves a layer below its last one to it.
/// Checked on the nominal shape (nominal_requirements); what only the real model decides (a route that covers every
/// layer of it) is left to the run's own check. Refused naming the allocator and the cell.
void check_heads_with_route(const TomlContext& c, const Cell& cell, const HostServices& host) {
  const CellConfig& cc = cell.config;
  if (cc.route.empty()) return;
  const std::string per_head = per_head_allocator(cc, host);
  if (per_head.empty()) return;
  std::vector<const PluginChoice*> scorers;
  std::set<int64_t> routed;
  for (const RouteEntry& e : cc.route) {
    scorers.push_back(&e.scorer);
    routed.insert(e.layers.begin(), e.layers.end());
  }
  if (!routed.empty() && static_cast<int64_t>(routed.size()) <= *routed.rbegin()) scorers.push_back(&*cc.scorer);
  std::optional<std::pair<int64_t, int64_t>> first;
  for (const PluginChoice* s : scorers) {
    const std::optional<ScorerRequirements> req = nominal_requirements(*s, host);
    if (!req) continue;
    const std::pair<int64_t, int64_t> spec{req->sinks, req->recent};
    if (!first) first = spec;
    if (spec != *first)
      throw InputError(c.origin + ": per-head allocator '" + per_head + "' with a scorer.route whose scorers protect "
                       "different positions (sinks, recent window); it takes one protected mask for every layer" +
                       (cell.values.empty() ? "" : " (in sweep cell " + cell.values.dump() + ")"));
  }
}

/// With [prefill] compress_between_chunks every compressed cell evicts after each chunk with what its scorers can
/// compute from a chunk (the held-entry statistics of abi/ripplekv/plugin.h "Decode-time scoring"): each scorer of
/// the cell (and of its route) must declare decode_scoring (checked on the nominal shape of nominal_requirements),
/// and the cell must be plain eviction by layer budgets: no per-head allocator (it ranks the whole prompt's scores),
/// no joint plan, sharing or codec, no decode policy that needs the prompt's statistics (h2o, periodic), and no key
/// re-rotation. Refused naming the key and the cell.
void check_chunk_compression(const std::string& key_where, const Cell& cell, const HostServices& host, bool rerotate) {
  const CellConfig& cc = cell.config;
  if (cc.full_cache) return;
  const std::string in_cell = cell.values.empty() ? "" : " (in sweep cell " + cell.values.dump() + ")";
  auto refuse = [&](const std::string& what) { throw InputError(key_where + " = true: " + what + in_cell); };
  if (rerotate) refuse("compression.rerotate is not supported (kept keys keep their positions between chunks)");
  const std::string per_head = per_head_allocator(cc, host);
  if (!per_head.empty())
    refuse("per-head allocator '" + per_head + "' (allocator.heads, or allocator.plugin alone) needs the whole "
           "prompt's scores; not supported");
  if (!cc.joint.none()) refuse("[compression.joint] is not supported");
  if (!cc.share.none()) refuse("[compression.share] is not supported");
  if (!cc.codec.none()) refuse("[compression.codec] is not supported");
  if (cc.decode.policy != "none" && cc.decode.policy != "rolling")
    refuse("compression.decode.policy = \"" + cc.decode.policy + "\" needs the prompt's statistics; use none or rolling");
  std::vector<const PluginChoice*> scorers = {&*cc.scorer};
  for (const RouteEntry& e : cc.route) scorers.push_back(&e.scorer);
  for (const PluginChoice* scorer : scorers) {
    const std::optional<ScorerRequirements> req = nominal_requirements(*scorer, host);
    if (!req) continue;  // refused by the plugin on the nominal shape: the run's own check on the real one reports it
    if (!req->decode_scoring)
      refuse("scorer '" + scorer->id + "' cannot score a chunk (it does not declare decode_scoring: it needs statistics "
             "of the whole prompt); snapkv, streamingllm, knorm and h2o with normalize = false can (`ripplekv plugins check ID` "
             "says whether a scorer declares it)");
  }
}

/// Creates every distinct plugin of `cells` once, so checks a plugin makes at creation (e.g. snapkv's odd kernel) fail
/// here, in `validate`, rather than after a run has loaded the model; and checks decode-time scoring.
void check_cells_create_their_plugins(const TomlContext& c, const toml::table& root, const std::vector<Cell>& cells,
                                      const RunPlan& plan) {
  HostServices host;
  const toml::node* between = root.at_path("prefill.compress_between_chunks").node();
  const std::string between_where =
      between ? where(c, *between, "prefill.compress_between_chunks") : c.origin + ": prefill.compress_between_chunks";
  std::set<std::string> created;
  for (const Cell& cell : cells) {
    std::vector<const std::optional<PluginChoice>*> choices = {&cell.config.signal, &cell.config.scorer,
                                                                &cell.config.allocator};
    std::vector<std::optional<PluginChoice>> routed;
    for (const RouteEntry& e : cell.config.route) routed.emplace_back(e.scorer);
    for (const auto& r : routed) choices.push_back(&r);
    for (const auto* choice : choices) {
      if (!*choice || !(*choice)->info->library) continue;  // a host builtin (the damage signal) has no instance
      const std::string key = (*choice)->key();
      if (!created.insert(key).second) continue;
      try {
        const PluginInstance inst = PluginInstance::create(*(*choice)->info, (*choice)->params, host);
        const uint64_t flags = (*choice)->info->descriptor->flags;
        // a per-prompt signal the cell reads (the run adds its statistics to the prefill only then)
        const bool per_prompt = (*choice)->info->descriptor->kind == RKV_KIND_SIGNAL &&
                                (flags & RKV_FLAG_PER_PROMPT) && cell.config.per_prompt_signal;
        if ((*choice)->info->descriptor->kind == RKV_KIND_SCORER || per_prompt) {  // on the nominal shape
          const std::optional<ScorerRequirements> req =
              query_scorer_requirements(inst, rkv_attention_shape{sizeof(rkv_attention_shape), 30, 8, 2, 64}, true);
          if (req && req->wants(RKV_STAT_RESIDUAL_COSINE) && plan.prefill.chunk_tokens > 0)
            throw InputError("prefill.chunk_tokens = " + std::to_string(plan.prefill.chunk_tokens) + ": '" +
                             (*choice)->id + "' reads the residual cosine (RKV_STAT_RESIDUAL_COSINE), which a "
                             "one-shot prefill captures only; set prefill.chunk_tokens = 0");
        }
      } catch (const InputError& e) {
        throw InputError(c.origin + ": " + e.what() + (cell.values.empty() ? "" : " (in sweep cell " + cell.values.dump() + ")"));
      }
    }
    if (cell.config.decode.traits().rescores) check_decode_scoring(c, cell, host);
    if (!cell.config.full_cache) check_heads_with_route(c, cell, host);
    if (plan.prefill.compress_between_chunks) check_chunk_compression(between_where, cell, host, plan.rerotate);
  }
}

RunPlan build_plan(toml::table root, const std::string& text, const TomlContext& c) {
  RunPlan plan;
  plan.config_text = text;
  plan.config_sha256 = sha256_hex(text.data(), text.size());
  check_keys(c, root, "", kRunSections);
  plan.registry = read_plugin_paths(c, root, &plan.plugin_paths);
  read_model_section(c, root, plan);
  read_data_sections(c, root, plan);
  read_run_settings(c, root, plan);
  const std::vector<SweepAxis> axes = read_sweep_axes(c, root, *plan.registry);
  check_sweep_size(c, root, axes, plan.max_cells);
  set_plan_identity(root, plan);
  plan.cells.push_back(full_cache_cell(plan.base_sha256));  // the full-cache reference first
  for (Cell& cell : expand_sweep(c, root, axes, *plan.registry)) plan.cells.push_back(std::move(cell));
  label_cells(plan.cells, plan.rerotate, plan.prefill);  // rerotate and chunk compression: run-level, named per cell
  plan.report_baseline = read_report_baseline(c, root.get_as<toml::table>("output"), axes, plan.cells);
  check_cells_create_their_plugins(c, root, plan.cells, plan);
  return plan;
}

/// The plan of a config whose [sweep] sweeps run-level keys (runner/plan/run_axes.hpp): each run's plan built from
/// the file's text again (so its errors name the file's lines) with the run's values set, the first one kept as the
/// plan, every run's config text recorded. Errors name the run.
RunPlan plan_of_runs(const std::string& text, const std::vector<std::string>& overrides,
                     const TomlContext& c, const std::vector<SweepAxis>& axes) {
  const std::vector<std::string> names = run_names(axes);
  RunPlan first;
  std::vector<SweepRun> runs;
  std::map<std::string, std::string> models;  // the model file, canonical -> its value as written
  for (size_t k = 0; k < names.size(); ++k) {
    toml::table root = parse_toml(text, c.origin);
    apply_config_overrides(root, overrides);
    take_run_axes(c, root);
    set_run_values(root, axes, k);
    SweepRun run{names[k], run_values(axes, k), ""};
    run.config_text = run_config_text(root, c.origin, run.name, run.values, overrides);
    try {
      RunPlan p = build_plan(std::move(root), run.config_text, c);
      if (k == 0) {
        // every run has about the first one's cells: the whole sweep within [output] max_cells, checked before
        // the other runs are built
        if (names.size() * p.cells.size() > static_cast<size_t>(p.max_cells))
          throw InputError(c.origin + ": [sweep] makes " + std::to_string(names.size()) + " runs of " +
                           std::to_string(p.cells.size()) + " cells, more than [output] max_cells = " +
                           std::to_string(p.max_cells));
      }
      // Two spellings of one file ("m/./a.gguf", "${RIPPLEKV_CACHE}/..." and "~/...") would run one model twice.
      std::error_code ec;
      const std::string file = fs::weakly_canonical(p.model_path, ec).string();
      const std::string written = run.values.value("model.path", std::string());
      const auto [it, fresh] = models.emplace(ec ? p.model_path : file, written);
      if (!fresh && it->second != written)
        throw InputError(c.origin + ": [sweep] \"model.path\" names the file '" + it->first + "' twice ('" +
                         it->second + "' and '" + written + "'); each model makes one run");
      if (k == 0) first = std::move(p);
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) + " (in run " + run.name + " of the sweep: " + run.values.dump() + ")");
    }
    runs.push_back(std::move(run));
  }
  for (const SweepAxis& a : axes) first.run_axis_keys.push_back(a.key);
  first.runs = std::move(runs);
  return first;
}

}  // namespace

RunPlan load_run_plan_from_string(const std::string& text, const std::string& origin, const std::string& base_dir,
                                  const std::vector<std::string>& overrides) {
  TomlContext c{origin, base_dir, {}};
  toml::table root = parse_toml(text, origin);
  c.overridden = apply_config_overrides(root, overrides);
  const std::string effective = effective_config_text(root, origin, overrides);  // "" without overrides
  const std::vector<SweepAxis> run_axes = take_run_axes(c, root);
  RunPlan plan = run_axes.empty() ? build_plan(std::move(root), effective.empty() ? text : effective, c)
                                  : plan_of_runs(text, overrides, c, run_axes);
  if (!run_axes.empty()) {  // the sweep's own config (each run's is in plan.runs)
    plan.config_text = effective.empty() ? text : effective;
    plan.config_sha256 = sha256_hex(plan.config_text.data(), plan.config_text.size());
  }
  plan.config_path = origin;
  plan.base_dir = base_dir;
  return plan;
}

RunPlan load_sweep_run(const RunPlan& sweep, size_t k) {
  RunPlan run = load_run_plan_from_string(sweep.runs.at(k).config_text, sweep.config_path, sweep.base_dir);
  run.backend = sweep.backend;
  run.dtype = sweep.dtype;
  run.backend_from_command_line = sweep.backend_from_command_line;
  return run;
}

CompressionConfig load_compression_config(const std::string& path) {
  // Only a regular file of at most kMaxConfigBytes: a FIFO, /dev/zero or a folder is refused, naming the path.
  const std::string text = read_regular_file(path, "compression config", kMaxConfigBytes);
  const toml::table root = parse_toml(text, path);
  const TomlContext c{path, fs::absolute(fs::path(path)).parent_path().string(), {}};
  check_keys(c, root, "", kRunSections);  // a run config is also a compression config; a misspelt section is not
  CompressionConfig out;
  std::vector<std::string> paths;
  out.registry = read_plugin_paths(c, root, &paths);
  out.cell = parse_cell(c, root, *out.registry, /*require_signal=*/false);
  if (const toml::table* b = sub_table(c, root, "budget", "budget"))
    out.compressible_layers = compressible_layers(c, *b, &out.compress_global_only);
  if (const toml::table* cp = sub_table(c, root, "compression", "compression")) {
    check_keys(c, *cp, "compression", kCompressionKeys);  // a misspelt rerotate is an error, not ignored
    out.rerotate = get_bool(c, *cp, "rerotate", "compression.rerotate", false);
  }
  // generate --compress prefills in one shot: the same cache as chunks without compression, but not what compression
  // between chunks computes, so that is refused rather than ignored.
  if (const toml::table* pf = sub_table(c, root, "prefill", "prefill"))
    if (get_bool(c, *pf, "compress_between_chunks", "prefill.compress_between_chunks", false))
      throw InputError(where(c, *pf->get("compress_between_chunks"), "prefill.compress_between_chunks") +
                       ": compression between chunks is a run setting (ripplekv run); generate --compress "
                       "compresses once after a one-shot prefill");
  return out;
}

RunPlan load_run_plan(const std::string& path, const std::vector<std::string>& overrides) {
  // Only a regular file of at most kMaxConfigBytes: `ripplekv validate /dev/zero` (or a FIFO, or a folder) is
  // refused at once, naming the path, instead of reading forever.
  const std::string text = read_regular_file(path, "config", kMaxConfigBytes);
  const std::string base = fs::absolute(fs::path(path)).parent_path().string();
  return load_run_plan_from_string(text, path, base, overrides);
}

}  // namespace rkv
