// Key-norm scorer, a third-party ripplekv plugin built out of tree (plugins/examples/knorm): the SDK demo. The same
// formula is built in as org.ripplekv.scorer.knorm (scorers/knorm); this one's id ends in "keynorm" so that both can
// be loaded at once without making either short name ambiguous (plugins/README.md, "Loading").
//
// KnormPress (kvpress, knorm_press.py: `scores = -keys.norm(dim=-1)`), from Devoto et al., "A Simple and Effective
// L2 Norm-Based Strategy for KV Cache Compression" (2024): keys with a low L2 norm tend to receive high
// attention, so a layer keeps the positions whose keys have the smallest norm:
//
//   score[g, j] = -||K[g, j, :]||_2        g = KV head, j = prompt position, K = the layer's cached keys
//
// The keys are the ones the host caches: after RoPE (RKV_STAT_KEYS, float32 [H_kv, T, d]), as in kvpress, whose
// cache also holds post-RoPE keys. RoPE rotates pairs of coordinates, so the norm is the same before and after it
// (up to rounding). No positions are protected (as in kvpress); the host keeps the top scores per KV head up to the
// layer's budget, ties to the earlier position.
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <string>

namespace {

class KeyNorm final : public rkv::sdk::Scorer {
 public:
  /// The descriptor: a third-party id (reverse DNS of the author's domain), kind, version, one-line description.
  /// No parameters. Thread-safe (called once per process by the SDK's registry).
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.example.scorer.keynorm", RKV_KIND_SCORER, "1.0.0",
                                "KnormPress: keep the positions whose keys have the smallest L2 norm");
  }

  /// Created by the host with validated params (none) and its services (unused). Owned by the host.
  KeyNorm(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  /// Asks for the layer's keys only: no attention statistics, no window, no protected positions.
  rkv_scorer_requirements requirements(const rkv_attention_shape& shape) override {
    head_dim_ = shape.head_dim;
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_KEYS;
    r.window = 0;
    r.sinks = 0;
    r.recent = 0;
    return r;
  }

  /// scores [n_kv_heads, T] float32 (host-owned, row-major) = -||K[g, j, :]||_2 with K = inputs.keys, float32
  /// [n_kv_heads, T, d] on the CPU, borrowed for the call. The norm is accumulated in double, so the score is the
  /// correctly rounded float of the exact norm for any realistic d. Throws rkv::sdk::Error (the SDK turns it into
  /// RKV_ERROR_INVALID_ARGUMENT and a message) when the keys are missing or of the wrong shape or dtype, or when a
  /// norm is not finite (a NaN or infinite key, or one beyond float range).
  /// Thread rule: never called concurrently on one instance (the host's rule).
  void score(const rkv_scorer_inputs& in, float* scores, int64_t n_kv_heads, int64_t T,
             rkv::sdk::Diagnostics&) override {
    if (head_dim_ < 1) throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "knorm: score() before requirements()");
    rkv::sdk::require_tensor(in.keys, "keys", kDLFloat, 32, {n_kv_heads, T, head_dim_});
    const float* K = rkv::sdk::tensor_data<const float>(in.keys);
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      for (int64_t j = 0; j < T; ++j) {
        const float* k = K + (g * T + j) * head_dim_;
        double sum_sq = 0.0;
        for (int64_t i = 0; i < head_dim_; ++i) sum_sq += static_cast<double>(k[i]) * static_cast<double>(k[i]);
        const float s = static_cast<float>(-std::sqrt(sum_sq));
        if (!std::isfinite(s))
          throw rkv::sdk::Error(RKV_ERROR_INVALID_ARGUMENT, "knorm: the key of KV head " + std::to_string(g) +
                                                                ", position " + std::to_string(j) +
                                                                " has no finite norm (scores must be finite)");
        scores[g * T + j] = s;
      }
    }
  }

 private:
  int64_t head_dim_ = 0;  // d, from requirements()
};

}  // namespace

// One plugin in this library: registers KeyNorm and defines the exported entry point rkv_plugin_library_get.
RKV_PLUGIN(KeyNorm)
