// The CPU implementation of rkv::Backend and the factory (backend/backend.hpp), on a seeded synthetic model:
//  - the statistics fused into the prefill equal those compute_attention_stats() computes independently from the
//    queries and keys after RoPE (a second, unfused Q K^T), and are bit-identical at one thread and at two;
//  - the query moments are the mean and covariance of the kept queries turned back before RoPE;
//  - prefill / extend / clone / compact agree with the plain forward functions (backend/cpu/forward.hpp);
//  - make_backend's errors: unknown kinds and dtypes, cuda without a device or without the CUDA backend, named.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "backend/backend.hpp"
#include "backend/cpu/forward.hpp"
#include "backend/cpu/threads.hpp"
#include "cache/attention_stats.hpp"
#include "cache/budget.hpp"
#include "cache/selection.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/decode/policy.hpp"
#include "core/errors.hpp"
#include "model/rope.hpp"
#include "model/synthetic_model.hpp"
#include "runner/decode/loop.hpp"

namespace {

const rkv::Model& model() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 6, 2, 16, 3), 5);
  return m;
}

std::vector<int32_t> tokens(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37 + 11) % model().config.vocab_size);
  return t;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0, s = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::fabs(double(a[i]) - b[i]));
    s = std::max(s, std::fabs(double(b[i])));
  }
  return m / s;
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(rkv::cpu::num_threads()) { rkv::cpu::set_num_threads(n); }
  ~ThreadCount() { rkv::cpu::set_num_threads(saved_); }

 private:
  int saved_;
};

rkv::PrefillRequest stats_request(int64_t window) {
  rkv::PrefillRequest req;
  req.keep_queries = 1 << 20;  // every position (clamped to T)
  rkv::AttentionStatsOptions w, c;
  w.window_attention = true;
  w.window = window;
  c.cumulative_attention = true;
  c.query_counts = true;
  req.stats = {w, c};
  return req;
}

TEST(CpuBackend, FusedStatisticsEqualTheUnfusedComputation) {
  const int64_t T = 150;  // three query blocks of 64, the last one partial
  for (int threads : {1, 2}) {
    ThreadCount tc(threads);
    const auto be = rkv::make_backend("cpu", model());
    const rkv::PrefillResult r = be->prefill(tokens(T), stats_request(20));
    ASSERT_EQ(r.n_queries, T);
    for (int64_t l = 0; l < model().config.n_layers; ++l) {
      const rkv::LayerKV kv = be->download_layer(*r.cache, l);
      const rkv::QueriesView q{r.queries[static_cast<size_t>(l)].data(), model().config.n_heads, T,
                               model().config.head_dim};
      const rkv::KeysView k{kv.k.data(), kv.n_kv_heads, T, kv.head_dim, kv.capacity * kv.head_dim};
      rkv::AttentionStatsOptions o;
      o.window_attention = o.cumulative_attention = o.query_counts = true;
      o.window = 20;
      const rkv::AttentionStats ref = rkv::compute_attention_stats(q, k, o);
      const rkv::AttentionStats& w = r.stats[0][static_cast<size_t>(l)];
      const rkv::AttentionStats& c = r.stats[1][static_cast<size_t>(l)];
      EXPECT_EQ(w.window, 20);
      EXPECT_LE(max_rel(w.window_attention, ref.window_attention), 1e-5) << "threads " << threads << " layer " << l;
      EXPECT_LE(max_rel(c.cumulative_attention, ref.cumulative_attention), 1e-5) << "threads " << threads << " layer " << l;
      EXPECT_EQ(c.query_counts, ref.query_counts);
      // By hand: every query's row sums to 1, so sum_j C[h, j] = T and sum_j W[h, j] = w.
      for (int64_t h = 0; h < model().config.n_heads; ++h) {
        double sc = 0, sw = 0;
        for (int64_t j = 0; j < T; ++j) {
          sc += c.cumulative_attention[static_cast<size_t>(h * T + j)];
          sw += w.window_attention[static_cast<size_t>(h * T + j)];
        }
        EXPECT_NEAR(sc, double(T), 1e-3);
        EXPECT_NEAR(sw, 20.0, 1e-4);
      }
    }
  }
}

TEST(CpuBackend, QueryMomentsAreThoseOfTheQueriesTurnedBackBeforeRope) {
  // RKV_STAT_QUERY_MOMENTS: the prefill's mean and covariance of the pre-RoPE queries t = skip .. T - 1, checked
  // against the kept post-RoPE queries turned back here with rope_rotate_by(-t) (angles in double per call, another
  // path than the prefill's cos/sin tables) and the two moments summed directly in double.
  const int64_t T = 40, skip = 3;
  const rkv::ModelConfig& c = model().config;
  const int64_t H = c.n_heads, d = c.head_dim;
  const auto be = rkv::make_backend("cpu", model());
  rkv::PrefillRequest req;
  req.keep_queries = T;
  rkv::AttentionStatsOptions o;
  o.query_moments = true;
  o.query_skip = skip;
  req.stats = {o};
  const rkv::PrefillResult r = be->prefill(tokens(T), req);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const rkv::AttentionStats& st = r.stats[0][static_cast<size_t>(l)];
    ASSERT_EQ(st.query_mean.size(), static_cast<size_t>(H * d));
    ASSERT_EQ(st.query_covariance.size(), static_cast<size_t>(H * d * d));
    for (int64_t h = 0; h < H; ++h) {
      std::vector<std::vector<float>> q0;
      for (int64_t t = skip; t < T; ++t) {
        const float* q = r.queries[static_cast<size_t>(l)].data() + (h * T + t) * d;
        q0.emplace_back(q, q + d);
        rkv::rope_rotate_by(q0.back().data(), model().layer_inv_freq(l), -t);
      }
      const double n = static_cast<double>(T - skip);
      for (int64_t i = 0; i < d; ++i) {
        double mi = 0;
        for (const auto& x : q0) mi += x[static_cast<size_t>(i)];
        mi /= n;
        EXPECT_NEAR(st.query_mean[static_cast<size_t>(h * d + i)], mi, 1e-5 * (1 + std::fabs(mi))) << "layer " << l;
        for (int64_t j = 0; j < d; ++j) {
          double mj = 0, cij = 0;
          for (const auto& x : q0) mj += x[static_cast<size_t>(j)];
          mj /= n;
          for (const auto& x : q0) cij += (x[static_cast<size_t>(i)] - mi) * (x[static_cast<size_t>(j)] - mj);
          cij /= n;
          EXPECT_NEAR(st.query_covariance[static_cast<size_t>((h * d + i) * d + j)], cij, 1e-5 * (1 + std::fabs(cij)))
              << "layer " << l << " head " << h << " (" << i << ", " << j << ")";
        }
      }
    }
  }
}

TEST(CpuBackend, FusedStatisticsAreReproducibleAndLeaveTheForwardUnchanged) {
  ThreadCount tc(2);
  const auto be = rkv::make_backend("cpu", model());
  const rkv::PrefillResult a = be->prefill(tokens(130), stats_request(16));
  const rkv::PrefillResult b = be->prefill(tokens(130), stats_request(16));
  const rkv::PrefillResult plain = be->prefill(tokens(130), {});
  for (size_t k = 0; k < 2; ++k)
    for (size_t l = 0; l < a.stats[k].size(); ++l) {
      EXPECT_EQ(a.stats[k][l].window_attention, b.stats[k][l].window_attention);
      EXPECT_EQ(a.stats[k][l].cumulative_attention, b.stats[k][l].cumulative_attention);
    }
  EXPECT_EQ(a.logits, plain.logits);  // statistics only observe: the logits are bit-identical
}

// The same on a model with sliding-window layers (gemma3 synthetic: window 16 on layers l % 3 < 2) and a prompt far
// past the window, where the statistics cover keys the sliding layers' attention masks out.
TEST(CpuBackend, FusedStatisticsLeaveASlidingWindowForwardUnchanged) {
  ThreadCount tc(2);
  const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("gemma3", 4, 2, 16, 3), 8);
  ASSERT_TRUE(m.config.is_sliding(0));
  const auto be = rkv::make_backend("cpu", m);
  std::vector<int32_t> t(130);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 37 + 11) % m.config.vocab_size);
  rkv::PrefillRequest with = stats_request(16), plain;
  with.logits = plain.logits = rkv::LogitsFor::All;
  EXPECT_EQ(be->prefill(t, with).logits, be->prefill(t, plain).logits);
}

TEST(CpuBackend, PrefillExtendCloneAndCompactAgreeWithTheForwardFunctions) {
  const auto be = rkv::make_backend("cpu", model());
  const std::vector<int32_t> p = tokens(70), cont = {3, 1, 4, 1, 5};
  rkv::cpu::Workspace ws;
  rkv::KVCache ref = rkv::cpu::make_cache(model(), 0);
  const std::vector<float> want_last = rkv::cpu::prefill(model(), p, 0, ref, ws, rkv::LogitsFor::Last);
  const std::vector<float> want_cont = rkv::cpu::prefill(model(), cont, 70, ref, ws, rkv::LogitsFor::All);
  const rkv::PrefillResult r = be->prefill(p, {});
  EXPECT_EQ(r.logits, want_last);
  const auto copy = be->clone(*r.cache);
  EXPECT_EQ(be->extend(*copy, cont, 70, rkv::LogitsFor::All), want_cont);
  EXPECT_EQ(copy->length(0), 75);
  EXPECT_EQ(r.cache->length(0), 70);
  // k + v (L 3, H_kv 2, T 70, d 16, f32) and one int32 position per entry and KV head.
  EXPECT_EQ(r.cache->bytes(), size_t(3) * 2 * 70 * (2 * 16 * sizeof(float) + sizeof(int32_t)));
  std::vector<float> scores(2 * 70);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 7) % 13);
  const rkv::Selection sel = rkv::select_positions(scores.data(), 2, 70, 10, rkv::ProtectedSpec{1, 2}, 1);
  be->compact_layer(*r.cache, 1, sel);
  EXPECT_EQ(r.cache->length(1), 10);
  EXPECT_EQ(r.cache->bytes(), size_t(2) * (70 + 70 + 10) * (2 * 16 * sizeof(float) + sizeof(int32_t)));
  const rkv::LayerKV kept = be->download_layer(*r.cache, 1);
  ASSERT_TRUE(kept.has_positions());
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 10; ++i) {
      EXPECT_EQ(kept.k_at(h, i)[0], ref.layers[1].k_at(h, sel.head_positions(h)[i])[0]);
      EXPECT_EQ(*kept.pos_at(h, i), sel.head_positions(h)[i]);  // prefill from position 0: index = position
    }
  // Decoding continues at position T = 70 on the compacted layer: the new entry carries 70, after the kept ones.
  be->extend(*r.cache, {7}, 70, rkv::LogitsFor::Last);
  const rkv::LayerKV grown = be->download_layer(*r.cache, 1);
  ASSERT_EQ(grown.length, 11);
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_EQ(*grown.pos_at(h, 10), 70);
    for (int64_t i = 0; i + 1 < 11; ++i) EXPECT_LT(*grown.pos_at(h, i), *grown.pos_at(h, i + 1)) << "ascending";
  }
  EXPECT_THROW(be->extend(*r.cache, {7}, int64_t(1) << 31, rkv::LogitsFor::Last), rkv::InputError);
  EXPECT_THROW(be->download_layer(*r.cache, 3), rkv::InputError);
  EXPECT_THROW(be->prefill({}, {}), rkv::InputError);
  EXPECT_THROW(be->prefill({static_cast<int32_t>(model().config.vocab_size)}, {}), rkv::InputError);
}

// Depth-wise sharing (Backend::share_layer): a shared layer's attention output, worked out by hand from its own
// query and the SOURCE layer's keys and values: o = sum_h softmax_j(s q_h . K_src[g(h), j]) V_src[g(h), j] Wo^T, with
// its own query equal to the unshared layer's (the same projection and RoPE), and its own cache untouched.
TEST(CpuBackend, ForwardSharedLayerAttendsOverTheSourceWithItsOwnQueryAndOutput) {
  const rkv::ModelConfig& c = model().config;
  const int64_t H = c.n_heads, G = c.group_size(), d = c.head_dim, D = c.d_model, T = 20;
  rkv::cpu::Workspace ws;
  rkv::KVCache kv = rkv::cpu::make_cache(model(), 0);
  rkv::cpu::prefill(model(), tokens(T), 0, kv, ws, rkv::LogitsFor::None);
  const int64_t pos = T;
  std::vector<float> x = rkv::cpu::embed(model(), {9});  // the new token's residual row entering layer 2
  for (int64_t l = 0; l < 2; ++l) rkv::cpu::forward_layer(model(), l, x.data(), 1, &pos, kv.layers[static_cast<size_t>(l)], ws);
  std::vector<float> q_shared, o_shared, q_own;
  rkv::cpu::LayerHooks hooks;
  hooks.on_queries = [&](const float* q, int64_t, int64_t, int64_t) { q_shared.assign(q, q + H * d); };
  hooks.on_attn_output = [&](const float* o, int64_t, int64_t) { o_shared.assign(o, o + D); };
  std::vector<float> xs = x;
  rkv::cpu::forward_shared_layer(model(), 2, xs.data(), 1, &pos, kv.layers[1], ws, &hooks);
  EXPECT_EQ(kv.layers[2].length, T);  // its own cache: untouched
  EXPECT_EQ(kv.layers[1].length, T + 1);
  {
    rkv::KVCache own = kv;
    rkv::cpu::LayerHooks qh;
    qh.on_queries = [&](const float* q, int64_t, int64_t, int64_t) { q_own.assign(q, q + H * d); };
    std::vector<float> xo = x;
    rkv::cpu::forward_layer(model(), 2, xo.data(), 1, &pos, own.layers[2], ws, &qh);
  }
  EXPECT_EQ(q_shared, q_own);
  const rkv::LayerWeights& w = model().layers[2];
  ASSERT_EQ(w.wo.size(), static_cast<size_t>(D * H * d)) << "the synthetic model keeps float32 weights";
  const rkv::LayerKV& src = kv.layers[1];
  std::vector<double> a(static_cast<size_t>(H * d), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / G, n = src.head_length(g);
    std::vector<double> p(static_cast<size_t>(n));
    double top = -1e300, sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < d; ++e) dot += double(q_shared[static_cast<size_t>(h * d + e)]) * src.k_at(g, j)[e];
      p[static_cast<size_t>(j)] = dot * c.attention_scale();
      top = std::max(top, p[static_cast<size_t>(j)]);
    }
    for (double& v : p) sum += (v = std::exp(v - top));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t e = 0; e < d; ++e) a[static_cast<size_t>(h * d + e)] += p[static_cast<size_t>(j)] / sum * src.v_at(g, j)[e];
  }
  std::vector<float> o_hand(static_cast<size_t>(D));
  for (int64_t r = 0; r < D; ++r) {
    double acc = 0;
    for (int64_t k = 0; k < H * d; ++k) acc += double(w.wo[static_cast<size_t>(r * H * d + k)]) * a[static_cast<size_t>(k)];
    o_hand[static_cast<size_t>(r)] = static_cast<float>(acc);
  }
  EXPECT_LE(max_rel(o_shared, o_hand), 1e-5);
}

// A shared layer through the Backend: no entries, its bytes freed, refused by compaction; extend attends over the
// source (the same logits as the forward functions with forward_shared_layer).
TEST(CpuBackend, ShareLayerFreesTheLayerAndExtendReadsTheSource) {
  const auto be = rkv::make_backend("cpu", model());
  const int64_t T = 30;
  const rkv::PrefillResult r = be->prefill(tokens(T), {});
  const size_t entry = 2 * 16 * sizeof(float) + sizeof(int32_t);
  be->share_layer(*r.cache, 2, 0);
  EXPECT_EQ(r.cache->bytes(), size_t(2) * 2 * T * entry);  // layers 0 and 1 only
  EXPECT_EQ(r.cache->length(2), 0);
  EXPECT_EQ(r.cache->shared_source(2), 0);
  EXPECT_EQ(r.cache->shared_source(1), 1);
  EXPECT_THROW(be->share_layer(*r.cache, 2, 1), rkv::InputError);
  EXPECT_THROW(be->share_layer(*r.cache, 1, 1), rkv::InputError);
  EXPECT_THROW(be->share_layer(*r.cache, 3, 0), rkv::InputError);
  const std::vector<int32_t> cont = {3, 1, 4};
  const std::vector<float> got = be->extend(*r.cache, cont, T, rkv::LogitsFor::All);
  // The same by the forward functions.
  rkv::cpu::Workspace ws;
  rkv::KVCache kv = rkv::cpu::make_cache(model(), 0);
  rkv::cpu::prefill(model(), tokens(T), 0, kv, ws, rkv::LogitsFor::None);
  std::vector<float> x = rkv::cpu::embed(model(), cont);
  const std::vector<int64_t> pos = {T, T + 1, T + 2};
  rkv::cpu::forward_layer(model(), 0, x.data(), 3, pos.data(), kv.layers[0], ws);
  rkv::cpu::forward_layer(model(), 1, x.data(), 3, pos.data(), kv.layers[1], ws);
  rkv::cpu::forward_shared_layer(model(), 2, x.data(), 3, pos.data(), kv.layers[0], ws);
  EXPECT_EQ(got, rkv::cpu::final_logits(model(), x.data(), 3, {0, 1, 2}, ws));
  EXPECT_EQ(r.cache->length(0), T + 3);
  EXPECT_EQ(r.cache->length(2), 0);
}

// The memory case of per-head budgets: T = 1024, f = 0.2 over 30 layers -> B = 6144 entries held per KV head (summed over layers);
// 16 decoded tokens add 16 x 30 (decode policy "none": nothing is evicted while decoding). Bytes follow the entries.
TEST(CpuBackend, EntriesHeldAfterCompressionAndDecoding) {
  rkv::ModelConfig c = rkv::synthetic_config("llama", 2, 1, 8, 30);
  c.d_model = 16;
  c.d_ff = 32;
  c.vocab_size = 64;
  c.context_length = 4096;
  const rkv::Model m = rkv::synthetic_model(c, 9);
  const auto be = rkv::make_backend("cpu", m);
  const int64_t T = 1024, L = 30;
  std::vector<int32_t> prompt(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 13) % 64);
  const rkv::PrefillResult r = be->prefill(prompt, {});
  const int64_t B = rkv::budget_total_from_fraction(0.2, T, L);
  ASSERT_EQ(B, 6144);
  const std::vector<int64_t> b = rkv::integerize_budgets(std::vector<double>(L, double(B) / L), B, T);
  std::vector<float> scores(static_cast<size_t>(T));
  for (int64_t j = 0; j < T; ++j) scores[static_cast<size_t>(j)] = float((j * 37) % 101);
  for (int64_t l = 0; l < L; ++l)
    be->compact_layer(*r.cache, l,
                      rkv::select_positions(scores.data(), 1, T, b[static_cast<size_t>(l)], rkv::ProtectedSpec{4, 8}, l));
  auto held = [&] {
    int64_t n = 0;
    for (int64_t l = 0; l < L; ++l) n += r.cache->length(l);
    return n;
  };
  EXPECT_EQ(held(), 6144);
  const size_t per_entry = 2 * 8 * sizeof(float) + sizeof(int32_t);  // k + v rows of d = 8, and the position
  EXPECT_EQ(r.cache->bytes(), size_t(6144) * per_entry);
  for (int64_t s = 0; s < 16; ++s) be->extend(*r.cache, {static_cast<int32_t>(s)}, T + s, rkv::LogitsFor::Last);
  EXPECT_EQ(held(), 6144 + 16 * 30);
  EXPECT_GE(r.cache->bytes(), size_t(6144 + 16 * 30) * per_entry);  // decode growth may reserve headroom
}

// Per-head budgets under the rolling decode policy: every KV head keeps its first 2 entries (sinks) and its most
// recent b_h - 2, with its own b_h; after every decoded token each head holds at most its budget (recorded per step),
// and the cache's bytes in use are exactly sum_h b_h entries per layer.
TEST(CpuBackend, RollingDecodeKeepsEachHeadWithinItsOwnBudget) {
  const rkv::ModelConfig& c = model().config;
  const int64_t T = 40, L = c.n_layers, Hkv = c.n_kv_heads;
  auto be = rkv::make_backend("cpu", model(), rkv::BackendOptions{});
  const rkv::PrefillResult r = be->prefill(tokens(T), {});
  const std::vector<int64_t> heads = {6, 11};  // b_{l,h} for every layer
  std::vector<float> scores(static_cast<size_t>(Hkv * T));
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = float((i * 29) % 53);
  for (int64_t l = 0; l < L; ++l)
    be->compact_layer(*r.cache, l, rkv::select_positions_per_head(scores.data(), Hkv, T, heads, {2, 2}, l));
  rkv::DecodeSpec spec;
  spec.policy = "rolling";
  spec.sinks = 2;
  const rkv::DecodePolicy rolling(spec, std::vector<int64_t>(static_cast<size_t>(L), 9),
                                  std::vector<std::vector<int64_t>>(static_cast<size_t>(L), heads));
  EXPECT_EQ(rolling.frozen_heads_warning(Hkv), "");
  spec.sinks = 6;
  const rkv::DecodePolicy frozen(spec, std::vector<int64_t>(static_cast<size_t>(L), 9),
                                 std::vector<std::vector<int64_t>>(static_cast<size_t>(L), heads));
  const std::string w = frozen.frozen_heads_warning(Hkv);  // sinks 6 >= head 0's budget of 6 in every layer
  EXPECT_NE(w.find("sinks = 6 is at or above the budget of " + std::to_string(L) + " (layer, KV head) pair(s), first "
                   "layer 0, KV head 0 (6 entries)"),
            std::string::npos)
      << w;
  const int64_t row = 2 * c.head_dim * 4 + 4;  // bytes of one entry: key, value (f32) and its int32 position
  const std::unique_ptr<rkv::DecodeSession> session = rolling.begin(*be, *r.cache, nullptr);
  for (int64_t s = 0; s < 12; ++s) {
    rkv::continuation_logits(*be, {static_cast<int32_t>(s + 3)}, T + s, *r.cache, session.get());
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < Hkv; ++h)
        ASSERT_LE(r.cache->head_length(l, h), heads[static_cast<size_t>(h)]) << "step " << s << " layer " << l;
  }
  EXPECT_EQ(r.cache->bytes_in_use(), static_cast<size_t>(L * (6 + 11) * row));
  const rkv::LayerKV kv = be->download_layer(*r.cache, 1);
  ASSERT_TRUE(kv.per_head());
  for (int64_t h = 0; h < Hkv; ++h) {
    const int64_t b = heads[static_cast<size_t>(h)];
    const rkv::Selection first = rkv::select_positions_per_head(scores.data(), Hkv, T, heads, {2, 2}, 1);
    std::vector<int32_t> want = {static_cast<int32_t>(first.head_positions(h)[0]),
                                 static_cast<int32_t>(first.head_positions(h)[1])};
    for (int64_t p = T + 12 - (b - 2); p < T + 12; ++p) want.push_back(static_cast<int32_t>(p));
    EXPECT_EQ(std::vector<int32_t>(kv.pos_at(h, 0), kv.pos_at(h, 0) + b), want) << "head " << h;
  }
}

TEST(BackendFactory, ClearErrorsForBackendsThatCannotBeHad) {
  EXPECT_EQ(rkv::make_backend("cpu", model())->kind(), "cpu");
  try {
    rkv::make_backend("tpu", model());
    FAIL() << "tpu accepted";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model.backend = tpu"), std::string::npos) << e.what();
  }
  rkv::BackendOptions bf16;
  bf16.dtype = "bf16";
  try {
    rkv::make_backend("cpu", model(), bf16);
    FAIL() << "bf16 on the cpu accepted";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model.dtype = bf16"), std::string::npos) << e.what();
  }
  // This machine: cuda is either a real device or refused with the reason, never a crash; auto picks what exists.
  const std::string resolved = rkv::resolve_backend_kind("auto");
  EXPECT_TRUE(resolved == "cpu" || resolved == "cuda");
  if (resolved == "cpu") {
    try {
      rkv::check_backend_available("cuda", {});
      FAIL() << "cuda accepted without a device";
    } catch (const rkv::InputError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("model.backend = cuda: ", 0), 0u) << m;
      EXPECT_TRUE(m.find("no CUDA device") != std::string::npos ||
                  m.find("this build has no CUDA backend") != std::string::npos) << m;
    }
    EXPECT_EQ(rkv::make_backend("auto", model())->kind(), "cpu");
  }
}

TEST(BackendFactory, ARegisteredFactoryServesItsKind) {
  int made = 0;
  rkv::register_backend("cuda", [&](const rkv::Model& m, const rkv::BackendOptions&) {
    ++made;
    return rkv::make_backend("cpu", m);
  }, [] { return true; });
  EXPECT_EQ(rkv::resolve_backend_kind("auto"), "cuda");
  EXPECT_EQ(rkv::make_backend("cuda", model())->kind(), "cpu");
  EXPECT_EQ(made, 1);
  rkv::register_backend("cuda", nullptr);
}

}  // namespace
