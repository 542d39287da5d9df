// Compression on the device: for each built-in scorer (snapkv, h2o, streamingllm), given identical statistics (and
// hence identical scores), the device's top-k keeps exactly the positions the host keeps, the compacted caches are
// identical and physically smaller, and decoding continues on them as on the CPU.
#include "backend/cpu/forward.hpp"
#include "backend/cuda/compression.hpp"
#include "backend/cuda/dlpack_view.hpp"
#include "backend/cuda/forward.hpp"
#include "cache/attention_stats.hpp"
#include "cache/compaction.hpp"
#include "cache/selection.hpp"
#include "gpu_test.hpp"
#include "plugin/instance.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"
#include "core/errors.hpp"

using namespace rkv_gpu_test;

namespace {

/// CPU prefill of `prompt` that keeps every layer's queries after RoPE ([H, T, d]).
std::vector<std::vector<float>> cpu_prefill_with_queries(const rkv::Model& m, const std::vector<int32_t>& prompt,
                                                         rkv::KVCache& cache) {
  const int64_t T = static_cast<int64_t>(prompt.size()), L = m.config.n_layers;
  rkv::cpu::Workspace ws;
  cache = rkv::cpu::make_cache(m, T);
  std::vector<std::vector<float>> queries(static_cast<size_t>(L));
  std::vector<float> x = rkv::cpu::embed(m, prompt);
  std::vector<int64_t> pos(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = i;
  for (int64_t l = 0; l < L; ++l) {
    rkv::cpu::LayerHooks hooks;
    hooks.on_queries = [&](const float* q, int64_t h, int64_t n, int64_t d) {
      queries[static_cast<size_t>(l)].assign(q, q + h * n * d);
    };
    rkv::cpu::forward_layer(m, l, x.data(), T, pos.data(), cache.layers[static_cast<size_t>(l)], ws, &hooks);
  }
  return queries;
}

class CompressionTest : public GpuTest {};

TEST_F(CompressionTest, BuiltInScorersKeepTheSamePositionsAndDecodeAlike) {
  const Sizes z = sizes();
  const rkv::Model model = rkv::synthetic_model(smollm2_shapes(z.layers, z.vocab), 43);
  const std::vector<int32_t> prompt = random_tokens(static_cast<size_t>(z.prompt), z.vocab, 3);
  const std::vector<int32_t> next = random_tokens(4, z.vocab, 4);
  const int64_t T = static_cast<int64_t>(prompt.size()), L = model.config.n_layers, H = model.config.n_heads;
  rkv::KVCache cpu_prefix;
  const std::vector<std::vector<float>> queries = cpu_prefill_with_queries(model, prompt, cpu_prefix);
  const rc::DeviceModel dm(*ctx, model, rc::Precision::FP32);

  const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  rkv::HostServices host;
  for (const char* id : {"snapkv", "h2o", "streamingllm"}) {
    SCOPED_TRACE(id);
    const rkv::PluginInfo& info = reg.resolve(id, RKV_KIND_SCORER);
    const rkv::ParamSet params = rkv::ParamSet::validate(*info.descriptor, {});
    const rkv::PluginInstance inst = rkv::PluginInstance::create(info, params, host);
    rkv_attention_shape shape{};
    shape.n_layers = L;
    shape.n_heads = H;
    shape.n_kv_heads = model.config.n_kv_heads;
    shape.head_dim = model.config.head_dim;
    const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, shape);

    rkv::KVCache cpu = cpu_prefix;
    rc::DeviceKVCache dev;
    for (const rkv::LayerKV& l : cpu.layers) dev.layers.push_back(rc::upload_layer(*ctx, l, rc::DType::F32));
    for (int64_t l = 0; l < L; ++l) {
      rkv::LayerKV& kv = cpu.layers[static_cast<size_t>(l)];
      rkv::AttentionStats stats;
      const rkv::AttentionStatsOptions opt = req.stats_options();
      if (opt.window_attention || opt.cumulative_attention)
        stats = rkv::compute_attention_stats(rkv::QueriesView{queries[static_cast<size_t>(l)].data(), H, T, 64},
                                             rkv::KeysView{kv.k.data(), kv.n_kv_heads, T, 64, kv.capacity * 64}, opt);
      rkv::ScorerCallInputs in;
      in.layer = l;
      in.n_heads = H;
      in.kv = &kv;
      in.stats = &stats;
      const rkv::ScoreResult sr = rkv::run_scorer(inst, req, in);
      // Budgets per layer: a quarter of the prompt plus a layer offset, one below the protected count, one >= T.
      int64_t budget = T / 4 + 7 * l;
      if (l == 1) budget = 3;
      if (L > 2 && l == L - 1) budget = T;
      const rkv::Selection want = rkv::select_positions(sr.scores.data(), kv.n_kv_heads, T, budget,
                                                        req.protected_spec(), l);
      const rc::DeviceBuffer ds = rc::upload(*ctx, sr.scores);
      const rkv::Selection got =
          rc::select_positions(*ctx, ds.as<float>(), kv.n_kv_heads, T, budget, req.protected_spec(), l);
      EXPECT_EQ(got.positions, want.positions) << "layer " << l;
      EXPECT_EQ(got.untouched, want.untouched) << "layer " << l;
      EXPECT_EQ(got.warnings, want.warnings) << "layer " << l;
      const rkv::CompactionReport cr = rkv::compact_layer(kv, want);
      const rkv::CompactionReport gr = rc::compact_layer(*ctx, dev.layers[static_cast<size_t>(l)], got);
      EXPECT_EQ(gr.length_after, cr.length_after);
      EXPECT_EQ(gr.bytes_after, cr.bytes_after);  // fp32 on both: [H_kv, b_l, d] floats
      const rkv::LayerKV back = rc::download_layer(*ctx, dev.layers[static_cast<size_t>(l)]);
      EXPECT_EQ(back.k, std::vector<float>(kv.k.begin(), kv.k.begin() + back.k.size())) << "layer " << l;
      EXPECT_EQ(back.v, std::vector<float>(kv.v.begin(), kv.v.begin() + back.v.size())) << "layer " << l;
    }
    EXPECT_EQ(dev.bytes(), cpu.bytes());
    // Decoding continues at position T on the compacted caches.
    rkv::cpu::Workspace cws;
    rc::DeviceWorkspace ws(*ctx);
    for (size_t i = 0; i < next.size(); ++i) {
      const int64_t pos = T + static_cast<int64_t>(i);
      const std::vector<float> want = rkv::cpu::decode_step(model, next[i], pos, cpu, cws);
      const std::vector<float> got = rc::decode_step(dm, next[i], pos, dev, ws);
      EXPECT_LE(max_abs_diff(got, want) / max_abs(want), 1e-4) << "decode step " << i;
      EXPECT_EQ(argmax(got.data(), z.vocab), argmax(want.data(), z.vocab)) << "decode step " << i;
    }
  }
}

TEST_F(CompressionTest, DeviceStatisticsFeedTheDevicePipeline) {
  // prefill with device statistics -> host scorer -> device top-k -> device compaction -> decode: the compacted
  // cache holds exactly b_l positions per layer and decoding runs on it.
  const Sizes z = sizes();
  const rkv::Model model = rkv::synthetic_model(smollm2_shapes(z.layers, z.vocab), 44);
  const std::vector<int32_t> prompt = random_tokens(static_cast<size_t>(z.prompt), z.vocab, 5);
  const int64_t T = static_cast<int64_t>(prompt.size()), L = model.config.n_layers;
  const rc::DeviceModel dm(*ctx, model, rc::Precision::BF16);
  const rkv::PluginRegistry reg = rkv::PluginRegistry::discover();
  rkv::HostServices host;
  const rkv::PluginInfo& info = reg.resolve("snapkv", RKV_KIND_SCORER);
  const rkv::ParamSet params = rkv::ParamSet::validate(*info.descriptor, {});
  const rkv::PluginInstance inst = rkv::PluginInstance::create(info, params, host);
  rkv_attention_shape shape{};
  shape.n_layers = L;
  shape.n_heads = model.config.n_heads;
  shape.n_kv_heads = model.config.n_kv_heads;
  shape.head_dim = model.config.head_dim;
  const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, shape);
  rc::StatsCapture cap;
  cap.options = req.stats_options();
  rc::DeviceWorkspace ws(*ctx);
  rc::DeviceKVCache dev = rc::make_cache(dm, T);
  ctx->begin_phase("prefill");
  rc::prefill(dm, prompt, 0, dev, ws, rc::LogitsFor::None, 0, &cap);
  const rc::PhaseMemory full = ctx->end_phase();
  const size_t full_bytes = dev.bytes();
  const int64_t budget = T / 4;
  for (int64_t l = 0; l < L; ++l) {
    const rkv::AttentionStats stats = cap.download(*ctx, l);
    rkv::LayerKV kv = rc::download_layer(*ctx, dev.layers[static_cast<size_t>(l)]);
    rkv::ScorerCallInputs in;
    in.layer = l;
    in.n_heads = model.config.n_heads;
    in.kv = &kv;
    in.stats = &stats;
    const rkv::ScoreResult sr = rkv::run_scorer(inst, req, in);
    const rc::DeviceBuffer ds = rc::upload(*ctx, sr.scores);
    const rkv::Selection sel =
        rc::select_positions(*ctx, ds.as<float>(), kv.n_kv_heads, T, budget, req.protected_spec(), l);
    const rkv::Selection host_sel =
        rkv::select_positions(sr.scores.data(), kv.n_kv_heads, T, budget, req.protected_spec(), l);
    EXPECT_EQ(sel.positions, host_sel.positions);
    rc::compact_layer(*ctx, dev.layers[static_cast<size_t>(l)], sel);
    EXPECT_EQ(dev.layers[static_cast<size_t>(l)].capacity, budget);
  }
  EXPECT_EQ(dev.bytes() * static_cast<size_t>(T), full_bytes * static_cast<size_t>(budget));
  ctx->begin_phase("decode");
  const std::vector<float> logits = rc::decode_step(dm, 5, T, dev, ws);
  const rc::PhaseMemory dec = ctx->end_phase();
  EXPECT_EQ(logits.size(), static_cast<size_t>(z.vocab));
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LT(dec.start_bytes, full.peak_bytes);
}

}  // namespace

namespace {

TEST_F(CompressionTest, DlpackViewsDescribeDeviceData) {
  rkv::LayerKV host;
  host.n_kv_heads = 3;
  host.head_dim = 64;
  host.capacity = host.length = 10;
  host.k.assign(3 * 10 * 64, 1.0f);
  host.v.assign(3 * 10 * 64, 2.0f);
  rc::DeviceLayerKV dev = rc::upload_layer(*ctx, host, rc::DType::BF16, 16);
  rc::DeviceTensorView kv = rc::layer_view(*ctx, dev, true);
  const DLTensor* t = kv.dl();
  EXPECT_EQ(t->device.device_type, kDLCUDA);
  EXPECT_EQ(t->dtype.code, kDLBfloat);
  EXPECT_EQ(t->dtype.bits, 16);
  ASSERT_EQ(t->ndim, 3);
  EXPECT_EQ(t->shape[1], 10);
  EXPECT_EQ(t->strides[0], 16 * 64);
  EXPECT_EQ(t->data, dev.v.data());
  rc::StatsCapture none;
  EXPECT_THROW(rc::stats_view(*ctx, none, 0, true), rkv::InputError);
}

}  // namespace
