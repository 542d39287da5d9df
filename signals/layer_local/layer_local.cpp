// Layer-local signal, the paper's "w/o DS" ablation (docs/ARCHITECTURE.md "layer_local"): the same value-cache perturbation as
// perturbation_kl, but the response is read at layer l itself, with no propagation to the output:
//   d_{i,l} = mean_{t in W_i} ||o'_{l,t} - o_{l,t}||_2 / ||o_{l,t}||_2
// where o is layer l's attention output after o_proj for the window tokens on the intact cache and o' on the
// perturbed one; s_l = mean_i d_{i,l}, averaged over `draws` noise draws.
#include <ripplekv/sdk.hpp>

#include <cmath>
#include <vector>

namespace {

class LayerLocal final : public rkv::sdk::Signal {
 public:
  static rkv::sdk::Descriptor describe() {
    return rkv::sdk::Descriptor("org.ripplekv.signal.layer_local", RKV_KIND_SIGNAL, "1.0.0",
                                "w/o DS ablation: relative change of layer l's attention output under value noise")
        .param(rkv::sdk::Param::Float("alpha", 0.02, "noise scale: v' = v + alpha * ||v|| * eps").min(0.0))
        .param(rkv::sdk::Param::Int("draws", 1, "noise draws averaged per example").min(1).max(65535))
        .param(rkv::sdk::Param::Int("seed", 0, "noise seed (Philox key)").min(0));
  }
  LayerLocal(const rkv::sdk::Params& p, const rkv::sdk::Host& host)
      : alpha_(p.get_float("alpha")), draws_(p.get_int("draws")), seed_(static_cast<uint64_t>(p.get_int("seed"))),
        host_(host) {}

  void profile(const rkv_signal_request& r, double* s, double* per_example, rkv::sdk::Diagnostics& diag) override {
    const rkv_profiler_v1* prof = r.profiler;
    if (!prof || !RKV_HAS_FIELD(prof, rkv_profiler_v1, restore))
      throw rkv::sdk::Error(RKV_ERROR_UNSUPPORTED, "layer_local needs the host's rkv.profiler/1 service (a model)");
    const int64_t L = r.n_layers, N = r.n_examples, n_w = prof->window_tokens, D = prof->d_model;
    std::vector<float> ref(static_cast<size_t>(n_w * D)), pert(ref.size());
    int64_t shape[2] = {n_w, D};
    auto view = [&](std::vector<float>& buf) {
      DLTensor t{};
      t.data = buf.data();
      t.device = DLDevice{kDLCPU, 0};
      t.ndim = 2;
      t.dtype = DLDataType{kDLFloat, 32, 1};
      t.shape = shape;
      return t;
    };
    DLTensor ref_t = view(ref), pert_t = view(pert);
    const rkv_diagnostics* sink = diag.raw();
    for (int64_t i = 0; i < N; ++i) {
      host_.throw_if_cancelled();
      rkv::sdk::check_service_status(prof->prepare_example(prof->ctx, i, sink), "prepare_example", i, -1);
      for (int64_t l = 0; l < L; ++l) {
        rkv::sdk::check_service_status(prof->attention_output(prof->ctx, l, 0, &ref_t, sink), "attention_output", i, l);
        double d = 0.0;
        for (int64_t draw = 0; draw < draws_; ++draw) {
          rkv::sdk::check_service_status(prof->perturb_values(prof->ctx, l, alpha_, seed_, draw, sink), "perturb_values", i, l);
          rkv::sdk::check_service_status(prof->attention_output(prof->ctx, l, 1, &pert_t, sink), "attention_output", i, l);
          rkv::sdk::check_service_status(prof->restore(prof->ctx, l, sink), "restore", i, l);
          double m = 0.0;
          for (int64_t t = 0; t < n_w; ++t) {
            double num = 0.0, den = 0.0;
            for (int64_t k = 0; k < D; ++k) {
              const double o = ref[static_cast<size_t>(t * D + k)], o2 = pert[static_cast<size_t>(t * D + k)];
              num += (o2 - o) * (o2 - o);
              den += o * o;
            }
            m += den > 0.0 ? std::sqrt(num / den) : 0.0;
          }
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
  }

 private:
  double alpha_;
  int64_t draws_;
  uint64_t seed_;
  rkv::sdk::Host host_;
};

}  // namespace

RKV_PLUGIN(LayerLocal)
