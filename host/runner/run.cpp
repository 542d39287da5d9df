#include "runner/run.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <memory>
#include <set>
#include <sstream>

#include "backend/backend.hpp"
#include "cache/budget.hpp"
#include "core/atomic_file.hpp"
#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "eval/longbench.hpp"
#include "eval/longbench_records.hpp"
#include "eval/ruler_metrics.hpp"
#include "eval/stats.hpp"
#include "model/model.hpp"
#include "runner/cache_codec.hpp"
#include "runner/cache_share.hpp"
#include "runner/compression.hpp"
#include "runner/joint_allocation.hpp"
#include "runner/plan_backend.hpp"
#include "runner/profile.hpp"
#include "runner/sliding_window.hpp"
#include "runner/run_dumps.hpp"
#include "runner/run_manifest.hpp"
#include "runner/run_records.hpp"
#include "runner/scorer_route.hpp"
#include "runner/task_lm_fidelity.hpp"
#include "runner/task_multi_question.hpp"
#include "runner/task_needle.hpp"
#include "runner/task_ruler.hpp"
#include "runner/text_windows.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string choice_key(const PluginChoice& c) { return c.id + "{" + c.params.to_string() + "}"; }

// ---- progress ----------------------------------------------------------------------------------------------------

/// A progress bar with ETA on a terminal, plain lines elsewhere (one line per finished step).
class Progress {
 public:
  Progress(bool quiet, std::function<void(int64_t, int64_t, const std::string&)> sink)
      : quiet_(quiet), sink_(std::move(sink)), tty_(::isatty(STDERR_FILENO) != 0), t0_(Clock::now()) {}
  void set_total(int64_t total) {
    total_ = total;
    t0_ = Clock::now();  // the ETA covers the cell loop, not the set-up before it
  }
  void step(const std::string& what) {
    ++done_;
    if (sink_) return sink_(done_, total_, what);
    if (quiet_) return;
    const double el = since(t0_);
    const double eta = done_ > 0 ? el / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0.0;
    std::ostringstream os;
    os.precision(0);
    os << std::fixed << "[" << done_ << "/" << total_ << "] " << what << "  elapsed " << el << " s, ETA " << eta << " s";
    if (tty_) {
      const int width = 30;
      const int filled = total_ > 0 ? static_cast<int>(width * done_ / total_) : width;
      std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
                << std::string(static_cast<size_t>(width - filled), '.') << "] " << os.str() << "\033[K";
      if (done_ == total_) std::cerr << "\n";
    } else {
      std::cerr << os.str() << "\n";
    }
  }
  void note(const std::string& line) const {
    if (quiet_ || sink_) return;
    if (tty_) std::cerr << "\r\033[K";
    std::cerr << line << "\n";
  }

 private:
  bool quiet_;
  std::function<void(int64_t, int64_t, const std::string&)> sink_;
  bool tty_;
  Clock::time_point t0_;
  int64_t done_ = 0, total_ = 0;
};

// ---- plugin instances --------------------------------------------------------------------------------------------

/// One instance per distinct (plugin, params), created on first use.
class InstancePool {
 public:
  explicit InstancePool(const HostServices& host) : host_(host) {}
  const PluginInstance& get(const PluginChoice& c) {
    const std::string key = choice_key(c);
    auto it = pool_.find(key);
    if (it == pool_.end())
      it = pool_.emplace(key, std::make_unique<PluginInstance>(PluginInstance::create(*c.info, c.params, host_))).first;
    return *it->second;
  }

 private:
  const HostServices& host_;
  std::map<std::string, std::unique_ptr<PluginInstance>> pool_;
};

// ---- examples -----------------------------------------------------------------------------------------------------

/// One evaluation prompt, prefilled once and shared by every cell.
struct Example {
  std::string task;
  int64_t index = 0;
  PrefilledPrompt prompt;
  // lm_fidelity
  std::vector<int32_t> continuation;
  LmFidelityReference reference;
  // needle
  NeedlePrompt needle;
  // ruler
  RulerPrompt ruler;
  // multi_question: the context and every question; which one this example asks (-1: all, query-agnostic)
  MultiQuestionPrompt multi_question;
  int64_t question = -1;
  // longbench
  const LongBenchRecord* record = nullptr;
  LongBenchDataset dataset;
  std::vector<int32_t> stop_ids;
  ScoreMemo memo;  // statistics and scores per scorer, shared by the cells
  // the full cache's outcome, per metric
  std::map<std::string, double> full_values;
  double full_decode_tps = 0;
  size_t full_kv_bytes = 0;      // the full cache's bytes after the prompt, sliding layers cut to their windows
  size_t full_kv_bytes_end = 0;  // the full cache's bytes after the task
  ExampleInput input;            // where its tokens came from (examples.jsonl "input")
};

/// Greedy continuation of a compressed (or full) cache after `prompt`, feeding `question` first when not empty, the
/// first token at position `start_pos` (T, or the cache length after key re-rotation: CompressedPrompt::next_position).
GreedyResult answer(Backend& backend, const PrefilledPrompt& prompt, BackendCache& cache, int64_t start_pos,
                    const std::vector<int32_t>& question, int64_t max_new, const std::vector<int32_t>& stop,
                    DecodeSession* decode) {
  if (question.empty()) return greedy_decode(backend, prompt.last_logits, start_pos, cache, max_new, stop, decode);
  const int64_t V = backend.model().config.vocab_size, n = static_cast<int64_t>(question.size());
  std::vector<float> last;
  if (decode) {  // token by token, the policy after each
    const std::vector<float> logits = continuation_logits(backend, question, start_pos, cache, decode);
    last.assign(logits.end() - V, logits.end());
  } else {
    last = extend_cache(backend, cache, question, start_pos, LogitsFor::Last);
  }
  return greedy_decode(backend, last, start_pos + n, cache, max_new, stop, decode);
}

/// A fresh copy of the cache an example's questions start from, with its own decode-policy session (null: none).
struct CacheCopy {
  std::unique_ptr<BackendCache> cache;
  std::unique_ptr<DecodeSession> decode;
};
using CacheForker = std::function<CacheCopy()>;

/// multi_question: the query-aware example answers its one question on `cache` (its prompt holds the question); the
/// query-agnostic one asks every question on its own copy from `fork`, `*bytes_end` the most bytes a copy held.
std::map<std::string, double> score_multi_question(Backend& backend, const Tokenizer& tok, const Example& ex,
                                                   BackendCache& cache, int64_t start_pos, double* decode_tps,
                                                   DecodeSession* decode, const CacheForker& fork, size_t* bytes_end) {
  const MultiQuestionPrompt& mq = ex.multi_question;
  if (ex.question >= 0) {
    const GreedyResult r =
        answer(backend, ex.prompt, cache, start_pos, {}, mq.max_new_tokens, tok.end_of_generation_ids(), decode);
    *decode_tps = r.tokens_per_second;
    return {{"query_aware", 100.0 * ruler_string_match_all(tok.decode(r.tokens, false),
                                                            {mq.answers[static_cast<size_t>(ex.question)]})}};
  }
  double found = 0, tps = 0;
  for (size_t i = 0; i < mq.questions.size(); ++i) {
    CacheCopy copy = fork();
    const GreedyResult r = answer(backend, ex.prompt, *copy.cache, start_pos, mq.questions[i], mq.max_new_tokens,
                                  tok.end_of_generation_ids(), copy.decode.get());
    found += ruler_string_match_all(tok.decode(r.tokens, false), {mq.answers[i]});
    tps += r.tokens_per_second;
    *bytes_end = std::max(*bytes_end, copy.cache->bytes_in_use());
  }
  const double n = static_cast<double>(mq.questions.size());
  *decode_tps = tps / n;
  return {{"query_agnostic", 100.0 * found / n}};
}

/// Scores one example on `cache` (the full cache or a compressed copy; consumed), with the decode policy's session
/// `decode` (null: every appended token is kept); tokens fed after the prompt start at `start_pos` (T, or the cache
/// length after key re-rotation). A query-agnostic multi_question example leaves `cache` alone and asks each question
/// on a copy from `fork`, setting `*bytes_end` (score_multi_question).
std::map<std::string, double> score_example(Backend& backend, const Tokenizer& tok, const Example& ex,
                                            BackendCache& cache, int64_t start_pos, double* decode_tps,
                                            DecodeSession* decode, const CacheForker& fork, size_t* bytes_end,
                                            CellDump* dump = nullptr) {
  if (ex.task == "multi_question")
    return score_multi_question(backend, tok, ex, cache, start_pos, decode_tps, decode, fork, bytes_end);
  std::map<std::string, double> v;
  if (ex.task == "lm_fidelity") {
    const LmFidelityValues f =
        lm_fidelity_score(backend, ex.prompt, cache, ex.continuation, ex.reference, decode, start_pos);
    v["kl"] = f.kl;
    v["top1_agreement"] = f.top1;
    v["ppl"] = f.ppl;
    v["ppl_full"] = f.ppl_full;
    if (dump) dump->add_logits(ex.task, ex.index, f.logits, backend.model().config.vocab_size);
  } else if (ex.task == "needle") {
    const GreedyResult r =
        answer(backend, ex.prompt, cache, start_pos, ex.needle.question_part, kNeedleAnswerTokens,
               tok.end_of_generation_ids(), decode);
    v["accuracy"] = needle_hit(tok.decode(r.tokens, false), ex.needle.passkey) ? 1.0 : 0.0;
    *decode_tps = r.tokens_per_second;
  } else if (ex.task == "ruler") {
    const GreedyResult r = answer(backend, ex.prompt, cache, start_pos, ex.ruler.question_part, ex.ruler.max_new_tokens,
                                  tok.end_of_generation_ids(), decode);
    const double score = 100.0 * ruler_string_match_all(tok.decode(r.tokens, false), ex.ruler.answers);
    v[ruler_metric(ex.ruler)] = score;
    v["average"] = score;
    *decode_tps = r.tokens_per_second;
  } else {
    const GreedyResult r =
        answer(backend, ex.prompt, cache, start_pos, {}, ex.dataset.max_new_tokens, ex.stop_ids, decode);
    const std::string pred = longbench_prediction(tok, r.tokens);
    v[ex.dataset.name] = 100.0 * longbench_example_score(ex.dataset, pred, *ex.record);
    *decode_tps = r.tokens_per_second;
  }
  return v;
}

// ---- the run --------------------------------------------------------------------------------------------------------

void check_cancel(const RunOptions& o) {
  if (o.cancel && o.cancel->load()) throw Cancelled();
}

/// Every sequence the run feeds the model must fit its trained context length (when the model states one): a clear
/// error naming the config keys, instead of silently running past the positions the model was trained on. LongBench
/// prompts are truncated to [tasks.longbench] max_context_tokens (default: the context length) by the task itself.
void check_lengths_fit_the_context(const RunPlan& plan, const ModelConfig& mc) {
  const int64_t ctx = mc.context_length;
  if (ctx <= 0) return;
  auto check = [&](int64_t n, const std::string& what) {
    if (n > ctx)
      throw InputError(plan.config_path + ": " + what + " = " + std::to_string(n) + " tokens is longer than the model's " +
                       "context length " + std::to_string(ctx) + "; lower it");
  };
  if (std::find(plan.tasks.begin(), plan.tasks.end(), "lm_fidelity") != plan.tasks.end())
    check(plan.eval.prefix_tokens + plan.continuation_tokens,
          "data.eval.prefix_tokens + tasks.lm_fidelity.continuation_tokens");
  bool needs_profile = false;
  for (const auto& c : plan.cells) needs_profile |= !c.config.full_cache && c.config.uses_profile;
  if (needs_profile)
    check(plan.calibration.prefix_tokens + plan.calibration.window_tokens,
          "data.calibration.prefix_tokens + data.calibration.window_tokens");
  if (std::find(plan.tasks.begin(), plan.tasks.end(), "needle") != plan.tasks.end())
    for (int64_t n : plan.needle.context_tokens) check(n, "tasks.needle.context_tokens");
  if (std::find(plan.tasks.begin(), plan.tasks.end(), "ruler") != plan.tasks.end()) {
    int64_t most_new = plan.ruler.max_new_tokens;
    for (const auto& name : plan.ruler.subtasks)
      if (const RulerSubtask* s = find_ruler_subtask(name); s && plan.ruler.max_new_tokens == 0)
        most_new = std::max(most_new, s->max_new_tokens);
    for (int64_t n : plan.ruler.context_tokens)
      check(n + most_new, "tasks.ruler.context_tokens + the answer's max_new_tokens");
  }
  if (std::find(plan.tasks.begin(), plan.tasks.end(), "multi_question") != plan.tasks.end())
    for (int64_t n : plan.multi_question.context_tokens)
      check(n + plan.multi_question.max_new_tokens,
            "tasks.multi_question.context_tokens + tasks.multi_question.max_new_tokens");
}

/// Every pending compressed cell's global budget B is feasible (B >= |A|) on every example, checked before the first
/// cell file is written: a config error found after it would leave a folder that neither the fixed config nor
/// --resume accepts. Throws rkv::InputError naming the config, the cell and the key to raise.
void check_budgets_feasible(const RunPlan& plan, const std::vector<size_t>& pending,
                            const std::vector<Example>& examples, const ModelConfig& mc,
                            const std::vector<int64_t>& layers_A) {
  const int64_t A = static_cast<int64_t>(layers_A.size());
  for (size_t c : pending) {
    const CellConfig& cc = plan.cells[c].config;
    if (cc.full_cache) continue;
    for (const auto& ex : examples) {
      const int64_t T = static_cast<int64_t>(ex.prompt.tokens.size());
      const int64_t B = cell_budget_total(token_fraction(cc, mc.head_dim, T), cc.budget_tokens, mc.layer_spans(layers_A, T));
      if (B < A)
        throw InputError(plan.config_path + ": cell '" + plan.cells[c].label + "': the global budget B = " +
                         std::to_string(B) + " is below the number of compressible layers |A| = " + std::to_string(A) +
                         " on a " + ex.task + " example of T = " + std::to_string(T) +
                         " tokens (every layer keeps at least one position); raise " +
                         (cc.budget_bytes_fraction ? "budget.bytes_fraction"
                          : cc.budget_fraction     ? "budget.fraction"
                                                   : "budget.tokens"));
    }
  }
}

/// The scorer of every layer of a cell: its [scorer], and each [[scorer.route]] entry's scorer on that entry's layers.
/// `scorers` holds a ScorerUse per choice_key of every scorer the cell names.
LayerScorers layer_scorers_of(const CellConfig& cc, const std::map<std::string, ScorerUse>& scorers) {
  std::map<int64_t, const ScorerUse*> routed;
  for (const RouteEntry& e : cc.route)
    for (int64_t l : e.layers) routed[l] = &scorers.at(choice_key(e.scorer));
  return LayerScorers(scorers.at(choice_key(*cc.scorer)), std::move(routed));
}

std::vector<size_t> shard_cells(const RunPlan& plan, int index, int count) {
  std::vector<size_t> order(plan.cells.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return plan.cells[a].id < plan.cells[b].id; });
  std::vector<size_t> mine;
  for (size_t k = 0; k < order.size(); ++k)
    if (static_cast<int>(k % static_cast<size_t>(count)) == index - 1) mine.push_back(order[k]);
  std::sort(mine.begin(), mine.end());  // config order within the shard
  return mine;
}

/// The input record of a generated prompt: `source` and `id` name it, the hash covers the compressed part then the
/// question fed after compression (the whole prompt the model sees).
ExampleInput prompt_input(const std::string& source, const std::string& id, const std::vector<int32_t>& compressed,
                          const std::vector<int32_t>& question) {
  std::vector<int32_t> ids = compressed;
  ids.insert(ids.end(), question.begin(), question.end());
  const auto n = static_cast<int64_t>(ids.size());
  return {source, -1, n, n, id, token_ids_sha256(ids)};
}

/// multi_question's examples: per context, the query-agnostic one (the context alone, every question asked after)
/// then one query-aware example per question (context and question prefilled together).
void add_multi_question_examples(const RunPlan& plan, const Tokenizer& tok, Backend& backend, const PrefillNeeds& needs,
                                 std::vector<Example>& examples, const RunOptions& opt) {
  std::string text;
  for (const auto& f : plan.eval.files) text += read_file(f) + "\n\n";
  int64_t index = 0;
  for (const MultiQuestionPrompt& p : build_multi_question_prompts(tok, text, plan.multi_question)) {
    for (int64_t q = -1; q < static_cast<int64_t>(p.questions.size()); ++q) {
      Example ex;
      ex.task = "multi_question";
      ex.index = index++;
      ex.multi_question = p;
      ex.question = q;
      std::vector<int32_t> ids = p.context;
      if (q >= 0) {
        const std::vector<int32_t>& question = p.questions[static_cast<size_t>(q)];
        ids.insert(ids.end(), question.begin(), question.end());
      }
      const std::string id = "context=" + std::to_string(p.context_tokens) + ",example=" + std::to_string(p.example) +
                             (q >= 0 ? ",question=" + std::to_string(q) : std::string(",questions=all"));
      ex.input = prompt_input("multi_question", id, ids, {});
      ex.prompt = prefill_prompt(backend, ids, needs);
      examples.push_back(std::move(ex));
      check_cancel(opt);
    }
  }
}

/// The key of a joint cell's damage table: its scorer and its grid (the calibration split is the run's).
std::string joint_table_key(const CellConfig& cc) { return choice_key(*cc.scorer) + "|" + cc.joint.label(); }

/// A cell's compressed cache of one prompt (not a joint cell): sharing plan, allocators, compression, sharing,
/// codec. Sets r's budget_total, share_sources, layer_bits and the allocators' and sharing's warnings.
CompressedPrompt compress_cell(Backend& backend, const PrefilledPrompt& prompt, const CellConfig& cc,
                               const LayerScorers& layer_scorers, ScoreMemo& memo, InstancePool& instances,
                               const std::map<std::string, SensitivityProfile>& profiles, const ModelConfig& mc,
                               const std::vector<int64_t>& layers_A, bool rerotate, ExampleOutcomeRecord& r) {
  const int64_t T = static_cast<int64_t>(prompt.tokens.size());
  std::vector<double> profile_kept, profile_all;
  if (cc.uses_profile) profile_all = profiles.at(choice_key(*cc.signal) + "|" + choice_key(*cc.scorer)).s;
  // Shared layers hold no cache: the cell's budget over A goes to the layers that keep theirs.
  const SharePlan shared = plan_sharing(
      cc.share, mc, layers_A,
      cell_budget_total(token_fraction(cc, mc.head_dim, T), cc.budget_tokens, mc.layer_spans(layers_A, T)), T,
      profile_all);
  if (cc.uses_profile)
    for (int64_t l : shared.layers) profile_kept.push_back(profile_all[static_cast<size_t>(l)]);
  const CellBudgets alloc =
      allocate_cell(backend, prompt, layer_scorers, memo, instances.get(*cc.allocator),
                    cc.allocator->heads ? &instances.get(*cc.allocator->heads) : nullptr, shared.layers, profile_kept,
                    shared.budget_total);
  CompressedPrompt comp = compress_prompt(backend, prompt, layer_scorers, shared.layers, alloc.layers, memo,
                                          alloc.heads.empty() ? nullptr : &alloc.heads, rerotate);
  share_compressed(backend, comp, shared.sources);
  if (!cc.share.none()) r.share_sources = shared.sources;
  const std::vector<int> bits = layer_bits_of(comp, cc.codec, profile_all, mc);
  const std::vector<std::vector<uint8_t>> classes =
      token_classes_of(backend, prompt, comp, layer_scorers, memo, cc.codec);
  encode_compressed(backend, comp, cc.codec, bits, classes);
  r.layer_bits.assign(bits.begin(), bits.end());
  r.token_class_entries = token_class_entries(classes, cc.codec);
  r.budget_total = shared.budget_total;
  r.warnings = alloc.warnings;
  if (!shared.warning.empty()) r.warnings.push_back(shared.warning);
  return comp;
}

/// A joint cell's compressed cache of one prompt (runner/joint_allocation.hpp). Sets r's budget_total (the entries
/// kept), layer_bits (every layer; 32 = float32), share_sources when a layer shares, and the plan per layer.
CompressedPrompt compress_joint_cell(Backend& backend, const PrefilledPrompt& prompt, const CellConfig& cc,
                                     const LayerScorers& layer_scorers, ScoreMemo& memo, const JointDamageTable& table,
                                     const ModelConfig& mc, const std::vector<int64_t>& layers_A, bool rerotate,
                                     ExampleOutcomeRecord& r) {
  const int64_t T = static_cast<int64_t>(prompt.tokens.size());
  const JointLayerPlan jp = plan_joint(cc.joint, table, mc, layers_A, T, *cc.budget_bytes_fraction);
  CompressedPrompt comp = compress_joint(backend, prompt, layer_scorers, memo, cc.joint, jp, rerotate);
  r.budget_total = std::accumulate(jp.budgets.begin(), jp.budgets.end(), int64_t{0});
  r.layer_bits.assign(jp.bits.begin(), jp.bits.end());
  for (size_t l = 0; l < jp.sources.size(); ++l)
    if (jp.sources[l] != static_cast<int64_t>(l)) r.share_sources = jp.sources;
  r.joint_plan = jp.chosen;
  return comp;
}

/// Refuses, before any work, a joint grid this model cannot run (naming the config, the cell and the key): an integer
/// width whose `group` does not suit the head dim or a model with sliding-window layers (check_codec_support), or a
/// fraction that keeps no position of a layer's span on the calibration prefix (where its damage is measured).
void check_joint_support(const RunPlan& plan, const Cell& cell, const ModelConfig& mc) {
  const JointSpec& joint = cell.config.joint;
  if (joint.none()) return;
  const std::string where = plan.config_path + ": cell '" + cell.label + "': ";
  for (int b : joint.bits) {
    if (b == 32) continue;
    check_codec(joint.codec(b), mc.head_dim, where + "compression.joint.bits / group");
    if (has_sliding_window(mc))
      throw InputError(where + "compression.joint.bits: " + std::to_string(b) + " bits pack layers, which a model with "
                       "sliding-window layers does not support (their window cut would evict from a packed cache)");
  }
  for (double f : joint.fractions)
    for (int64_t l = 0; l < mc.n_layers; ++l)
      if (std::floor(f * static_cast<double>(mc.layer_span(l, plan.calibration.prefix_tokens)) + 0.5) < 1)
        throw InputError(where + "compression.joint.fractions: " + std::to_string(f) + " keeps no position of layer " +
                         std::to_string(l) + "'s span of " +
                         std::to_string(mc.layer_span(l, plan.calibration.prefix_tokens)) +
                         " calibration tokens; raise it or data.calibration.prefix_tokens");
}

}  // namespace

RunSummary run_ablation(const RunPlan& plan, const RunOptions& opt) {
  // Model loading, reading and tokenizing texts and drawing windows poll this (core/cancel.hpp), not only the
  // per-example loops below: a cancelled run stops within a fraction of a second in every phase.
  const CancelScope cancel_scope(opt.cancel);
  const auto t_run = Clock::now();
  if (opt.out_dir.empty()) throw InputError("run: an output folder is required (--out DIR or [output] dir)");
  if (opt.shard_count < 1 || opt.shard_index < 1 || opt.shard_index > opt.shard_count)
    throw InputError("run: --shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) +
                     " is not I/N with 1 <= I <= N");
  // The backend first: one that cannot be had stops the run before anything is loaded or written.
  const BackendOptions backend_options = plan_backend_options(plan, opt.threads);
  check_plan_backend(plan, backend_options);
  const std::string backend_kind = resolve_backend_kind(plan.backend);
  const std::string out = opt.out_dir;
  check_output_folder_is_ours(out, opt.force, "run");  // never overwrite a folder that is not a ripplekv run
  const OutputFolderLock lock(out);  // one writer per folder: a second run (or merge) into it stops here
  // Checks only: run.json and config.toml are written once every model-dependent check below has passed.
  RunIdentity id = prepare_output_folder(plan, out, opt.resume, opt.force);

  RunSummary summary;
  summary.cells_total = static_cast<int64_t>(plan.cells.size());
  std::vector<size_t> pending, complete;
  for (size_t c : shard_cells(plan, opt.shard_index, opt.shard_count)) {
    if (opt.resume && cell_file_complete(out, plan.cells[c].id, plan.base_sha256, backend_kind, plan.dtype)) {
      complete.push_back(c);
      continue;
    }
    pending.push_back(c);
  }
  summary.cells_skipped = summary.cells_total - static_cast<int64_t>(pending.size());
  Progress progress(opt.quiet, opt.progress);
  if (pending.empty()) {
    progress.note("run: nothing to do (" + std::to_string(summary.cells_skipped) + " cells complete or in other shards)");
    write_run_identity(plan, out, opt.resume, opt.shard_index, opt.shard_count, opt.force);
    assemble_outputs({out}, out, true);
    summary.seconds = since(t_run);
    return summary;
  }

  // Model, tokenizer, plugins.
  progress.note("run: loading " + plan.model_path);
  const Model model = load_model(plan.model_path, weights_for_backend(plan.backend, plan.weights));
  const Tokenizer tok = Tokenizer::from_path(plan.model_path);
  id.model_sha256 = model.sha256;
  id.weights = weight_storage_name(model.weights);
  id.manifest = reproducibility_manifest(plan, tok);
  // Cells kept from before must come from this model file (else one report mixes two models' numbers).
  for (size_t c : complete) check_cell_model(out, plan.cells[c].id, model.sha256);
  const std::unique_ptr<Backend> backend = make_backend(plan.backend, model, backend_options);
  id.backend = backend->kind();
  id.compute_dtype = backend->compute_dtype();
  progress.note("run: backend " + backend->description());
  HostServices host;
  host.watch(opt.cancel);  // plugin calls polling is_cancelled() see Ctrl-C / the C API's cancel callback
  InstancePool instances(host);
  const ModelConfig& mc = model.config;
  const rkv_attention_shape shape{sizeof(rkv_attention_shape), mc.n_layers, mc.n_heads, mc.n_kv_heads, mc.head_dim};

  check_lengths_fit_the_context(plan, mc);
  for (size_t c : pending)  // before any work: a setting the model's sliding windows rule out fails the run here
    if (!plan.cells[c].config.full_cache) {
      check_sliding_window_support(mc, plan.rerotate, plan.cells[c].config.decode.policy,
                                   plan.config_path + ": cell '" + plan.cells[c].label + "'");
      check_codec_support(mc, plan.cells[c].config.codec,
                          plan.config_path + ": cell '" + plan.cells[c].label + "'");
      check_share_support(mc, plan.cells[c].config.share, plan.config_path + ": cell '" + plan.cells[c].label + "'");
      check_joint_support(plan, plan.cells[c], mc);
    }

  const std::vector<int64_t> layers_A =
      resolve_compressible_layers(plan.compressible_layers, plan.compress_global_only, mc, plan.config_path);

  // Scorers of the cells to compute, and how many prompt queries their statistics need.
  std::map<std::string, ScorerUse> scorers;
  auto add_scorer = [&](const PluginChoice& choice) {
    const std::string key = choice_key(choice);
    if (scorers.count(key)) return;
    ScorerUse use;
    use.instance = &instances.get(choice);
    use.requirements = query_scorer_requirements(*use.instance, shape);
    use.key = key;
    scorers.emplace(key, use);
  };
  for (size_t c : pending) {
    const CellConfig& cc = plan.cells[c].config;
    if (cc.full_cache) continue;
    check_route_layers(cc.route, mc.n_layers, plan.config_path + ": cell '" + plan.cells[c].label + "'");
    add_scorer(*cc.scorer);
    for (const RouteEntry& e : cc.route) add_scorer(e.scorer);  // a route's scorers join the shared prefill's needs
  }
  for (size_t c : pending) {  // before any prefill: what allocate_cell would refuse in the middle of the run
    const CellConfig& cc = plan.cells[c].config;
    if (!cc.full_cache && !cc.route.empty() && cc.allocator->heads &&
        !layer_scorers_of(cc, scorers).same_protected_spec(layers_A))
      throw InputError(plan.config_path + ": cell '" + plan.cells[c].label + "': allocator.heads = '" +
                       cc.allocator->heads->id + "' with a scorer.route whose scorers protect different positions "
                       "(sinks, recent window); a per-head allocator takes one protected mask for every layer");
  }
  std::vector<const ScorerUse*> scorer_list;
  for (const auto& kv : scorers) scorer_list.push_back(&kv.second);
  // Every scorer's statistics, from the one shared prefill, and the prompt's cumulative attention when a cell's decode
  // policy seeds accumulated attention from it.
  bool cumulative_for_decode = false;
  for (size_t c : pending) {
    const CellConfig& cc = plan.cells[c].config;
    if (cc.full_cache) continue;
    const ScorerRequirements& req = scorers.at(choice_key(*cc.scorer)).requirements;
    if (cc.decode.policy == "periodic" && !req.decode_scoring)  // before any cell is computed
      throw InputError(plan.config_path + ": compression.decode.policy = \"periodic\" re-scores with the scorer, and '" +
                       cc.scorer->id + "'" +
                       (cc.scorer->params.to_string().empty() ? "" : " with " + cc.scorer->params.to_string()) +
                       " does not support decode-time scoring (cell " + plan.cells[c].label +
                       (plan.cells[c].values.empty() ? "" : ", sweep values " + plan.cells[c].values.dump()) + ")");
    cumulative_for_decode = cumulative_for_decode || decode_needs_prompt_cumulative(cc.decode, req);
  }
  const PrefillNeeds needs = prefill_needs(scorer_list, cumulative_for_decode);

  // Sensitivity profiles, one per (signal, scorer) that a cell's allocator uses.
  std::map<std::string, SensitivityProfile> profiles;
  std::vector<std::string> profile_order;  // written in this order once the run is known to start
  for (size_t c : pending) {
    const CellConfig& cc = plan.cells[c].config;
    if (cc.full_cache || !cc.uses_profile) continue;
    const std::string key = choice_key(*cc.signal) + "|" + choice_key(*cc.scorer);
    if (profiles.count(key)) continue;
    check_cancel(opt);
    progress.note("run: profiling with " + cc.signal->id + " (base scorer " + cc.scorer->id + ")");
    ProfileRequest req = make_profile_request(plan, cc, model, tok);
    req.backend = backend.get();
    req.cancel = opt.cancel;
    SensitivityProfile p = compute_profile(req);
    progress.note("run: profile " +
                  (p.from_cache ? "read from the cache (computed in " + std::to_string(p.seconds) + " s)"
                                : "computed in " + std::to_string(p.seconds) + " s") +
                  ", split-half Spearman " + std::to_string(p.split_half_spearman));
    profile_order.push_back(key);
    profiles.emplace(key, std::move(p));
  }

  // The joint cells' damage tables: D_l(o) of every option of their grid (runner/joint_allocation.hpp), each a profile
  // of the damage signal (cached like one), measured once per (scorer, grid).
  std::map<std::string, JointDamageTable> joint_tables;
  for (size_t c : pending) {
    const CellConfig& cc = plan.cells[c].config;
    if (cc.full_cache || cc.joint.none()) continue;
    const std::string key = joint_table_key(cc);
    if (joint_tables.count(key)) continue;
    JointDamageTable table;
    table.options = joint_options(cc.joint.fractions, cc.joint.bits, cc.joint.share);
    for (const JointOption& o : table.options) {
      check_cancel(opt);
      if (joint_option_is_lossless(o)) {
        table.damage.emplace_back(static_cast<size_t>(mc.n_layers), 0.0);
        continue;
      }
      progress.note("run: joint plan: damage of " + o.label() + " per layer (base scorer " + cc.scorer->id + ")");
      ProfileRequest req = make_profile_request(plan, cc, model, tok, "damage");
      req.signal.params = joint_option_damage_params(cc.joint, o);
      req.backend = backend.get();
      req.cancel = opt.cancel;
      table.damage.push_back(compute_profile(req).s);
    }
    joint_tables.emplace(key, std::move(table));
  }

  // Evaluation examples, each prefilled once.
  std::vector<Example> examples;
  std::vector<LongBenchRecord> lb_records;
  for (const std::string& task : plan.tasks) {
    if (task == "lm_fidelity") {
      const auto windows = draw_text_windows(tok, plan.eval.files, plan.eval.examples,
                                             plan.eval.prefix_tokens + plan.continuation_tokens, plan.eval.seed);
      for (size_t i = 0; i < windows.size(); ++i) {
        Example ex;
        ex.task = task;
        ex.index = static_cast<int64_t>(i);
        const auto& w = windows[i].tokens;
        const std::vector<int32_t> prefix(w.begin(), w.begin() + plan.eval.prefix_tokens);
        ex.continuation.assign(w.begin() + plan.eval.prefix_tokens, w.end());
        ex.input = {windows[i].file, windows[i].offset, static_cast<int64_t>(w.size()), plan.eval.prefix_tokens, "",
                    token_ids_sha256(w)};
        examples.push_back(std::move(ex));
        examples.back().prompt = prefill_prompt(*backend, prefix, needs);
        examples.back().reference = lm_fidelity_reference(*backend, examples.back().prompt, examples.back().continuation);
        check_cancel(opt);
      }
    } else if (task == "needle") {
      std::string haystack;
      for (const auto& f : plan.eval.files) haystack += read_file(f) + "\n\n";
      const auto prompts = build_needle_prompts(tok, haystack, plan.needle, plan.query_aware);
      for (size_t i = 0; i < prompts.size(); ++i) {
        Example ex;
        ex.task = task;
        ex.index = static_cast<int64_t>(i);
        ex.needle = prompts[i];
        std::ostringstream id;
        id << "context=" << ex.needle.context_tokens << ",depth=" << ex.needle.depth << ",trial=" << ex.needle.trial;
        ex.input = prompt_input("needle", id.str(), ex.needle.compressed_part, ex.needle.question_part);
        ex.prompt = prefill_prompt(*backend, ex.needle.compressed_part, needs);
        examples.push_back(std::move(ex));
        check_cancel(opt);
      }
    } else if (task == "ruler") {
      std::string text;
      for (const auto& f : plan.eval.files) text += read_file(f) + "\n\n";
      const auto prompts = build_ruler_prompts(tok, text, plan.ruler, plan.query_aware);
      for (size_t i = 0; i < prompts.size(); ++i) {
        Example ex;
        ex.task = task;
        ex.index = static_cast<int64_t>(i);
        ex.ruler = prompts[i];
        ex.input = prompt_input("ruler", ruler_metric(ex.ruler) + ",example=" + std::to_string(ex.ruler.example),
                                ex.ruler.compressed_part, ex.ruler.question_part);
        ex.prompt = prefill_prompt(*backend, ex.ruler.compressed_part, needs);
        examples.push_back(std::move(ex));
        check_cancel(opt);
      }
    } else if (task == "multi_question") {
      add_multi_question_examples(plan, tok, *backend, needs, examples, opt);
    } else if (task == "longbench") {
      for (const auto& f : plan.longbench.files) {
        auto recs = read_longbench_jsonl(f);
        lb_records.insert(lb_records.end(), recs.begin(), recs.end());
      }
    }
  }
  if (!lb_records.empty()) {
    const ChatTemplate chat = ChatTemplate::for_tokenizer(tok);
    const size_t max_len = static_cast<size_t>(plan.longbench.max_context_tokens > 0 ? plan.longbench.max_context_tokens
                                                                                     : std::max<int64_t>(mc.context_length, 2));
    for (size_t i = 0; i < lb_records.size(); ++i) {
      Example ex;
      ex.task = "longbench";
      ex.index = static_cast<int64_t>(i);
      ex.record = &lb_records[i];
      LongBenchOverride ov;
      if (auto it = plan.longbench.datasets.find(lb_records[i].dataset); it != plan.longbench.datasets.end()) {
        if (!it->second.prompt.empty()) ov.prompt_template = it->second.prompt;
        if (it->second.max_new_tokens > 0) ov.max_new_tokens = static_cast<int>(it->second.max_new_tokens);
      }
      ex.dataset = longbench_dataset(lb_records[i].dataset, ov);
      ex.stop_ids = longbench_stop_ids(ex.dataset, tok);
      const auto ids = longbench_prompt_ids(lb_records[i], ex.dataset, tok, &chat, max_len);
      ex.input = {lb_records[i].dataset, -1, static_cast<int64_t>(ids.size()), static_cast<int64_t>(ids.size()),
                  lb_records[i].id, token_ids_sha256(ids)};
      ex.prompt = prefill_prompt(*backend, ids, needs);
      examples.push_back(std::move(ex));
      check_cancel(opt);
    }
  }
  check_budgets_feasible(plan, pending, examples, mc, layers_A);
  for (size_t c : pending) {  // a joint plan that fits no option into its bytes fails here, before any file
    const CellConfig& cc = plan.cells[c].config;
    if (cc.full_cache || cc.joint.none()) continue;
    for (const auto& ex : examples) try {
        plan_joint(cc.joint, joint_tables.at(joint_table_key(cc)), mc, layers_A,
                   static_cast<int64_t>(ex.prompt.tokens.size()), *cc.budget_bytes_fraction);
      } catch (const InputError& e) {
        throw InputError(plan.config_path + ": cell '" + plan.cells[c].label + "': " + e.what());
      }
  }
  // Every check has passed: from here on the folder is this run's (a refused run above left it as it was).
  write_run_identity(plan, out, opt.resume, opt.shard_index, opt.shard_count, opt.force);
  for (size_t i = 0; i < profile_order.size(); ++i) write_profile_file(out, profiles.at(profile_order[i]), i == 0);
  // The full cache's outcome on every example (the reference reported beside every cell).
  for (Example& ex : examples) {
    const std::unique_ptr<BackendCache> full = backend->clone(*ex.prompt.cache);
    ex.full_kv_bytes = window_bytes(*backend, *ex.prompt.cache, static_cast<int64_t>(ex.prompt.tokens.size()));
    const CacheForker fork = [&] { return CacheCopy{backend->clone(*ex.prompt.cache), nullptr}; };
    size_t forked_end = 0;
    ex.full_values = score_example(*backend, tok, ex, *full, static_cast<int64_t>(ex.prompt.tokens.size()),
                                   &ex.full_decode_tps, nullptr, fork, &forked_end);
    ex.full_kv_bytes_end = forked_end > 0 ? forked_end : full->bytes_in_use();
  }

  // Cells: compute each distinct effective input once; write each finished cell atomically.
  progress.set_total(static_cast<int64_t>(pending.size()));
  std::map<std::string, std::pair<std::vector<ExampleOutcomeRecord>, CellDump>> done_by_effective;
  for (size_t c : pending) {
    const Cell& cell = plan.cells[c];
    const CellConfig& cc = cell.config;
    const auto t_cell = Clock::now();
    std::vector<ExampleOutcomeRecord> outcomes;
    CellDump dump(out, cell.id, opt.dumps);
    auto reuse = done_by_effective.find(cell.effective_key);
    if (reuse != done_by_effective.end()) {
      outcomes = reuse->second.first;
      dump = reuse->second.second.for_cell(cell.id);
    } else {
      for (Example& ex : examples) {
        check_cancel(opt);
        ExampleOutcomeRecord r;
        r.task = ex.task;
        r.example = ex.index;
        r.prefix_tokens = static_cast<int64_t>(ex.prompt.tokens.size());
        r.kv_bytes_full = ex.full_kv_bytes;
        r.full_values = ex.full_values;
        r.input = ex.input;
        const int64_t T = r.prefix_tokens;
        if (cc.full_cache) {
          r.values = ex.full_values;
          const std::vector<int64_t> spans_A = mc.layer_spans(layers_A, T);
          r.budget_total = std::accumulate(spans_A.begin(), spans_A.end(), int64_t{0});
          for (int64_t l = 0; l < mc.n_layers; ++l) r.budgets.push_back(mc.layer_span(l, T));
          r.kv_bytes = r.kv_bytes_full;
          r.kv_bytes_end = ex.full_kv_bytes_end;
          r.decode_tokens_per_second = ex.full_decode_tps;
          if (ex.task == "lm_fidelity") dump.add_logits(ex.task, ex.index, ex.reference.logits, mc.vocab_size);
        } else {
          const ScorerUse& scorer = scorers.at(choice_key(*cc.scorer));
          const LayerScorers layer_scorers = layer_scorers_of(cc, scorers);
          CompressedPrompt comp = cc.joint.none()
              ? compress_cell(*backend, ex.prompt, cc, layer_scorers, ex.memo, instances, profiles, mc, layers_A,
                              plan.rerotate, r)
              : compress_joint_cell(*backend, ex.prompt, cc, layer_scorers, ex.memo,
                                    joint_tables.at(joint_table_key(cc)), mc, layers_A, plan.rerotate, r);
          r.budgets = comp.budgets;
          r.head_budgets = comp.head_budgets;
          r.kv_bytes = comp.bytes_kept;
          r.compress_seconds = comp.seconds;
          r.warnings.insert(r.warnings.end(), comp.warnings.begin(), comp.warnings.end());
          if (cc.budget_tokens && *cc.budget_tokens >= T)
            r.warnings.push_back("prompt of " + std::to_string(T) + " tokens is not longer than the budget of " +
                                 std::to_string(*cc.budget_tokens) + " tokens: left uncompressed");
          const DecodePolicy policy(cc.decode, comp.budgets, comp.head_budgets, &scorer);
          if (const std::string w = policy.frozen_heads_warning(mc.n_kv_heads); !w.empty()) r.warnings.push_back(w);
          const std::unique_ptr<DecodeSession> decode =
              policy.begin(*backend, *comp.cache, prompt_cumulative_attention(ex.prompt), &comp.prompt_positions);
          const CacheForker fork = [&] {
            CacheCopy copy{backend->clone(*comp.cache), nullptr};
            copy.decode =
                policy.begin(*backend, *copy.cache, prompt_cumulative_attention(ex.prompt), &comp.prompt_positions);
            return copy;
          };
          size_t forked_end = 0;
          dump.add_kept(*backend, *comp.cache, ex.task, ex.index, T, &comp.prompt_positions);
          r.values = score_example(*backend, tok, ex, *comp.cache, comp.next_position, &r.decode_tokens_per_second,
                                   decode.get(), fork, &forked_end, &dump);
          r.kv_bytes_end = forked_end > 0 ? forked_end : comp.cache->bytes_in_use();
        }
        outcomes.push_back(std::move(r));
      }
      done_by_effective.emplace(cell.effective_key, std::make_pair(outcomes, dump));
    }
    dump.write();
    write_cell_file(out, plan, id, cell, outcomes, since(t_cell));
    ++summary.cells_computed;
    progress.step(cell.label);
  }
  assemble_outputs({out}, out, opt.quiet);
  summary.seconds = since(t_run);
  return summary;
}

}  // namespace rkv
