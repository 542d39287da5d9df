// The accumulated attention of every held entry (runner/compress/accumulated_attention.hpp).
#include <string>

#include "core/errors.hpp"
#include "runner/compress/accumulated_attention.hpp"

namespace rkv {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

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
    if (!kv.has_positions()) throw InputError("accumulated attention: layer " + str(l) + " of the cache has no positions");
    const AttentionStats* st = prompt_cumulative ? &(*prompt_cumulative)[static_cast<size_t>(l)] : nullptr;
    // The entries' prompt positions: as stored, or as recorded before a re-rotation moved them.
    const std::vector<int32_t>* moved = prompt_positions && static_cast<size_t>(l) < prompt_positions->size() &&
                                                !(*prompt_positions)[static_cast<size_t>(l)].empty()
                                            ? &(*prompt_positions)[static_cast<size_t>(l)]
                                            : nullptr;
    if (moved && static_cast<int64_t>(moved->size()) != kv.entries())
      throw InputError("accumulated attention: layer " + str(l) + ": " + str(static_cast<int64_t>(moved->size())) +
                       " recorded prompt positions for " + str(kv.entries()) + " entries");
    if (st && static_cast<int64_t>(st->cumulative_attention.size()) != H_ * st->prefix_tokens)
      throw InputError("accumulated attention: layer " + str(l) + "'s prompt statistics hold no cumulative attention");
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
          throw InputError("accumulated attention: layer " + str(l) + " holds position " + str(p) + ", outside the prompt of " +
                           str(st->prefix_tokens) + " positions");
        a[static_cast<size_t>(j)] = st->cumulative_attention[static_cast<size_t>(q * st->prefix_tokens + p)];
      }
    }
  }
}

void AccumulatedAttention::add(const BackendCache& cache, const ExtendObservation& observed) {
  if (observed.attention_mass.size() != acc_.size())
    throw InputError("accumulated attention: the decode step observed no attention mass (" +
                     str(static_cast<int64_t>(observed.attention_mass.size())) + " layers)");
  for (size_t l = 0; l < acc_.size(); ++l) {
    const std::vector<float>& m = observed.attention_mass[l];
    size_t at = 0;
    for (int64_t g = 0; g < Hkv_; ++g) {
      const int64_t len = cache.head_length(static_cast<int64_t>(l), g);
      for (int64_t c = 0; c < G_; ++c) {
        std::vector<double>& a = acc_[l][static_cast<size_t>(g * G_ + c)];
        if (static_cast<int64_t>(a.size()) > len || at + static_cast<size_t>(len) > m.size())
          throw InputError("accumulated attention: layer " + str(static_cast<int64_t>(l)) +
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

}  // namespace rkv
