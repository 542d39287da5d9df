#include "runner/compress/joint.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "cache/layer_bits.hpp"
#include "core/errors.hpp"
#include "runner/compress/share.hpp"
#include "runner/plan/damage_signal_spec.hpp"

namespace rkv {

namespace {

/// Bytes of one entry of one KV head at `bits` (an integer count for every format of the grid).
int64_t entry_bytes(const JointSpec& spec, int bits, int64_t head_dim) {
  return std::llround(codec_entry_bytes(spec.codec(bits), head_dim));
}

/// b = floor(f span + 0.5), within [1, span].
int64_t kept_entries(double f, int64_t span) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::floor(f * static_cast<double>(span) + 0.5)), 1, span);
}

}  // namespace

ParamSet joint_option_damage_params(const JointSpec& spec, const JointOption& o) {
  std::vector<UserParam> user;
  if (o.shared) {
    user.push_back({"of", std::string("sharing"), false, ""});
  } else {
    user.push_back({"fraction", o.fraction, false, ""});
    user.push_back({"bits", int64_t{o.bits}, false, ""});
    user.push_back({"group", spec.group, false, ""});
    user.push_back({"symmetric", spec.symmetric, false, ""});
  }
  return ParamSet::validate(*damage_signal_info().descriptor, user);
}

bool joint_option_is_lossless(const JointOption& o) { return !o.shared && o.fraction >= 1.0 && o.bits == 32; }

JointLayerPlan plan_joint(const JointSpec& spec, const JointDamageTable& table, const ModelConfig& mc,
                          const std::vector<int64_t>& layers_A, int64_t T, double x) {
  const size_t O = table.options.size(), A = layers_A.size();
  const int64_t H = mc.n_kv_heads;
  std::vector<std::vector<double>> damage(A, std::vector<double>(O));
  std::vector<std::vector<int64_t>> bytes(A, std::vector<int64_t>(O));
  std::vector<int64_t> spans(A);
  double full = 0;
  for (size_t a = 0; a < A; ++a) {
    const int64_t l = layers_A[a];
    spans[a] = mc.layer_span(l, T);
    full += static_cast<double>(H * spans[a] * entry_bytes(spec, 32, mc.head_dim));
    for (size_t o = 0; o < O; ++o) {
      const JointOption& opt = table.options[o];
      if (table.damage[o].size() != static_cast<size_t>(mc.n_layers))
        throw InputError("joint plan: a damage table of " + std::to_string(table.damage[o].size()) +
                         " layers for a model of " + std::to_string(mc.n_layers));
      damage[a][o] = opt.shared && l == 0 ? std::numeric_limits<double>::infinity() : table.damage[o][static_cast<size_t>(l)];
      bytes[a][o] = opt.shared ? 0 : H * kept_entries(opt.fraction, spans[a]) * entry_bytes(spec, opt.bits, mc.head_dim);
    }
  }
  JointLayerPlan jp;
  jp.budget = static_cast<int64_t>(std::floor(x * full));
  std::vector<size_t> choice;
  try {
    choice = choose_joint_plan(damage, bytes, jp.budget);
  } catch (const InputError& e) {
    throw InputError(std::string(e.what()) + "; raise budget.bytes_fraction (now " + std::to_string(x) +
                     ") or add smaller options to compression.joint.fractions / bits / share");
  }
  // The leftover goes to the kept layers, the most damaged first.
  std::vector<int64_t> kept(A, 0), cap(A, 0), e(A, 0);
  for (size_t a = 0; a < A; ++a) {
    const JointOption& opt = table.options[choice[a]];
    if (opt.shared) continue;
    kept[a] = kept_entries(opt.fraction, spans[a]);
    cap[a] = spans[a];
    e[a] = H * entry_bytes(spec, opt.bits, mc.head_dim);
  }
  std::vector<size_t> order(A);
  for (size_t a = 0; a < A; ++a) order[a] = a;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t p, size_t q) { return damage[p][choice[p]] > damage[q][choice[q]]; });
  jp.bytes = jp.budget - spend_leftover(kept, cap, e, order, jp.budget);

  const size_t L = static_cast<size_t>(mc.n_layers);
  jp.bits.assign(L, 32);
  jp.chosen.assign(L, "whole");
  jp.sources.resize(L);
  for (size_t l = 0; l < L; ++l) jp.sources[l] = static_cast<int64_t>(l);
  for (size_t a = 0; a < A; ++a) {
    const size_t l = static_cast<size_t>(layers_A[a]);
    const JointOption& opt = table.options[choice[a]];
    jp.chosen[l] = opt.label();
    if (opt.shared) {
      int64_t s = static_cast<int64_t>(l) - 1;
      while (jp.sources[static_cast<size_t>(s)] != s) --s;  // layer 0 never shares, so this stops
      jp.sources[l] = s;
      continue;
    }
    jp.bits[l] = opt.bits;
    jp.layers.push_back(layers_A[a]);
    jp.budgets.push_back(kept[a]);
  }
  return jp;
}

CompressedPrompt compress_joint(Backend& backend, const PrefilledPrompt& prompt, const LayerScorers& scorer,
                                ScoreMemo& memo, const JointSpec& spec, const JointLayerPlan& jp, bool rerotate) {
  CompressedPrompt comp = compress_prompt(backend, prompt, scorer, jp.layers, jp.budgets, memo, nullptr, rerotate);
  share_compressed(backend, comp, jp.sources);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t l = 0; l < comp.cache->n_layers(); ++l)
    if (jp.bits[static_cast<size_t>(l)] < 32 && comp.cache->shared_source(l) == l)
      backend.encode_layer(*comp.cache, l, spec.codec(jp.bits[static_cast<size_t>(l)]));
  comp.bytes_kept = comp.cache->bytes();
  comp.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return comp;
}

}  // namespace rkv
