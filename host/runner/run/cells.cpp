#include "runner/run/cells.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <utility>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/timing.hpp"
#include "runner/compress/cell.hpp"
#include "runner/decode/policy.hpp"
#include "runner/profile/joint_damage.hpp"
#include "runner/records/cell_records.hpp"
#include "runner/records/checkpoint.hpp"
#include "runner/records/dumps.hpp"
#include "runner/report/outputs.hpp"
#include "runner/report/report.hpp"
#include "runner/run/examples.hpp"

namespace rkv {

namespace {

/// One pending cell during the loop: its checkpoint and its wall time so far.
struct CellRun {
  const Cell* cell = nullptr;
  std::unique_ptr<CellCheckpoint> checkpoint;
  double seconds = 0;  ///< wall seconds of its own work in this invocation, plus its share of each example's prefill
};

/// One cell's outcome on one example, with what it dumps.
struct CellOutcome {
  ExampleOutcomeRecord record;
  std::string kept;           ///< --dump kept lines
  std::vector<float> logits;  ///< --dump logits (teacher-forced continuations)
};

/// What every cell records of an example: its task, index, T, input and the full cache's values and bytes.
ExampleOutcomeRecord outcome_of(const PrefilledExample& p) {
  ExampleOutcomeRecord r;
  r.task = p.example->data.task;
  r.example = p.example->data.index;
  r.prefix_tokens = p.example->prompt_tokens();
  r.kv_bytes_full = p.full_kv_bytes;
  r.full_values = p.full_values;
  r.input = p.example->data.input;
  return r;
}

/// The full-cache cell on `p`: its values are the full cache's, every layer keeps its span.
CellOutcome full_cache_outcome(const RunState& s, const PrefilledExample& p) {
  const ModelConfig& mc = s.config();
  CellOutcome out{outcome_of(p), "", p.full_logits};
  ExampleOutcomeRecord& r = out.record;
  const int64_t T = r.prefix_tokens;
  r.values = p.full_values;
  const std::vector<int64_t> spans_A = mc.layer_spans(s.layers_A, T);
  r.budget_total = std::accumulate(spans_A.begin(), spans_A.end(), int64_t{0});
  for (int64_t l = 0; l < mc.n_layers; ++l) r.budgets.push_back(mc.layer_span(l, T));
  r.kv_bytes = r.kv_bytes_full;
  r.kv_bytes_end = p.full_kv_bytes_end;
  r.decode_tokens_per_second = p.full_decode_tps;
  return out;
}

/// The setting of compressed cell `cc` for compress_cell (its scorers, allocators, profile, joint table).
CellSetting cell_setting(const RunState& s, const CellConfig& cc, const LayerScorers& scorers) {
  CellSetting setting;
  setting.cell = &cc;
  setting.scorers = &scorers;
  setting.instances = s.instances.get();
  if (cc.per_prompt_signal) setting.prompt_signal = &s.scorers->at(*cc.signal);
  else if (cc.uses_profile) setting.profile = s.profiles.at(profile_key(cc)).s;
  if (!cc.joint.none()) setting.joint_table = &s.joint_tables.at(joint_table_key(cc));
  setting.layers_A = s.layers_A;
  setting.rerotate = s.plan.rerotate;
  if (s.plan.prefill.compress_between_chunks) setting.chunk_tokens = s.plan.prefill.chunk_tokens;
  return setting;
}

/// Compressed cell `cc` on `p`: the cell sequence, then the task scored on the compressed cache under the cell's
/// decode policy (each question of a multi-question example on its own copy with its own session).
CellOutcome compressed_outcome(RunState& s, const CellConfig& cc, PrefilledExample& p) {
  const ModelConfig& mc = s.config();
  CellOutcome out{outcome_of(p), "", {}};
  ExampleOutcomeRecord& r = out.record;
  const int64_t T = r.prefix_tokens;
  const ScorerUse& scorer = s.scorers->at(*cc.scorer);
  const LayerScorers layer_scorers = s.scorers->layers_of(cc);
  CellCompression cell = compress_cell(*s.backend, p.prompt, p.memo, cell_setting(s, cc, layer_scorers));
  CompressedPrompt& comp = cell.comp;
  r.budget_total = cell.budget_total;
  r.budgets = comp.budgets;
  r.head_budgets = comp.head_budgets;
  r.layer_bits = cell.layer_bits;
  r.prompt_profile = cell.prompt_profile;
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
  const std::vector<AttentionStats>* cumulative = prompt_cumulative_attention(p.prompt);
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
  if (s.opt.dumps.count("kept")) out.kept = kept_dump_lines(*s.backend, *comp.cache, r.task, r.example, T, &comp.prompt_positions);
  // Compressed between chunks, the cell's prompt ends with its own prediction (computed on its compressed chunks).
  PrefilledPrompt own;
  if (!cell.last_logits.empty()) {
    own.tokens = p.prompt.tokens;
    own.last_logits = std::move(cell.last_logits);
  }
  const PrefilledPrompt& prompt = own.tokens.empty() ? p.prompt : own;
  TaskScore score = p.example->task->score(*s.backend, *s.tok, prompt, p.example->data, p.prepared.get(), scored);
  if (s.opt.dumps.count("logits")) out.logits = std::move(score.logits);
  r.values = std::move(score.values);
  r.decode_tokens_per_second = score.decode_tokens_per_second;
  r.kv_bytes_end = score.bytes_end > 0 ? score.bytes_end : comp.cache->bytes_in_use();
  return out;
}

/// The pending cells with their checkpoints (resumed with --resume).
std::vector<CellRun> open_cells(const RunState& s) {
  const CheckpointIdentity id{s.plan.base_sha256, s.id.model_sha256, s.id.backend, s.id.compute_dtype};
  std::vector<CellRun> cells;
  for (size_t c : s.pending) {
    CellRun run;
    run.cell = &s.plan.cells[c];
    run.checkpoint = std::make_unique<CellCheckpoint>(*s.out, run.cell->id, id, s.opt.resume);
    cells.push_back(std::move(run));
  }
  return cells;
}

/// True when some cell lacks example `ex` (it must be prefilled).
bool needed(const std::vector<CellRun>& cells, const Example& ex) {
  for (const CellRun& c : cells)
    if (!c.checkpoint->find(ex.data.task, ex.data.index, ex.data.input.ids_sha256)) return true;
  return false;
}

/// Every cell that lacks example `ex` runs on it (each effective key once) and records the outcome and its dumps.
/// Each such cell's seconds get its own work plus an even share of the example's prefill (the work they share).
void run_example(RunState& s, std::vector<CellRun>& cells, const Example& ex) {
  const auto t_prefill = SteadyClock::now();
  PrefilledExample p = prefill_example(s, ex);
  size_t sharing = 0;  // the cells that run on this example
  for (const CellRun& c : cells) sharing += !c.checkpoint->find(ex.data.task, ex.data.index, ex.data.input.ids_sha256);
  const double prefill_share = sharing ? seconds_since(t_prefill) / static_cast<double>(sharing) : 0.0;
  std::map<std::string, CellOutcome> by_effective_key;
  for (CellRun& c : cells) {
    if (c.checkpoint->find(ex.data.task, ex.data.index, ex.data.input.ids_sha256)) continue;
    c.seconds += prefill_share;
    throw_if_cancelled();
    const auto t0 = SteadyClock::now();
    auto it = by_effective_key.find(c.cell->effective_key);
    if (it == by_effective_key.end())
      it = by_effective_key
               .emplace(c.cell->effective_key, c.cell->config.full_cache ? full_cache_outcome(s, p)
                                                                          : compressed_outcome(s, c.cell->config, p))
               .first;
    const CellOutcome& o = it->second;
    // Nothing computed from weights that changed under the run is written (model/model.hpp check_unchanged).
    s.model->check_unchanged("cell '" + c.cell->label + "', " + ex.data.task + " example " +
                             std::to_string(ex.data.index + 1));
    s.lock->check_held();  // still the folder's only writer
    if (!o.logits.empty()) {
      write_logits_dump(*s.out, c.cell->id, o.record.task, o.record.example, o.logits, s.config().vocab_size);
      index_dump(*s.out, c.cell->id, c.cell->label);
    }
    c.checkpoint->append(o.record, o.kept);
    c.seconds += seconds_since(t0);
  }
}

/// A cell that has every example: its outcomes in example order, its kept dump and its cell file.
void finish_cell(const RunState& s, CellRun& c) {
  std::vector<ExampleOutcomeRecord> outcomes;
  for (const Example& ex : s.examples) {
    const ExampleOutcomeRecord* r = c.checkpoint->find(ex.data.task, ex.data.index, ex.data.input.ids_sha256);
    if (!r) throw InputError("cell '" + c.cell->label + "' has no outcome for " + ex.data.task + " example " +
                             std::to_string(ex.data.index));
    outcomes.push_back(*r);
  }
  s.lock->check_held();
  const std::string kept = c.checkpoint->kept_lines();
  write_kept_dump(*s.out, c.cell->id, kept);
  if (!kept.empty()) index_dump(*s.out, c.cell->id, c.cell->label);
  write_cell_file(*s.out, s.plan, s.id, *c.cell, outcomes, c.seconds);
  c.checkpoint->remove();
}

/// After a cancel: report.md over what is finished -- the cells complete before this invocation and every
/// unfinished cell's finished examples -- marked partial at its top; results.jsonl and the other records stay a
/// finished run's. A failure to write it is said on stderr and does not stop the cancel.
void write_partial_report(RunState& s, const std::vector<CellRun>& cells, size_t done) {
  const CancelShield shield;  // reading the cell files polls cancellation: this short part runs to its end
  try {
    std::vector<std::string> order;
    std::map<std::string, std::string> labels;
    std::vector<CellData> data = collect_cells({s.opt.out_dir}, &order, &labels, true, false);  // complete cells
    for (const CellRun& c : cells) {
      CellData d;
      d.examples = c.checkpoint->outcomes();
      if (d.examples.empty()) continue;
      d.meta = cell_record(s.plan, s.id, *c.cell, {}, c.seconds);
      d.meta.erase("examples");
      data.push_back(std::move(d));
    }
    if (data.empty()) return;
    write_report(data, *s.out, report_resamples(data),
                 "partial report: the run was cancelled after " + std::to_string(done) + " of " +
                     std::to_string(s.examples.size()) + " examples (every cell shows the examples it finished, one more "
                     "for the cells that finished the example in progress; a cell that finished none is left out). "
                     "Rerun with --resume to finish (results.jsonl is written then)");
    s.progress.note("run: cancelled; partial report in " + s.out->path_of("report.md"));
  } catch (const std::exception& e) {
    std::cerr << "run: cancelled; the partial report could not be written: " << e.what() << "\n";
  }
}

}  // namespace

void run_cells(RunState& s, RunSummary& summary) {
  std::vector<CellRun> cells = open_cells(s);
  s.progress.set_total(static_cast<int64_t>(s.examples.size()));
  size_t done = 0;
  try {
    for (const Example& ex : s.examples) {
      throw_if_cancelled();
      if (needed(cells, ex)) run_example(s, cells, ex);
      ++done;
      s.progress.step(ex.data.task + " example " + std::to_string(ex.data.index + 1) + " (" +
                      std::to_string(ex.prompt_tokens()) + " tokens) on " + std::to_string(cells.size()) + " cells");
    }
  } catch (const Cancelled&) {
    write_partial_report(s, cells, done);
    throw;
  }
  const CancelShield shield;  // every example is done: the cell files are written even if a cancel arrives now
  for (CellRun& c : cells) {
    finish_cell(s, c);
    ++summary.cells_computed;
  }
  ::unlinkat(s.out->fd(), "partial", AT_REMOVEDIR);  // only when empty (a link there is not a folder: left alone)
}

}  // namespace rkv
