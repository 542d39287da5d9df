// RippleKV's signal (docs/ARCHITECTURE.md "perturbation_kl"): perturb one layer's value cache and read the KL shift at the
// model's output over an evaluation window.
//
// For calibration example i (prefix of P tokens + window W_i of n_w tokens) and layer l:
//   v' = v + alpha * ||v||_2 * eps,  eps ~ N(0, I_d)   on every KV head and every unprotected prefix position
//   d_{i,l} = mean_{t in W_i} KL(P_{i,t} || Q_{i,l,t}),   averaged over `draws` noise draws
//   s_l = mean_i d_{i,l}
// The host's profiler service ("rkv.profiler/1") does the model work: it builds the prefix cache once per example,
// perturbs with Philox4x32-10 + Box-Muller noise keyed by (seed, draw, i, l, h, u), reruns only the window from layer
// l upward, and returns the KL per window position. alpha = 0 gives exactly zero.
#include <ripplekv/sdk.hpp>

#include <vector>

namespace {

class PerturbationKL final : public rkv::sdk::Signal {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.signal.perturbation_kl", RKV_KIND_SIGNAL, "1.0.0",
                                "RippleKV: KL at the output after norm-scaled noise on one layer's value cache")
        .param(rkv::sdk::Param::Float("alpha", 0.02, "noise scale: v' = v + alpha * ||v|| * eps").min(0.0))
        .param(rkv::sdk::Param::Int("draws", 1, "noise draws averaged per example").min(1).max(65535))
        .param(rkv::sdk::Param::Int("seed", 0, "noise seed (Philox key)").min(0));
  }
  PerturbationKL(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : alpha_(p.get_float("alpha")), draws_(p.get_int("draws")), seed_(static_cast<uint64_t>(p.get_int("seed"))),
        host_(host) {}

  void profile(const rkv_signal_request& r, double* s, double* per_example, rkv::sdk::Diagnostics& diag) override {
    const rkv_profiler_v1* prof = r.profiler;
    if (!prof || !RKV_HAS_FIELD(prof, rkv_profiler_v1, restore))
      throw rkv::sdk::Error(RKV_ERROR_UNSUPPORTED, "perturbation_kl needs the host's rkv.profiler/1 service (a model)");
    const int64_t L = r.n_layers, N = r.n_examples, n_w = prof->window_tokens;
    std::vector<double> kl(static_cast<size_t>(n_w));
    int64_t kl_shape[1] = {n_w};
    DLTensor kl_tensor{};
    kl_tensor.data = kl.data();
    kl_tensor.device = DLDevice{kDLCPU, 0};
    kl_tensor.ndim = 1;
    kl_tensor.dtype = DLDataType{kDLFloat, 64, 1};
    kl_tensor.shape = kl_shape;
    const rkv_diagnostics* sink = diag.raw();  // the profiler's messages reach our caller directly
    for (int64_t i = 0; i < N; ++i) {
      host_.throw_if_cancelled();
      rkv::sdk::check_service_status(prof->prepare_example(prof->ctx, i, sink), "prepare_example", i, -1);
      for (int64_t l = 0; l < L; ++l) {
        double d = 0.0;
        for (int64_t draw = 0; draw < draws_; ++draw) {
          rkv::sdk::check_service_status(prof->perturb_values(prof->ctx, l, alpha_, seed_, draw, sink), "perturb_values", i, l);
          rkv::sdk::check_service_status(prof->window_kl(prof->ctx, l, &kl_tensor, sink), "window_kl", i, l);
          rkv::sdk::check_service_status(prof->restore(prof->ctx, l, sink), "restore", i, l);
          double m = 0.0;
          for (double v : kl) m += v;
          d += m / static_cast<double>(n_w);
        }
        per_example[i * L + l] = d / static_cast<double>(draws_);
      }
    }
    for (int64_t l = 0; l < L; ++l) {
      double m = 0.0;
      for (int64_t i = 0; i < N; ++i) m += per_example[i * L + l];
      s[l] = m / static_cast<double>(N);
    }
    diag.info("perturbation_kl: profiled " + std::to_string(N) + " examples x " + std::to_string(L) + " layers");
  }

 private:
  double alpha_;
  int64_t draws_;
  uint64_t seed_;
  rkv::sdk::Host host_;
};

}  // namespace

RKV_PLUGIN(PerturbationKL)
