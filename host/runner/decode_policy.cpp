#include "runner/decode_policy.hpp"

#include <algorithm>
#include <climits>

#include "cache/selection.hpp"
#include "core/errors.hpp"
#include "runner/compression.hpp"
#include "runner/decode_sessions.hpp"
#include "runner/sliding_window.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

DecodePolicy::DecodePolicy(DecodeSpec spec, std::vector<int64_t> budgets,
                           std::vector<std::vector<int64_t>> head_budgets, const ScorerUse* scorer)
    : spec_(std::move(spec)), budgets_(std::move(budgets)), head_budgets_(std::move(head_budgets)), scorer_(scorer) {
  const auto& names = decode_policy_names();
  if (std::find(names.begin(), names.end(), spec_.policy) == names.end())
    throw InputError("compression.decode.policy must be \"none\", \"rolling\", \"h2o\" or \"periodic\" (got \"" +
                     spec_.policy + "\")");
  if (spec_.sinks < 0) throw InputError("compression.decode.sinks must be >= 0 (got " + str(spec_.sinks) + ")");
  if (spec_.recent < -1) throw InputError("compression.decode.recent must be >= 0 (got " + str(spec_.recent) + ")");
  if (spec_.interval < 1)
    throw InputError("compression.decode.interval must be >= 1 (got " + str(spec_.interval) + ")");
  if (spec_.target < 0) throw InputError("compression.decode.target must be >= 0 (got " + str(spec_.target) + ")");
  // Policy "none" never evicts, so it takes any budgets (a shared layer's is 0: runner/cache_share.hpp).
  for (int64_t b : budgets_)
    if (b < 1 && spec_.policy != "none")
      throw InputError("decode policy: a layer budget of " + str(b) + " entries (must be >= 1)");
  if (!head_budgets_.empty() && head_budgets_.size() != budgets_.size())
    throw InputError("decode policy: per-head budgets for " + str(static_cast<int64_t>(head_budgets_.size())) +
                     " layers, " + str(static_cast<int64_t>(budgets_.size())) + " layer budgets");
  for (const auto& row : head_budgets_)
    for (int64_t b : row)
      if (b < 1) throw InputError("decode policy: a head budget of " + str(b) + " entries (must be >= 1)");
  if (spec_.policy == "periodic") {
    if (!scorer_ || !scorer_->instance)
      throw InputError("compression.decode.policy = \"periodic\" re-scores with the cell's scorer, and none is given");
    if (!scorer_->requirements.decode_scoring)
      throw InputError("compression.decode.policy = \"periodic\": scorer '" + scorer_->instance->id() +
                       "' does not support decode-time scoring with these parameters (its requirements leave "
                       "decode_scoring at 0; h2o, for one, supports it only with normalize = false)");
  }
}

ExtendCapture DecodePolicy::capture() const {
  ExtendCapture c;
  if (spec_.policy == "h2o") c.attention_mass = true;
  if (spec_.policy == "periodic") {
    const ScorerRequirements& r = scorer_->requirements;
    c.attention_mass = (r.decode_stats & RKV_STAT_CUMULATIVE_ATTENTION) != 0;
    c.queries = (r.decode_stats & (RKV_STAT_WINDOW_ATTENTION | RKV_STAT_WINDOW_QUERIES)) != 0;
  }
  return c;
}

bool decode_needs_prompt_cumulative(const DecodeSpec& spec, const ScorerRequirements& scorer) {
  return spec.policy == "h2o" ||
         (spec.policy == "periodic" && (scorer.decode_stats & RKV_STAT_CUMULATIVE_ATTENTION) != 0);
}


int64_t DecodePolicy::head_budget(int64_t layer, int64_t head) const {
  const auto l = static_cast<size_t>(layer);
  return head_budgets_.empty() || head_budgets_[l].empty() ? budgets_[l] : head_budgets_[l][static_cast<size_t>(head)];
}

int64_t DecodePolicy::head_limit(int64_t layer, int64_t head, int64_t held) const {
  if (spec_.policy == "none") return INT64_MAX;
  if (spec_.policy == "periodic")
    return std::max(held, (spec_.target > 0 ? spec_.target : head_budget(layer, head)) + spec_.interval - 1);
  return std::max(held, head_budget(layer, head));
}

std::string DecodePolicy::frozen_heads_warning(int64_t n_kv_heads) const {
  if (spec_.policy != "rolling") return "";
  int64_t frozen = 0, first_l = -1, first_h = -1;
  for (int64_t l = 0; l < static_cast<int64_t>(budgets_.size()); ++l)
    for (int64_t h = 0; h < n_kv_heads; ++h)
      if (spec_.sinks >= head_budget(l, h)) {
        if (frozen++ == 0) first_l = l, first_h = h;
      }
  if (frozen == 0) return "";
  return "rolling decode: sinks = " + str(spec_.sinks) + " is at or above the budget of " + str(frozen) +
         " (layer, KV head) pair(s), first layer " + str(first_l) + ", KV head " + str(first_h) + " (" +
         str(head_budget(first_l, first_h)) + " entries): those heads keep their first entries and evict every new " +
         "token at once";
}

std::unique_ptr<DecodeSession> DecodePolicy::begin(Backend& backend, const BackendCache& cache,
                                                   const std::vector<AttentionStats>* prompt_cumulative,
                                                   const std::vector<std::vector<int32_t>>* prompt_positions) const {
  if (spec_.policy == "none") return nullptr;
  if (cache.n_layers() != static_cast<int64_t>(budgets_.size()))
    throw InputError("decode policy: the cache has " + str(cache.n_layers()) + " layers but " +
                     str(static_cast<int64_t>(budgets_.size())) + " budgets were given");
  if (spec_.policy == "rolling") return decode::make_rolling_session(*this);
  // h2o and periodic keep state per held entry, which the window cut after every token (sliding_window.hpp) would
  // have to follow; rolling keeps none.
  if (has_sliding_window(backend.model().config))
    throw InputError("compression.decode.policy = \"" + spec_.policy + "\" is not supported on a model with "
                     "sliding-window layers (use \"none\" or \"rolling\")");
  if (spec_.policy == "h2o") {
    if (!prompt_cumulative)
      throw InputError("decode policy h2o: the prefill's cumulative attention was not computed (it seeds the "
                       "accumulated attention of every prompt entry)");
    return decode::make_h2o_session(*this, backend, cache, prompt_cumulative, prompt_positions);
  }
  return decode::make_periodic_session(*this, *scorer_, backend, cache, prompt_cumulative, prompt_positions);
}

// ---- shared by the sessions ----

namespace decode {

void keep_entries(Backend& backend, BackendCache& cache, int64_t layer, const KeepLists& keep) {
  const int64_t Hkv = static_cast<int64_t>(keep.size());
  bool changes = false;
  for (int64_t h = 0; h < Hkv; ++h)
    changes = changes || static_cast<int64_t>(keep[static_cast<size_t>(h)].size()) != cache.head_length(layer, h);
  if (!changes) return;
  Selection sel;
  sel.layer = layer;
  sel.n_kv_heads = Hkv;
  sel.prefix_tokens = cache.length(layer);
  for (const auto& k : keep) {
    sel.positions.insert(sel.positions.end(), k.begin(), k.end());
    sel.head_kept.push_back(static_cast<int64_t>(k.size()));
    sel.budget += static_cast<int64_t>(k.size());
    sel.kept = std::max(sel.kept, static_cast<int64_t>(k.size()));
  }
  if (std::all_of(sel.head_kept.begin(), sel.head_kept.end(), [&](int64_t k) { return k == sel.kept; })) {
    sel.head_kept.clear();  // the same count in every head: a uniform selection (every backend compacts those)
    sel.budget = sel.kept;
  }
  backend.compact_layer(cache, layer, sel);
}

AccumulatedAttention::AccumulatedAttention(Backend& backend, const BackendCache& cache,
                                           const std::vector<AttentionStats>* prompt_cumulative,
                                           const std::vector<std::vector<int32_t>>* prompt_positions) {
  const ModelConfig& c = backend.model().config;
  H_ = c.n_heads;
  Hkv_ = c.n_kv_heads;
  G_ = c.group_size();
  const int64_t L = cache.n_layers();
  acc_.assign(static_cast<size_t>(L), std::vector<std::vector<double>>(static_cast<size_t>(H_)));
  for (int64_t l = 0; l < L; ++l) {
    const LayerKV kv = backend.download_layer(cache, l);
    if (!kv.has_positions()) throw InputError("decode policy: layer " + str(l) + " of the cache has no positions");
    const AttentionStats* st = prompt_cumulative ? &(*prompt_cumulative)[static_cast<size_t>(l)] : nullptr;
    // The entries' prompt positions: as stored, or as recorded before a re-rotation moved them.
    const std::vector<int32_t>* moved = prompt_positions && static_cast<size_t>(l) < prompt_positions->size() &&
                                                !(*prompt_positions)[static_cast<size_t>(l)].empty()
                                            ? &(*prompt_positions)[static_cast<size_t>(l)]
                                            : nullptr;
    if (moved && static_cast<int64_t>(moved->size()) != kv.entries())
      throw InputError("decode policy: layer " + str(l) + ": " + str(static_cast<int64_t>(moved->size())) +
                       " recorded prompt positions for " + str(kv.entries()) + " entries");
    if (st && static_cast<int64_t>(st->cumulative_attention.size()) != H_ * st->prefix_tokens)
      throw InputError("decode policy: layer " + str(l) + "'s prompt statistics hold no cumulative attention");
    for (int64_t q = 0; q < H_; ++q) {
      const int64_t g = q / G_, n = kv.head_length(g);
      std::vector<double>& a = acc_[static_cast<size_t>(l)][static_cast<size_t>(q)];
      a.assign(static_cast<size_t>(n), 0.0);
      if (!st) continue;
      int64_t first = 0;  // entries of the KV heads before g (the offset of g's positions in `moved`)
      for (int64_t h = 0; h < g; ++h) first += kv.head_length(h);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t p = moved ? (*moved)[static_cast<size_t>(first + j)] : *kv.pos_at(g, j);
        if (p < 0 || p >= st->prefix_tokens)
          throw InputError("decode policy: layer " + str(l) + " holds position " + str(p) + ", outside the prompt of " +
                           str(st->prefix_tokens) + " positions");
        a[static_cast<size_t>(j)] = st->cumulative_attention[static_cast<size_t>(q * st->prefix_tokens + p)];
      }
    }
  }
}

void AccumulatedAttention::add(const BackendCache& cache, const ExtendObservation& observed) {
  if (observed.attention_mass.size() != acc_.size())
    throw InputError("decode policy: the decode step observed no attention mass (" +
                     str(static_cast<int64_t>(observed.attention_mass.size())) + " layers)");
  for (size_t l = 0; l < acc_.size(); ++l) {
    const std::vector<float>& m = observed.attention_mass[l];
    size_t at = 0;
    for (int64_t g = 0; g < Hkv_; ++g) {
      const int64_t len = cache.head_length(static_cast<int64_t>(l), g);
      for (int64_t c = 0; c < G_; ++c) {
        std::vector<double>& a = acc_[l][static_cast<size_t>(g * G_ + c)];
        if (static_cast<int64_t>(a.size()) > len || at + static_cast<size_t>(len) > m.size())
          throw InputError("decode policy: layer " + str(static_cast<int64_t>(l)) +
                           ": the attention mass does not match the cache's head lengths");
        a.resize(static_cast<size_t>(len), 0.0);
        for (int64_t j = 0; j < len; ++j) a[static_cast<size_t>(j)] += m[at + static_cast<size_t>(j)];
        at += static_cast<size_t>(len);
      }
    }
  }
}

std::vector<double> AccumulatedAttention::kv_head(int64_t layer, int64_t g) const {
  std::vector<double> s = query_head(layer, g * G_);
  for (int64_t c = 1; c < G_; ++c) {
    const std::vector<double>& a = query_head(layer, g * G_ + c);
    for (size_t j = 0; j < s.size(); ++j) s[j] += a[j];
  }
  return s;
}

void AccumulatedAttention::keep(int64_t layer, const KeepLists& keep) {
  for (int64_t q = 0; q < H_; ++q) {
    std::vector<double>& a = acc_[static_cast<size_t>(layer)][static_cast<size_t>(q)];
    std::vector<double> kept;
    for (int64_t j : keep[static_cast<size_t>(q / G_)]) kept.push_back(a[static_cast<size_t>(j)]);
    a = std::move(kept);
  }
}

}  // namespace decode

}  // namespace rkv
