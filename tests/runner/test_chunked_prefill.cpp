// Chunked prefill (runner/compress/chunked_prefill.hpp) on seeded synthetic models: without compression it equals the
// one-shot prefill (logits, cache, statistics and window queries within 1e-5 of each tensor's largest magnitude) on
// a GQA model and on a Gemma 3 model with sliding-window layers, with a chunk size that does not divide T; with
// compression between chunks, a hand-worked 3-chunk case of kept positions (streamingllm), the b_l + C bound after
// every chunk, sinks at absolute positions, and chunk-2 keys above layer 0 that differ from the one-shot keys (the
// chunks saw only what was kept, not the oracle). Built twice: for the CPU backend (tests/runner) and, in
// test_chunked_emu (tests/gpu), also for the CUDA backend's code path on the CPU emulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/errors.hpp"
#include "model/synthetic_model.hpp"
#include "common/plugin_fixture.hpp"
#include "runner/compress/chunked_prefill.hpp"
#ifdef RKV_CUDA_EMU
#include "backend/cuda/cuda_backend.hpp"
#endif

namespace {

/// The backends this build checks: the CPU, and the CUDA code path where the emulator is compiled in.
std::vector<std::string> backend_kinds() {
#ifdef RKV_CUDA_EMU
  static const bool registered = [] {
    rkv::register_backend("cuda", [](const rkv::Model& m, const rkv::BackendOptions& o) {
      return rkv::cuda_emu::make_cuda_backend(m, o);
    }, [] { return true; });
    return true;
  }();
  (void)registered;
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

/// Two layers, H = 4 query heads over H_kv = 2 KV heads (GQA group of 2), d = 64 (a head dim the CUDA backend runs).
const rkv::Model& gqa_model() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 64, 2), 11);
  return m;
}

/// Gemma 3's layer: three layers, the first two with a sliding window of 16 positions, the third global.
const rkv::Model& gemma_model() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("gemma3", 4, 2, 64, 3), 5);
  return m;
}

std::vector<int32_t> tokens(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 17 + 5) % 40);
  return t;
}

/// |got - want| <= tol * max |want| element by element (both the same length, not empty).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_FALSE(want.empty()) << what;
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), tol * scale) << what << " at " << i;
}

/// Every statistic the prefill computes: window attention (w = 8) with query counts, cumulative attention with
/// counts, and the query moments after 4 skipped positions; and 8 window queries.
rkv::PrefillNeeds every_need() {
  rkv::PrefillNeeds n;
  n.keep_queries = 8;
  rkv::AttentionStatsOptions w;
  w.window_attention = w.query_counts = true;
  w.window = 8;
  rkv::AttentionStatsOptions c;
  c.cumulative_attention = c.query_counts = true;
  rkv::AttentionStatsOptions m;
  m.query_moments = true;
  m.query_skip = 4;
  n.stats = {w, c, m};
  return n;
}

struct Case {
  const rkv::Model* (*model)();
  const char* name;
};

const rkv::Model* gqa() { return &gqa_model(); }
const rkv::Model* gemma() { return &gemma_model(); }

// Near-equal chunks of at most C, worked by hand: ceil(T / C) of them, the first T mod n one token longer.
TEST(ChunkedPrefill, ChunkBoundsAreNearEqualAndAtMostC) {
  using B = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(rkv::chunk_bounds(45, 16), (B{{0, 15}, {15, 15}, {30, 15}}));
  EXPECT_EQ(rkv::chunk_bounds(50, 16), (B{{0, 13}, {13, 13}, {26, 12}, {38, 12}}));
  EXPECT_EQ(rkv::chunk_bounds(4097, 2048), (B{{0, 1366}, {1366, 1366}, {2732, 1365}}));  // not 2048, 2048, 1
  EXPECT_EQ(rkv::chunk_bounds(12, 4), (B{{0, 4}, {4, 4}, {8, 4}}));
  EXPECT_EQ(rkv::chunk_bounds(10, 20), (B{{0, 10}}));
  EXPECT_THROW(rkv::chunk_bounds(10, 0), rkv::InputError);
}

// T = 45 in chunks of at most 16 (15 + 15 + 15): the chunked prefill equals the one-shot one.
TEST(ChunkedPrefill, WithoutCompressionEqualsTheOneShotPrefill) {
  for (const Case& c : {Case{gqa, "gqa"}, Case{gemma, "gemma3 (sliding windows of 16)"}})
    for (const std::string& kind : backend_kinds()) {
      SCOPED_TRACE(std::string(c.name) + " on " + kind);
      const auto be = rkv::make_backend(kind, *c.model());
      const rkv::PrefillNeeds needs = every_need();
      const rkv::PrefilledPrompt one = rkv::prefill_prompt(*be, tokens(45), needs);
      const rkv::PrefilledPrompt chunked = rkv::chunked_prefill_prompt(*be, tokens(45), needs, 16);
      expect_close(chunked.last_logits, one.last_logits, 1e-5, "last logits");
      EXPECT_EQ(chunked.cache->bytes(), one.cache->bytes());  // allocated once, exactly (Backend::reserve)
      ASSERT_EQ(chunked.n_queries, 8);
      const int64_t L = c.model()->config.n_layers;
      for (int64_t l = 0; l < L; ++l) {
        const std::string at = " of layer " + std::to_string(l);
        const rkv::LayerKV a = be->download_layer(*chunked.cache, l), b = be->download_layer(*one.cache, l);
        ASSERT_EQ(a.length, 45);
        expect_close(a.k, b.k, 1e-5, "keys" + at);
        expect_close(a.v, b.v, 1e-5, "values" + at);
        EXPECT_EQ(a.pos, b.pos);
        expect_close(chunked.queries[static_cast<size_t>(l)], one.queries[static_cast<size_t>(l)], 1e-5, "queries" + at);
        const rkv::AttentionStats& w = chunked.stats[0][static_cast<size_t>(l)];
        const rkv::AttentionStats& w1 = one.stats[0][static_cast<size_t>(l)];
        EXPECT_EQ(w.window, w1.window);
        expect_close(w.window_attention, w1.window_attention, 1e-5, "window attention" + at);
        expect_close(w.query_counts, w1.query_counts, 0, "query counts" + at);
        expect_close(chunked.stats[1][static_cast<size_t>(l)].cumulative_attention,
                     one.stats[1][static_cast<size_t>(l)].cumulative_attention, 1e-5, "cumulative attention" + at);
        expect_close(chunked.stats[2][static_cast<size_t>(l)].query_mean, one.stats[2][static_cast<size_t>(l)].query_mean,
                     1e-5, "query mean" + at);
        expect_close(chunked.stats[2][static_cast<size_t>(l)].query_covariance,
                     one.stats[2][static_cast<size_t>(l)].query_covariance, 1e-5, "query covariance" + at);
      }
    }
}

// Backend::reserve makes room once: a 2-layer cache of 10 entries per KV head reserved 6 more holds 16 rows of
// 2 d floats + one int32 position (516 bytes at d = 64) per KV head and layer, 2 x 2 x 16 x 516 = 33024 bytes, and
// the extend of 6 tokens that follows allocates nothing more.
TEST(ChunkedPrefill, ReserveMakesRoomOnce) {
  for (const std::string& kind : backend_kinds()) {
    SCOPED_TRACE(kind);
    const auto be = rkv::make_backend(kind, gqa_model());
    rkv::PrefillResult r = be->prefill(tokens(10), {});
    const size_t in_use = r.cache->bytes_in_use();
    EXPECT_EQ(in_use, 2u * 2u * 10u * 516u);
    be->reserve(*r.cache, 6);
    EXPECT_EQ(r.cache->bytes_in_use(), in_use);
    EXPECT_EQ(r.cache->bytes(), 33024u);
    be->extend(*r.cache, {1, 2, 3, 4, 5, 6}, 10, rkv::LogitsFor::None);
    EXPECT_EQ(r.cache->bytes(), 33024u);
    EXPECT_EQ(r.cache->bytes_in_use(), 33024u);
    EXPECT_THROW(be->reserve(*r.cache, -1), rkv::InputError);
  }
}

// A chunk of at least T is the one-shot prefill; a negative chunk is an error.
TEST(ChunkedPrefill, ChunkOfAtLeastTIsOneShotAndNegativeIsRefused) {
  const auto be = rkv::make_backend("cpu", gqa_model());
  const rkv::PrefilledPrompt one = rkv::prefill_prompt(*be, tokens(20), {});
  EXPECT_EQ(rkv::chunked_prefill_prompt(*be, tokens(20), {}, 20).last_logits, one.last_logits);
  EXPECT_THROW(rkv::chunked_prefill_prompt(*be, tokens(20), {}, -1), rkv::InputError);
  EXPECT_THROW(rkv::chunked_prefill_prompt(*be, {}, {}, 4), rkv::InputError);
}

/// The real scorer plugins (build/lib/ripplekv/plugins).
class ChunkCompression : public ::testing::Test {
 protected:
  rkv::ScorerUse scorer(const std::string& id, std::vector<rkv::UserParam> params, const rkv::Model& model) {
    return plugins_.scorer(id, std::move(params), model.config);
  }
  rkv_test::PluginFixture plugins_;
};

// Worked by hand: streamingllm (sinks = 2, score = cache index), b = 5 in both layers, T = 12 in chunks of 4.
//   chunk 1 (positions 0-3):  holds 4 <= 5, nothing evicted             -> [0, 1, 2, 3]
//   chunk 2 (4-7):            holds 8 > 5: sinks 0, 1 + the 3 newest    -> [0, 1, 5, 6, 7]
//   chunk 3 (8-11):           holds 9 > 5: sinks 0, 1 + the 3 newest    -> [0, 1, 9, 10, 11]
// The sinks are the absolute positions 0 and 1, not the first two of each chunk (4, 5 or 8, 9).
TEST_F(ChunkCompression, HandWorkedThreeChunksOfStreamingLLM) {
  const rkv::ScorerUse st = scorer("streamingllm", {{"sinks", int64_t(2), false, "t"}}, gqa_model());
  for (const std::string& kind : backend_kinds()) {
    SCOPED_TRACE(kind);
    const auto be = rkv::make_backend(kind, gqa_model());
    const rkv::ChunkedCompression r =
        rkv::prefill_compressing_chunks(*be, tokens(12), 4, st, {0, 1}, {5, 5}, /*trace_positions=*/true);
    ASSERT_EQ(r.chunks.size(), 3u);
    const std::vector<std::vector<int32_t>> want = {{0, 1, 2, 3}, {0, 1, 5, 6, 7}, {0, 1, 9, 10, 11}};
    const std::vector<int64_t> appended = {4, 8, 9};
    for (size_t k = 0; k < 3; ++k)
      for (int64_t l = 0; l < 2; ++l) {
        EXPECT_EQ(r.chunks[k].positions[static_cast<size_t>(l)], want[k]) << "chunk " << k << " layer " << l;
        EXPECT_EQ(r.chunks[k].held_after_append[static_cast<size_t>(l)], appended[k]);
      }
    EXPECT_EQ(r.comp.budgets, (std::vector<int64_t>{5, 5}));
    EXPECT_EQ(r.comp.next_position, 12);
    EXPECT_EQ(r.last_logits.size(), static_cast<size_t>(gqa_model().config.vocab_size));
  }
}

// SnapKV (window 4) with b = 12, T = 50 in chunks of at most 16 (13 + 13 + 12 + 12): after every chunk a layer holds at most
// b + C before and b after its compression; the kept keys of layer 0 (a projection of the token alone) equal the
// one-shot keys at their positions, while above layer 0 the keys of later chunks differ (their hidden states saw only
// the kept entries: were they equal to 1e-6, this would be the oracle that scores with the full earlier chunks).
TEST_F(ChunkCompression, BoundedByBudgetPlusChunkAndLaterChunksSeeOnlyWhatWasKept) {
  const rkv::ScorerUse snap = scorer("snapkv", {{"window", int64_t(4), false, "t"}}, gqa_model());
  for (const std::string& kind : backend_kinds()) {
    SCOPED_TRACE(kind);
    const auto be = rkv::make_backend(kind, gqa_model());
    const rkv::ChunkedCompression r = rkv::prefill_compressing_chunks(*be, tokens(50), 16, snap, {0, 1}, {12, 12});
    ASSERT_EQ(r.chunks.size(), 4u);
    for (const rkv::ChunkTrace& t : r.chunks)
      for (int64_t l = 0; l < 2; ++l) {
        EXPECT_LE(t.held_after_append[static_cast<size_t>(l)], 12 + 16);
        EXPECT_LE(t.held_after_compression[static_cast<size_t>(l)], 12);
      }
    EXPECT_EQ(r.chunks[1].held_after_append[0], 12 + 13);  // the budget did not grow with the chunks
    const rkv::PrefilledPrompt one = rkv::prefill_prompt(*be, tokens(50), {});
    double max_diff[2] = {0, 0};
    for (int64_t l = 0; l < 2; ++l) {
      const rkv::LayerKV kept = be->download_layer(*r.comp.cache, l), full = be->download_layer(*one.cache, l);
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < kept.head_length(h); ++i) {
          const int32_t p = *kept.pos_at(h, i);
          if (p < 13) continue;  // the first chunk saw nothing compressed
          for (int64_t e = 0; e < 64; ++e)
            max_diff[l] = std::max(max_diff[l], std::fabs(static_cast<double>(kept.k_at(h, i)[e]) - full.k_at(h, p)[e]));
        }
    }
    EXPECT_LE(max_diff[0], 1e-5);
    EXPECT_GT(max_diff[1], 1e-6);
    double logit_diff = 0;
    for (size_t i = 0; i < r.last_logits.size(); ++i)
      logit_diff = std::max(logit_diff, std::fabs(static_cast<double>(r.last_logits[i]) - one.last_logits[i]));
    EXPECT_GT(logit_diff, 1e-6);
  }
}

// Sliding-window layers hold at most their window (16) once a chunk ends past it; the global layer its budget.
TEST_F(ChunkCompression, SlidingLayersKeepTheirWindow) {
  const rkv::ScorerUse snap = scorer("snapkv", {{"window", int64_t(4), false, "t"}}, gemma_model());
  const auto be = rkv::make_backend("cpu", gemma_model());
  const rkv::ChunkedCompression r = rkv::prefill_compressing_chunks(*be, tokens(48), 12, snap, {2}, {10});
  for (const rkv::ChunkTrace& t : r.chunks) {
    EXPECT_LE(t.held_after_compression[0], 16);
    EXPECT_LE(t.held_after_compression[1], 16);
    EXPECT_LE(t.held_after_compression[2], 10);
  }
  EXPECT_EQ(r.chunks.back().held_after_compression, (std::vector<int64_t>{16, 16, 10}));
}

// A scorer that needs the whole prompt's statistics cannot score a chunk: refused, naming it.
TEST_F(ChunkCompression, ScorerWithoutChunkScoringIsRefused) {
  const rkv::ScorerUse ea = scorer("expected_attention", {}, gqa_model());
  const auto be = rkv::make_backend("cpu", gqa_model());
  try {
    rkv::prefill_compressing_chunks(*be, tokens(20), 8, ea, {0, 1}, {6, 6});
    FAIL() << "no error";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected_attention"), std::string::npos) << e.what();
  }
}

}  // namespace
