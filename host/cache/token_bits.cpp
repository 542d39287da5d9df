#include "cache/token_bits.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "cache/layer_bits.hpp"
#include "core/errors.hpp"

namespace rkv {

CodecSpec token_class_codec(const CodecSpec& base, int bits) {
  CodecSpec c;
  c.format = bits == 16 ? CodecFormat::f16 : CodecFormat::integer;
  c.bits = bits == 16 ? base.bits : bits;
  c.group = base.group;
  c.symmetric = base.symmetric;
  return c;
}

std::vector<CodecSpec> token_class_codecs(const CodecSpec& base) {
  std::vector<CodecSpec> out;
  for (int b : base.token_bits) out.push_back(token_class_codec(base, b));
  return out;
}

double mixed_entry_bytes(const CodecSpec& codec, int64_t head_dim) {
  const double e_base = codec_entry_bytes(codec, head_dim);
  double e = e_base;
  for (size_t c = 0; c < codec.token_bits.size() && c < codec.token_shares.size(); ++c)
    e += codec.token_shares[c] * (codec_entry_bytes(token_class_codec(codec, codec.token_bits[c]), head_dim) - e_base);
  return e;
}

std::vector<int64_t> token_class_counts(const std::vector<double>& shares, int64_t m) {
  std::vector<int64_t> counts;
  double cumulative = 0;
  int64_t before = 0;
  for (double p : shares) {
    cumulative += p;
    const int64_t upto = std::min(m, static_cast<int64_t>(std::floor(cumulative * static_cast<double>(m) + 1e-9)));
    counts.push_back(std::max<int64_t>(0, upto - before));
    before = std::max(before, upto);
  }
  return counts;
}

std::vector<uint8_t> rank_token_classes(const float* scores, int64_t prefix_tokens, const int32_t* positions,
                                        int64_t m, const std::vector<int64_t>& protect,
                                        const std::vector<double>& shares) {
  std::vector<int64_t> priority(static_cast<size_t>(prefix_tokens), -1);  // protected rank, -1: not protected
  for (size_t i = 0; i < protect.size(); ++i)
    if (protect[i] >= 0 && protect[i] < prefix_tokens && priority[static_cast<size_t>(protect[i])] < 0)
      priority[static_cast<size_t>(protect[i])] = static_cast<int64_t>(i);
  for (int64_t i = 0; i < m; ++i)
    if (positions[i] < 0 || positions[i] >= prefix_tokens)
      throw InputError("token classes: entry " + std::to_string(i) + " has position " + std::to_string(positions[i]) +
                       ", outside the prompt's [0, " + std::to_string(prefix_tokens) + ")");
  std::vector<int64_t> order(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {  // the eviction's order (selection.hpp)
    const int32_t pa = positions[a], pb = positions[b];
    const int64_t ra = priority[static_cast<size_t>(pa)], rb = priority[static_cast<size_t>(pb)];
    if ((ra >= 0) != (rb >= 0)) return ra >= 0;
    if (ra >= 0) return ra < rb;
    if (scores[pa] != scores[pb]) return scores[pa] > scores[pb];
    return pa < pb;
  });
  std::vector<uint8_t> cls(static_cast<size_t>(m), 0);
  const std::vector<int64_t> counts = token_class_counts(shares, m);
  size_t next = 0;
  for (size_t c = 0; c < counts.size(); ++c)
    for (int64_t k = 0; k < counts[c]; ++k) cls[static_cast<size_t>(order[next++])] = static_cast<uint8_t>(c + 1);
  return cls;
}

}  // namespace rkv
