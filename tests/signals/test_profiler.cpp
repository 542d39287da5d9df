// The profiler service and profiles on a seeded synthetic model (ctest label unit), through the real signal .so
// plugins: exactness at alpha = 0, agreement with an independent naive implementation, which values a perturbation
// touches, the layers below the perturbed one, KL's quadratic growth, reproducibility, threads, the profile cache.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "backend/cpu/threads.hpp"
#include "core/errors.hpp"
#include "model/synthetic_model.hpp"
#include "plugin/instance.hpp"
#include "plugin/signal_call.hpp"
#include "profiler_helpers.hpp"
#include "runner/profile/profile.hpp"
#include "runner/profile/profiler.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int64_t kP = 24, kW = 6, kN = 3;
const rkv::ProtectedSpec kProtect{2, 4};  // positions 0, 1 and 20..23

const rkv::Model& model() {
  static const rkv::Model m = [] {
    rkv::Model x = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 8, 4), 11);
    x.sha256 = "synthetic-llama-4-layers-seed-11";
    return x;
  }();
  return m;
}

std::vector<std::vector<int32_t>> examples() {
  rkv::SyntheticRng r(5);
  std::vector<std::vector<int32_t>> ex(kN);
  for (auto& e : ex)
    for (int64_t t = 0; t < kP + kW; ++t)
      e.push_back(static_cast<int32_t>((r.next() + 1.0f) * 0.5f * static_cast<float>(model().config.vocab_size - 1)));
  return ex;
}

bool protected_pos(int64_t u) { return u < kProtect.sinks || u >= kP - kProtect.recent; }

/// A fresh temporary folder.
fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("rkv_profiler_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

rkv::ProfileRequest request(const rkv::PluginChoice& signal, const std::string& cache_dir = "") {
  rkv::ProfileRequest r;
  r.model = &model();
  r.signal = signal;
  for (const auto& e : examples()) r.examples.push_back(rkv::TextWindow{e, "synthetic", 0});
  r.prefix_tokens = kP;
  r.window_tokens = kW;
  r.protect = kProtect;
  r.threads = 1;
  r.read_cache = r.write_cache = !cache_dir.empty();
  r.cache_dir = cache_dir;
  return r;
}

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override { rkv::cpu::set_num_threads(1); }
};

TEST_F(ProfilerTest, AlphaZeroGivesExactlyZeroKL) {
  rkv::Profiler p(model(), examples(), kP, kW, kProtect);
  for (int64_t i = 0; i < kN; ++i) {
    p.prepare_example(i);
    for (int64_t l = 0; l < p.n_layers(); ++l) {
      for (double kl : p.window_kl(l)) EXPECT_EQ(kl, 0.0) << "unperturbed, layer " << l;
      p.perturb_values(l, 0.0, 3, 0);
      for (double kl : p.window_kl(l)) EXPECT_EQ(kl, 0.0) << "alpha 0, layer " << l;
      p.restore(l);
    }
  }
}

TEST_F(ProfilerTest, WindowOnlyRecomputeMatchesTheNaiveMethod) {
  const auto ex = examples();
  rkv::Profiler p(model(), ex, kP, kW, kProtect);
  for (int64_t i = 0; i < kN; ++i) {
    p.prepare_example(i);
    for (int64_t l = 0; l < p.n_layers(); ++l) {
      p.perturb_values(l, 0.3, 7, 0);
      const std::vector<double> fast = p.window_kl(l), from_zero = p.window_kl(0);
      p.restore(l);
      const std::vector<double> naive = rkv_test::naive_window_kl(model(), ex[static_cast<size_t>(i)], kP, l, 0.3, 7,
                                                                  static_cast<uint32_t>(i), kProtect.sinks,
                                                                  kProtect.recent);
      for (int64_t t = 0; t < kW; ++t) {
        EXPECT_GT(naive[static_cast<size_t>(t)], 0.0);
        EXPECT_LE(rkv_test::rel_diff(fast[static_cast<size_t>(t)], naive[static_cast<size_t>(t)]), 1e-5)
            << "example " << i << " layer " << l << " row " << t;
        EXPECT_EQ(fast[static_cast<size_t>(t)], from_zero[static_cast<size_t>(t)]) << "layer " << l << " row " << t;
      }
    }
  }
}

TEST_F(ProfilerTest, PerturbationTouchesOnlyUnprotectedValuesOfOneLayerAndRestoresExactly) {
  rkv::Profiler p(model(), examples(), kP, kW, kProtect);
  p.prepare_example(1);
  const rkv::KVCache before = rkv_test::cpu_session(p).cache();
  const int64_t d = model().config.head_dim, L = p.n_layers();
  const double alpha = 0.05;
  for (int64_t l = 0; l < L; ++l) {
    p.perturb_values(l, alpha, 9, 2);
    const rkv::KVCache& now = rkv_test::cpu_session(p).cache();
    std::vector<float> eps(static_cast<size_t>(d));
    for (int64_t m = 0; m < L; ++m) {
      const rkv::LayerKV &a = before.layers[static_cast<size_t>(m)], &b = now.layers[static_cast<size_t>(m)];
      ASSERT_EQ(b.length, kP);
      for (int64_t h = 0; h < a.n_kv_heads; ++h)
        for (int64_t u = 0; u < kP; ++u)
          for (int64_t k = 0; k < d; ++k) {
            EXPECT_EQ(a.k_at(h, u)[k], b.k_at(h, u)[k]) << "a key changed: layer " << m;
            if (m != l || protected_pos(u)) {
              EXPECT_EQ(a.v_at(h, u)[k], b.v_at(h, u)[k]) << "layer " << m << " head " << h << " position " << u;
            }
          }
    }
    // The perturbed values follow the formula: v' = v + alpha * ||v|| * eps, eps keyed (seed, draw, i, l, h, u).
    const rkv::LayerKV &a = before.layers[static_cast<size_t>(l)], &b = now.layers[static_cast<size_t>(l)];
    for (int64_t h = 0; h < a.n_kv_heads; ++h)
      for (int64_t u = 0; u < kP; ++u) {
        if (protected_pos(u)) continue;
        double n2 = 0;
        for (int64_t k = 0; k < d; ++k) n2 += double(a.v_at(h, u)[k]) * a.v_at(h, u)[k];
        rkv::perturbation_noise(9, 2, 1, static_cast<uint32_t>(l), static_cast<uint32_t>(h), static_cast<uint32_t>(u),
                                static_cast<int>(d), eps.data());
        for (int64_t k = 0; k < d; ++k) {
          const float expect = static_cast<float>(a.v_at(h, u)[k] + alpha * std::sqrt(n2) * eps[static_cast<size_t>(k)]);
          EXPECT_EQ(b.v_at(h, u)[k], expect);
          EXPECT_NE(b.v_at(h, u)[k], a.v_at(h, u)[k]);
        }
      }
    p.restore(l);
    for (int64_t h = 0; h < a.n_kv_heads; ++h)
      for (int64_t u = 0; u < kP; ++u)
        for (int64_t k = 0; k < d; ++k) EXPECT_EQ(a.v_at(h, u)[k], rkv_test::cpu_session(p).cache().layers[static_cast<size_t>(l)].v_at(h, u)[k]);
  }
  for (int64_t u = 0; u < kP + 2; ++u) EXPECT_EQ(p.is_protected(u), u < kP && protected_pos(u)) << u;
  EXPECT_FALSE(p.is_protected(-1));
}

TEST_F(ProfilerTest, PerturbingALayerLeavesEveryLayerBelowUntouched) {
  const auto ex = examples();
  rkv::Profiler p(model(), ex, kP, kW, kProtect);
  p.prepare_example(0);
  const int64_t L = p.n_layers(), D = model().config.d_model;
  const std::vector<int32_t> window(ex[0].begin() + kP, ex[0].end());
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < kW; ++t) pos.push_back(kP + t);
  for (int64_t l = 0; l < L; ++l) {
    // Run the window by hand through all layers of a copy of the perturbed cache; compare what enters each layer.
    p.perturb_values(l, 0.2, 1, 0);
    rkv::KVCache cache = rkv_test::cpu_session(p).cache();
    rkv::cpu::Workspace ws;
    std::vector<float> x = rkv::cpu::embed(model(), window);
    for (int64_t m = 0; m <= L; ++m) {
      const float* ref = rkv_test::cpu_session(p).reference_hidden(m);
      bool same = true;
      for (int64_t k = 0; k < kW * D; ++k) same = same && x[static_cast<size_t>(k)] == ref[k];
      if (m <= l)
        EXPECT_TRUE(same) << "the input of layer " << m << " changed when layer " << l << " was perturbed";
      else
        EXPECT_FALSE(same) << "layer " << l << "'s perturbation did not reach layer " << m;
      if (m < L) rkv::cpu::forward_layer(model(), m, x.data(), kW, pos.data(), cache.layers[static_cast<size_t>(m)], ws);
    }
    p.restore(l);
  }
}

TEST_F(ProfilerTest, ValuesViewWritesReachTheCacheAndRestoreUndoesThem) {
  rkv::Profiler p(model(), examples(), kP, kW, kProtect);
  p.prepare_example(2);
  const rkv::KVCache before = rkv_test::cpu_session(p).cache();
  const rkv_profiler_v1* abi = p.abi();
  DLTensor view{};
  ASSERT_EQ(abi->values_view(abi->ctx, 2, &view, nullptr), RKV_OK);
  ASSERT_EQ(view.ndim, 3);
  EXPECT_EQ(view.shape[0], model().config.n_kv_heads);
  EXPECT_EQ(view.shape[1], kP);
  EXPECT_EQ(view.shape[2], model().config.head_dim);
  EXPECT_EQ(view.dtype.bits, 32);
  float* v = static_cast<float*>(view.data);
  const int64_t d = model().config.head_dim;
  EXPECT_EQ(v[(1 * kP + 5) * d + 3], before.layers[2].v_at(1, 5)[3]);  // [h = 1, u = 5, k = 3]
  v[(1 * kP + 5) * d + 3] += 0.5f;
  EXPECT_GT(p.window_kl(2)[0] + p.window_kl(2)[kW - 1], 0.0);
  EXPECT_EQ(rkv_test::cpu_session(p).cache().layers[2].v_at(1, 5)[3], before.layers[2].v_at(1, 5)[3] + 0.5f);
  ASSERT_EQ(abi->restore(abi->ctx, 2, nullptr), RKV_OK);
  EXPECT_EQ(rkv_test::cpu_session(p).cache().layers[2].v_at(1, 5)[3], before.layers[2].v_at(1, 5)[3]);
  for (double kl : p.window_kl(2)) EXPECT_EQ(kl, 0.0);
}

TEST_F(ProfilerTest, AttentionOutputOnReferenceAndPerturbedValues) {
  rkv::Profiler p(model(), examples(), kP, kW, kProtect);
  p.prepare_example(0);
  for (int64_t l = 0; l < p.n_layers(); ++l) {
    const std::vector<float> ref = p.attention_output(l, false);
    EXPECT_EQ(p.attention_output(l, true), ref) << "unperturbed layer " << l;
    p.perturb_values(l, 0.0, 0, 0);
    EXPECT_EQ(p.attention_output(l, true), ref) << "alpha 0, layer " << l;
    p.perturb_values(l, 0.1, 0, 0);
    EXPECT_NE(p.attention_output(l, true), ref) << "layer " << l;
    EXPECT_EQ(p.attention_output(l, false), ref) << "reference after perturbing layer " << l;
    p.restore(l);
  }
  // Independently: the o_proj output of the layer on the intact prefix cache, seen through the forward pass's hook.
  const auto ex = examples();
  rkv::KVCache cache = rkv_test::cpu_session(p).cache();
  std::vector<float> x(rkv_test::cpu_session(p).reference_hidden(1), rkv_test::cpu_session(p).reference_hidden(1) + kW * model().config.d_model), seen;
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < kW; ++t) pos.push_back(kP + t);
  rkv::cpu::LayerHooks hooks;
  hooks.on_attn_output = [&](const float* o, int64_t n, int64_t D) { seen.assign(o, o + n * D); };
  rkv::cpu::Workspace ws;
  rkv::cpu::forward_layer(model(), 1, x.data(), kW, pos.data(), cache.layers[1], ws, &hooks);
  EXPECT_EQ(p.attention_output(1, false), seen);
}

TEST_F(ProfilerTest, ClearErrors) {
  auto ex = examples();
  rkv::Profiler p(model(), ex, kP, kW, kProtect);
  EXPECT_THROW(p.window_kl(0), rkv::InputError);  // before prepare_example
  EXPECT_THROW(p.prepare_example(kN), rkv::InputError);
  EXPECT_THROW(p.prepare_example(-1), rkv::InputError);
  p.prepare_example(0);
  EXPECT_THROW(p.perturb_values(4, 0.1, 0, 0), rkv::InputError);
  EXPECT_THROW(p.perturb_values(0, -0.1, 0, 0), rkv::InputError);
  EXPECT_THROW(p.perturb_values(0, 0.1, 0, 70000), rkv::InputError);
  p.perturb_values(1, 0.1, 0, 0);
  try {
    p.window_kl(2);
    FAIL() << "window_kl above a perturbed layer must fail";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1 is perturbed"), std::string::npos) << e.what();
  }
  // Through the C table: a status and a message in the caller's sink.
  std::string message;
  rkv_diagnostics sink{sizeof(rkv_diagnostics), &message,
                       [](void* ctx, rkv_diag_level, const char* m) { *static_cast<std::string*>(ctx) += m; }};
  std::vector<double> kl(kW);
  int64_t shape[1] = {kW};
  DLTensor t{};
  t.data = kl.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLFloat, 64, 1};
  t.shape = shape;
  EXPECT_EQ(p.abi()->window_kl(p.abi()->ctx, 3, &t, &sink), RKV_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("window_kl"), std::string::npos) << message;
  EXPECT_EQ(p.abi()->window_kl(p.abi()->ctx, 1, &t, &sink), RKV_OK);
  shape[0] = kW + 1;
  EXPECT_EQ(p.abi()->window_kl(p.abi()->ctx, 1, &t, &sink), RKV_ERROR_INVALID_ARGUMENT);
  ex[1].pop_back();
  EXPECT_THROW(rkv::Profiler(model(), ex, kP, kW, kProtect), rkv::InputError);
  ex[1].push_back(999);  // outside the vocabulary
  EXPECT_THROW(rkv::Profiler(model(), ex, kP, kW, kProtect), rkv::InputError);
}

// ---- whole profiles through the real plugins ----

TEST_F(ProfilerTest, PerturbationKlProfileIsBitwiseReproducible) {
  const auto sig = rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", 0.1}, {"draws", int64_t{2}}});
  const rkv::SensitivityProfile a = rkv::compute_profile(request(sig)), b = rkv::compute_profile(request(sig));
  EXPECT_FALSE(a.from_cache);
  EXPECT_EQ(a.s, b.s);
  EXPECT_EQ(a.per_example, b.per_example);
  ASSERT_EQ(a.s.size(), 4u);
  for (size_t l = 0; l < 4; ++l) {
    EXPECT_GT(a.s[l], 0.0);
    double m = 0;
    for (const auto& row : a.per_example) m += row[l];
    EXPECT_NEAR(a.s[l], m / kN, 1e-15 * m);
    EXPECT_LE(a.ci_low[l], a.s[l] * (1 + 1e-12));
    EXPECT_GE(a.ci_high[l], a.s[l] * (1 - 1e-12));
  }
  // Another seed gives another profile.
  const auto sig2 = rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", 0.1}, {"draws", int64_t{2}}, {"seed", int64_t{1}}});
  EXPECT_NE(rkv::compute_profile(request(sig2)).s, a.s);
}

TEST_F(ProfilerTest, ProgressCountsEachCalibrationExampleOnce) {
  // perturbation_kl prepares example 0, 1, ..., N-1 in turn (each once, many calls within): the request's on_example
  // sees 1, 2, ..., N of N, each once and in order, the last after the signal returns.
  auto r = request(rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", 0.1}}));
  std::vector<std::pair<int64_t, int64_t>> seen;
  r.on_example = [&](int64_t done, int64_t total) { seen.emplace_back(done, total); };
  rkv::compute_profile(r);
  ASSERT_EQ(seen.size(), static_cast<size_t>(kN));
  for (int64_t k = 0; k < kN; ++k) EXPECT_EQ(seen[static_cast<size_t>(k)], std::make_pair(k + 1, int64_t{kN}));
}

TEST_F(ProfilerTest, OneAndTwoThreadsAgree) {
  const auto sig = rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", 0.1}});
  auto r1 = request(sig), r2 = request(sig);
  r2.threads = 2;
  const rkv::SensitivityProfile a = rkv::compute_profile(r1), b = rkv::compute_profile(r2);
  for (size_t l = 0; l < a.s.size(); ++l) EXPECT_LE(rkv_test::rel_diff(a.s[l], b.s[l]), 1e-4) << l;
}

TEST_F(ProfilerTest, KLIsQuadraticInASmallAlphaAndZeroAtZero) {
  auto at = [](double alpha) {
    return rkv::compute_profile(request(rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", alpha}}))).s;
  };
  const auto s1 = at(0.01), s2 = at(0.02), s0 = at(0.0);
  for (size_t l = 0; l < s1.size(); ++l) {
    EXPECT_GE(s2[l] / s1[l], 3.6) << "layer " << l;
    EXPECT_LE(s2[l] / s1[l], 4.4) << "layer " << l;
    EXPECT_EQ(s0[l], 0.0) << "layer " << l;
  }
}

/// Wraps the profiler's table: after every perturb_values and before every window_kl it checks that no protected
/// position of any layer has changed since prepare_example.
struct ProtectedSpy {
  rkv::Profiler* p = nullptr;
  rkv_profiler_v1 table{};
  rkv::KVCache snapshot;
  int64_t checks = 0, violations = 0;

  explicit ProtectedSpy(rkv::Profiler& prof) : p(&prof), table(*prof.abi()) {
    table.ctx = this;
    table.prepare_example = [](void* c, int64_t i, const rkv_diagnostics* d) {
      auto* s = static_cast<ProtectedSpy*>(c);
      const rkv_status st = s->p->abi()->prepare_example(s->p->abi()->ctx, i, d);
      s->snapshot = rkv_test::cpu_session(*s->p).cache();
      return st;
    };
    table.perturb_values = [](void* c, int64_t l, double a, uint64_t seed, int64_t draw, const rkv_diagnostics* d) {
      auto* s = static_cast<ProtectedSpy*>(c);
      const rkv_status st = s->p->abi()->perturb_values(s->p->abi()->ctx, l, a, seed, draw, d);
      s->check();
      return st;
    };
    table.window_kl = [](void* c, int64_t l, DLTensor* out, const rkv_diagnostics* d) {
      auto* s = static_cast<ProtectedSpy*>(c);
      s->check();
      return s->p->abi()->window_kl(s->p->abi()->ctx, l, out, d);
    };
    // The rest only forward to the profiler's own table.
    table.values_view = [](void* c, int64_t l, DLTensor* out, const rkv_diagnostics* d) {
      auto* s = static_cast<ProtectedSpy*>(c);
      return s->p->abi()->values_view(s->p->abi()->ctx, l, out, d);
    };
    table.is_protected = [](void* c, int64_t u) {
      auto* s = static_cast<ProtectedSpy*>(c);
      return s->p->abi()->is_protected(s->p->abi()->ctx, u);
    };
    table.attention_output = [](void* c, int64_t l, int32_t perturbed, DLTensor* out, const rkv_diagnostics* d) {
      auto* s = static_cast<ProtectedSpy*>(c);
      return s->p->abi()->attention_output(s->p->abi()->ctx, l, perturbed, out, d);
    };
    table.restore = [](void* c, int64_t l, const rkv_diagnostics* d) {
      auto* s = static_cast<ProtectedSpy*>(c);
      return s->p->abi()->restore(s->p->abi()->ctx, l, d);
    };
  }
  void check() {
    ++checks;
    for (size_t l = 0; l < snapshot.layers.size(); ++l) {
      const rkv::LayerKV &a = snapshot.layers[l], &b = rkv_test::cpu_session(*p).cache().layers[l];
      for (int64_t h = 0; h < a.n_kv_heads; ++h)
        for (int64_t u = 0; u < kP; ++u) {
          if (!protected_pos(u)) continue;
          for (int64_t k = 0; k < a.head_dim; ++k)
            if (a.v_at(h, u)[k] != b.v_at(h, u)[k] || a.k_at(h, u)[k] != b.k_at(h, u)[k]) ++violations;
        }
    }
  }
};

TEST_F(ProfilerTest, NoProtectedPositionIsEverPerturbedByThePlugin) {
  rkv::Profiler prof(model(), examples(), kP, kW, kProtect);
  ProtectedSpy spy(prof);
  rkv::HostServices host;
  host.set_service(RKV_SERVICE_PROFILER_V1, &spy.table);
  const auto sig = rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", 0.5}, {"draws", int64_t{2}}});
  const auto inst = rkv::PluginInstance::create(*sig.info, sig.params, host);
  const rkv::SignalOutput out = rkv::run_signal(inst, 4, kN, &spy.table);
  EXPECT_EQ(spy.checks, 2 * kN * 4 * 2);
  EXPECT_EQ(spy.violations, 0);
  for (double s : out.s) EXPECT_GT(s, 0.0);
}

TEST_F(ProfilerTest, LayerLocalIsPositiveAndZeroAtAlphaZero) {
  const auto pos = rkv::compute_profile(request(rkv_test::choice("layer_local", RKV_KIND_SIGNAL, {{"alpha", 0.05}})));
  const auto zero = rkv::compute_profile(request(rkv_test::choice("layer_local", RKV_KIND_SIGNAL, {{"alpha", 0.0}})));
  for (size_t l = 0; l < 4; ++l) {
    EXPECT_TRUE(std::isfinite(pos.s[l]));
    EXPECT_GT(pos.s[l], 0.0);
    EXPECT_LT(pos.s[l], 1.0);  // 5% noise on some values cannot move the output by 100%
    EXPECT_EQ(zero.s[l], 0.0);
  }
  // Roughly linear in alpha (a norm, not a KL): doubling alpha about doubles it.
  const auto twice = rkv::compute_profile(request(rkv_test::choice("layer_local", RKV_KIND_SIGNAL, {{"alpha", 0.1}})));
  for (size_t l = 0; l < 4; ++l) {
    EXPECT_GT(twice.s[l] / pos.s[l], 1.8) << l;
    EXPECT_LT(twice.s[l] / pos.s[l], 2.2) << l;
  }
}

TEST_F(ProfilerTest, DepthThroughComputeProfile) {
  const auto p = rkv::compute_profile(request(rkv_test::choice("depth", RKV_KIND_SIGNAL)));
  EXPECT_EQ(p.s, (std::vector<double>{0, 1.0 / 3, 2.0 / 3, 1}));
}

// ---- the cache ----

TEST_F(ProfilerTest, ProfileJsonHasExactlyTheDocumentedKeys) {
  const auto p = rkv::compute_profile(request(rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL)));
  const nlohmann::json j = p.to_json();
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"model_sha256", "signal", "params", "layers", "s", "ci_low", "ci_high",
                                         "split_half_spearman", "per_example", "calibration", "cache_key", "seconds"}));
  EXPECT_EQ(j["signal"], "org.ripplekv.signal.perturbation_kl");
  EXPECT_EQ(j["params"]["alpha"], 0.02);
  EXPECT_EQ(j["layers"], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(j["per_example"].size(), static_cast<size_t>(kN));
  EXPECT_EQ(j["calibration"]["protected"]["count"], 6);
  EXPECT_EQ(j["cache_key"].get<std::string>().size(), 64u);
}

TEST_F(ProfilerTest, CacheIsReusedAndACorruptFileIsIgnoredWithAWarning) {
  const fs::path dir = temp_dir("cache");
  const auto sig = rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", 0.1}});
  const auto r = request(sig, dir.string());
  const rkv::SensitivityProfile first = rkv::compute_profile(r);
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(first.warnings.empty());
  const fs::path file = dir / (first.cache_key + ".json");
  ASSERT_TRUE(fs::exists(file));
  const rkv::SensitivityProfile second = rkv::compute_profile(r);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.s, first.s);
  EXPECT_EQ(second.per_example, first.per_example);
  EXPECT_EQ(second.ci_low, first.ci_low);
  EXPECT_EQ(second.seconds, first.seconds);
  EXPECT_EQ(second.to_json(), first.to_json());

  for (const std::string garbage : {std::string("{\"s\": [1, 2"), std::string("[]"), std::string()}) {
    std::ofstream(file) << garbage;
    const rkv::SensitivityProfile again = rkv::compute_profile(r);
    EXPECT_FALSE(again.from_cache);
    ASSERT_EQ(again.warnings.size(), 1u);
    EXPECT_NE(again.warnings[0].find("ignoring the profile cache file"), std::string::npos) << again.warnings[0];
    EXPECT_EQ(again.s, first.s);
    EXPECT_TRUE(rkv::compute_profile(r).from_cache);  // rewritten
  }
  // A stale file: right name, other content.
  nlohmann::json stale = first.to_json();
  stale["cache_key"] = std::string(64, '0');
  std::ofstream(file) << stale.dump();
  EXPECT_FALSE(rkv::compute_profile(r).from_cache);
  // A file whose numbers are wrong in shape.
  stale = first.to_json();
  stale["per_example"][0].erase(0);
  std::ofstream(file) << stale.dump();
  const auto shaped = rkv::compute_profile(r);
  EXPECT_FALSE(shaped.from_cache);
  EXPECT_EQ(shaped.warnings.size(), 1u);
  // read_cache = false recomputes without a warning.
  auto nr = r;
  nr.read_cache = false;
  EXPECT_FALSE(rkv::compute_profile(nr).from_cache);
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().extension(), ".json") << e.path();
  fs::remove_all(dir);
}

TEST_F(ProfilerTest, CacheKeyCoversEveryInput) {
  const auto sig = rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL);
  const auto base = request(sig);
  const std::string k = rkv::profile_cache_key(base);
  EXPECT_EQ(rkv::profile_cache_key(request(sig)), k);
  std::set<std::string> keys{k};
  auto r = base;
  r.signal = rkv_test::choice("perturbation_kl", RKV_KIND_SIGNAL, {{"alpha", 0.03}});
  keys.insert(rkv::profile_cache_key(r));
  r = base;
  r.signal = rkv_test::choice("layer_local", RKV_KIND_SIGNAL);
  keys.insert(rkv::profile_cache_key(r));
  r = base;
  r.examples[1].tokens[3] ^= 1;
  keys.insert(rkv::profile_cache_key(r));
  r = base;  // same tokens, another prefix/window split
  r.prefix_tokens -= 1;
  r.window_tokens += 1;
  keys.insert(rkv::profile_cache_key(r));
  r = base;
  r.protect = rkv::ProtectedSpec{4, 4};
  keys.insert(rkv::profile_cache_key(r));
  r = base;
  rkv::Model other = rkv::synthetic_model(model().config, 11);
  other.sha256 = "another";
  r.model = &other;
  keys.insert(rkv::profile_cache_key(r));
  // model.weights: the same file held in ggml blocks gives other (not bit-identical) profiles.
  r = base;
  rkv::Model blocks = rkv::synthetic_model(model().config, 11);
  blocks.sha256 = model().sha256;
  blocks.weights = rkv::WeightStorage::quantized;
  r.model = &blocks;
  keys.insert(rkv::profile_cache_key(r));
  EXPECT_EQ(keys.size(), 8u);
  // Things that do not change the values do not change the key.
  r = base;
  r.threads = 2;
  r.examples[0].file = "elsewhere";
  r.bootstrap_seed = 5;
  EXPECT_EQ(rkv::profile_cache_key(r), k);
}

}  // namespace
