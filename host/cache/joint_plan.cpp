#include "cache/joint_plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/errors.hpp"

namespace rkv {

namespace {

/// A partial plan over the layers seen so far: its totals and how it was reached.
struct State {
  int64_t bytes = 0;
  double damage = 0;
  size_t parent = 0;  ///< index in the previous layer's frontier
  size_t option = 0;  ///< the option this layer took
};

/// Keeps the Pareto-minimal states of `s` (sorted by bytes, then damage): a state survives only when its damage is
/// below every state with no more bytes. Then, above kMaxJointStates, the lowest damage per bucket of budget / cap.
std::vector<State> pareto_frontier(std::vector<State> s, int64_t budget) {
  std::stable_sort(s.begin(), s.end(), [](const State& a, const State& b) {  // stable: ties keep option order
    return a.bytes != b.bytes ? a.bytes < b.bytes : a.damage < b.damage;
  });
  std::vector<State> front;
  for (const State& x : s)
    if (front.empty() || x.damage < front.back().damage) front.push_back(x);
  if (front.size() <= kMaxJointStates) return front;
  const int64_t bucket = std::max<int64_t>(1, budget / static_cast<int64_t>(kMaxJointStates));
  std::vector<State> thin;
  for (const State& x : front)  // damage falls along the frontier: the last state of a bucket is its best
    if (!thin.empty() && thin.back().bytes / bucket == x.bytes / bucket) thin.back() = x;
    else thin.push_back(x);
  return thin;
}

void check_tables(const std::vector<std::vector<double>>& damage, const std::vector<std::vector<int64_t>>& bytes) {
  if (damage.size() != bytes.size())
    throw InputError("joint plan: damage for " + std::to_string(damage.size()) + " layers, bytes for " +
                     std::to_string(bytes.size()));
  for (size_t l = 0; l < damage.size(); ++l) {
    if (damage[l].size() != bytes[l].size() || damage[l].empty())
      throw InputError("joint plan: layer " + std::to_string(l) + " has " + std::to_string(damage[l].size()) +
                       " damages and " + std::to_string(bytes[l].size()) + " byte counts (one per option, at least one)");
    for (size_t o = 0; o < damage[l].size(); ++o)
      if (std::isnan(damage[l][o]) || damage[l][o] < 0 || bytes[l][o] < 0)
        throw InputError("joint plan: layer " + std::to_string(l) + ", option " + std::to_string(o) +
                         " has a negative or NaN damage or byte count");
  }
}

}  // namespace

std::string JointOption::label() const {
  if (shared) return "shared";
  std::ostringstream os;
  os << "f=" << fraction << (bits == 32 ? " f32" : " int" + std::to_string(bits));
  return os.str();
}

std::vector<JointOption> joint_options(const std::vector<double>& fractions, const std::vector<int>& bits, bool share) {
  std::vector<JointOption> out;
  for (double f : fractions)
    for (int b : bits) out.push_back({f, b, false});
  if (share) out.push_back({0.0, 0, true});
  return out;
}

std::vector<size_t> choose_joint_plan(const std::vector<std::vector<double>>& damage,
                                      const std::vector<std::vector<int64_t>>& bytes, int64_t budget) {
  check_tables(damage, bytes);
  const size_t L = damage.size();
  std::vector<std::vector<State>> fronts;  // [layer] the frontier after it
  std::vector<State> front = {State{}};
  int64_t cheapest = 0;
  for (size_t l = 0; l < L; ++l) {
    std::vector<State> next;
    int64_t least = std::numeric_limits<int64_t>::max();
    for (size_t o = 0; o < damage[l].size(); ++o)
      if (std::isfinite(damage[l][o])) least = std::min(least, bytes[l][o]);
    if (least == std::numeric_limits<int64_t>::max())
      throw InputError("joint plan: layer " + std::to_string(l) + " has no option it can take");
    cheapest += least;
    for (size_t p = 0; p < front.size(); ++p)
      for (size_t o = 0; o < damage[l].size(); ++o) {
        if (!std::isfinite(damage[l][o]) || front[p].bytes + bytes[l][o] > budget) continue;
        next.push_back({front[p].bytes + bytes[l][o], front[p].damage + damage[l][o], p, o});
      }
    if (next.empty())
      throw InputError("joint plan: no plan fits the budget of " + std::to_string(budget) +
                       " bytes (the cheapest options of every layer need " + std::to_string(cheapest) + " bytes so far)");
    front = pareto_frontier(std::move(next), budget);
    fronts.push_back(front);
  }
  // The frontier's last state has the least damage (damage falls as bytes grow); walk its parents back.
  std::vector<size_t> plan(L);
  size_t at = fronts.back().size() - 1;
  for (size_t l = L; l-- > 0;) {
    plan[l] = fronts[l][at].option;
    at = fronts[l][at].parent;
  }
  return plan;
}

int64_t spend_leftover(std::vector<int64_t>& kept, const std::vector<int64_t>& cap,
                       const std::vector<int64_t>& entry_bytes, const std::vector<size_t>& order, int64_t budget) {
  int64_t used = 0;
  for (size_t l = 0; l < kept.size(); ++l) used += kept[l] * entry_bytes[l];
  if (used > budget)
    throw InputError("joint plan: the kept entries take " + std::to_string(used) + " bytes, above the budget of " +
                     std::to_string(budget));
  int64_t left = budget - used;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t l : order) {
      if (entry_bytes[l] <= 0 || kept[l] >= cap[l] || entry_bytes[l] > left) continue;
      const int64_t more = std::min(cap[l] - kept[l], left / entry_bytes[l]);
      kept[l] += more;
      left -= more * entry_bytes[l];
      grew = true;
    }
  }
  return left;
}

}  // namespace rkv
