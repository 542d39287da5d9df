#include "runner/run/cell_checks.hpp"

#include "core/errors.hpp"
#include "runner/compress/budgets.hpp"
#include "runner/compress/cell.hpp"
#include "runner/profile/joint_damage.hpp"

namespace rkv {

namespace {

/// Every sequence the run feeds the model fits its trained context length (when the model states one): the
/// calibration windows when a cell reads a profile, and each task's prompts and answers (Task::check_fits_context).
/// LongBench prompts are truncated by the task itself.
void check_lengths_fit_the_context(const RunState& s) { check_lengths_fit_context(s.plan, s.config().context_length); }

/// A per-head allocator takes one protected mask for every layer: a route's scorers must protect the same positions.
void check_heads_with_route(const RunState& s, size_t c) {
  const CellConfig& cc = s.plan.cells[c].config;
  if (cc.route.empty() || s.scorers->layers_of(cc).same_protected_spec(s.layers_A)) return;
  const PluginChoice* per_head = cc.allocator->heads ? cc.allocator->heads.get() : nullptr;
  if (!per_head && !serves_layer_budgets(s.instances->get(*cc.allocator))) per_head = &*cc.allocator;
  if (!per_head) return;
  throw InputError(s.where(c) + ": per-head allocator '" + per_head->id + "' (" +
                   (cc.allocator->heads ? "allocator.heads" : "allocator.plugin") +
                   ") with a scorer.route whose scorers protect different positions (sinks, recent window); it takes "
                   "one protected mask for every layer");
}

/// A decode policy that re-scores needs a scorer that declared decode-time scoring (on this model's shape).
void check_decode_scoring(const RunState& s, size_t c) {
  const Cell& cell = s.plan.cells[c];
  const CellConfig& cc = cell.config;
  if (!cc.decode.traits().rescores || s.scorers->at(*cc.scorer).requirements.decode_scoring) return;
  const std::string params = cc.scorer->params.to_string();
  throw InputError(s.plan.config_path + ": compression.decode.policy = \"" + cc.decode.policy +
                   "\" re-scores with the scorer, and '" + cc.scorer->id + "'" + (params.empty() ? "" : " with " + params) +
                   " does not support decode-time scoring (cell " + cell.label +
                   (cell.values.empty() ? "" : ", sweep values " + cell.values.dump()) + ")");
}

}  // namespace

void check_lengths_fit_context(const RunPlan& plan, int64_t context_length) {
  if (context_length <= 0) return;
  bool needs_profile = false;
  for (const auto& c : plan.cells)
    needs_profile |= !c.config.full_cache && c.config.uses_profile && !c.config.per_prompt_signal;
  if (needs_profile)
    check_sequence_fits(plan, plan.calibration.prefix_tokens + plan.calibration.window_tokens,
                        "data.calibration.prefix_tokens + data.calibration.window_tokens", context_length);
  for (const Task* task : tasks_of(plan)) task->check_fits_context(plan, context_length);
}

void check_plan_on_model_config(const RunPlan& plan, const ModelConfig& config) {
  check_lengths_fit_context(plan, config.context_length);
  for (const Cell& cell : plan.cells)
    check_cell_on_model(cell.config, config, plan.rerotate, plan.calibration.prefix_tokens,
                        plan.config_path + ": cell '" + cell.label + "'");
}

void check_cells_on_model(RunState& s) {
  const ModelConfig& mc = s.config();
  check_lengths_fit_the_context(s);
  for (size_t c : s.pending)
    check_cell_on_model(s.plan.cells[c].config, mc, s.plan.rerotate, s.plan.calibration.prefix_tokens, s.where(c));
  s.layers_A = resolve_compressible_layers(s.plan.compressible_layers, s.plan.compress_global_only, mc,
                                           s.plan.config_path);
  s.scorers = std::make_unique<ScorerSet>(*s.instances, mc);
  for (size_t c : s.pending)  // a route's scorers join the shared prefill's needs
    if (!s.plan.cells[c].config.full_cache) s.scorers->add_cell(s.plan.cells[c].config, s.where(c));
  bool cumulative_for_decode = false;  // a decode policy that seeds accumulated attention from the prompt
  for (size_t c : s.pending) {
    const CellConfig& cc = s.plan.cells[c].config;
    if (cc.full_cache) continue;
    check_heads_with_route(s, c);
  }
  for (size_t c : s.pending) {
    const CellConfig& cc = s.plan.cells[c].config;
    if (cc.full_cache) continue;
    check_decode_scoring(s, c);
    cumulative_for_decode = cumulative_for_decode ||
                            decode_needs_prompt_cumulative(cc.decode, s.scorers->at(*cc.scorer).requirements);
  }
  s.needs = prefill_needs(s.scorers->all(), cumulative_for_decode);
  if (s.plan.prefill.chunk_tokens > 0)  // the residual cosine is a one-shot prefill's capture
    for (const ScorerUse* use : s.scorers->all())
      if (use->requirements.wants(RKV_STAT_RESIDUAL_COSINE))
        throw InputError(s.plan.config_path + ": prefill.chunk_tokens = " + std::to_string(s.plan.prefill.chunk_tokens) +
                         ": '" + use->instance->id() + "' reads the residual cosine (RKV_STAT_RESIDUAL_COSINE), which a "
                         "one-shot prefill captures only; set prefill.chunk_tokens = 0");
}

void check_budgets_on_examples(const RunState& s) {
  const ModelConfig& mc = s.config();
  const int64_t A = static_cast<int64_t>(s.layers_A.size());
  for (size_t c : s.pending) {
    const CellConfig& cc = s.plan.cells[c].config;
    if (cc.full_cache) continue;
    for (const Example& ex : s.examples) {
      const int64_t T = ex.prompt_tokens();
      const int64_t B = cell_budget_total(cc, mc, s.layers_A, T);
      if (B < A)
        throw InputError(s.where(c) + ": the global budget B = " + std::to_string(B) +
                         " is below the number of compressible layers |A| = " + std::to_string(A) + " on a " +
                         ex.data.task + " example of T = " + std::to_string(T) +
                         " tokens (every layer keeps at least one position); raise " +
                         (cc.budget_bytes_fraction ? "budget.bytes_fraction"
                          : cc.budget_fraction     ? "budget.fraction"
                                                   : "budget.tokens"));
    }
  }
  for (size_t c : s.pending) {  // a joint plan that fits no option into its bytes fails here, before any file
    const CellConfig& cc = s.plan.cells[c].config;
    if (cc.full_cache || cc.joint.none()) continue;
    for (const Example& ex : s.examples) try {
        plan_joint(cc.joint, s.joint_tables.at(joint_table_key(cc)), mc, s.layers_A,
                   ex.prompt_tokens(), *cc.budget_bytes_fraction);
      } catch (const InputError& e) {
        throw InputError(s.where(c) + ": " + e.what());
      }
  }
}

}  // namespace rkv
