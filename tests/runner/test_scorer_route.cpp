// [[scorer.route]] in ablation configs (runner/plan/scorer_route.hpp): layer sets, validation errors that name the key,
// and a route as part of the cell (label, group, effective key, id, sweep).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/errors.hpp"
#include "runner/plan/config.hpp"
#include "runner/plan/scorer_route.hpp"

namespace {

namespace fs = std::filesystem;

class Route : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rkv-route-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    for (const char* f : {"model.gguf", "a.txt", "b.txt"}) std::ofstream(dir / f) << "text of " << f;
  }
  void TearDown() override { fs::remove_all(dir); }

  static std::string base(const std::string& route, const std::string& extra = "") {
    return "[model]\npath = \"model.gguf\"\n"
           "[data.calibration]\nfiles = [\"a.txt\"]\n"
           "[data.eval]\nfiles = [\"b.txt\"]\n"
           "[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 16\n" +
           route + "[allocator]\nplugin = \"uniform\"\n[budget]\nfraction = 0.2\n" + extra;
  }
  rkv::RunPlan load(const std::string& text) const { return rkv::load_run_plan_from_string(text, "cfg.toml", dir.string()); }
  std::string error(const std::string& text) const {
    try {
      load(text);
    } catch (const rkv::InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir;
};

TEST(LayerSet, RangesAndIndices) {
  EXPECT_EQ(rkv::parse_layer_set("0-3, 7,9 - 10", "k", 100), (std::vector<int64_t>{0, 1, 2, 3, 7, 9, 10}));
  EXPECT_EQ(rkv::parse_layer_set("5", "k", 100), (std::vector<int64_t>{5}));
  EXPECT_EQ(rkv::parse_layer_set("12, 2-3", "k", 100), (std::vector<int64_t>{2, 3, 12}));  // sorted
  EXPECT_EQ(rkv::layer_set_text({0, 1, 2, 3, 7, 9, 10}), "0-3, 7, 9-10");
  for (const char* bad : {"", "3-1", "a", "1-", "-2", "1,,2", "2, 2", "0-3, 3", "101"})
    EXPECT_THROW(rkv::parse_layer_set(bad, "k", 100), rkv::InputError) << bad;
}

TEST_F(Route, ParsesEntriesWithTheirOwnParams) {
  const rkv::RunPlan p = load(base("[[scorer.route]]\nlayers = \"0-2, 5\"\nplugin = \"knorm\"\n"
                                   "[[scorer.route]]\nlayers = [7, 6]\nplugin = \"snapkv\"\nsnapkv = { window = 8 }\n"));
  ASSERT_EQ(p.cells.size(), 2u);
  const auto& route = p.cells[1].config.route;
  ASSERT_EQ(route.size(), 2u);
  EXPECT_EQ(route[0].scorer.id, "org.ripplekv.scorer.knorm");
  EXPECT_EQ(route[0].layers, (std::vector<int64_t>{0, 1, 2, 5}));
  EXPECT_EQ(route[1].layers, (std::vector<int64_t>{6, 7}));
  // The entry's own params; [scorer.snapkv] (window 16) belongs to the cell's [scorer] only.
  EXPECT_EQ(std::get<int64_t>(route[1].scorer.params.values().at("window")), 8);
  EXPECT_EQ(std::get<int64_t>(p.cells[1].config.scorer->params.values().at("window")), 16);
  EXPECT_EQ(p.cells[1].label, "uniform + snapkv + route[knorm:0-2,5; snapkv(window=8):6-7] @ f=0.2");
  EXPECT_EQ(p.cells[1].group, "uniform + snapkv + route[knorm:0-2,5; snapkv(window=8):6-7]");
}

TEST_F(Route, ParamsAsASubTableOfTheEntry) {
  const rkv::RunPlan p = load(base("[[scorer.route]]\nlayers = \"1\"\nplugin = \"snapkv\"\n"
                                   "[scorer.route.snapkv]\nwindow = 4\nkernel = 3\n"));
  const auto& e = p.cells[1].config.route.at(0);
  EXPECT_EQ(std::get<int64_t>(e.scorer.params.values().at("window")), 4);
  EXPECT_EQ(std::get<int64_t>(e.scorer.params.values().at("kernel")), 3);
  EXPECT_EQ(e.user_params, "kernel=3,window=4");
}

TEST_F(Route, ARouteIsPartOfTheCell) {
  const rkv::RunPlan plain = load(base(""));
  const rkv::RunPlan routed = load(base("[[scorer.route]]\nlayers = \"0-3\"\nplugin = \"knorm\"\n"));
  const rkv::RunPlan other = load(base("[[scorer.route]]\nlayers = \"0-4\"\nplugin = \"knorm\"\n"));
  EXPECT_TRUE(plain.cells[1].config.route.empty());
  EXPECT_NE(plain.cells[1].id, routed.cells[1].id);
  EXPECT_NE(routed.cells[1].id, other.cells[1].id);
  EXPECT_NE(plain.cells[1].effective_key, routed.cells[1].effective_key);
  EXPECT_NE(routed.cells[1].effective_key, other.cells[1].effective_key);
  EXPECT_NE(routed.cells[1].effective_key.find("route=org.ripplekv.scorer.knorm{}@0-3;"), std::string::npos);
  EXPECT_EQ(routed.cells[1].id, load(base("[[scorer.route]]\nlayers = [0, 1, 2, 3]\nplugin = \"knorm\"\n")).cells[1].id);
  EXPECT_EQ(rkv::route_json(routed.cells[1].config.route)[0].at("layers"), nlohmann::json({0, 1, 2, 3}));
  EXPECT_TRUE(rkv::route_json({}).is_null());
}

TEST_F(Route, SweepsAsATableValue) {
  const rkv::RunPlan p = load(base("", "[sweep]\n\"scorer.route\" = [[], [{ layers = \"0-1\", plugin = \"knorm\" }]]\n"));
  ASSERT_EQ(p.cells.size(), 3u);
  EXPECT_TRUE(p.cells[1].config.route.empty());
  ASSERT_EQ(p.cells[2].config.route.size(), 1u);
  EXPECT_EQ(p.cells[2].config.route[0].layers, (std::vector<int64_t>{0, 1}));
  EXPECT_NE(p.cells[1].label, p.cells[2].label);
  EXPECT_EQ(p.cells[1].label, "uniform + snapkv @ f=0.2");
  EXPECT_EQ(p.cells[2].label, "uniform + snapkv + route[knorm:0-1] @ f=0.2");
  EXPECT_NE(p.cells[1].effective_key, p.cells[2].effective_key);
}

TEST_F(Route, ErrorsNameTheKey) {
  auto entry = [](const std::string& body) { return "[[scorer.route]]\n" + body; };
  const std::string e1 = error(base(entry("layers = \"0-3\"\nplugin = \"knorm\"\n") +
                                    entry("layers = \"3-5\"\nplugin = \"snapkv\"\n")));
  EXPECT_NE(e1.find("'scorer.route[1].layers'"), std::string::npos) << e1;
  EXPECT_NE(e1.find("layer 3 is also routed by scorer.route[0]"), std::string::npos) << e1;
  const std::string e2 = error(base(entry("layers = \"0\"\nplugin = \"nosuch\"\n")));
  EXPECT_NE(e2.find("'scorer.route[0].plugin'"), std::string::npos) << e2;
  const std::string e3 = error(base(entry("layers = \"0\"\nplugin = \"snapkv\"\nsnapkv = { window = -3 }\n")));
  EXPECT_NE(e3.find("scorer.route[0]"), std::string::npos) << e3;
  EXPECT_NE(e3.find("window"), std::string::npos) << e3;
  const std::string e4 = error(base(entry("layers = \"0\"\nplugin = \"snapkv\"\nsnapkv = { windw = 3 }\n")));
  EXPECT_NE(e4.find("windw"), std::string::npos) << e4;
  const std::string e5 = error(base(entry("plugin = \"knorm\"\n")));
  EXPECT_NE(e5.find("scorer.route[0]"), std::string::npos) << e5;
  EXPECT_NE(e5.find("needs layers"), std::string::npos) << e5;
  const std::string e6 = error(base(entry("layers = \"2-1\"\nplugin = \"knorm\"\n")));
  EXPECT_NE(e6.find("'scorer.route[0].layers'"), std::string::npos) << e6;
  EXPECT_NE(e6.find("descending"), std::string::npos) << e6;
  const std::string e7 = error(base(entry("layers = [1, -1]\nplugin = \"knorm\"\n")));
  EXPECT_NE(e7.find("'scorer.route[0].layers'"), std::string::npos) << e7;
  const std::string e8 = error(base(entry("layers = \"1\"\nplugin = \"knorm\"\nsnapkv = { window = 3 }\n")));
  EXPECT_NE(e8.find("'scorer.route[0].snapkv'"), std::string::npos) << e8;
  const std::string e9 = error(base(entry("layers = \"1\"\nplugin = \"knorm\"\nweight = 2\n")));
  EXPECT_NE(e9.find("'scorer.route[0].weight' is not a known key"), std::string::npos) << e9;
  const std::string e10 = error(base("[scorer.route]\nlayers = \"1\"\n"));  // a table, not an array of tables
  EXPECT_NE(e10.find("'scorer.route' must be an array of tables"), std::string::npos) << e10;
  const std::string e11 = error(base(entry("layers = \"0\"\nplugin = \"knorm\"\n"),
                                     "[compression.decode]\npolicy = \"periodic\"\n"));
  EXPECT_NE(e11.find("'scorer.route'"), std::string::npos) << e11;
  EXPECT_NE(e11.find("periodic"), std::string::npos) << e11;
  const std::string e12 = error(base(entry("layers = \"0\"\nplugin = \"uniform\"\n")));  // an allocator, not a scorer
  EXPECT_NE(e12.find("'scorer.route[0].plugin'"), std::string::npos) << e12;
}

TEST(RouteLayers, BeyondTheModelIsAnErrorNamingTheEntry) {
  std::vector<rkv::RouteEntry> route(2);
  route[0].layers = {0, 1};
  route[1].layers = {2, 30};
  EXPECT_NO_THROW(rkv::check_route_layers(route, 31, "cfg.toml"));
  try {
    rkv::check_route_layers(route, 30, "cfg.toml");
    FAIL() << "no error";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("scorer.route[1].layers names layer 30 but the model has 30 layers"),
              std::string::npos)
        << e.what();
  }
}

TEST(RouteToml, WritesPastableTables) {
  rkv::RouteTomlEntry a{"knorm", {}, {0, 1, 2, 5}}, b{"snapkv", {{"window", int64_t{8}}, {"pooling", std::string("max")}}, {3, 4}},
      unused{"h2o", {}, {}};
  EXPECT_EQ(rkv::route_toml({a, b, unused}),
            "[[scorer.route]]\nlayers = \"0-2, 5\"\nplugin = \"knorm\"\n"
            "[[scorer.route]]\nlayers = \"3-4\"\nplugin = \"snapkv\"\nsnapkv = { window = 8, pooling = \"max\" }\n");
}

}  // namespace
