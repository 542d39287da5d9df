// DynamicKV's layer budgets (allocators/dynamickv) against its reference code on tests/fixtures/dynamickv
// (tests/reference/make_dynamickv_fixture.sh: DreamMr/DynamicKV's DynamicKVClusterV11 scoring five seeded attention
// stacks -- SmolLM2's 30 layers x 3 heads at three capacities, Gemma 3 270M's 18 x 1, a 32-layer x 8-head one -- and
// re-deciding the budgets as its call site does), and by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <algorithm>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "common/plugin_fixture.hpp"
#include "core/errors.hpp"
#include "plugin/allocator_call.hpp"

namespace {

using json = nlohmann::json;

std::string fixture_path(const char* name) {
  return std::string(RKV_TEST_SOURCE_DIR) + "/tests/fixtures/dynamickv/" + name;
}

const json& fixture() {
  static const json j = [] {
    std::ifstream f(fixture_path("budgets.json"));
    return json::parse(f);
  }();
  return j;
}

const std::vector<float>& fixture_scores() {
  static const std::vector<float> s = [] {
    std::ifstream f(fixture_path("scores.f32"), std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));  // little-endian, as written
    return out;
  }();
  return s;
}

rkv::UserParam P(const char* k, rkv::ParamValue v) { return rkv::UserParam{k, std::move(v), false, "test"}; }

/// A request over scores [L, H, T] whose last w positions are protected (the scorer's window).
rkv::HeadAllocationInputs request(const std::vector<float>& scores, int64_t L, int64_t H, int64_t T, int64_t w,
                                  int64_t B) {
  rkv::HeadAllocationInputs in;
  in.scores = &scores;
  in.protected_mask.assign(static_cast<size_t>(T), 0);
  for (int64_t j = T - w; j < T; ++j) in.protected_mask[static_cast<size_t>(j)] = 1;
  in.budget_total = B;
  in.prefix_tokens = T;
  in.n_layers = L;
  in.n_kv_heads = H;
  in.protected_count = w;
  return in;
}

TEST(DynamicKVFixture, LayerBudgetsAreTheReferencesScaledToTheBudget) {
  // The reference's budgets b_l = kept_l + w (its last layer re-deciding too), on its own scores; ripplekv gives back
  // what the reference leaves unused by scaling them to B = capacity x L (the plugin's raw reals), then the host
  // integerizes by largest remainder.
  rkv_test::PluginFixture plugins;
  const rkv::PluginInstance& alloc = plugins.instance("dynamickv", RKV_KIND_ALLOCATOR, {});
  ASSERT_EQ(fixture()["cases"].size(), 5u);
  for (const json& c : fixture()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const int64_t L = c["layers"], H = c["heads"], T = c["T"], w = c["window"], cap = c["capacity"];
    ASSERT_EQ(c["kernel_size"].get<int>(), 5);
    const int64_t Tp = T - w;
    std::vector<float> scores(static_cast<size_t>(L * H * T), 0.0f);  // the window's scores: protected, unread
    const float* src = fixture_scores().data() + c["scores_offset"].get<int64_t>();
    for (int64_t lh = 0; lh < L * H; ++lh)
      std::copy(src + lh * Tp, src + (lh + 1) * Tp, scores.begin() + lh * T);
    const int64_t B = cap * L;
    const rkv::HeadAllocation got = rkv::run_head_allocator(alloc, request(scores, L, H, T, w, B));
    // the reference's distinct kept positions per layer plus its window (what it stores beyond them are window
    // entries its cut ran into, stored twice)
    std::vector<double> ref;
    for (int64_t kept : c["distinct"]) ref.push_back(static_cast<double>(kept + w));
    EXPECT_LE(std::accumulate(ref.begin(), ref.end(), 0.0), static_cast<double>(B));  // never above the budget
    // Scaled to B and capped at the span T: min(T, s b_l) summing to B, s found here by bisection.
    auto filled = [&](double s) {
      double t = 0;
      for (double v : ref) t += std::min(static_cast<double>(T), s * v);
      return t;
    };
    double lo = 0, hi = static_cast<double>(B);
    for (int i = 0; i < 200; ++i) (filled(0.5 * (lo + hi)) < static_cast<double>(B) ? lo : hi) = 0.5 * (lo + hi);
    for (int64_t l = 0; l < L; ++l) {
      const double want = std::min(static_cast<double>(T), lo * ref[static_cast<size_t>(l)]);
      for (int64_t h = 0; h < H; ++h)
        EXPECT_NEAR(got.raw[static_cast<size_t>(l * H + h)], want, 1e-9 * static_cast<double>(B))
            << "layer " << l << ", head " << h;
      EXPECT_LE(std::abs(static_cast<double>(got.layer_budgets[static_cast<size_t>(l)]) - want), 1.0) << "layer " << l;
    }
    EXPECT_EQ(std::accumulate(got.layer_budgets.begin(), got.layer_budgets.end(), int64_t{0}), B);
    // Where the layer count is a multiple of 4 the reference's own call site already re-decides at the last layer:
    // the added decision changes nothing; elsewhere its last L mod 4 layers would keep budget_size positions each.
    if (L % 4 == 0) EXPECT_EQ(c["lengths"], c["lengths_unpatched"]);
    else EXPECT_EQ(c["lengths_unpatched"][static_cast<size_t>(L - 1)].get<int64_t>(), c["budget_size"].get<int64_t>());
  }
}

TEST(DynamicKV, OneDecisionByHand) {
  // L = 4 layers, one head, T = 6, the last position protected (w = 1), capacity 3: B = 12, base = 2,
  // budget_size = min(10 x 2, 5) = 5, one decision after layer 3 (the last, interval 4) over tk = 2 x 1 x 4 = 8.
  // The top 8 of the 20 scores: layer 0's five, layer 1's 5.5 and 5.4, layer 2's 5.3: counts [5, 2, 1, 0] div 4 =
  // [1, 0, 0, 0], sum 1 != H T' = 5, so the last layer gets tk div L - 1 = 1: [1, 0, 0, 1]. fix = trunc(5 x 1/2) =
  // [2, 0, 0, 2], ss = 4 / (2 x 4) = 0.5, fix = [4, 0, 0, 4], which sums to 8 already. Budgets fix + w = [5, 1, 1, 5].
  const std::vector<float> rows[4] = {{10, 9, 8, 7, 6, 100}, {5.5f, 5.4f, 0.1f, 0.1f, 0.1f, 100},
                                      {5.3f, 0.2f, 0.2f, 0.2f, 0.2f, 100}, {0.05f, 0.05f, 0.05f, 0.05f, 0.05f, 100}};
  std::vector<float> scores;
  for (const auto& r : rows) scores.insert(scores.end(), r.begin(), r.end());
  rkv_test::PluginFixture plugins;
  const rkv::HeadAllocation got =
      rkv::run_head_allocator(plugins.instance("dynamickv", RKV_KIND_ALLOCATOR, {}), request(scores, 4, 1, 6, 1, 12));
  EXPECT_EQ(got.layer_budgets, (std::vector<int64_t>{5, 1, 1, 5}));
  // interval 1: a decision after every layer. After layer 0 (n = 1, tk = 2): counts [2], fix = trunc(5 x 1) = 5, ss =
  // 5/8, fix = floor(5 / 0.625) = 8 -> capped at T' = 5 (kept 5). After layer 1 (tk = 4: 10, 9, 8, 7): counts [4, 0]
  // div 2 = [2, 0], fix [5, 0] -> ss 5/8 -> [8, 0] -> kept [5, 0]. After layer 2 (tk = 6: layer 0's five and 5.5):
  // [5, 1, 0] div 3 = [1, 0, 0] -> fix [5, 0, 0] -> [8, 0, 0] -> kept [5, 0, 0]. The last as above: [4, 0, 0, 4] ->
  // kept [4, 0, 0, 4]. The same budgets here: a layer that once got nothing keeps nothing.
  const rkv::HeadAllocation every = rkv::run_head_allocator(
      plugins.instance("dynamickv", RKV_KIND_ALLOCATOR, {P("interval", int64_t{1})}), request(scores, 4, 1, 6, 1, 12));
  EXPECT_EQ(every.layer_budgets, (std::vector<int64_t>{5, 1, 1, 5}));
}

TEST(DynamicKV, ABudgetAtTheWindowIsSplitUniformlyAndLayerBudgetsEvenlyOverHeads) {
  rkv_test::PluginFixture plugins;
  const rkv::PluginInstance& alloc = plugins.instance("dynamickv", RKV_KIND_ALLOCATOR, {});
  const std::vector<float> scores(static_cast<size_t>(3 * 2 * 10), 1.0f);
  // capacity 4 per layer with 4 protected positions: base = 0, nothing to rank
  const rkv::HeadAllocation u = rkv::run_head_allocator(alloc, request(scores, 3, 2, 10, 4, 12));
  EXPECT_EQ(u.layer_budgets, (std::vector<int64_t>{4, 4, 4}));
  ASSERT_EQ(u.warnings.size(), 1u);
  EXPECT_NE(u.warnings[0].find("leaves no room beside the 4 protected positions; split uniformly"), std::string::npos);
  // After a layer allocator it splits each layer's budget evenly over the heads.
  rkv::HeadAllocationInputs in = request(scores, 3, 2, 10, 1, 15);
  const std::vector<int64_t> layer_b = {3, 5, 7};
  in.layer_budgets = &layer_b;
  const rkv::HeadAllocation even = rkv::run_head_allocator(alloc, in);
  EXPECT_EQ(even.budgets, (std::vector<std::vector<int64_t>>{{3, 3}, {5, 5}, {7, 7}}));
}

}  // namespace
