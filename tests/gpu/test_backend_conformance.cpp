// The backend conformance suite (in the style of ggml's test-backend-ops): every member of rkv::Backend
// (backend/backend.hpp) on seeded synthetic models (SmolLM2's shapes; a Gemma-3-shaped one with sliding-window
// layers), run on the CUDA backend -- the real one on a
// device (test_gpu, label gpu) or its code path under the CPU emulator (test_gpu_emu, label unit), made by
// make_backend("cuda") from the backend module (libripplekv-cuda.so, the real one or tests/emu-backend's) -- and checked
// against the CPU backend, the oracle. fp32 mode: logits, queries, statistics and caches within 1e-4 relative,
// identical kept positions (selection runs on the host from the CPU's scores), identical greedy tokens; the profiler's
// KL within 1e-3 relative (docs/ARCHITECTURE.md "perturbation_kl": across backends) and exactly 0 on an unperturbed cache.
#include <cmath>
#include <memory>
#include <numeric>
#include <string>

#include "backend/backend.hpp"
#include "backend/backend_module.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "cache/selection.hpp"
#include "core/errors.hpp"
#include "model/rope.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/decode/policy.hpp"
#include "gpu_test.hpp"
#include "runner/decode/loop.hpp"

using namespace rkv_gpu_test;

namespace {

double rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  const double scale = std::max(max_abs(want), 1e-30);
  return max_abs_diff(got, want) / scale;
}

void expect_layers_match(const rkv::LayerKV& got, const rkv::LayerKV& want, double tol, const std::string& what) {
  ASSERT_EQ(got.length, want.length) << what;
  ASSERT_EQ(got.n_kv_heads, want.n_kv_heads) << what;
  ASSERT_EQ(got.per_head(), want.per_head()) << what;
  std::vector<float> gk, wk, gv, wv;
  for (int64_t h = 0; h < want.n_kv_heads; ++h) {
    ASSERT_EQ(got.head_length(h), want.head_length(h)) << what << " head " << h;
    for (int64_t p = 0; p < want.head_length(h); ++p)
      for (int64_t e = 0; e < want.head_dim; ++e) {
        gk.push_back(got.k_at(h, p)[e]);
        wk.push_back(want.k_at(h, p)[e]);
        gv.push_back(got.v_at(h, p)[e]);
        wv.push_back(want.v_at(h, p)[e]);
      }
  }
  EXPECT_LE(rel_diff(gk, wk), tol) << what << " keys";
  EXPECT_LE(rel_diff(gv, wv), tol) << what << " values";
  // Every entry carries its original position, the same on both backends.
  ASSERT_TRUE(got.has_positions()) << what;
  ASSERT_TRUE(want.has_positions()) << what;
  EXPECT_EQ(got.pos, want.pos) << what << " positions";
}

/// Two dequantized layers of one codec: the same lengths and positions, and all but a few entries within 1e-3 of the
/// largest magnitude. The few: elements whose code flipped between the backends (an entry within float noise of a
/// rounding boundary), each off by one quantization step; at most 1% of the elements. A wrong layout or scale
/// would move most of them.
void expect_packed_layers_match(const rkv::LayerKV& got, const rkv::LayerKV& want, const std::string& what) {
  ASSERT_EQ(got.length, want.length) << what;
  ASSERT_EQ(got.per_head(), want.per_head()) << what;
  EXPECT_EQ(got.pos, want.pos) << what << " positions";
  for (const bool values : {false, true}) {
    const std::vector<float>& g = values ? got.v : got.k;
    const std::vector<float>& w = values ? want.v : want.k;
    ASSERT_EQ(g.size(), w.size()) << what;
    const double scale = std::max(max_abs(w), 1e-30);
    size_t off = 0;
    for (size_t i = 0; i < g.size(); ++i) off += std::fabs(double(g[i]) - w[i]) > 1e-3 * scale;
    EXPECT_LE(off, g.size() / 100) << what << (values ? " values" : " keys") << ": " << off << " of " << g.size()
                                   << " elements differ by more than 1e-3";
  }
}

/// Layer 0's per-head selection of a T-position prompt: KV head h keeps 40 - 10 h entries, positions 2 i + h * shift.
rkv::Selection ragged_selection(int64_t n_kv_heads, int64_t T, int64_t shift) {
  rkv::Selection sel;
  sel.layer = 0;
  sel.n_kv_heads = n_kv_heads;
  sel.prefix_tokens = T;
  sel.kept = 40;
  for (int64_t h = 0; h < n_kv_heads; ++h) {
    sel.head_kept.push_back(40 - 10 * h);
    for (int64_t i = 0; i < 40 - 10 * h; ++i) sel.positions.push_back(2 * i + h * shift);
  }
  sel.budget = std::accumulate(sel.head_kept.begin(), sel.head_kept.end(), int64_t{0});
  return sel;
}

/// A decode policy of `policy` with rolling's sinks = 2 over `budgets` (and per-head budgets when given).
rkv::DecodePolicy policy_of(const std::string& policy, std::vector<int64_t> budgets,
                            std::vector<std::vector<int64_t>> heads = {}) {
  rkv::DecodeSpec spec;
  spec.policy = policy;
  spec.sinks = 2;
  return rkv::DecodePolicy(spec, std::move(budgets), std::move(heads));
}

/// Run on four synthetic models (the test parameter): "llama" (SmolLM2's shapes), "gemma3" (head dim 64, window
/// 16 on layers l % 3 < 2, so the 100-token prompt reaches far past the window: model/synthetic_model.hpp), "qwen3"
/// (per-head Q/K norms, head dim 128), "olmo2" (Q/K norms over the whole projection, norms after the sublayers) and
/// "gemma2" (attention scores soft-capped at 2, window 16 on even layers).
class BackendConformance : public GpuTest, public testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    const Sizes z = sizes();
    if (GetParam() == "gemma3") {
      rkv::ModelConfig c = rkv::synthetic_config("gemma3", 4, 2, 64, std::max<int64_t>(3, z.layers));
      c.vocab_size = z.vocab;
      model = rkv::synthetic_model(c, 42);
    } else if (GetParam() != "llama") {  // qwen3 (per-head Q/K norms, head dim 128), olmo2 (whole Q/K norms, post
                                         // norms), gemma2 (score soft-cap, window 16 on even layers)
      rkv::ModelConfig c = rkv::synthetic_config(GetParam(), 4, 2, GetParam() == "qwen3" ? 128 : 64, z.layers);
      c.vocab_size = z.vocab;
      model = rkv::synthetic_model(c, 42);
    } else {
      model = rkv::synthetic_model(smollm2_shapes(z.layers, z.vocab), 42);
    }
    prompt = random_tokens(static_cast<size_t>(z.prompt), z.vocab, 1);
    next = random_tokens(8, z.vocab, 2);
    rkv::BackendOptions o;
    o.dtype = "f32";
    cpu = rkv::make_backend("cpu", model, o);
    dev = rkv::make_backend("cuda", model, o);  // through the module loader: libripplekv-cuda.so, real or emulated
  }
  rkv::Model model;
  std::vector<int32_t> prompt, next;
  std::unique_ptr<rkv::Backend> cpu, dev;
};

TEST_P(BackendConformance, KindDtypeAndDescription) {
  EXPECT_EQ(cpu->kind(), "cpu");
  EXPECT_EQ(dev->kind(), "cuda");
  EXPECT_EQ(cpu->compute_dtype(), "f32");
  EXPECT_EQ(dev->compute_dtype(), "f32");
  EXPECT_NE(dev->description().find("cuda"), std::string::npos);
  EXPECT_EQ(&dev->model(), &model);
  // make_backend("cuda") went through the module loader, which found this build's module (real or emulated)
  const rkv::BackendModule& module = rkv::load_backend_module("cuda");
  EXPECT_EQ(module.interface_version, rkv::kBackendModuleInterface);
  EXPECT_STREQ(module.kind, "cuda");
  EXPECT_GT(module.device_count(), 0);
}

TEST_P(BackendConformance, PrefillLogitsQueriesAndStatisticsMatchCpu) {
  rkv::PrefillRequest req;
  req.logits = rkv::LogitsFor::All;
  req.keep_queries = 8;
  rkv::AttentionStatsOptions window, cumulative;
  window.window_attention = true;
  window.window = 8;
  cumulative.cumulative_attention = cumulative.query_counts = true;
  cumulative.query_moments = true;  // RKV_STAT_QUERY_MOMENTS rides along with the cumulative sums
  cumulative.query_skip = 2;
  req.stats = {window, cumulative};
  const rkv::PrefillResult a = cpu->prefill(prompt, req), b = dev->prefill(prompt, req);
  const int64_t T = static_cast<int64_t>(prompt.size()), V = model.config.vocab_size, L = model.config.n_layers;
  ASSERT_EQ(b.logits.size(), static_cast<size_t>(T * V));
  EXPECT_LE(rel_diff(b.logits, a.logits), 1e-4);
  for (int64_t t = 0; t < T; t += 7)
    EXPECT_EQ(argmax(b.logits.data() + t * V, V), argmax(a.logits.data() + t * V, V)) << "row " << t;
  ASSERT_EQ(b.n_queries, 8);
  ASSERT_EQ(b.queries.size(), static_cast<size_t>(L));
  ASSERT_EQ(b.stats.size(), 2u);
  for (int64_t l = 0; l < L; ++l) {
    EXPECT_LE(rel_diff(b.queries[static_cast<size_t>(l)], a.queries[static_cast<size_t>(l)]), 1e-4) << "layer " << l;
    const rkv::AttentionStats &aw = a.stats[0][static_cast<size_t>(l)], &bw = b.stats[0][static_cast<size_t>(l)];
    const rkv::AttentionStats &ac = a.stats[1][static_cast<size_t>(l)], &bc = b.stats[1][static_cast<size_t>(l)];
    EXPECT_EQ(bw.window, 8);
    EXPECT_LE(rel_diff(bw.window_attention, aw.window_attention), 1e-4) << "layer " << l;
    EXPECT_LE(rel_diff(bc.cumulative_attention, ac.cumulative_attention), 1e-4) << "layer " << l;
    EXPECT_TRUE(bc.window_attention.empty());
    ASSERT_EQ(ac.query_mean.size(), static_cast<size_t>(model.config.n_heads * model.config.head_dim));
    EXPECT_LE(rel_diff(bc.query_mean, ac.query_mean), 1e-4) << "layer " << l;
    EXPECT_LE(rel_diff(bc.query_covariance, ac.query_covariance), 1e-4) << "layer " << l;
    EXPECT_TRUE(bw.query_mean.empty());
    EXPECT_EQ(bc.query_counts, ac.query_counts) << "layer " << l;  // min(T - j, W) on a sliding layer
    ASSERT_EQ(bc.query_counts.size(), static_cast<size_t>(T));
    EXPECT_EQ(bc.query_counts[0], static_cast<float>(model.config.is_sliding(l) ? model.config.sliding_window : T));
    // Each window query's probabilities sum to 1 over its keys: sum_j W[h, j] = w for every head (by hand).
    for (int64_t h = 0; h < model.config.n_heads; ++h) {
      double s = 0;
      for (int64_t j = 0; j < T; ++j) s += bw.window_attention[static_cast<size_t>(h * T + j)];
      EXPECT_NEAR(s, 8.0, 1e-3) << "layer " << l << " head " << h;
    }
    expect_layers_match(dev->download_layer(*b.cache, l), cpu->download_layer(*a.cache, l), 1e-4,
                        "layer " + std::to_string(l));
  }
  EXPECT_EQ(b.cache->bytes(), a.cache->bytes());  // both f32 [H_kv, T, d] keys and values per layer
  EXPECT_EQ(b.cache->length(0), T);
}

TEST_P(BackendConformance, ExtendDecodeAndCloneMatchCpu) {
  const rkv::PrefillResult a = cpu->prefill(prompt, {}), b = dev->prefill(prompt, {});
  const int64_t T = static_cast<int64_t>(prompt.size()), V = model.config.vocab_size;
  // Teacher-forced continuation on clones (the originals stay at T entries).
  const auto ca = cpu->clone(*a.cache), cb = dev->clone(*b.cache);
  const std::vector<float> la = cpu->extend(*ca, next, T, rkv::LogitsFor::All);
  const std::vector<float> lb = dev->extend(*cb, next, T, rkv::LogitsFor::All);
  EXPECT_LE(rel_diff(lb, la), 1e-4);
  EXPECT_EQ(cb->length(0), T + static_cast<int64_t>(next.size()));
  EXPECT_EQ(b.cache->length(0), T);
  // Eight greedy decode steps from the prompt's logits: identical tokens.
  int32_t ta = static_cast<int32_t>(argmax(a.logits.data(), V)), tb = static_cast<int32_t>(argmax(b.logits.data(), V));
  for (int64_t s = 0; s < 8; ++s) {
    ASSERT_EQ(tb, ta) << "step " << s;
    const std::vector<float> na = cpu->extend(*a.cache, {ta}, T + s, rkv::LogitsFor::Last);
    const std::vector<float> nb = dev->extend(*b.cache, {tb}, T + s, rkv::LogitsFor::Last);
    EXPECT_LE(rel_diff(nb, na), 1e-4) << "step " << s;
    ta = static_cast<int32_t>(argmax(na.data(), V));
    tb = static_cast<int32_t>(argmax(nb.data(), V));
  }
}

TEST_P(BackendConformance, CompactionKeepsTheSelectedEntriesAndFreesTheRest) {
  const rkv::PrefillResult a = cpu->prefill(prompt, {}), b = dev->prefill(prompt, {});
  const int64_t T = static_cast<int64_t>(prompt.size()), Hkv = model.config.n_kv_heads;
  // Scores from the CPU cache's key norms; the same Selection goes to both backends.
  const rkv::LayerKV layer0 = cpu->download_layer(*a.cache, 0);
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < T; ++j) {
      double n2 = 0;
      for (int64_t e = 0; e < layer0.head_dim; ++e) n2 += double(layer0.k_at(h, j)[e]) * layer0.k_at(h, j)[e];
      scores[static_cast<size_t>(h * T + j)] = static_cast<float>(n2);
    }
  const int64_t b_l = T / 3;
  const rkv::Selection sel = rkv::select_positions(scores.data(), Hkv, T, b_l, rkv::ProtectedSpec{2, 4}, 0);
  const auto ca = cpu->clone(*a.cache), cb = dev->clone(*b.cache);
  cpu->compact_layer(*ca, 0, sel);
  dev->compact_layer(*cb, 0, sel);
  EXPECT_EQ(cb->length(0), b_l);
  EXPECT_EQ(cb->length(1 % model.config.n_layers), model.config.n_layers > 1 ? T : b_l);
  EXPECT_EQ(cb->bytes(), ca->bytes());
  // By hand: the kept rows are the full cache's rows at the selected positions.
  const rkv::LayerKV kept = dev->download_layer(*cb, 0), full = dev->download_layer(*b.cache, 0);
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t r = 0; r < b_l; ++r)
      for (int64_t e = 0; e < full.head_dim; ++e)
        ASSERT_EQ(kept.k_at(h, r)[e], full.k_at(h, sel.head_positions(h)[r])[e]) << "head " << h << " row " << r;
  expect_layers_match(kept, cpu->download_layer(*ca, 0), 1e-4, "compacted layer 0");
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t r = 0; r < b_l; ++r) ASSERT_EQ(*kept.pos_at(h, r), sel.head_positions(h)[r]) << "head " << h;
  // Decoding continues at position T on the compacted caches, the same on both.
  const std::vector<float> la = cpu->extend(*ca, next, T, rkv::LogitsFor::All);
  const std::vector<float> lb = dev->extend(*cb, next, T, rkv::LogitsFor::All);
  EXPECT_LE(rel_diff(lb, la), 1e-4);
  // The appended entries carry positions T, T + 1, ... after the kept ones (by hand), on both backends.
  const rkv::LayerKV grown = dev->download_layer(*cb, 0);
  ASSERT_EQ(grown.length, b_l + static_cast<int64_t>(next.size()));
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t i = 0; i < static_cast<int64_t>(next.size()); ++i) EXPECT_EQ(*grown.pos_at(h, b_l + i), T + i);
  expect_layers_match(grown, cpu->download_layer(*ca, 0), 1e-4, "compacted layer 0 after decoding");
  // A selection for another T is refused.
  const rkv::Selection other = rkv::select_positions(scores.data(), Hkv, T - 1, 4, rkv::ProtectedSpec{}, 0);
  EXPECT_THROW(dev->compact_layer(*cb, 1 % model.config.n_layers, other), rkv::InputError);
}

// clone_selected copies the prefill one layer at a time, compacting each as it is copied: the same cache as clone() +
// compact_layer() on every backend (layer 0 compacted, the others whole), and the source is left as it was.
TEST_P(BackendConformance, CloneSelectedEqualsCloneThenCompact) {
  const int64_t T = static_cast<int64_t>(prompt.size()), Hkv = model.config.n_kv_heads, L = model.config.n_layers;
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>((i * 7919) % 101);  // any fixed order
  const rkv::Selection sel = rkv::select_positions(scores.data(), Hkv, T, T / 2, rkv::ProtectedSpec{1, 2}, 0);
  std::vector<const rkv::Selection*> chosen(static_cast<size_t>(L), nullptr);
  chosen[0] = &sel;
  for (rkv::Backend* be : {cpu.get(), dev.get()}) {
    const rkv::PrefillResult r = be->prefill(prompt, {});
    const auto expected = be->clone(*r.cache);
    be->compact_layer(*expected, 0, sel);
    const auto got = be->clone_selected(*r.cache, chosen);
    EXPECT_EQ(got->bytes(), expected->bytes()) << be->kind();
    for (int64_t l = 0; l < L; ++l) {
      const rkv::LayerKV a = be->download_layer(*got, l), b = be->download_layer(*expected, l);
      ASSERT_EQ(a.length, b.length) << be->kind() << " layer " << l;
      expect_layers_match(a, b, 0.0, "clone_selected layer " + std::to_string(l));
    }
    EXPECT_EQ(r.cache->length(0), T) << be->kind();  // the source keeps every entry
    EXPECT_EQ(got->length(0), T / 2) << be->kind();
    EXPECT_THROW(be->clone_selected(*r.cache, std::vector<const rkv::Selection*>(static_cast<size_t>(L) + 1)),
                 rkv::InputError);
  }
}

// truncate cuts an extended full cache back to the prompt: every entry equal to the prefill's bit for bit, the storage
// exactly sized again (bytes() of the fresh prefill), and the logits of a token fed after it equal to those fed on a
// fresh prefill. Refused without change for a length past the cache and for a compacted per-head layer.
TEST_P(BackendConformance, TruncateUndoesAppendsBitForBit) {
  const int64_t T = static_cast<int64_t>(prompt.size()), L = model.config.n_layers;
  for (rkv::Backend* be : {cpu.get(), dev.get()}) {
    const rkv::PrefillResult fresh = be->prefill(prompt, {});
    const rkv::PrefillResult r = be->prefill(prompt, {});
    be->extend(*r.cache, {5, 6, 7}, T, rkv::LogitsFor::Last);  // grows every layer (room beyond the 3 entries)
    ASSERT_EQ(r.cache->length(0), T + 3) << be->kind();
    EXPECT_THROW(be->truncate(*r.cache, T + 4), rkv::InputError) << be->kind();
    EXPECT_THROW(be->truncate(*r.cache, -1), rkv::InputError) << be->kind();
    EXPECT_EQ(r.cache->length(0), T + 3) << be->kind();  // nothing changed by the refusals
    be->truncate(*r.cache, T);
    EXPECT_EQ(r.cache->bytes(), fresh.cache->bytes()) << be->kind();
    EXPECT_EQ(r.cache->bytes(), r.cache->bytes_in_use()) << be->kind();
    for (int64_t l = 0; l < L; ++l) {
      const rkv::LayerKV a = be->download_layer(*r.cache, l), b = be->download_layer(*fresh.cache, l);
      ASSERT_EQ(a.length, T) << be->kind() << " layer " << l;
      EXPECT_EQ(a.k, b.k) << be->kind() << " layer " << l;
      EXPECT_EQ(a.v, b.v) << be->kind() << " layer " << l;
      EXPECT_EQ(a.pos, b.pos) << be->kind() << " layer " << l;
    }
    const std::vector<float> after = be->extend(*r.cache, {9}, T, rkv::LogitsFor::Last);
    const std::vector<float> want = be->extend(*fresh.cache, {9}, T, rkv::LogitsFor::Last);
    EXPECT_EQ(after, want) << be->kind();
    ASSERT_GT(model.config.n_kv_heads, 1);  // so the selection below is ragged (per-head lengths)
    be->compact_layer(*fresh.cache, 0, ragged_selection(model.config.n_kv_heads, T + 1, 1));
    EXPECT_THROW(be->truncate(*fresh.cache, 2), rkv::InputError) << be->kind();
    EXPECT_EQ(fresh.cache->length(L - 1), T + 1) << be->kind();  // checked before any layer is cut
  }
}

// Backend::value_output_norms on both backends equals n[h, j] = sum_c |sum_i W_o[c, h d + i] v[g(h), j, i]| computed
// directly in double from the model's float32 W_o and the layer's values as each backend holds them (within 1e-5).
TEST_P(BackendConformance, ValueOutputNormsEqualTheDirectSum) {
  const int64_t T = static_cast<int64_t>(prompt.size()), H = model.config.n_heads, D = model.config.d_model;
  const int64_t d = model.config.head_dim, G = model.config.group_size();
  for (rkv::Backend* be : {cpu.get(), dev.get()}) {
    const rkv::PrefillResult r = be->prefill(prompt, {});
    for (int64_t l : {int64_t{0}, model.config.n_layers - 1}) {
      const std::vector<float> got = be->value_output_norms(*r.cache, l);
      const rkv::LayerKV kv = be->download_layer(*r.cache, l);
      const std::vector<float>& W = model.layers[static_cast<size_t>(l)].wo;
      ASSERT_EQ(W.size(), static_cast<size_t>(D * H * d));
      ASSERT_EQ(got.size(), static_cast<size_t>(H * kv.length)) << be->kind();
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < kv.length; j += 3) {
          double want = 0;
          for (int64_t c = 0; c < D; ++c) {
            double y = 0;
            for (int64_t i = 0; i < d; ++i) y += double(W[static_cast<size_t>(c * H * d + h * d + i)]) * kv.v_at(h / G, j)[i];
            want += std::fabs(y);
          }
          EXPECT_NEAR(got[static_cast<size_t>(h * kv.length + j)], want, 1e-5 * want)
              << be->kind() << " layer " << l << " head " << h << " entry " << j;
        }
    }
    EXPECT_THROW(be->value_output_norms(*r.cache, model.config.n_layers), rkv::InputError) << be->kind();
    ASSERT_GT(model.config.n_kv_heads, 1);
    be->compact_layer(*r.cache, 0, ragged_selection(model.config.n_kv_heads, T, 1));
    EXPECT_THROW(be->value_output_norms(*r.cache, 0), rkv::InputError) << be->kind();
  }
}

// RKV_STAT_RESIDUAL_COSINE (cache/attention_stats.hpp residual_cosines): the cosine between each position's residual
// stream before and after the attention block, captured by both backends' prefill. On the model as it is both agree
// (1e-5) and every value is a cosine; with layer 1's o_proj zeroed (a copy of the model) the attention adds nothing
// there (Gemma's post-attention norm of 0 is 0), so every cosine of layer 1 is 1 (to float rounding), by hand.
TEST_P(BackendConformance, ResidualCosineComparesTheResidualBeforeAndAfterAttention) {
  rkv::PrefillRequest req;
  rkv::AttentionStatsOptions o;
  o.residual_cosine = true;
  req.stats = {o};
  const int64_t T = static_cast<int64_t>(prompt.size()), L = model.config.n_layers;
  const rkv::PrefillResult a = cpu->prefill(prompt, req), b = dev->prefill(prompt, req);
  for (int64_t l = 0; l < L; ++l) {
    const std::vector<float>& ca = a.stats[0][static_cast<size_t>(l)].residual_cosine;
    ASSERT_EQ(ca.size(), static_cast<size_t>(T)) << "layer " << l;
    EXPECT_LE(rel_diff(b.stats[0][static_cast<size_t>(l)].residual_cosine, ca), 1e-5) << "layer " << l;
    for (float c : ca) EXPECT_LE(std::fabs(c), 1.0f + 1e-6f) << "layer " << l;
    EXPECT_LT(*std::min_element(ca.begin(), ca.end()), 0.9999f) << "layer " << l;  // the attention does change x
  }
  rkv::Model silent = model;
  std::fill(silent.layers[1].wo.begin(), silent.layers[1].wo.end(), 0.0f);
  rkv::BackendOptions opt;
  opt.dtype = "f32";
  for (const char* kind : {"cpu", "cuda"}) {
    const rkv::PrefillResult r = rkv::make_backend(kind, silent, opt)->prefill(prompt, req);
    for (float c : r.stats[0][1].residual_cosine) EXPECT_NEAR(c, 1.0f, 1e-6f) << kind;
    const rkv::PrefillResult& same = std::string(kind) == "cpu" ? a : b;  // layer 0 is unchanged
    EXPECT_EQ(r.stats[0][0].residual_cosine, same.stats[0][0].residual_cosine) << kind;
  }
}

// Decode policy "rolling" (runner/decode/policy.hpp) on both backends: after compressing every layer to b = 10 entries,
// each of 15 teacher-forced tokens is followed by an eviction; the cache never holds more than b per layer, and at the
// end each head holds its first 2 entries (the sinks: its two earliest kept prompt positions) and the positions of the
// 8 most recent tokens, T + 7 .. T + 14 (by hand). Logits agree across backends.
TEST_P(BackendConformance, RollingDecodeKeepsSinksAndTheMostRecentEntries) {
  const int64_t T = static_cast<int64_t>(prompt.size()), Hkv = model.config.n_kv_heads, L = model.config.n_layers;
  const int64_t b = 10;
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 37) % 101);
  const rkv::Selection sel = rkv::select_positions(scores.data(), Hkv, T, b, rkv::ProtectedSpec{2, 2}, 0);
  const rkv::DecodePolicy rolling = policy_of("rolling", std::vector<int64_t>(static_cast<size_t>(L), b));
  std::vector<std::vector<float>> logits;
  std::vector<rkv::LayerKV> held;  // the sliding layers' entries, cpu's then the device's
  for (rkv::Backend* be : {cpu.get(), dev.get()}) {
    const rkv::PrefillResult r = be->prefill(prompt, {});
    for (int64_t l = 0; l < L; ++l) be->compact_layer(*r.cache, l, sel);
    const std::unique_ptr<rkv::DecodeSession> session = rolling.begin(*be, *r.cache, nullptr);
    std::vector<float> all;
    for (int64_t s = 0; s < 15; ++s) {
      const std::vector<float> row =
          rkv::continuation_logits(*be, {static_cast<int32_t>(s + 1)}, T + s, *r.cache, session.get());
      all.insert(all.end(), row.begin(), row.end());
      for (int64_t l = 0; l < L; ++l) ASSERT_LE(r.cache->length(l), b) << be->kind() << " step " << s << " layer " << l;
    }
    for (int64_t l = 0; l < L; ++l) {
      const rkv::LayerKV kv = be->download_layer(*r.cache, l);
      const int64_t W = model.config.layer_window(l);
      if (W > 0) {  // a sliding layer also drops what left its window (runner/compress/sliding_window.hpp): the sinks first
        for (int64_t h = 0; h < Hkv; ++h)
          for (int64_t i = 0; i < kv.head_length(h); ++i)
            EXPECT_LT(T + 14 - *kv.pos_at(h, i), W) << be->kind() << " layer " << l << " head " << h;
        held.push_back(kv);
        continue;
      }
      ASSERT_EQ(kv.length, b);
      for (int64_t h = 0; h < Hkv; ++h) {
        std::vector<int32_t> want = {static_cast<int32_t>(sel.head_positions(h)[0]),
                                     static_cast<int32_t>(sel.head_positions(h)[1])};
        for (int64_t p = T + 7; p <= T + 14; ++p) want.push_back(static_cast<int32_t>(p));
        EXPECT_EQ(std::vector<int32_t>(kv.pos_at(h, 0), kv.pos_at(h, 0) + b), want) << be->kind() << " head " << h;
      }
    }
    logits.push_back(all);
  }
  EXPECT_LE(rel_diff(logits[1], logits[0]), 1e-4);
  for (size_t k = 0; k < held.size() / 2; ++k)  // the device holds the cpu's entries in its sliding layers
    expect_layers_match(held[held.size() / 2 + k], held[k], 1e-4, "sliding layer " + std::to_string(k));
  // "none" keeps every token.
  const rkv::PrefillResult r = cpu->prefill(prompt, {});
  for (int64_t l = 0; l < L; ++l) cpu->compact_layer(*r.cache, l, sel);
  EXPECT_EQ(policy_of("none", std::vector<int64_t>(static_cast<size_t>(L), b)).begin(*cpu, *r.cache, nullptr), nullptr);
  rkv::continuation_logits(*cpu, next, T, *r.cache, nullptr);
  int64_t global = 0;  // the first layer without a sliding window (0 on llama, 2 on gemma3)
  while (model.config.is_sliding(global)) ++global;
  EXPECT_EQ(r.cache->length(global), b + static_cast<int64_t>(next.size()));
  EXPECT_THROW(policy_of("h2", {b}), rkv::InputError);
  EXPECT_THROW(policy_of("periodic", {b}), rkv::InputError);  // periodic needs a decode-capable scorer
}

// Per-head budgets (the ragged per-head layout): compaction with a different count per KV head, decoding on it
// (teacher-forced, one launch per KV head on cuda) and the rolling policy evicting each head to its own budget give
// the CPU's entries, positions, bytes and logits.
TEST_P(BackendConformance, PerHeadCompactionDecodeAndRollingMatchCpu) {
  const int64_t T = static_cast<int64_t>(prompt.size()), Hkv = model.config.n_kv_heads, L = model.config.n_layers;
  std::vector<int64_t> heads(static_cast<size_t>(Hkv));
  for (int64_t h = 0; h < Hkv; ++h) heads[static_cast<size_t>(h)] = 6 + 5 * h;  // 6, 11, 16, ...
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 41) % 97);
  const rkv::Selection sel = rkv::select_positions_per_head(scores.data(), Hkv, T, heads, rkv::ProtectedSpec{2, 2}, 0);
  ASSERT_TRUE(sel.per_head());
  const rkv::DecodePolicy rolling = policy_of("rolling", std::vector<int64_t>(static_cast<size_t>(L), T),
                                              std::vector<std::vector<int64_t>>(static_cast<size_t>(L), heads));
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<rkv::LayerKV>> after;
  std::vector<size_t> bytes;
  for (rkv::Backend* be : {cpu.get(), dev.get()}) {
    const rkv::PrefillResult r = be->prefill(prompt, {});
    for (int64_t l = 0; l < L; ++l) be->compact_layer(*r.cache, l, sel);
    for (int64_t h = 0; h < Hkv; ++h) EXPECT_EQ(r.cache->head_length(0, h), heads[static_cast<size_t>(h)]) << be->kind();
    EXPECT_THROW(be->layer_view(*r.cache, 0, false), rkv::InputError) << be->kind();
    std::vector<float> all = rkv::continuation_logits(*be, next, T, *r.cache, nullptr);  // 8 rows at once, then
    const std::unique_ptr<rkv::DecodeSession> session = rolling.begin(*be, *r.cache, nullptr);
    for (int64_t s = 0; s < 10; ++s) {  // one at a time, evicting
      const std::vector<float> row = rkv::continuation_logits(*be, {static_cast<int32_t>(s + 5)},
                                                              T + static_cast<int64_t>(next.size()) + s, *r.cache,
                                                              session.get());
      all.insert(all.end(), row.begin(), row.end());
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < Hkv; ++h)
          ASSERT_LE(r.cache->head_length(l, h), heads[static_cast<size_t>(h)]) << be->kind() << " step " << s;
    }
    std::vector<rkv::LayerKV> layers;
    for (int64_t l = 0; l < L; ++l) layers.push_back(be->download_layer(*r.cache, l));
    after.push_back(std::move(layers));
    bytes.push_back(r.cache->bytes_in_use());
    logits.push_back(all);
  }
  EXPECT_LE(rel_diff(logits[1], logits[0]), 1e-4);
  for (int64_t l = 0; l < L; ++l)
    expect_layers_match(after[1][static_cast<size_t>(l)], after[0][static_cast<size_t>(l)], 1e-4,
                        "layer " + std::to_string(l));
  int64_t entries = 0;
  for (int64_t b : heads) entries += b;
  const size_t per_entry = 2 * static_cast<size_t>(model.config.head_dim) * 4 + 4;
  EXPECT_EQ(bytes[0], static_cast<size_t>(L * entries) * per_entry);
  EXPECT_EQ(bytes[1], bytes[0]);
}

// Backend::extend's attention mass (ExtendCapture::attention_mass) on both backends, uniform and per-head layouts:
// each query head's row sums to the number of new rows (softmax rows sum to 1), and the values agree with the CPU.
// The CPU's own value is checked against a direct softmax of q . k times the model's attention scale (1/sqrt(d) for
// llama), over the entries inside the window on gemma3's sliding layer 1, from the captured queries and the
// downloaded keys and positions (an independent computation).
TEST_P(BackendConformance, ExtendAttentionMassAndQueriesMatchCpu) {
  const int64_t T = static_cast<int64_t>(prompt.size()), Hkv = model.config.n_kv_heads, L = model.config.n_layers;
  const int64_t H = model.config.n_heads, G = H / Hkv, d = model.config.head_dim;
  std::vector<int64_t> heads(static_cast<size_t>(Hkv));
  for (int64_t h = 0; h < Hkv; ++h) heads[static_cast<size_t>(h)] = 5 + 3 * h;
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 13) % 31);
  const rkv::Selection per_head = rkv::select_positions_per_head(scores.data(), Hkv, T, heads, {1, 1}, 0);
  const rkv::Selection uniform = rkv::select_positions(scores.data(), Hkv, T, 9, {1, 1}, 0);
  rkv::ExtendCapture capture;
  capture.attention_mass = capture.queries = true;
  for (const rkv::Selection* sel : {&uniform, &per_head}) {
    std::vector<rkv::ExtendObservation> seen;
    for (rkv::Backend* be : {cpu.get(), dev.get()}) {
      const rkv::PrefillResult r = be->prefill(prompt, {});
      for (int64_t l = 0; l < L; ++l) be->compact_layer(*r.cache, l, *sel);
      rkv::ExtendObservation o;
      const std::vector<int32_t> two(next.begin(), next.begin() + 2);
      be->extend(*r.cache, two, T, rkv::LogitsFor::Last, capture, &o);
      ASSERT_EQ(o.attention_mass.size(), static_cast<size_t>(L)) << be->kind();
      ASSERT_EQ(o.queries.size(), static_cast<size_t>(L)) << be->kind();
      for (int64_t l = 0; l < L; ++l) {
        size_t at = 0;
        for (int64_t g = 0; g < Hkv; ++g) {
          const int64_t len = r.cache->head_length(l, g);
          for (int64_t c = 0; c < G; ++c, at += static_cast<size_t>(len)) {
            double sum = 0;
            for (int64_t j = 0; j < len; ++j) sum += o.attention_mass[static_cast<size_t>(l)][at + static_cast<size_t>(j)];
            EXPECT_NEAR(sum, 2.0, 1e-4) << be->kind() << " layer " << l << " query head " << g * G + c;
          }
        }
        ASSERT_EQ(at, o.attention_mass[static_cast<size_t>(l)].size());
      }
      if (be == cpu.get()) {  // the oracle against a direct softmax, layer 1, the second new row sees every entry
        const rkv::LayerKV kv = be->download_layer(*r.cache, 1);
        const std::vector<float>& q = o.queries[1];  // [H, 2, d]
        std::vector<double> want;
        for (int64_t g = 0; g < Hkv; ++g)
          for (int64_t c = 0; c < G; ++c) {
            const int64_t len = kv.head_length(g), qh = g * G + c;
            std::vector<double> total(static_cast<size_t>(len), 0.0);
            for (int64_t i = 0; i < 2; ++i) {
              const int64_t seen_len = len - 1 + i;  // row 0 does not see the second new entry
              std::vector<double> p(static_cast<size_t>(seen_len));
              double mx = -1e300, z = 0;
              const int64_t W = model.config.layer_window(1);  // gemma3: layer 1 slides; the new rows are at T, T + 1
              for (int64_t j = 0; j < seen_len; ++j) {
                double dot = 0;
                for (int64_t e = 0; e < d; ++e) dot += double(q[static_cast<size_t>((qh * 2 + i) * d + e)]) * kv.k_at(g, j)[e];
                const bool visible = W == 0 || T + i - *kv.pos_at(g, j) < W;
                const double x = dot * double(model.config.attention_scale()), cap = model.config.attn_logit_softcap;
                p[static_cast<size_t>(j)] = !visible ? -INFINITY : cap > 0 ? cap * std::tanh(x / cap) : x;  // gemma2
                mx = std::max(mx, p[static_cast<size_t>(j)]);
              }
              for (double& x : p) z += (x = std::exp(x - mx));
              for (int64_t j = 0; j < seen_len; ++j) total[static_cast<size_t>(j)] += p[static_cast<size_t>(j)] / z;
            }
            want.insert(want.end(), total.begin(), total.end());
          }
        ASSERT_EQ(want.size(), o.attention_mass[1].size());
        for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(o.attention_mass[1][j], want[j], 1e-4) << "entry " << j;
      }
      seen.push_back(std::move(o));
    }
    for (int64_t l = 0; l < L; ++l) {
      EXPECT_LE(rel_diff(seen[1].attention_mass[static_cast<size_t>(l)], seen[0].attention_mass[static_cast<size_t>(l)]),
                1e-4)
          << "layer " << l << (sel->per_head() ? " per head" : " uniform");
      EXPECT_LE(rel_diff(seen[1].queries[static_cast<size_t>(l)], seen[0].queries[static_cast<size_t>(l)]), 1e-4);
    }
  }
  rkv::ExtendObservation* none = nullptr;
  const rkv::PrefillResult r = cpu->prefill(prompt, {});
  EXPECT_THROW(cpu->extend(*r.cache, next, T, rkv::LogitsFor::Last, capture, none), rkv::InputError);
}

// Decode policy "h2o" on both backends (per-head budgets, the accumulated attention seeded from the prompt's
// cumulative attention): after every token each head holds at most its budget and keeps its recent entries; the two
// backends keep the same positions and give the same logits.
TEST_P(BackendConformance, H2oDecodeMatchesCpu) {
  const int64_t T = static_cast<int64_t>(prompt.size()), Hkv = model.config.n_kv_heads, L = model.config.n_layers;
  std::vector<int64_t> heads(static_cast<size_t>(Hkv));
  for (int64_t h = 0; h < Hkv; ++h) heads[static_cast<size_t>(h)] = 8 + 2 * h;
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 7) % 23);
  const rkv::Selection sel = rkv::select_positions_per_head(scores.data(), Hkv, T, heads, {1, 2}, 0);
  rkv::DecodeSpec spec;
  spec.policy = "h2o";
  spec.recent = 3;
  const rkv::DecodePolicy h2o(spec, std::vector<int64_t>(static_cast<size_t>(L), T),
                              std::vector<std::vector<int64_t>>(static_cast<size_t>(L), heads));
  rkv::PrefillRequest req;
  rkv::AttentionStatsOptions cumulative;
  cumulative.cumulative_attention = true;
  req.stats.push_back(cumulative);
  if (!model.config.layer_sliding.empty()) {  // state per held entry: refused on a model with sliding-window layers
    const rkv::PrefillResult r = cpu->prefill(prompt, req);
    EXPECT_THROW(h2o.begin(*cpu, *r.cache, &r.stats[0]), rkv::InputError);
    return;
  }
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<rkv::LayerKV>> after;
  for (rkv::Backend* be : {cpu.get(), dev.get()}) {
    const rkv::PrefillResult r = be->prefill(prompt, req);
    for (int64_t l = 0; l < L; ++l) be->compact_layer(*r.cache, l, sel);
    const std::unique_ptr<rkv::DecodeSession> session = h2o.begin(*be, *r.cache, &r.stats[0]);
    std::vector<float> all;
    for (int64_t s = 0; s < 12; ++s) {
      const std::vector<float> row =
          rkv::continuation_logits(*be, {static_cast<int32_t>(s + 3)}, T + s, *r.cache, session.get());
      all.insert(all.end(), row.begin(), row.end());
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < Hkv; ++h)
          ASSERT_LE(r.cache->head_length(l, h), heads[static_cast<size_t>(h)]) << be->kind() << " step " << s;
    }
    std::vector<rkv::LayerKV> layers;
    for (int64_t l = 0; l < L; ++l) {
      layers.push_back(be->download_layer(*r.cache, l));
      for (int64_t h = 0; h < Hkv; ++h) {  // the 3 most recent tokens are always held
        const rkv::LayerKV& kv = layers.back();
        const int64_t n = kv.head_length(h);
        for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(*kv.pos_at(h, n - 3 + i), T + 9 + i) << be->kind() << " head " << h;
      }
    }
    after.push_back(std::move(layers));
    logits.push_back(all);
  }
  EXPECT_LE(rel_diff(logits[1], logits[0]), 1e-4);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < Hkv; ++h) {
      const rkv::LayerKV& a = after[0][static_cast<size_t>(l)];
      const rkv::LayerKV& b = after[1][static_cast<size_t>(l)];
      EXPECT_EQ(std::vector<int32_t>(b.pos_at(h, 0), b.pos_at(h, 0) + b.head_length(h)),
                std::vector<int32_t>(a.pos_at(h, 0), a.pos_at(h, 0) + a.head_length(h)))
          << "layer " << l << " head " << h;
    }
}

// Key re-rotation (Backend::rerotate_layer, compression.rerotate) on a uniform compaction (layer 0) and a per-head
// one (every other layer): on each backend every KV head then holds positions 0 .. n_h - 1 and each kept key equals
// that backend's full-cache key at its original position p turned by i - p (rope_rerotate, computed here on the
// host); keys, values and positions match the CPU's within 1e-4, and so do the logits of 8 tokens fed from the cache
// length (where kvpress' pipeline puts the tokens after a re-rotated context).
TEST_P(BackendConformance, RerotationMovesKeptKeysToContiguousPositionsAsTheCpu) {
  const int64_t T = static_cast<int64_t>(prompt.size()), Hkv = model.config.n_kv_heads, L = model.config.n_layers;
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 37) % 101);
  const rkv::Selection uniform = rkv::select_positions(scores.data(), Hkv, T, T / 3, rkv::ProtectedSpec{2, 2}, 0);
  std::vector<int64_t> heads(static_cast<size_t>(Hkv));
  for (int64_t h = 0; h < Hkv; ++h) heads[static_cast<size_t>(h)] = 6 + 5 * h;  // 6, 11, 16, ...
  const rkv::Selection ragged = rkv::select_positions_per_head(scores.data(), Hkv, T, heads, rkv::ProtectedSpec{2, 2}, 1);
  ASSERT_TRUE(ragged.per_head());
  std::vector<std::vector<rkv::LayerKV>> after;
  std::vector<std::vector<float>> logits;
  for (rkv::Backend* be : {cpu.get(), dev.get()}) {
    SCOPED_TRACE(be->kind());
    const rkv::PrefillResult r = be->prefill(prompt, {});
    const auto c = be->clone(*r.cache);
    int64_t longest = 0;
    std::vector<rkv::LayerKV> layers;
    for (int64_t l = 0; l < L; ++l) {
      const rkv::Selection& sel = l == 0 ? uniform : ragged;
      be->compact_layer(*c, l, sel);
      be->rerotate_layer(*c, l);
      const rkv::LayerKV full = be->download_layer(*r.cache, l), got = be->download_layer(*c, l);
      double scale = 0;
      for (float x : full.k) scale = std::max(scale, double(std::fabs(x)));
      for (int64_t h = 0; h < Hkv; ++h) {
        const int64_t n = sel.head_kept_count(h);
        ASSERT_EQ(got.head_length(h), n) << "layer " << l << " head " << h;
        longest = std::max(longest, n);
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(*got.pos_at(h, i), i) << "layer " << l << " head " << h;
          const int64_t p = sel.head_positions(h)[i];
          std::vector<float> want(full.k_at(h, p), full.k_at(h, p) + full.head_dim);
          rkv::rope_rerotate(want.data(), model.layer_inv_freq(l), p, i);
          for (int64_t e = 0; e < full.head_dim; ++e) {
            worst = std::max(worst, std::fabs(double(got.k_at(h, i)[e]) - want[static_cast<size_t>(e)]));
            ASSERT_EQ(got.v_at(h, i)[e], full.v_at(h, p)[e]) << "values are not rotated";
          }
        }
        EXPECT_LE(worst, 1e-5 * scale) << "layer " << l << " head " << h;
      }
      layers.push_back(got);
    }
    EXPECT_EQ(longest, std::max(T / 3, heads.back()));
    logits.push_back(be->extend(*c, next, longest, rkv::LogitsFor::All));
    const rkv::LayerKV grown = be->download_layer(*c, 0);  // appended entries carry positions longest, longest + 1, ..
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t i = 0; i < static_cast<int64_t>(next.size()); ++i)
        EXPECT_EQ(*grown.pos_at(h, T / 3 + i), longest + i) << "head " << h;
    after.push_back(std::move(layers));
  }
  for (int64_t l = 0; l < L; ++l)
    expect_layers_match(after[1][static_cast<size_t>(l)], after[0][static_cast<size_t>(l)], 1e-4,
                        "re-rotated layer " + std::to_string(l));
  EXPECT_LE(rel_diff(logits[1], logits[0]), 1e-4);
}

TEST_P(BackendConformance, ProfilerSessionMatchesCpu) {
  // Logits of the raw synthetic model spread over tens of nats, so its softmax is one-hot and every KL underflows:
  // scale the final norm so the logits spread about one (as tests/gpu/test_profiler.cpp does).
  rkv::Model soft = model;
  for (float& w : soft.output_norm) w *= 0.05f;
  rkv::BackendOptions o;
  o.dtype = "f32";
  const auto soft_cpu = rkv::make_backend("cpu", soft, o), soft_dev = rkv::make_backend("cuda", soft, o);
  const int64_t P = 48, n_w = 6;
  const rkv::ProtectedSpec protect{2, 4};
  auto sa = soft_cpu->new_profiler(P, n_w, protect), sb = soft_dev->new_profiler(P, n_w, protect);
  std::vector<int32_t> tokens(prompt.begin(), prompt.begin() + P + n_w);
  sa->prepare_example(3, tokens);
  sb->prepare_example(3, tokens);
  const int64_t L = model.config.n_layers;
  for (int64_t l = 0; l < L; ++l) {
    EXPECT_LE(rel_diff(sb->attention_output(l, false), sa->attention_output(l, false)), 1e-4) << "layer " << l;
    for (double kl : sb->window_kl(l)) EXPECT_EQ(kl, 0.0) << "unperturbed, from layer " << l;
    sa->perturb_values(l, 0.05, 11, 1);
    sb->perturb_values(l, 0.05, 11, 1);
    EXPECT_TRUE(sb->is_changed(l));
    // The noise is the same counter-based draw on both: the perturbed values agree, so do the KLs.
    EXPECT_LE(rel_diff(sb->read_values(l), sa->read_values(l)), 1e-4) << "layer " << l;
    const std::vector<double> ka = sa->window_kl(l), kb = sb->window_kl(l);
    ASSERT_EQ(kb.size(), static_cast<size_t>(n_w));
    for (int64_t t = 0; t < n_w; ++t) {
      EXPECT_GT(ka[static_cast<size_t>(t)], 0.0);
      EXPECT_LE(std::fabs(kb[static_cast<size_t>(t)] - ka[static_cast<size_t>(t)]), 1e-3 * ka[static_cast<size_t>(t)])
          << "layer " << l << " row " << t;
    }
    EXPECT_LE(rel_diff(sb->attention_output(l, true), sa->attention_output(l, true)), 1e-4) << "layer " << l;
    sa->restore(l);
    sb->restore(l);
    EXPECT_FALSE(sb->is_changed(l));
    for (double kl : sb->window_kl(l)) EXPECT_EQ(kl, 0.0) << "restored layer " << l;
  }
  // Custom values: write, rerun, restore.
  std::vector<float> v = sb->read_values(0);
  ASSERT_EQ(v.size(), static_cast<size_t>(model.config.n_kv_heads * P * model.config.head_dim));
  for (float& x : v) x = -x;
  sb->write_values(0, v);
  EXPECT_EQ(sb->read_values(0), v);
  double total = 0;
  for (double kl : sb->window_kl(0)) total += kl;
  EXPECT_GT(total, 0.0);
  sb->restore(0);
  for (double kl : sb->window_kl(0)) EXPECT_EQ(kl, 0.0);
}

TEST_P(BackendConformance, LayerViewsDescribeTheCacheInPlace) {
  const rkv::PrefillResult a = cpu->prefill(prompt, {}), b = dev->prefill(prompt, {});
  const int64_t T = static_cast<int64_t>(prompt.size());
  for (bool values : {false, true}) {
    rkv::TensorView va = cpu->layer_view(*a.cache, 1 % model.config.n_layers, values);
    rkv::TensorView vb = dev->layer_view(*b.cache, 1 % model.config.n_layers, values);
    rkv::TensorView copy = vb;  // a copied view keeps its own shape storage
    for (DLTensor* t : {va.dl(), vb.dl(), copy.dl()}) {
      ASSERT_EQ(t->ndim, 3);
      EXPECT_EQ(t->shape[0], model.config.n_kv_heads);
      EXPECT_EQ(t->shape[1], T);
      EXPECT_EQ(t->shape[2], model.config.head_dim);
      EXPECT_EQ(t->strides[1], model.config.head_dim);
      EXPECT_EQ(t->strides[2], 1);
      EXPECT_EQ(t->dtype.code, kDLFloat);
      EXPECT_EQ(t->dtype.bits, 32);
    }
    EXPECT_EQ(va.dl()->device.device_type, kDLCPU);
    EXPECT_EQ(vb.dl()->device.device_type, kDLCUDA);
    EXPECT_EQ(copy.dl()->data, vb.dl()->data);
    // The CPU view reads the cache itself: element [h = 1, j = 5, e = 3] as download_layer has it.
    const rkv::LayerKV host = cpu->download_layer(*a.cache, 1 % model.config.n_layers);
    const DLTensor* t = va.dl();
    const float* p = static_cast<const float*>(t->data) + 1 * t->strides[0] + 5 * t->strides[1] + 3;
    EXPECT_EQ(*p, values ? host.v_at(1, 5)[3] : host.k_at(1, 5)[3]);
  }
  EXPECT_THROW(dev->layer_view(*b.cache, model.config.n_layers, false), rkv::InputError);
}

TEST_P(BackendConformance, MemoryPhasesAreRecorded) {
  dev->begin_phase("prefill");
  const rkv::PrefillResult b = dev->prefill(prompt, {});
  dev->end_phase();
  const auto phases = dev->memory_phases();
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(phases[0].phase, "prefill");
  EXPECT_GE(phases[0].peak_bytes, b.cache->bytes());  // at least the cache it made was held during the phase
}

TEST_P(BackendConformance, CodecPacksTheSameBytesAndDecodesAsTheCpu) {
  // Every codec on the prompt's cache (after a per-head compaction of layer 0), then decode steps that pack each new
  // entry (residual 0) or fill KIVI's residual: the same bytes, positions and lengths on both backends (both pack in
  // the host codec), and the same entries and logits within 1e-3. Not 1e-4 as unpacked caches: quantization is
  // discontinuous, and the backends' 1e-6 differences in the entries they pack can move a group's fp16 scale to
  // the next fp16 value (2^-10 relative) or, rarely, flip a code by one step -- kernels::dequantize_kv itself is
  // exact (OpsTest.DequantizeKvEqualsTheHostCodecBitForBit); a wrong layout would move most entries by whole steps.
  const int64_t T = static_cast<int64_t>(prompt.size()), V = model.config.vocab_size;
  rkv::CodecSpec int4, kivi, q4;
  int4.format = rkv::CodecFormat::integer;
  kivi.format = rkv::CodecFormat::kivi;
  kivi.bits = 2;
  kivi.group = 16;
  kivi.residual = 8;
  q4.format = rkv::CodecFormat::q4_0;
  rkv::CodecSpec mixed;  // per-token bits: int2 with classes at 16 (f16) and 8 bits
  mixed.format = rkv::CodecFormat::integer;
  mixed.bits = 2;
  mixed.token_bits = {16, 8};
  mixed.token_shares = {0.2, 0.2};
  for (const rkv::CodecSpec& codec : {int4, kivi, q4, mixed}) {
    SCOPED_TRACE(codec.label());
    const rkv::PrefillResult a = cpu->prefill(prompt, {}), b = dev->prefill(prompt, {});
    // layer 0: heads keep 40, 30, 20 of the first positions (per-head lengths)
    const rkv::Selection sel = ragged_selection(model.config.n_kv_heads, T, 0);
    cpu->compact_layer(*a.cache, 0, sel);
    dev->compact_layer(*b.cache, 0, sel);
    const size_t f32_bytes = a.cache->bytes_in_use();
    for (int64_t l = 0; l < model.config.n_layers; ++l) {
      if (!codec.mixed()) {
        cpu->encode_layer(*a.cache, l, codec);
        dev->encode_layer(*b.cache, l, codec);
        continue;
      }
      std::vector<uint8_t> classes;  // entry i of a head: i % 5 == 0 at 16 bits, i % 5 == 2 at 8 bits, else 2 bits
      for (int64_t h = 0; h < model.config.n_kv_heads; ++h)
        for (int64_t i = 0; i < a.cache->head_length(l, h); ++i)
          classes.push_back(static_cast<uint8_t>(i % 5 == 0 ? 1 : i % 5 == 2 ? 2 : 0));
      if (model.config.is_sliding(l)) {  // classes reorder the entries; a window needs them in position order
        EXPECT_THROW(cpu->encode_layer_classes(*a.cache, l, codec, classes), rkv::InputError);
        EXPECT_THROW(dev->encode_layer_classes(*b.cache, l, codec, classes), rkv::InputError);
        classes.assign(classes.size(), 0);  // all at the base bits: allowed
      }
      cpu->encode_layer_classes(*a.cache, l, codec, classes);
      dev->encode_layer_classes(*b.cache, l, codec, classes);
    }
    EXPECT_EQ(b.cache->bytes_in_use(), a.cache->bytes_in_use());
    EXPECT_LT(a.cache->bytes_in_use(), f32_bytes / 2);  // 84, 68, 76 and 112.8 of 516 bytes per entry, plus tails
    const auto cb = dev->clone(*b.cache);  // a clone decodes like its original
    int32_t t = static_cast<int32_t>(argmax(a.logits.data(), V));
    for (int64_t s = 0; s < 20; ++s) {
      const std::vector<float> na = cpu->extend(*a.cache, {t}, T + s, rkv::LogitsFor::Last);
      const std::vector<float> nb = dev->extend(*b.cache, {t}, T + s, rkv::LogitsFor::Last);
      const std::vector<float> nc = dev->extend(*cb, {t}, T + s, rkv::LogitsFor::Last);
      EXPECT_LE(rel_diff(nb, na), 1e-3) << "step " << s;
      EXPECT_EQ(nc, nb) << "step " << s;
      t = static_cast<int32_t>(argmax(na.data(), V));
    }
    EXPECT_EQ(b.cache->bytes_in_use(), a.cache->bytes_in_use());
    for (int64_t l = 0; l < model.config.n_layers; ++l) {
      expect_packed_layers_match(dev->download_layer(*b.cache, l), cpu->download_layer(*a.cache, l),
                                 "layer " + std::to_string(l));
      EXPECT_EQ(dev->layer_positions(*b.cache, l), cpu->layer_positions(*a.cache, l));
      EXPECT_EQ(b.cache->head_length(l, 0), a.cache->head_length(l, 0));
    }
    EXPECT_THROW(dev->compact_layer(*b.cache, 1, sel), rkv::InputError);
    EXPECT_THROW(dev->layer_view(*b.cache, 1, false), rkv::InputError);
    EXPECT_THROW(dev->encode_layer(*b.cache, 1, codec), rkv::InputError);
  }
}

TEST_P(BackendConformance, SharedLayersReadTheirSourceAsTheCpuDoes) {
  // Layer 1 shares layer 0, which is left uniform and float32, or compacted per head (ragged) and int4-packed: a
  // 3-row extend (the prefill kernel) then decode steps (the decode kernel) give the CPU's logits within 1e-4, the
  // shared layer holds nothing and its bytes are freed, and a clone decodes like its original. The CPU's shared layer
  // itself is checked by hand in test_cpu_backend (CpuBackend.ForwardSharedLayer...). On gemma3 both layers slide.
  const int64_t T = static_cast<int64_t>(prompt.size()), V = model.config.vocab_size;
  const rkv::Selection sel = ragged_selection(model.config.n_kv_heads, T, 1);
  rkv::CodecSpec int4;
  int4.format = rkv::CodecFormat::integer;
  // A whole float32 layer: T entries per KV head of key + value (4 d bytes each) + an int32 position.
  const size_t layer_bytes = static_cast<size_t>(T * model.config.n_kv_heads * (8 * model.config.head_dim + 4));
  for (const bool ragged_packed_source : {false, true}) {
    SCOPED_TRACE(ragged_packed_source ? "ragged, packed source" : "uniform float32 source");
    const rkv::PrefillResult a = cpu->prefill(prompt, {}), b = dev->prefill(prompt, {});
    for (rkv::Backend* be : {cpu.get(), dev.get()}) {
      rkv::BackendCache& c = be == cpu.get() ? *a.cache : *b.cache;
      if (ragged_packed_source && !model.config.is_sliding(0)) {  // a packed cache refuses sliding windows
        be->compact_layer(c, 0, sel);
        be->encode_layer(c, 0, int4);
      }
      const size_t before = c.bytes();
      be->share_layer(c, 1, 0);
      EXPECT_EQ(before - c.bytes(), layer_bytes);  // layer 1 freed whole
      EXPECT_EQ(c.shared_source(1), 0);
      EXPECT_EQ(c.shared_source(0), 0);
      EXPECT_EQ(c.length(1), 0);
      EXPECT_EQ(be->download_layer(c, 1).length, 0);
      EXPECT_THROW(be->share_layer(c, 1, 0), rkv::InputError);  // already shared
      EXPECT_THROW(be->share_layer(c, 0, 0), rkv::InputError);  // not an earlier layer
      if (model.config.n_layers > 2) EXPECT_THROW(be->share_layer(c, 2, 1), rkv::InputError);  // a shared source
      EXPECT_THROW(be->compact_layer(c, 1, sel), rkv::InputError);
      EXPECT_THROW(be->encode_layer(c, 1, int4), rkv::InputError);
    }
    EXPECT_EQ(b.cache->bytes_in_use(), a.cache->bytes_in_use());
    const auto cb = dev->clone(*b.cache);
    int32_t t = static_cast<int32_t>(argmax(a.logits.data(), V));
    const std::vector<int32_t> three = {t, next[0], next[1]};
    const std::vector<float> la = cpu->extend(*a.cache, three, T, rkv::LogitsFor::All);
    const std::vector<float> lb = dev->extend(*b.cache, three, T, rkv::LogitsFor::All);
    const std::vector<float> lc = dev->extend(*cb, three, T, rkv::LogitsFor::All);
    EXPECT_LE(rel_diff(lb, la), ragged_packed_source ? 1e-3 : 1e-4);  // 1e-3: CodecPacks... says why
    EXPECT_EQ(lc, lb);
    t = static_cast<int32_t>(argmax(la.data() + 2 * V, V));
    for (int64_t s = 0; s < 5; ++s) {
      const std::vector<float> na = cpu->extend(*a.cache, {t}, T + 3 + s, rkv::LogitsFor::Last);
      const std::vector<float> nb = dev->extend(*b.cache, {t}, T + 3 + s, rkv::LogitsFor::Last);
      EXPECT_LE(rel_diff(nb, na), ragged_packed_source ? 1e-3 : 1e-4) << "step " << s;
      t = static_cast<int32_t>(argmax(na.data(), V));
    }
    EXPECT_EQ(a.cache->head_length(1, 0), 0);
    EXPECT_EQ(b.cache->head_length(1, 0), 0);
    EXPECT_EQ(b.cache->head_length(0, 1), a.cache->head_length(0, 1));  // the source grew by the 8 new rows
    EXPECT_EQ(a.cache->head_length(0, 1), (ragged_packed_source && !model.config.is_sliding(0) ? 30 : T) + 8);
  }
}

TEST_P(BackendConformance, ErrorsNameTheirArgument) {
  EXPECT_THROW(dev->prefill({}, {}), rkv::InputError);
  EXPECT_THROW(dev->prefill({static_cast<int32_t>(model.config.vocab_size)}, {}), rkv::InputError);
  const rkv::PrefillResult a = cpu->prefill(prompt, {});
  EXPECT_THROW(dev->download_layer(*a.cache, 0), rkv::InputError);  // a CPU cache handed to the CUDA backend
  const rkv::PrefillResult b = dev->prefill(prompt, {});
  EXPECT_THROW(dev->download_layer(*b.cache, model.config.n_layers), rkv::InputError);
  EXPECT_THROW(cpu->download_layer(*b.cache, 0), rkv::InputError);
}

INSTANTIATE_TEST_SUITE_P(Models, BackendConformance,
                         testing::Values("llama", "gemma3", "qwen3", "olmo2", "gemma2"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
