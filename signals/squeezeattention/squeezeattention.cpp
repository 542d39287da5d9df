// SqueezeAttention's layer importance, a per-prompt signal (rkv.prompt_signal/1, ABI minor 7): how much each layer's
// attention block changes the residual stream of the prompt being compressed.
//
// Source: Wang et al., "SqueezeAttention: 2D Management of KV-Cache in LLM Inference via Layer-wise Optimal Budget"
// (ICLR 2025); reference code hetailang/SqueezeAttention at a1933d1, utils_hh/modify_llama_drop.py: during the
// prefill each decoder layer records cosine_similarity(h, h + attn(norm(h))) of every prompt token (h the residual
// entering the layer), and the layer's importance is its mean over the prompt (lower = attention matters more). With
// the host's residual cosine c_l[t] (RKV_STAT_RESIDUAL_COSINE, the same two vectors and torch's eps):
//   s_l = 1 - (1 / T) sum_t c_l[t]
// so larger is more sensitive, as every ripplekv profile. The squeezeattention allocator (allocators/squeezeattention)
// clusters the layers by it; it is invariant to this flip (a negated, shifted copy of the reference's value).
#include <ripplekv/sdk.hpp>

namespace {

class SqueezeAttention final : public rkv::sdk::PromptSignal {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.signal.squeezeattention", RKV_KIND_SIGNAL, "1.0.0",
                                "SqueezeAttention layer importance (per prompt): 1 - the mean cosine between the "
                                "residual stream before and after attention")
        .flags(RKV_FLAG_PER_PROMPT);
  }
  SqueezeAttention(const rkv::sdk::Params&, const rkv::sdk::Host&) {}

  rkv_scorer_requirements requirements(const rkv_attention_shape&) override {
    rkv_scorer_requirements r{};
    r.stats = RKV_STAT_RESIDUAL_COSINE;
    return r;
  }

  /// s_l of one layer from residual_cosine float32 [T] (CPU, borrowed for the call). Throws Error(INVALID_ARGUMENT)
  /// when it is missing or misshaped (a host older than ABI minor 7). Thread rule: never called concurrently.
  double layer_value(const rkv_scorer_inputs& in, rkv::sdk::Diagnostics&) override {
    const DLTensor* c = RKV_HAS_FIELD(&in, rkv_scorer_inputs, residual_cosine) ? in.residual_cosine : nullptr;
    rkv::sdk::require_tensor(c, "residual_cosine", kDLFloat, 32, {in.prefix_tokens});
    const float* v = rkv::sdk::tensor_data<const float>(c);
    double sum = 0.0;
    for (int64_t t = 0; t < in.prefix_tokens; ++t) sum += v[t];
    return 1.0 - sum / static_cast<double>(in.prefix_tokens);
  }
};

}  // namespace

RKV_PLUGIN(SqueezeAttention)
