#include "model/model_check.hpp"

#include <limits>

#include "core/errors.hpp"
#include "model/architectures.hpp"

namespace rkv::detail {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

void check_shape(const std::string& source, const std::string& name, const std::vector<int64_t>& got,
                 const std::vector<int64_t>& expected, const std::string& what) {
  if (got != expected) {
    throw InputError(source + ": tensor '" + name + "' has shape " + shape_str(got) + ", expected " +
                     shape_str(expected) + " (" + what + ")");
  }
}

void check_sizes(const ModelConfig& c, const std::string& source) {
  if (!find_architecture(c.architecture)) {
    throw InputError(source + ": unsupported architecture '" + c.architecture + "' (supported: " +
                     supported_architectures() + ")");
  }
  if (!c.layer_sliding.empty() && static_cast<int64_t>(c.layer_sliding.size()) != c.n_layers) {
    throw InputError(source + ": the sliding-window pattern has " + std::to_string(c.layer_sliding.size()) +
                     " entries, the model has " + std::to_string(c.n_layers) + " layers");
  }
  if (!c.layer_sliding.empty() && c.sliding_window <= 0) {
    throw InputError(source + ": sliding-window layers need a positive window, got " + std::to_string(c.sliding_window));
  }
  auto positive = [&](int64_t v, const char* what) {
    if (v <= 0) throw InputError(source + ": " + what + " must be positive, got " + std::to_string(v));
  };
  positive(c.n_layers, "the layer count");
  if (c.n_layers > kMaxLayers)
    throw InputError(source + ": the layer count " + std::to_string(c.n_layers) + " is above " + std::to_string(kMaxLayers));
  positive(c.d_model, "the hidden size");
  positive(c.n_heads, "the head count");
  positive(c.n_kv_heads, "the KV head count");
  positive(c.head_dim, "the head dimension");
  positive(c.d_ff, "the feed-forward size");
  positive(c.vocab_size, "the vocabulary size");
  if (c.n_heads % c.n_kv_heads != 0) {
    throw InputError(source + ": head count " + std::to_string(c.n_heads) + " is not a multiple of the KV head count " +
                     std::to_string(c.n_kv_heads));
  }
  if (c.head_dim % 2 != 0) throw InputError(source + ": head dimension " + std::to_string(c.head_dim) + " is odd");
  if (!(c.rms_eps > 0.0f)) throw InputError(source + ": RMSNorm epsilon must be positive");
  // Element counts of the largest weights; H_kv <= H, so H*d*D bounds the K/V projections too.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto fits = [&](int64_t a, int64_t b, const char* what) {
    if (a > kMax / b) throw InputError(source + ": " + what + " overflows (the sizes in the configuration are corrupt)");
  };
  fits(c.n_heads, c.head_dim, "heads * head dimension");
  fits(c.n_heads * c.head_dim, c.d_model, "heads * head dimension * hidden size");
  fits(c.vocab_size, c.d_model, "vocabulary size * hidden size");
  fits(c.d_ff, c.d_model, "feed-forward size * hidden size");
}

void split_rows(std::vector<float>& f32, const QuantMatrix& q, int64_t cols, const std::vector<RowPart>& parts) {
  int64_t r0 = 0;
  for (const RowPart& p : parts) {
    if (!f32.empty()) {
      p.f32->assign(f32.begin() + r0 * cols, f32.begin() + (r0 + p.rows) * cols);
    } else if (!q.empty()) {
      *p.q = QuantMatrix{q.type, p.rows, q.cols, q.row(r0), q.keep};
    }
    r0 += p.rows;
  }
  std::vector<float>().swap(f32);
}

void finish_config(Model& m, const std::string& source, const std::vector<float>& freq_factors) {
  const ModelConfig& c = m.config;
  check_sizes(c, source);
  try {
    m.rope_inv_freq = rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);
    // Sliding-window layers (gemma3) have their own base and no scaling (llama.cpp: rope_freq_scale_train_swa = 1).
    m.rope_inv_freq_swa.clear();
    if (!c.layer_sliding.empty() && c.rope_theta_swa > 0.0) m.rope_inv_freq_swa = rope_inv_freq(c.head_dim, c.rope_theta_swa, RopeScaling{});
    if (!freq_factors.empty()) {
      if (freq_factors.size() != m.rope_inv_freq.size()) {
        throw InputError("rope_freqs has " + std::to_string(freq_factors.size()) + " entries, expected " +
                         std::to_string(m.rope_inv_freq.size()));
      }
      for (size_t i = 0; i < freq_factors.size(); ++i) {
        if (!(freq_factors[i] > 0.0f)) throw InputError("rope_freqs entry " + std::to_string(i) + " is not positive");
        m.rope_inv_freq[i] /= static_cast<double>(freq_factors[i]);
      }
    }
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
}

}  // namespace rkv::detail
