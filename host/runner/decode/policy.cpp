#include "runner/decode/policy.hpp"

#include <algorithm>
#include <climits>

#include "core/errors.hpp"
#include "runner/compress/scorers.hpp"
#include "runner/compress/sliding_window.hpp"
#include "runner/decode/sessions.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

using PromptCumulative = std::vector<AttentionStats>;
using PromptPositions = std::vector<std::vector<int32_t>>;

/// The machinery of one decode policy of runner/plan/decode_spec.hpp's table, under the same name.
struct PolicySessions {
  std::string name;
  /// The most entries KV head `head` of `layer` holds after any token, given `held` when decoding started.
  int64_t (*head_limit)(const DecodePolicy& policy, int64_t layer, int64_t head, int64_t held);
  /// The session of one sequence (never called for a policy that does not evict).
  std::unique_ptr<DecodeSession> (*begin)(const DecodePolicy& policy, const ScorerUse* scorer, Backend& backend,
                                          const BackendCache& cache, const PromptCumulative* prompt_cumulative,
                                          const PromptPositions* prompt_positions);
  /// A warning about budgets the policy cannot serve as asked ("" when none); null: it has none.
  std::string (*budget_warning)(const DecodePolicy& policy, int64_t n_kv_heads);
};

int64_t unbounded(const DecodePolicy&, int64_t, int64_t, int64_t) { return INT64_MAX; }
int64_t up_to_budget(const DecodePolicy& p, int64_t layer, int64_t head, int64_t held) {
  return std::max(held, p.head_budget(layer, head));
}
int64_t up_to_target_and_interval(const DecodePolicy& p, int64_t layer, int64_t head, int64_t held) {
  const DecodeSpec& s = p.spec();
  return std::max(held, (s.target > 0 ? s.target : p.head_budget(layer, head)) + s.interval - 1);
}

std::unique_ptr<DecodeSession> begin_rolling(const DecodePolicy& p, const ScorerUse*, Backend&, const BackendCache&,
                                             const PromptCumulative*, const PromptPositions*) {
  return decode::make_rolling_session(p);
}
std::unique_ptr<DecodeSession> begin_h2o(const DecodePolicy& p, const ScorerUse*, Backend& backend,
                                         const BackendCache& cache, const PromptCumulative* cumulative,
                                         const PromptPositions* positions) {
  if (!cumulative)
    throw InputError("decode policy h2o: the prefill's cumulative attention was not computed (it seeds the "
                     "accumulated attention of every prompt entry)");
  return decode::make_h2o_session(p, backend, cache, cumulative, positions);
}
std::unique_ptr<DecodeSession> begin_periodic(const DecodePolicy& p, const ScorerUse* scorer, Backend& backend,
                                              const BackendCache& cache, const PromptCumulative* cumulative,
                                              const PromptPositions* positions) {
  return decode::make_periodic_session(p, *scorer, backend, cache, cumulative, positions);
}

/// The budget warning of a policy whose parameter `what` (e.g. "sinks = 6") is too large for the (layer, KV head)
/// pairs whose budget b satisfies `hit(b)`: "" when none does, else one line naming how many and the first, with
/// `consequence(b)` for the first one's budget.
template <typename Hit, typename Consequence>
std::string heads_warning(const DecodePolicy& p, int64_t n_kv_heads, const std::string& what, const char* relation,
                          Hit hit, Consequence consequence) {
  int64_t count = 0, first_l = -1, first_h = -1;
  for (int64_t l = 0; l < p.n_layers(); ++l)
    for (int64_t h = 0; h < n_kv_heads; ++h)
      if (hit(p.head_budget(l, h)) && count++ == 0) first_l = l, first_h = h;
  if (count == 0) return "";
  const int64_t b = p.head_budget(first_l, first_h);
  return p.spec().policy + " decode: " + what + " is " + relation + " the budget of " + str(count) +
         " (layer, KV head) pair(s), first layer " + str(first_l) + ", KV head " + str(first_h) + " (" + str(b) +
         " entries): " + consequence(b);
}

/// Rolling with `sinks` at or above a head's budget: that head keeps its first entries and evicts every new token.
std::string rolling_frozen_heads(const DecodePolicy& p, int64_t n_kv_heads) {
  const int64_t sinks = p.spec().sinks;
  return heads_warning(p, n_kv_heads, "sinks = " + str(sinks), "at or above", [&](int64_t b) { return sinks >= b; },
                       [](int64_t) {
                         return std::string("those heads keep their first entries and evict every new token at once");
                       });
}

/// H2O with `recent` at or above a head's budget: the head keeps only its most recent entries (pure recency, no heavy
/// hitter), which is what rolling with sinks = 0 does, under an h2o label.
std::string h2o_recency_only_heads(const DecodePolicy& p, int64_t n_kv_heads) {
  const int64_t recent = p.spec().recent;  // -1: half the budget, always below it
  if (recent < 0) return "";
  return heads_warning(p, n_kv_heads, "recent = " + str(recent), "at or above", [&](int64_t b) { return recent >= b; },
                       [](int64_t) {
                         return std::string("those heads keep only their most recent entries (pure recency, no heavy "
                                            "hitters: rolling with sinks = 0, not H2O)");
                       });
}

/// Periodic with a `target` above a head's budget: the head grows past its budget and is compressed only once it holds
/// more than the target, after target - b + 1 decoded tokens; a shorter continuation never evicts.
std::string periodic_unreached_target_heads(const DecodePolicy& p, int64_t n_kv_heads) {
  const int64_t target = p.spec().target;  // 0: the budget itself, always reached
  if (target <= 0) return "";
  return heads_warning(p, n_kv_heads, "target = " + str(target), "above", [&](int64_t b) { return target > b; },
                       [&](int64_t b) {
                         return "those heads grow past their budget and are not compressed before they hold more "
                                "than " + str(target) + " entries (" + str(target - b + 1) +
                                " decoded tokens for the first; a shorter continuation never evicts)";
                       });
}

/// One entry per policy of decode_policies() (a unit test checks the two tables name the same policies).
const std::vector<PolicySessions>& policy_sessions() {
  static const std::vector<PolicySessions> table = {
      {"none", unbounded, nullptr, nullptr},
      {"rolling", up_to_budget, begin_rolling, rolling_frozen_heads},
      {"h2o", up_to_budget, begin_h2o, h2o_recency_only_heads},
      {"periodic", up_to_target_and_interval, begin_periodic, periodic_unreached_target_heads},
  };
  return table;
}

const PolicySessions& sessions_of(const std::string& name) {
  for (const PolicySessions& s : policy_sessions())
    if (s.name == name) return s;
  throw InputError("decode policy '" + name + "' has no sessions (runner/decode/policy.cpp)");
}

}  // namespace

std::vector<std::string> decode_policy_session_names() {
  std::vector<std::string> names;
  for (const PolicySessions& s : policy_sessions()) names.push_back(s.name);
  return names;
}

DecodePolicy::DecodePolicy(DecodeSpec spec, std::vector<int64_t> budgets,
                           std::vector<std::vector<int64_t>> head_budgets, const ScorerUse* scorer)
    : spec_(std::move(spec)), budgets_(std::move(budgets)), head_budgets_(std::move(head_budgets)), scorer_(scorer) {
  const DecodePolicyTraits& traits = spec_.traits();  // rkv::InputError naming the policies for an unknown one
  if (spec_.sinks < 0) throw InputError("compression.decode.sinks must be >= 0 (got " + str(spec_.sinks) + ")");
  if (spec_.recent < -1) throw InputError("compression.decode.recent must be >= 0 (got " + str(spec_.recent) + ")");
  if (spec_.interval < 1)
    throw InputError("compression.decode.interval must be >= 1 (got " + str(spec_.interval) + ")");
  if (spec_.target < 0) throw InputError("compression.decode.target must be >= 0 (got " + str(spec_.target) + ")");
  // A policy that never evicts takes any budgets (a shared layer's is 0: runner/compress/share.hpp).
  for (int64_t b : budgets_)
    if (b < 1 && traits.evicts) throw InputError("decode policy: a layer budget of " + str(b) + " entries (must be >= 1)");
  if (!head_budgets_.empty() && head_budgets_.size() != budgets_.size())
    throw InputError("decode policy: per-head budgets for " + str(static_cast<int64_t>(head_budgets_.size())) +
                     " layers, " + str(static_cast<int64_t>(budgets_.size())) + " layer budgets");
  for (const auto& row : head_budgets_)
    for (int64_t b : row)
      if (b < 1) throw InputError("decode policy: a head budget of " + str(b) + " entries (must be >= 1)");
  if (traits.rescores) {
    if (!scorer_ || !scorer_->instance)
      throw InputError("compression.decode.policy = \"" + spec_.policy +
                       "\" re-scores with the cell's scorer, and none is given");
    if (!scorer_->requirements.decode_scoring)
      throw InputError("compression.decode.policy = \"" + spec_.policy + "\": scorer '" + scorer_->instance->id() +
                       "' does not support decode-time scoring with these parameters (its requirements leave "
                       "decode_scoring at 0; h2o, for one, supports it only with normalize = false)");
  }
}

bool DecodePolicy::active() const { return spec_.traits().evicts; }

ExtendCapture DecodePolicy::capture() const {
  const DecodePolicyTraits& traits = spec_.traits();
  ExtendCapture c;
  const uint64_t decode_stats = traits.rescores ? scorer_->requirements.decode_stats : 0;
  c.attention_mass = traits.accumulates_attention || (decode_stats & RKV_STAT_CUMULATIVE_ATTENTION) != 0;
  c.queries = (decode_stats & (RKV_STAT_WINDOW_ATTENTION | RKV_STAT_WINDOW_QUERIES)) != 0;
  return c;
}

bool decode_needs_prompt_cumulative(const DecodeSpec& spec, const ScorerRequirements& scorer) {
  const DecodePolicyTraits& traits = spec.traits();
  return traits.accumulates_attention ||
         (traits.rescores && (scorer.decode_stats & RKV_STAT_CUMULATIVE_ATTENTION) != 0);
}

int64_t DecodePolicy::head_budget(int64_t layer, int64_t head) const {
  const auto l = static_cast<size_t>(layer);
  return head_budgets_.empty() || head_budgets_[l].empty() ? budgets_[l] : head_budgets_[l][static_cast<size_t>(head)];
}

int64_t DecodePolicy::head_limit(int64_t layer, int64_t head, int64_t held) const {
  return sessions_of(spec_.policy).head_limit(*this, layer, head, held);
}

std::string DecodePolicy::frozen_heads_warning(int64_t n_kv_heads) const {
  const PolicySessions& s = sessions_of(spec_.policy);
  return s.budget_warning ? s.budget_warning(*this, n_kv_heads) : "";
}

std::unique_ptr<DecodeSession> DecodePolicy::begin(Backend& backend, const BackendCache& cache,
                                                   const std::vector<AttentionStats>* prompt_cumulative,
                                                   const std::vector<std::vector<int32_t>>* prompt_positions) const {
  const DecodePolicyTraits& traits = spec_.traits();
  if (!traits.evicts) return nullptr;
  if (cache.n_layers() != static_cast<int64_t>(budgets_.size()))
    throw InputError("decode policy: the cache has " + str(cache.n_layers()) + " layers but " +
                     str(static_cast<int64_t>(budgets_.size())) + " budgets were given");
  // State per held entry would have to follow the window cut after every token (runner/compress/sliding_window.hpp).
  if (traits.per_entry_state && has_sliding_window(backend.model().config))
    throw InputError("compression.decode.policy = \"" + spec_.policy + "\" is not supported on a model with "
                     "sliding-window layers (use \"none\" or \"rolling\")");
  return sessions_of(spec_.policy).begin(*this, scorer_, backend, cache, prompt_cumulative, prompt_positions);
}

}  // namespace rkv
