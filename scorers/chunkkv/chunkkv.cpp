// ChunkKV scorer: chunk-level scores broadcast to positions, so every KV head of a layer keeps the same whole chunks.
//
// Source: kvpress 0.5.5, kvpress/presses/chunkkv_press.py (wrapping a ScorerPress); Liu et al., "ChunkKV:
// Semantic-Preserving KV Cache Compression for Efficient Long-Context LLM Inference" (2025, arXiv 2502.00299).
//
// Inner per-position scores e[g, j] (`inner`): kvpress SnapKVPress.score without `attentions` (ChunkKV refuses them;
// the host's window attention, see inner_scores.hpp) or KnormPress.score.
// Chunks of `chunk_length` c: complete chunks [ic, (i+1)c) for i < n = floor(T / c), and the remainder [nc, T) when
// T mod c > 0. Chunk score = mean over the chunk's positions of sum_g e[g, j]; every position gets its chunk's score,
// on every KV head:  s[g, j] = chunkscore(chunk of j).  With T < c (no complete chunk) kvpress falls back to the
// inner press itself: s = e.
//
// Convention: kvpress keeps max(1, int(#chunks * (1 - compression_ratio))) whole chunks; ripplekv keeps exactly b_l
// positions: the best whole chunks and then the earlier positions of the next one (host ties go to the earlier
// position; chunks with equal scores are taken earlier first, kvpress's order there is torch.topk's). With b_l =
// kvpress's kept count (a multiple of c) the kept positions are the same. Nothing is protected. Checked against
// kvpress on tests/fixtures/kvpress.
#include <ripplekv/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "inner_scores.hpp"

namespace {

using rkv::sdk::Error;
using rkv::sdk::Param;

class ChunkKV final : public rkv::sdk::Scorer {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.scorer.chunkkv", RKV_KIND_SCORER, "1.0.0",
                                "ChunkKV: whole chunks ranked by the inner scorer's mean score, same for all heads")
        .param(Param::Int("chunk_length", 20, "chunk length c in positions").min(1).max(1 << 20))
        .param(Param::Choice("inner", "snapkv", {"snapkv", "knorm"},
                             "per-position scorer: kvpress SnapKV (window mean, avg pooling) or knorm"))
        .param(Param::Int("window", 64, "inner snapkv: observation window w in positions").min(1).max(1 << 20))
        .param(Param::Int("kernel", 5, "inner snapkv: avg-pooling kernel in positions (odd)").min(1).max(1025));
  }

  ChunkKV(const rkv::sdk::Params& p, const rkv::sdk::Host&)
      : chunk_(p.get_int("chunk_length")),
        snap_(p.get_string("inner") == "snapkv"),
        window_(p.get_int("window")),
        kernel_(p.get_int("kernel")) {
    if (kernel_ % 2 == 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "chunkkv: kernel must be odd, got " + std::to_string(kernel_));
  }

  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    if (shape.n_heads < 1 || shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
      throw Error(RKV_ERROR_INVALID_ARGUMENT, "chunkkv: n_heads must be a positive multiple of n_kv_heads");
    n_heads_ = shape.n_heads;
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = snap_ ? RKV_STAT_WINDOW_ATTENTION : RKV_STAT_KEYS;
    r.window = snap_ ? window_ : 0;
    return r;
  }

  /// scores [H_kv, T] float32; snapkv reads window_attention float32 [H, T], knorm keys float32 [H_kv, T, d] (CPU,
  /// borrowed for the call). Throws Error(INVALID_ARGUMENT) for missing or misshaped inputs or non-finite scores.
  /// Thread rule: never called concurrently on one instance.
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (n_heads_ < 1) throw Error(RKV_ERROR_INVALID_ARGUMENT, "chunkkv: score() before requirements()");
    std::vector<float> e(static_cast<size_t>(n_kv_heads * T));
    if (snap_) rkv_inner::kvpress_snapkv(in, e.data(), n_heads_, n_kv_heads, T, window_, kernel_, "chunkkv");
    else rkv_inner::knorm(in, e.data(), n_kv_heads, T, head_dim_);
    const int64_t n = T / chunk_;
    if (n == 0) {
      std::copy(e.begin(), e.end(), scores);
      return;
    }
    for (int64_t c0 = 0; c0 < T; c0 += chunk_) {
      const int64_t c1 = c0 + chunk_ <= T ? c0 + chunk_ : T;  // the remainder chunk is [n c, T)
      float sum = 0.0f;
      for (int64_t j = c0; j < c1; ++j) {
        float over_heads = 0.0f;
        for (int64_t g = 0; g < n_kv_heads; ++g) over_heads += e[static_cast<size_t>(g * T + j)];
        sum += over_heads;
      }
      const float chunk_score = sum / static_cast<float>(c1 - c0);
      if (!std::isfinite(chunk_score))
        throw Error(RKV_ERROR_INVALID_ARGUMENT, "chunkkv: non-finite chunk score at positions " + std::to_string(c0) +
                                                    " .. " + std::to_string(c1 - 1));
      for (int64_t g = 0; g < n_kv_heads; ++g)
        for (int64_t j = c0; j < c1; ++j) scores[g * T + j] = chunk_score;
    }
  }

 private:
  int64_t chunk_;
  bool snap_;
  int64_t window_, kernel_;
  int64_t n_heads_ = 0, head_dim_ = 0;
};

}  // namespace

RKV_PLUGIN(ChunkKV)
