#include "runner/run/cells.hpp"

#include <map>
#include <numeric>
#include <utility>

#include "core/cancel.hpp"
#include "core/timing.hpp"
#include "runner/compress/cell.hpp"
#include "runner/decode/policy.hpp"
#include "runner/profile/joint_damage.hpp"
#include "runner/records/cell_records.hpp"
#include "runner/records/dumps.hpp"
#include "runner/run/run_state.hpp"

namespace rkv {

namespace {

/// What every cell records of an example: its task, index, T, input and the full cache's values and bytes.
ExampleOutcomeRecord outcome_of(const Example& ex) {
  ExampleOutcomeRecord r;
  r.task = ex.data.task;
  r.example = ex.data.index;
  r.prefix_tokens = static_cast<int64_t>(ex.prompt.tokens.size());
  r.kv_bytes_full = ex.full_kv_bytes;
  r.full_values = ex.full_values;
  r.input = ex.data.input;
  return r;
}

/// The full-cache cell on `ex`: its values are the full cache's, every layer keeps its span.
ExampleOutcomeRecord full_cache_outcome(const RunState& s, const Example& ex, CellDump& dump) {
  const ModelConfig& mc = s.config();
  ExampleOutcomeRecord r = outcome_of(ex);
  const int64_t T = r.prefix_tokens;
  r.values = ex.full_values;
  const std::vector<int64_t> spans_A = mc.layer_spans(s.layers_A, T);
  r.budget_total = std::accumulate(spans_A.begin(), spans_A.end(), int64_t{0});
  for (int64_t l = 0; l < mc.n_layers; ++l) r.budgets.push_back(mc.layer_span(l, T));
  r.kv_bytes = r.kv_bytes_full;
  r.kv_bytes_end = ex.full_kv_bytes_end;
  r.decode_tokens_per_second = ex.full_decode_tps;
  if (!ex.full_logits.empty()) dump.add_logits(r.task, r.example, ex.full_logits, mc.vocab_size);
  return r;
}

/// The setting of compressed cell `cc` for compress_cell (its scorers, allocators, profile, joint table).
CellSetting cell_setting(const RunState& s, const CellConfig& cc, const LayerScorers& scorers) {
  CellSetting setting;
  setting.cell = &cc;
  setting.scorers = &scorers;
  setting.instances = s.instances.get();
  if (cc.uses_profile) setting.profile = s.profiles.at(profile_key(cc)).s;
  if (!cc.joint.none()) setting.joint_table = &s.joint_tables.at(joint_table_key(cc));
  setting.layers_A = s.layers_A;
  setting.rerotate = s.plan.rerotate;
  return setting;
}

/// Compressed cell `cc` on `ex`: the cell sequence, then the task scored on the compressed cache under the cell's
/// decode policy (each question of a multi-question example on its own copy with its own session).
ExampleOutcomeRecord compressed_outcome(RunState& s, const CellConfig& cc, Example& ex, CellDump& dump) {
  const ModelConfig& mc = s.config();
  ExampleOutcomeRecord r = outcome_of(ex);
  const int64_t T = r.prefix_tokens;
  const ScorerUse& scorer = s.scorers->at(*cc.scorer);
  const LayerScorers layer_scorers = s.scorers->layers_of(cc);
  CellCompression cell = compress_cell(*s.backend, ex.prompt, ex.memo, cell_setting(s, cc, layer_scorers));
  CompressedPrompt& comp = cell.comp;
  r.budget_total = cell.budget_total;
  r.budgets = comp.budgets;
  r.head_budgets = comp.head_budgets;
  r.layer_bits = cell.layer_bits;
  r.token_class_entries = cell.token_class_entries;
  r.share_sources = cell.share_sources;
  r.joint_plan = cell.joint_plan;
  r.kv_bytes = comp.bytes_kept;
  r.compress_seconds = comp.seconds;
  r.warnings = cell.warnings;
  if (cc.budget_tokens && *cc.budget_tokens >= T)
    r.warnings.push_back("prompt of " + std::to_string(T) + " tokens is not longer than the budget of " +
                         std::to_string(*cc.budget_tokens) + " tokens: left uncompressed");
  const DecodePolicy policy(cc.decode, comp.budgets, comp.head_budgets, &scorer);
  if (const std::string w = policy.frozen_heads_warning(mc.n_kv_heads); !w.empty()) r.warnings.push_back(w);
  const std::vector<AttentionStats>* cumulative = prompt_cumulative_attention(ex.prompt);
  const std::unique_ptr<DecodeSession> decode = policy.begin(*s.backend, *comp.cache, cumulative, &comp.prompt_positions);
  ScoredCache scored;
  scored.cache = comp.cache.get();
  scored.start_pos = comp.next_position;
  scored.decode = decode.get();
  scored.fork = [&] {
    CacheCopy copy{s.backend->clone(*comp.cache), nullptr};
    copy.decode = policy.begin(*s.backend, *copy.cache, cumulative, &comp.prompt_positions);
    return copy;
  };
  dump.add_kept(*s.backend, *comp.cache, r.task, r.example, T, &comp.prompt_positions);
  TaskScore score = ex.task->score(*s.backend, *s.tok, ex.prompt, ex.data, scored);
  if (!score.logits.empty()) dump.add_logits(r.task, r.example, score.logits, mc.vocab_size);
  r.values = std::move(score.values);
  r.decode_tokens_per_second = score.decode_tokens_per_second;
  r.kv_bytes_end = score.bytes_end > 0 ? score.bytes_end : comp.cache->bytes_in_use();
  return r;
}

}  // namespace

void run_cells(RunState& s, RunSummary& summary) {
  s.progress.set_total(static_cast<int64_t>(s.pending.size()));
  std::map<std::string, std::pair<std::vector<ExampleOutcomeRecord>, CellDump>> done_by_effective;
  for (size_t c : s.pending) {
    const Cell& cell = s.plan.cells[c];
    const auto t_cell = SteadyClock::now();
    std::vector<ExampleOutcomeRecord> outcomes;
    CellDump dump(s.opt.out_dir, cell.id, s.opt.dumps);
    auto reuse = done_by_effective.find(cell.effective_key);
    if (reuse != done_by_effective.end()) {
      outcomes = reuse->second.first;
      dump = reuse->second.second.for_cell(cell.id);
    } else {
      for (Example& ex : s.examples) {
        throw_if_cancelled();
        outcomes.push_back(cell.config.full_cache ? full_cache_outcome(s, ex, dump)
                                                  : compressed_outcome(s, cell.config, ex, dump));
      }
      done_by_effective.emplace(cell.effective_key, std::make_pair(outcomes, dump));
    }
    dump.write();
    write_cell_file(s.opt.out_dir, s.plan, s.id, cell, outcomes, seconds_since(t_cell));
    ++summary.cells_computed;
    s.progress.step(cell.label);
  }
}

}  // namespace rkv
