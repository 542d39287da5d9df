// Ablation configs: every bad input is a clear error naming the file, the line and the key; sweeps expand into the
// cartesian product with the full-cache reference first; cells with the same effective inputs share a key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/assets.hpp"
#include "core/errors.hpp"
#include "core/fnv1a.hpp"
#include "runner/compress/codec_step.hpp"
#include "runner/plan/config.hpp"
#include "runner/plan/config_overrides.hpp"
#include "runner/plan/sweep.hpp"
#include "runner/compress/plan_backend.hpp"
#include "runner/compress/budgets.hpp"

namespace {

namespace fs = std::filesystem;

/// A folder with a model file and text files, so configs validate without the real assets.
class Config : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rkv-config-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    for (const char* f : {"model.gguf", "a.txt", "b.txt", "c.txt"}) std::ofstream(dir / f) << "text of " << f;
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string base(const std::string& extra = "", const std::string& sweep = "") const {
    return "[model]\npath = \"model.gguf\"\n"
           "[data.calibration]\nfiles = [\"a.txt\"]\nexamples = 2\n"
           "[data.eval]\nfiles = [\"b.txt\"]\n"
           "[signal]\nplugin = \"perturbation_kl\"\n"
           "[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 16\n"
           "[allocator]\nplugin = \"ripplekv\"\n"
           "[budget]\nfraction = 0.2\n" +
           extra + sweep;
  }
  rkv::RunPlan load(const std::string& text) const {
    return rkv::load_run_plan_from_string(text, "cfg.toml", dir.string());
  }
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

TEST_F(Config, ValidConfigHasTheFullCacheCellFirst) {
  const rkv::RunPlan p = load(base());
  ASSERT_EQ(p.cells.size(), 2u);
  EXPECT_TRUE(p.cells[0].config.full_cache);
  EXPECT_EQ(p.cells[1].config.allocator->id, "org.ripplekv.allocator.ripplekv");
  EXPECT_EQ(std::get<int64_t>(p.cells[1].config.scorer->params.values().at("window")), 16);
  EXPECT_EQ(p.calibration.examples, 2);
  EXPECT_EQ(p.calibration.prefix_tokens, 1024);  // defaults: N 8, P 1024, n_w 32
  EXPECT_EQ(p.calibration.window_tokens, 32);
}

TEST_F(Config, CodecSectionIsACellSettingWithErrorsNamingTheKey) {
  EXPECT_TRUE(load(base()).cells[1].config.codec.none());
  const rkv::RunPlan p = load(base("[compression.codec]\nformat = \"int\"\nbits = 4\ngroup = 32\n"));
  EXPECT_EQ(p.cells[1].config.codec.label(), "int4-asym-g32");
  EXPECT_NE(p.cells[1].label.find("kv int4-asym-g32"), std::string::npos) << p.cells[1].label;
  EXPECT_TRUE(p.cells[0].config.codec.none());  // the full-cache reference stays float32
  EXPECT_EQ(load(base("[compression.codec]\nformat = \"kivi\"\nbits = 2\n")).cells[1].config.codec.residual, 128);
  // A codec changes what a cell computes: another effective key than the same cell without it.
  EXPECT_NE(p.cells[1].effective_key, load(base()).cells[1].effective_key);
  EXPECT_NE(error(base("[compression.codec]\nformat = \"int3\"\n")).find("compression.codec.format"), std::string::npos);
  EXPECT_NE(error(base("[compression.codec]\nformat = \"int\"\nbits = 3\n")).find("compression.codec.bits"),
            std::string::npos);
  EXPECT_NE(error(base("[compression.codec]\nformat = \"int\"\nbits = 16\n")).find("<= 8"), std::string::npos);
  EXPECT_NE(error(base("[compression.codec]\nformat = \"int\"\ngroup = 0\n")).find("compression.codec.group"),
            std::string::npos);
  EXPECT_NE(error(base("[compression.codec]\nformat = \"int\"\nresidual = -1\n")).find("compression.codec.residual"),
            std::string::npos);
  EXPECT_NE(error(base("[compression.codec]\nformat = \"kivi\"\nsymmetric = true\n")).find("asymmetric"),
            std::string::npos);
  EXPECT_NE(error(base("[compression.codec]\nformt = \"int\"\n")).find("format"), std::string::npos);
  const std::string with_policy =
      error(base("[compression.codec]\nformat = \"q4_0\"\n[compression.decode]\npolicy = \"rolling\"\n"));
  EXPECT_NE(with_policy.find("decode policy"), std::string::npos) << with_policy;
  // Swept: one cell per format, labelled by it.
  const rkv::RunPlan s =
      load(base("[compression.codec]\nformat = \"int\"\n", "[sweep]\n\"compression.codec.format\" = [\"int\", \"q8_0\"]\n"));
  ASSERT_EQ(s.cells.size(), 3u);
  EXPECT_EQ(s.cells[2].config.codec.label(), "q8_0");
  EXPECT_NE(s.cells[2].label.find("kv q8_0"), std::string::npos) << s.cells[2].label;
  EXPECT_NE(error(base("", "[sweep]\n\"compression.codec.bitz\" = [2, 4]\n")).find("compression.codec.format"),
            std::string::npos);
  // q8_0, q4_0 and f16 have fixed layouts and ignore bits and group (still range-checked): bits = 3 with group = 3
  // is refused for int (not 2, 4 or 8) but accepted for them.
  for (const char* format : {"q8_0", "q4_0", "f16"})
    EXPECT_NO_THROW(load(base(std::string("[compression.codec]\nformat = \"") + format + "\"\nbits = 3\ngroup = 3\n")))
        << format;
  EXPECT_NE(error(base("[compression.codec]\nformat = \"q8_0\"\nbits = 16\n")).find("<= 8"), std::string::npos);
  // format "none" ignores the other codec keys: a sweep over bits keeps one float32 cell, not one per bits value.
  const rkv::RunPlan nb = load(base("", "[sweep]\n\"compression.codec.format\" = [\"none\", \"int\"]\n"
                                          "\"compression.codec.bits\" = [2, 4, 8]\n"));
  ASSERT_EQ(nb.cells.size(), 1u + 1u + 3u);
  int float32_cells = 0;
  for (const auto& cell : nb.cells) float32_cells += !cell.config.full_cache && cell.config.codec.none();
  EXPECT_EQ(float32_cells, 1);
}

TEST_F(Config, ShareSectionIsACellSettingWithErrorsNamingTheKey) {
  EXPECT_TRUE(load(base()).cells[1].config.share.none());
  const rkv::RunPlan g = load(base("[compression.share]\ngroups = 2\n"));
  EXPECT_EQ(g.cells[1].config.share.label(), "CLA@2");
  EXPECT_NE(g.cells[1].label.find("share CLA@2"), std::string::npos) << g.cells[1].label;
  EXPECT_NE(g.cells[1].effective_key, load(base()).cells[1].effective_key);
  EXPECT_TRUE(g.cells[0].config.share.none());  // the full-cache reference shares nothing
  const rkv::RunPlan m = load(base("[compression.share]\nmap = [[3, 2], [5, 2]]\n"));
  ASSERT_EQ(m.cells[1].config.share.map.size(), 2u);
  EXPECT_EQ(m.cells[1].config.share.label(), "map 3<-2 5<-2");
  const rkv::RunPlan chooser = load(base("[compression.share]\ncount = 3\n"));
  EXPECT_TRUE(chooser.cells[1].config.uses_profile);
  EXPECT_NE(chooser.cells[1].label.find("ripplekv(perturbation_kl) + snapkv"), std::string::npos) << chooser.cells[1].label;
  EXPECT_NE(chooser.cells[1].label.find("share 3 layers by perturbation_kl"), std::string::npos) << chooser.cells[1].label;
  // Under uniform the profile only chooses the shared layers: the label shows the signal there, not beside uniform.
  std::string uniform = base("[compression.share]\ncount = 3\n[signal.damage]\nof = \"sharing\"\n");
  auto swap = [&](const std::string& from, const std::string& to) { uniform.replace(uniform.find(from), from.size(), to); };
  swap("plugin = \"ripplekv\"", "plugin = \"uniform\"");
  swap("plugin = \"perturbation_kl\"", "plugin = \"damage\"");
  const std::string label = load(uniform).cells[1].label;
  EXPECT_EQ(label.find("uniform("), std::string::npos) << label;
  EXPECT_NE(label.find("share 3 layers by damage: sharing damage"), std::string::npos) << label;
  // groups = 1 is no sharing: the same effective key as a cell without the section.
  EXPECT_EQ(load(base("[compression.share]\ngroups = 1\n")).cells[1].effective_key, load(base()).cells[1].effective_key);
  EXPECT_NE(error(base("[compression.share]\ngroups = 0\n")).find("compression.share.groups"), std::string::npos);
  EXPECT_NE(error(base("[compression.share]\nmap = [[2, 2]]\n")).find("compression.share.map"), std::string::npos);
  EXPECT_NE(error(base("[compression.share]\nmap = [[2, -1]]\n")).find("0 <= source < layer"), std::string::npos);
  EXPECT_NE(error(base("[compression.share]\nmap = [3, 2]\n")).find("compression.share.map"), std::string::npos);
  EXPECT_NE(error(base("[compression.share]\nmap = [[3, 2], [3, 1]]\n")).find("twice"), std::string::npos);
  EXPECT_NE(error(base("[compression.share]\nmap = [[3, 2], [4, 3]]\n")).find("itself shared"), std::string::npos);
  EXPECT_NE(error(base("[compression.share]\ngroups = 2\ncount = 1\n")).find("one of"), std::string::npos);
  EXPECT_NE(error(base("[compression.share]\ngroup = 2\n")).find("groups"), std::string::npos);
  EXPECT_NE(error(base("[compression.share]\ngroups = 2\n[compression.decode]\npolicy = \"rolling\"\n"))
                .find("compression.decode.policy"),
            std::string::npos);
  const rkv::RunPlan s = load(base("", "[sweep]\n\"compression.share.groups\" = [1, 2, 3]\n"));
  ASSERT_EQ(s.cells.size(), 4u);
  EXPECT_EQ(s.cells[3].config.share.groups, 3);
}

TEST_F(Config, JointSectionNeedsABytesBudgetAndReplacesTheAllocatorAndCodec) {
  auto bytes = [&](const std::string& extra, const std::string& sweep = "") {
    std::string t = base(extra, sweep);
    t.replace(t.find("fraction = 0.2"), 14, "bytes_fraction = 0.2");
    return t;
  };
  const rkv::RunPlan p = load(bytes("[compression.joint]\nshare = true\n[compression.codec]\nformat = \"int\"\n"));
  const rkv::CellConfig& cc = p.cells[1].config;
  EXPECT_EQ(cc.joint.plan, "damage");  // the default when the table is present
  EXPECT_EQ(cc.joint.fractions, (std::vector<double>{1.0, 0.5, 0.25, 0.125}));
  EXPECT_EQ(cc.joint.bits, (std::vector<int>{32, 8, 4, 2}));
  EXPECT_TRUE(cc.codec.none());      // the plan picks the bits
  EXPECT_FALSE(cc.uses_profile);     // and measures its own damages: the [signal] is not profiled for it
  EXPECT_EQ(p.cells[1].label, "joint(damage) + snapkv @ kv bytes=0.2, joint f 1/0.5/0.25/0.125 x bits 32/8/4/2 + share");
  // plan = "none" is an ordinary cell; a sweep over the plan crossed with the codec keeps one joint cell.
  const rkv::RunPlan s = load(bytes("[compression.joint]\n", "[sweep]\n\"compression.joint.plan\" = [\"none\", \"damage\"]\n"
                                    "\"compression.codec.format\" = [\"none\", \"int\"]\n"));
  ASSERT_EQ(s.cells.size(), 4u);
  std::set<std::string> keys;
  for (size_t i = 1; i < s.cells.size(); ++i) keys.insert(s.cells[i].effective_key);
  EXPECT_EQ(keys.size(), 3u);  // none/none, none/int, damage
  EXPECT_NE(error(base("[compression.joint]\n")).find("bytes_fraction"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\nplan = \"oracle\"\n")).find("compression.joint.plan"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\nfractions = [0.5, 0.0]\n")).find("compression.joint.fractions"),
            std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\nfractions = [0.5, 0.5]\n")).find("distinct"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\nfractions = []\n")).find("compression.joint.fractions"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\nbits = [16]\n")).find("compression.joint.bits"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\nbits = [4, 4]\n")).find("compression.joint.bits"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\ngroup = 0\n")).find("compression.joint.group"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\ngroup = 3\nbits = [2]\n")).find("whole number of bytes"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\nfraction = [1.0]\n")).find("fractions"), std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\n[compression.share]\ngroups = 2\n")).find("compression.joint.share"),
            std::string::npos);
  EXPECT_NE(error(bytes("[compression.joint]\n[compression.decode]\npolicy = \"rolling\"\n")).find("decode.policy"),
            std::string::npos);
  // With a codec in the base config the joint cell's own message comes first (its plan replaces the codec).
  EXPECT_NE(error(bytes("[compression.joint]\n[compression.decode]\npolicy = \"rolling\"\n[compression.codec]\n"
                        "format = \"int\"\n")).find("[compression.joint] plan = \"damage\" with compression.decode"),
            std::string::npos);
  EXPECT_NE(error(base("", "[sweep]\n\"compression.joint.bogus\" = [1]\n")).find("compression.joint.plan"), std::string::npos);
  // The damage signal's bits (the joint plan's options) are checked when the config is read.
  auto damage = [&](const std::string& params) {
    std::string t = base("[signal.damage]\n" + params);
    t.replace(t.find("plugin = \"perturbation_kl\""), 26, "plugin = \"damage\"");
    return t;
  };
  EXPECT_NE(error(damage("bits = 3\n")).find("bits must be 32, 8, 4 or 2 (got 3)"), std::string::npos);
  EXPECT_NE(error(damage("bits = 4\nof = \"sharing\"\n")).find("needs of = \"compression\""), std::string::npos);
  EXPECT_NE(error(damage("bits = 4\ngroup = 3\n")).find("whole number of bytes"), std::string::npos);
  EXPECT_EQ(std::get<int64_t>(load(damage("bits = 2\n")).cells[1].config.signal->params.values().at("bits")), 2);
}

TEST_F(Config, ASweptRoutesBadParamNamesTheFileWithoutALineZero) {
  const std::string e = error(base("", "[sweep]\n\"scorer.route\" = [[], [{ layers = \"0-3\", plugin = \"knorm\", "
                                       "knorm = { bogus = 1 } }]]\n"));
  EXPECT_NE(e.find("has no parameter 'bogus' (cfg.toml)"), std::string::npos) << e;
  EXPECT_EQ(e.find("cfg.toml:0"), std::string::npos) << e;
}

TEST_F(Config, ABaseValueTheSweepOverridesIsRangeChecked) {
  // budget.fraction = -1 under a budget.fraction axis used to pass (only NaN / infinity were caught).
  std::string t = base("", "[sweep]\n\"budget.fraction\" = [0.1, 0.2]\n");
  t.replace(t.find("fraction = 0.2"), 14, "fraction = -1.0");
  const std::string e = error(t);
  EXPECT_NE(e.find("'budget.fraction' must be in (0, 1] (got -1)"), std::string::npos) << e;
  EXPECT_NE(e.find("a base value: the sweep overrides it"), std::string::npos) << e;
  // A valid base under the same axis loads, and each cell has its swept value.
  const rkv::RunPlan ok = load(base("", "[sweep]\n\"budget.fraction\" = [0.1, 0.3]\n"));
  EXPECT_EQ(ok.cells.size(), 3u);
  // A bad value the sweep does not touch is every cell's: named as the first cell's, without the base-value note;
  // an int param's bounds print as integers.
  const std::string w = error(base("[scorer.snapkv]\nwindow = 0\n", "[sweep]\n\"budget.fraction\" = [0.1, 0.3]\n")
                                  .replace(base().find("[scorer.snapkv]\nwindow = 16\n"), 28, ""));
  EXPECT_NE(w.find("parameter 'window' (cfg.toml:17): 0 is out of range; allowed: between 1 and 1048576 (in sweep"),
            std::string::npos) << w;
  EXPECT_NE(w.find("(in sweep cell {\"budget.fraction\":0.1})"), std::string::npos) << w;
  EXPECT_EQ(w.find("a base value"), std::string::npos) << w;
}

TEST_F(Config, APerHeadAllocatorWithARouteProtectingOtherPositionsFailsAtValidate) {
  // knorm protects nothing, snapkv its window: one protected mask cannot serve both. The route leaves layers 0-9 to
  // the [scorer] (snapkv), so validate can tell without the model, for allocator.heads and a per-head plugin alone.
  const std::string route = "[[scorer.route]]\nlayers = \"10-20\"\nplugin = \"knorm\"\n";
  for (const char* axis : {"\"allocator.heads\" = [\"adakv\"]", "\"allocator.plugin\" = [\"global_topk\"]"}) {
    const std::string e = error(base(route, std::string("[sweep]\n") + axis + "\n"));
    EXPECT_NE(e.find("with a scorer.route whose scorers protect different positions"), std::string::npos) << e;
  }
  // The same route under layer budgets is fine.
  EXPECT_NO_THROW(load(base(route)));
}

TEST_F(Config, BytesFractionBudgetBecomesATokenFractionPerCodec) {
  std::string text = base();
  text.replace(text.find("fraction = 0.2"), 14, "bytes_fraction = 0.1");
  const rkv::RunPlan p = load(text + "[compression.codec]\nformat = \"int\"\nbits = 4\n");
  const rkv::CellConfig& cc = p.cells[1].config;
  ASSERT_TRUE(cc.budget_bytes_fraction.has_value());
  EXPECT_FALSE(cc.budget_fraction.has_value());
  EXPECT_NE(p.cells[1].label.find("kv bytes=0.1"), std::string::npos) << p.cells[1].label;
  // SmolLM2's d = 64: float32 516 bytes per entry and KV head, int4 asymmetric g32 84: f = 0.1 x 516 / 84.
  EXPECT_DOUBLE_EQ(*rkv::token_fraction(cc, 64, 1024), 0.1 * 516.0 / 84.0);
  const rkv::RunPlan none = load(text);  // without a codec the bytes fraction is the token fraction
  EXPECT_DOUBLE_EQ(*rkv::token_fraction(none.cells[1].config, 64, 1024), 0.1);
  std::string big = base();
  big.replace(big.find("fraction = 0.2"), 14, "bytes_fraction = 0.9");
  const rkv::RunPlan capped = load(big + "[compression.codec]\nformat = \"q8_0\"\n");
  EXPECT_DOUBLE_EQ(*rkv::token_fraction(capped.cells[1].config, 64, 1024), 1.0);  // 0.9 x 516 / 140 > 1: keep all
  // Entries a codec keeps in float32 are costed at float32. KIVI 2-bit g32, residual 0, T = 1024: R = 31 entries
  // per head may stay float32 (one partial key group), so b = 31 + (0.1 x 1024 x 516 - 31 x 516) / 52 = 739.5.
  const rkv::RunPlan kv = load(text + "[compression.codec]\nformat = \"kivi\"\nbits = 2\nresidual = 0\n");
  EXPECT_NEAR(*rkv::token_fraction(kv.cells[1].config, 64, 1024), (31.0 + (0.1 * 1024 * 516 - 31.0 * 516) / 52) / 1024,
              1e-12);
  // KIVI's default residual of 128 holds more than 0.1 x 256 = 25.6 entries: at T = 256 everything kept is float32.
  const rkv::RunPlan kr = load(text + "[compression.codec]\nformat = \"kivi\"\nbits = 2\n");
  EXPECT_DOUBLE_EQ(*rkv::token_fraction(kr.cells[1].config, 64, 256), 0.1);
  std::string both = base();
  both.replace(both.find("fraction = 0.2"), 14, "fraction = 0.2\nbytes_fraction = 0.1");
  EXPECT_NE(error(both).find("exactly one"), std::string::npos);
  std::string bad = base();
  bad.replace(bad.find("fraction = 0.2"), 14, "bytes_fraction = 1.5");
  EXPECT_NE(error(bad).find("budget.bytes_fraction"), std::string::npos);
  // Per-layer bits follow the profile: the cell uses its signal even under the uniform allocator.
  std::string uniform = base("[compression.codec]\nformat = \"int\"\nlayer_bits = \"profile\"\n");
  uniform.replace(uniform.find("plugin = \"ripplekv\""), 19, "plugin = \"uniform\"");
  const rkv::RunPlan lb = load(uniform);
  EXPECT_TRUE(lb.cells[1].config.uses_profile);
  EXPECT_EQ(lb.cells[1].config.codec.label(), "int4-asym-g32-profile4");
  EXPECT_NE(error(base("[compression.codec]\nformat = \"q4_0\"\nlayer_bits = \"profile\"\n")).find("layer_bits"),
            std::string::npos);
  EXPECT_NE(error(base("[compression.codec]\nformat = \"int\"\nlayer_bits = \"per-token\"\n")).find("layer_bits"),
            std::string::npos);
}

TEST_F(Config, TokenBitsAreACodecSettingWithErrorsNamingTheKey) {
  const std::string codec = "[compression.codec]\nformat = \"int\"\nbits = 4\n";
  const rkv::RunPlan p = load(base(codec + "token_bits = [16, 8]\ntoken_shares = [0.05, 0.15]\n"));
  const rkv::CodecSpec& c = p.cells[1].config.codec;
  EXPECT_EQ(c.label(), "int4-asym-g32+16x0.05+8x0.15");
  EXPECT_NE(p.cells[1].label.find("int4-asym-g32+16x0.05+8x0.15"), std::string::npos) << p.cells[1].label;
  EXPECT_EQ(c.to_json().at("token_bits").get<std::vector<int>>(), (std::vector<int>{16, 8}));
  EXPECT_NE(p.cells[1].effective_key, load(base(codec)).cells[1].effective_key);
  // A share of 0 drops its class, and no classes is the uniform cell: the same effective key, computed once.
  EXPECT_EQ(load(base(codec + "token_bits = [16]\ntoken_shares = [0]\n")).cells[1].effective_key,
            load(base(codec)).cells[1].effective_key);
  EXPECT_EQ(load(base(codec + "token_bits = []\ntoken_shares = []\n")).cells[1].effective_key,
            load(base(codec)).cells[1].effective_key);
  // Bytes: the mix's mean entry, SmolLM2 d = 64, int4 with 5% at f16: e = 84 + 0.05 x (260 - 84) = 92.8.
  std::string text = base(codec + "token_bits = [16]\ntoken_shares = [0.05]\n");
  text.replace(text.find("fraction = 0.2"), 14, "bytes_fraction = 0.1");
  EXPECT_NEAR(*rkv::token_fraction(load(text).cells[1].config, 64, 1024), 0.1 * 516.0 / 92.8, 1e-12);
  auto err = [&](const std::string& keys) { return error(base(codec + keys)); };
  EXPECT_NE(err("token_bits = [16, 8]\ntoken_shares = [0.1]\n").find("compression.codec.token_bits"), std::string::npos);
  EXPECT_NE(err("token_bits = [8, 16]\ntoken_shares = [0.1, 0.1]\n").find("strictly decreasing"), std::string::npos);
  EXPECT_NE(err("token_bits = [12]\ntoken_shares = [0.1]\n").find("compression.codec.token_bits"), std::string::npos);
  EXPECT_NE(err("token_bits = [4]\ntoken_shares = [0.1]\n").find("above compression.codec.bits"), std::string::npos);
  EXPECT_NE(err("token_bits = [16]\ntoken_shares = [1.5]\n").find("compression.codec.token_shares"), std::string::npos);
  EXPECT_NE(err("token_bits = [16]\ntoken_shares = [-0.1]\n").find("[0, 1]"), std::string::npos);
  EXPECT_NE(err("token_bits = [16, 8]\ntoken_shares = [0.6, 0.5]\n").find("more than 1"), std::string::npos);
  EXPECT_NE(err("token_bits = [16]\ntoken_shares = [\"a\"]\n").find("compression.codec.token_shares"),
            std::string::npos);
  EXPECT_NE(err("token_bits = [16]\ntoken_shares = [0.1]\nlayer_bits = \"profile\"\n").find("layer_bits"),
            std::string::npos);
  EXPECT_NE(error(base("[compression.codec]\nformat = \"q8_0\"\ntoken_bits = [16]\ntoken_shares = [0.1]\n"))
                .find("format \"int\""),
            std::string::npos);
  // f16 is a format of its own; format "none" ignores the classes (a sweep over formats keeps one float32 cell).
  EXPECT_EQ(load(base("[compression.codec]\nformat = \"f16\"\n")).cells[1].config.codec.label(), "f16");
  EXPECT_TRUE(load(base("[compression.codec]\ntoken_bits = [16]\ntoken_shares = [0.1]\n")).cells[1].config.codec.none());
  // Sweepable: one cell per share list.
  const rkv::RunPlan s = load(base(codec + "token_bits = [16]\n",
                                   "[sweep]\n\"compression.codec.token_shares\" = [[0.05], [0.1]]\n"));
  ASSERT_EQ(s.cells.size(), 3u);
  EXPECT_EQ(s.cells[2].config.codec.label(), "int4-asym-g32+16x0.1");
}

TEST_F(Config, SweepIsTheCartesianProduct) {
  const rkv::RunPlan p = load(base("", "[sweep]\n\"allocator.plugin\" = [\"uniform\", \"pyramid\", \"ripplekv\"]\n"
                                       "\"budget.fraction\" = [0.1, 0.3]\n"));
  ASSERT_EQ(p.cells.size(), 1u + 3u * 2u);
  std::set<std::string> ids;
  for (const auto& c : p.cells) ids.insert(c.id);
  EXPECT_EQ(ids.size(), p.cells.size());  // stable, distinct ids
  EXPECT_EQ(p.cells[2].config.allocator->id, "org.ripplekv.allocator.pyramid");
  EXPECT_DOUBLE_EQ(*p.cells[4].config.budget_fraction, 0.3);
  // Cell ids do not depend on anything but the swept values: the same config gives the same ids.
  EXPECT_EQ(load(base("", "[sweep]\n\"allocator.plugin\" = [\"uniform\", \"pyramid\", \"ripplekv\"]\n"
                          "\"budget.fraction\" = [0.1, 0.3]\n")).cells[3].id, p.cells[3].id);
}

// Regression: the full-cache cell had the same id in every config, so two configs writing into one folder
// overwrote each other's reference cell. Its id now depends on the non-swept config, and only on it.
TEST_F(Config, SweepMethodsSetSeveralKeysTogetherCrossedWithTheOtherAxes) {
  // Three methods x two budgets = 6 cells (not the 2 x 2 x 2 x 2 of crossing each key): each method sets its own
  // keys, and a key one method sets (allocator.heads) keeps its base value ("none") in the others' cells.
  const rkv::RunPlan p = load(base("",
      "[sweep]\nmethods = [{ \"scorer.plugin\" = \"snapkv\", \"allocator.plugin\" = \"uniform\" },\n"
      "  { scorer = { plugin = \"snapkv\" }, allocator = { plugin = \"uniform\", heads = \"adakv\" } },\n"
      "  { \"scorer.plugin\" = \"streamingllm\", \"allocator.plugin\" = \"ripplekv\" }]\n"
      "\"budget.fraction\" = [0.25, 0.5]\n"));
  ASSERT_EQ(p.cells.size(), 7u);  // + the full cache
  std::vector<std::string> seen;
  for (size_t i = 1; i < p.cells.size(); ++i) {
    const rkv::CellConfig& cc = p.cells[i].config;
    seen.push_back(rkv::short_id(cc.scorer->id) + "/" + rkv::short_id(cc.allocator->id) + "/" +
                   (cc.allocator->heads ? rkv::short_id(cc.allocator->heads->id) : "-") + "/" +
                   std::to_string(*cc.budget_fraction));
  }
  // The first axis (keys in TOML's sorted order: "budget.fraction" before "methods") varies fastest.
  EXPECT_EQ(seen, (std::vector<std::string>{"snapkv/uniform/-/0.250000", "snapkv/uniform/-/0.500000",
                                            "snapkv/uniform/adakv/0.250000", "snapkv/uniform/adakv/0.500000",
                                            "streamingllm/ripplekv/-/0.250000", "streamingllm/ripplekv/-/0.500000"}));
  // Values hold the keys one by one, so labels name the plugins as for any sweep.
  EXPECT_EQ(p.cells[3].values.at("allocator.heads"), "adakv");
  EXPECT_FALSE(p.cells[1].values.contains("allocator.heads"));
  EXPECT_NE(p.cells[3].label.find("adakv"), std::string::npos) << p.cells[3].label;
  EXPECT_EQ(p.cells[1].label.find("adakv"), std::string::npos) << p.cells[1].label;
  // Errors name the key.
  EXPECT_NE(error(base("", "[sweep]\nmethods = [1]\n")).find("sweep.methods[0]"), std::string::npos);
  EXPECT_NE(error(base("", "[sweep]\nmethods = []\n")).find("sweep.methods"), std::string::npos);
  EXPECT_NE(error(base("", "[sweep]\nmethods = [{ \"scorer.plugn\" = \"snapkv\" }]\n")).find("scorer.plugn"),
            std::string::npos);
  EXPECT_NE(error(base("", "[sweep]\nmethods = [{ \"scorer.plugin\" = \"snapkv\" }]\n"
                           "\"scorer.plugin\" = [\"h2o\"]\n")).find("sweep each setting once"),
            std::string::npos);
}

TEST_F(Config, OutputBaselineSelectsSweptValuesWithErrorsNamingTheKey) {
  const std::string sweep = "[sweep]\n\"scorer.plugin\" = [\"snapkv\", \"h2o\"]\n\"budget.fraction\" = [0.1, 0.3]\n";
  // Absent: uniform (the report as before); "full"; a selector, written with a quoted dotted key or nested.
  EXPECT_EQ(load(base("", sweep)).report_baseline.kind, rkv::ReportBaseline::Kind::uniform);
  EXPECT_EQ(load(base("[output]\nbaseline = \"full\"\n", sweep)).report_baseline.kind, rkv::ReportBaseline::Kind::full);
  for (const char* form : {"{ \"scorer.plugin\" = \"snapkv\" }", "{ scorer = { plugin = \"snapkv\" } }"}) {
    const rkv::ReportBaseline b = load(base(std::string("[output]\nbaseline = ") + form + "\n", sweep)).report_baseline;
    EXPECT_EQ(b.kind, rkv::ReportBaseline::Kind::selector) << form;
    EXPECT_EQ(b.describe(), "scorer.plugin = snapkv") << form;
    EXPECT_EQ(b.free, std::vector<std::string>{"scorer.plugin"}) << form;
  }
  // A methods axis that sets a selected key frees all of its keys (a method is one choice).
  const rkv::ReportBaseline m = load(base("[output]\nbaseline = { \"allocator.plugin\" = \"uniform\" }\n",
      "[sweep]\nmethods = [{ \"scorer.plugin\" = \"snapkv\", \"allocator.plugin\" = \"uniform\" },\n"
      "  { \"scorer.plugin\" = \"snapkv\", \"allocator.plugin\" = \"ripplekv\" }]\n")).report_baseline;
  EXPECT_EQ(m.free, (std::vector<std::string>{"allocator.plugin", "scorer.plugin"}));
  // Errors name output.baseline, the key and its line.
  EXPECT_NE(error(base("[output]\nbaseline = \"best\"\n", sweep)).find("cfg.toml:19:"), std::string::npos)
      << error(base("[output]\nbaseline = \"best\"\n", sweep));
  EXPECT_NE(error(base("[output]\nbaseline = \"best\"\n", sweep)).find("is not a baseline"), std::string::npos);
  const std::string unswept = error(base("[output]\nbaseline = { \"allocator.plugin\" = \"uniform\" }\n", sweep));
  EXPECT_NE(unswept.find("output.baseline.allocator.plugin"), std::string::npos) << unswept;
  EXPECT_NE(unswept.find("is not swept (swept keys: budget.fraction, scorer.plugin)"), std::string::npos) << unswept;
  const std::string untaken = error(base("[output]\nbaseline = { \"scorer.plugin\" = \"tova\" }\n", sweep));
  EXPECT_NE(untaken.find("no cell of the sweep has scorer.plugin = \"tova\""), std::string::npos) << untaken;
  EXPECT_NE(error(base("[output]\nbaseline = {}\n", sweep)).find("non-empty table"), std::string::npos);
  // Empty nested tables are refused, not dropped: { scorer = {} } names a key that is not swept.
  EXPECT_NE(error(base("[output]\nbaseline = { scorer = {} }\n", sweep)).find("'scorer' is not swept"), std::string::npos);
  EXPECT_NE(error(base("[output]\nbaseline = { \"scorer.plugin\" = \"snapkv\", nonsense = {} }\n", sweep))
                .find("'nonsense' is not swept"),
            std::string::npos);
  EXPECT_NE(error(base("[output]\nbaseline = 3\n", sweep)).find("output.baseline"), std::string::npos);
  EXPECT_NE(error(base("[output]\nbaseline = { \"scorer.plugin\" = \"snapkv\" }\n")).find("the config has no [sweep]"),
            std::string::npos);
}

TEST_F(Config, PrefillSectionIsRangeCheckedAndChunkCompressionRefusesWhatCannotScoreAChunk) {
  const rkv::RunPlan one = load(base());
  EXPECT_EQ(one.prefill.chunk_tokens, 0);
  EXPECT_FALSE(one.prefill.compress_between_chunks);
  const rkv::RunPlan chunked = load(base("[prefill]\nchunk_tokens = 512\ncompress_between_chunks = true\n"));
  EXPECT_EQ(chunked.prefill.chunk_tokens, 512);
  EXPECT_TRUE(chunked.prefill.compress_between_chunks);
  EXPECT_NE(error(base("[prefill]\nchunk_tokens = -1\n")).find("prefill.chunk_tokens"), std::string::npos);
  EXPECT_NE(error(base("[prefill]\nchunk_tokens = 4\n")).find("at least 16"), std::string::npos);
  EXPECT_EQ(load(base("[prefill]\nchunk_tokens = 16\n")).prefill.chunk_tokens, 16);
  EXPECT_NE(error(base("[prefill]\nchunk_size = 8\n")).find("chunk_size"), std::string::npos);
  EXPECT_NE(error(base("[prefill]\ncompress_between_chunks = true\n")).find("chunk_tokens >= 1"), std::string::npos);
  const std::string between = "[prefill]\nchunk_tokens = 64\ncompress_between_chunks = true\n";
  // expected_attention needs the whole prompt's query moments: it cannot score a chunk.
  const std::string e = error(base(between, "[sweep]\n\"scorer.plugin\" = [\"snapkv\", \"expected_attention\"]\n"));
  EXPECT_NE(e.find("expected_attention"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot score a chunk"), std::string::npos) << e;
  EXPECT_NE(error(base(between + "[compression]\nrerotate = true\n")).find("rerotate"), std::string::npos);
  EXPECT_NE(error(base(between, "[sweep]\n\"allocator.heads\" = [\"adakv\"]\n")).find("allocator.heads"),
            std::string::npos);
  // A per-head allocator given alone as allocator.plugin is refused too (it was run as uniform, silently).
  for (const char* alone : {"adakv", "global_topk"}) {
    const std::string m = error(base(between, std::string("[sweep]\n\"allocator.plugin\" = [\"") + alone + "\"]\n"));
    EXPECT_NE(m.find(std::string("per-head allocator 'org.ripplekv.allocator.") + alone + "'"), std::string::npos) << m;
  }
  EXPECT_NE(error(base(between + "[compression.codec]\nformat = \"int\"\nbits = 4\n")).find("compression.codec"),
            std::string::npos);
  // The residual cosine (the squeezeattention signal) is captured by a one-shot prefill only: chunk_tokens is
  // refused at validate time; cake (window queries and keys) prefills in chunks.
  const std::string squeeze =
      "[sweep]\nmethods = [{ \"allocator.plugin\" = \"squeezeattention\", \"signal.plugin\" = \"squeezeattention\" }]\n";
  const std::string m = error(base("[prefill]\nchunk_tokens = 64\n", squeeze));
  EXPECT_NE(m.find("prefill.chunk_tokens = 64: 'org.ripplekv.signal.squeezeattention' reads the residual cosine"),
            std::string::npos) << m;
  EXPECT_EQ(load(base("[prefill]\nchunk_tokens = 64\n",
                      "[sweep]\nmethods = [{ \"allocator.plugin\" = \"cake\", \"signal.plugin\" = \"cake\" }]\n"))
                .cells.size(), 2u);
  // A cell whose allocator reads no profile never computes its [signal]: squeezeattention there is no reason to refuse.
  EXPECT_EQ(load(base("[prefill]\nchunk_tokens = 64\n", "[sweep]\nmethods = [{ \"allocator.plugin\" = \"uniform\", "
                                                       "\"signal.plugin\" = \"squeezeattention\" }]\n"))
                .cells.size(), 2u);
  // generate --compress prefills in one shot: compression between chunks is refused there, not ignored.
  const fs::path p = dir / "compress.toml";
  std::ofstream(p, std::ios::trunc) << "[scorer]\nplugin = \"snapkv\"\n[allocator]\nplugin = \"uniform\"\n"
                                       "[budget]\nfraction = 0.3\n" << between;
  try {
    rkv::load_compression_config(p.string());
    ADD_FAILURE() << "no error";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("prefill.compress_between_chunks"), std::string::npos) << e.what();
  }
}

TEST_F(Config, FullCacheCellIdDependsOnTheBaseConfig) {
  const rkv::RunPlan a = load(base());
  std::string changed = base();
  changed.replace(changed.find("fraction = 0.2"), 14, "fraction = 0.3");
  const rkv::RunPlan b = load(changed);
  const rkv::RunPlan a_swept = load(base("", "[sweep]\n\"budget.fraction\" = [0.1, 0.3]\n"));
  ASSERT_TRUE(a.cells[0].config.full_cache && b.cells[0].config.full_cache && a_swept.cells[0].config.full_cache);
  EXPECT_NE(a.base_sha256, b.base_sha256);
  EXPECT_NE(a.cells[0].id, b.cells[0].id);
  EXPECT_EQ(a.cells[0].id, a_swept.cells[0].id);  // the sweep is not part of the base config
  EXPECT_EQ(a.cells[0].id, load(base()).cells[0].id);  // stable
}

TEST_F(Config, UniformUnderTwoSignalsHasOneEffectiveKey) {
  const rkv::RunPlan p = load(base("", "[sweep]\n\"allocator.plugin\" = [\"uniform\", \"ripplekv\"]\n"
                                       "\"signal.plugin\" = [\"perturbation_kl\", \"depth\"]\n"));
  ASSERT_EQ(p.cells.size(), 5u);
  std::map<std::string, int> keys;
  for (const auto& c : p.cells) keys[c.effective_key]++;
  EXPECT_EQ(keys.size(), 4u);  // full, uniform (once for both signals), ripplekv x 2 signals
}

TEST_F(Config, SyntaxErrorsGiveLineAndColumn) {
  const std::string e = error("[model]\npath = \"x\"\nthreads = = 2\n");
  EXPECT_NE(e.find("cfg.toml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("TOML syntax error"), std::string::npos) << e;
}

TEST_F(Config, UnknownKeysNameTheLineAndClosestMatch) {
  EXPECT_EQ(error(base("[output]\ndri = \"x\"\n")),
            "cfg.toml:19: 'output.dri' is not a known key in [output]; valid: dir, bootstrap_resamples, max_cells, baseline; "
            "did you mean "
            "'dir'?");
  const std::string e = error(base("[modle]\n"));
  EXPECT_NE(e.find("'modle' is not a known key at the top level"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'model'?"), std::string::npos) << e;
}

TEST_F(Config, PluginParamsAreValidatedAgainstTheirPlugin) {
  const std::string e = error(base("[allocator.ripplekv]\ngama = 2.0\n"));
  EXPECT_NE(e.find("plugin 'org.ripplekv.allocator.ripplekv' has no parameter 'gama' (cfg.toml:19)"), std::string::npos)
      << e;
  EXPECT_NE(e.find("did you mean 'gamma'?"), std::string::npos) << e;
  const std::string r = error(base("[allocator.ripplekv]\nr = 0.5\n"));
  EXPECT_NE(r.find("0.5 is out of range; allowed: >= 1"), std::string::npos) << r;
  const std::string u = error(base("[allocator.pyramidd]\nbeta = 2\n"));
  EXPECT_NE(u.find("table names no allocator plugin"), std::string::npos) << u;
}

TEST_F(Config, WrongTypesAndRanges) {
  EXPECT_NE(error(base("[tasks.lm_fidelity]\ncontinuation_tokens = \"64\"\n")).find("must be an integer"),
            std::string::npos);
  EXPECT_NE(error(base("[tasks.lm_fidelity]\ncontinuation_tokens = 0\n")).find("must be >= 2 (got 0)"),
            std::string::npos);
  // one token leaves the perplexity nothing to predict (it predicts tokens 2 .. n)
  EXPECT_NE(error(base("[tasks.lm_fidelity]\ncontinuation_tokens = 1\n")).find("must be >= 2 (got 1)"),
            std::string::npos);
  std::string t = base();
  t.replace(t.find("fraction = 0.2"), 14, "fraction = 1.5");
  EXPECT_NE(error(t).find("'budget.fraction' must be in (0, 1] (got 1.5)"), std::string::npos) << error(t);
  t = base();
  t.replace(t.find("examples = 2"), 12, "examples = -3");
  EXPECT_NE(error(t).find("'data.calibration.examples' must be >= 1 (got -3)"), std::string::npos) << error(t);
}

// Regression: integers were narrowed silently (bootstrap_resamples = 4294967396 ran with 100 resamples;
// 2147483648 passed validate and died after every cell). Every integer key is range-checked where it is read.
TEST_F(Config, IntegerSettingsBeyondWhatTheirConsumersHoldAreRejectedAtValidate) {
  struct Case {
    std::string toml, key, bound;
  };
  const std::vector<Case> cases = {
      {"[output]\nbootstrap_resamples = 4294967396\n", "output.bootstrap_resamples", "must be <= 1000000"},
      {"[output]\nbootstrap_resamples = 2147483648\n", "output.bootstrap_resamples", "must be <= 1000000"},
      {"[tasks.needle]\ntrials = 9223372036854775807\n", "tasks.needle.trials", "must be <= 1000000"},
      {"[tasks.lm_fidelity]\ncontinuation_tokens = 9223372036854775000\n", "tasks.lm_fidelity.continuation_tokens",
       "must be <= 16777216"},
      {"[tasks.longbench]\nmax_context_tokens = 4294967296\n", "tasks.longbench.max_context_tokens", "must be <= 16777216"},
      {"[tasks.needle]\ncontext_tokens = [1024, 9223372036854775807]\n", "tasks.needle.context_tokens",
       "must be in [64, 16777216]"},
  };
  for (const Case& c : cases) {
    const std::string e = error(base(c.toml));
    EXPECT_NE(e.find("cfg.toml:"), std::string::npos) << e;
    EXPECT_NE(e.find("'" + c.key + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(c.bound), std::string::npos) << e;
  }
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = base();
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  std::string e = error(replaced("examples = 2", "examples = 2147483648"));
  EXPECT_NE(e.find("'data.calibration.examples' must be <= 1000000 (got 2147483648)"), std::string::npos) << e;
  e = error(replaced("[data.eval]\n", "[data.eval]\nprefix_tokens = 9223372036854775000\n"));
  EXPECT_NE(e.find("'data.eval.prefix_tokens' must be <= 16777216"), std::string::npos) << e;
  e = error(replaced("fraction = 0.2", "tokens = 4294967296"));
  EXPECT_NE(e.find("'budget.tokens' must be <= 16777216"), std::string::npos) << e;
  e = error(replaced("path = \"model.gguf\"", "path = \"model.gguf\"\nthreads = 4294967297"));
  EXPECT_NE(e.find("'model.threads' must be <= 4096"), std::string::npos) << e;
  e = error(replaced("fraction = 0.2", "fraction = 0.2\nlayers = [0, 4294967296]"));
  EXPECT_NE(e.find("'budget.layers' must hold layer indices in [0, 100000]"), std::string::npos) << e;
  e = error(base("[tasks]\nrun = [\"needle\"]\n[tasks.needle]\ntrials = 100000\ncontext_tokens = [64, 128, 256]\n"
                 "depths = [0.0, 0.5, 1.0, 0.25]\n"));
  EXPECT_NE(e.find("1200000 prompts, more than 1000000"), std::string::npos) << e;
  // The bounds themselves are accepted.
  EXPECT_EQ(load(base("[output]\nbootstrap_resamples = 1000000\n")).bootstrap_resamples, 1000000);
}

// [tasks.ruler]: defaults, every key read, and each bad value named with its key.
TEST_F(Config, RulerTaskSettingsAreReadAndRangeChecked) {
  // (The default sources, RULER's own, need the asset cache: tests/runner/test_ruler.cpp RulerPlan checks them.)
  const std::string eval_sources = "haystack = \"eval_text\"\nword_pool = \"eval_text\"\n";
  const rkv::RunPlan d = load(base("[tasks]\nrun = [\"ruler\"]\n[tasks.ruler]\n" + eval_sources));
  ASSERT_EQ(d.tasks, std::vector<std::string>{"ruler"});
  EXPECT_EQ(d.ruler.subtasks.size(), 11u);  // every synthetic subtask of RULER (the two QA tasks need their data)
  EXPECT_EQ(d.ruler.subtasks.front(), "niah_single_1");
  EXPECT_EQ(d.ruler.subtasks.back(), "fwe");
  EXPECT_EQ(d.ruler.context_tokens, std::vector<int64_t>{1024});
  EXPECT_EQ(d.ruler.examples, 4);
  EXPECT_EQ(d.ruler.seed, 42u);
  EXPECT_EQ(d.ruler.max_new_tokens, 0);
  const rkv::RunPlan p = load(base("[tasks]\nrun = [\"ruler\"]\n[tasks.ruler]\nsubtasks = [\"vt\", \"niah_single_2\"]\n"
                                   "context_tokens = [512, 2048]\nexamples = 3\nseed = 5\nmax_new_tokens = 40\n" + eval_sources));
  EXPECT_EQ(p.ruler.subtasks, (std::vector<std::string>{"vt", "niah_single_2"}));
  EXPECT_EQ(p.ruler.context_tokens, (std::vector<int64_t>{512, 2048}));
  EXPECT_EQ(p.ruler.examples, 3);
  EXPECT_EQ(p.ruler.seed, 5u);
  EXPECT_EQ(p.ruler.max_new_tokens, 40);
  struct Case {
    std::string toml, expect;
  };
  const std::vector<Case> cases = {
      {"subtasks = [\"niah_singel_1\"]", "'tasks.ruler.subtasks': unknown subtask 'niah_singel_1'"},
      {"subtasks = [\"niah_singel_1\"]", "did you mean 'niah_single_1'?"},
      {"subtasks = [\"vt\", \"vt\"]", "'tasks.ruler.subtasks' lists 'vt' twice"},
      {"subtasks = []", "'tasks.ruler.subtasks' lists no subtask"},
      {"context_tokens = []", "'tasks.ruler.context_tokens' lists no length"},
      {"context_tokens = [1024, 32]", "'tasks.ruler.context_tokens' must be in [64, 16777216] (got 32)"},
      {"context_tokens = [16777217]", "'tasks.ruler.context_tokens' must be in [64, 16777216] (got 16777217)"},
      {"examples = 0", "'tasks.ruler.examples' must be >= 1 (got 0)"},
      {"examples = 1000001", "'tasks.ruler.examples' must be <= 1000000"},
      {"examples = 100000\ncontext_tokens = [64, 128]", "2200000 prompts, more than 1000000"},  // 11 x 2 x 100000
      {"seed = -1", "'tasks.ruler.seed' must be >= 0 (got -1)"},
      {"max_new_tokens = -1", "'tasks.ruler.max_new_tokens' must be >= 0 (got -1)"},
      {"max_new_tokens = 1000001", "'tasks.ruler.max_new_tokens' must be <= 1000000"},
      {"exmaples = 3", "did you mean 'examples'?"},
  };
  for (const Case& c : cases) {
    const std::string e = error(base("[tasks]\nrun = [\"ruler\"]\n[tasks.ruler]\n" + c.toml + "\n"));
    EXPECT_NE(e.find("cfg.toml:"), std::string::npos) << c.toml << ": " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.toml << ": " << e;
  }
  EXPECT_NE(error(base("[tasks]\nrun = [\"rulr\"]\n")).find("did you mean 'ruler'?"), std::string::npos);
  // A task listed twice would run and score its examples twice.
  EXPECT_NE(error(base("[tasks]\nrun = [\"ruler\", \"needle\", \"ruler\"]\n")).find("cfg.toml:19: 'tasks.run' lists 'ruler' twice"),
            std::string::npos)
      << error(base("[tasks]\nrun = [\"ruler\", \"needle\", \"ruler\"]\n"));
}

// [tasks.multi_question]: defaults, every key read, and each bad value named with its key.
TEST_F(Config, MultiQuestionTaskSettingsAreReadAndRangeChecked) {
  const rkv::RunPlan d = load(base("[tasks]\nrun = [\"multi_question\"]\n"));
  EXPECT_EQ(d.multi_question.context_tokens, std::vector<int64_t>{1024});
  EXPECT_EQ(d.multi_question.questions, 4);
  EXPECT_EQ(d.multi_question.examples, 4);
  EXPECT_EQ(d.multi_question.seed, 42u);
  EXPECT_EQ(d.multi_question.max_new_tokens, 32);
  const rkv::RunPlan p = load(base("[tasks]\nrun = [\"multi_question\"]\n[tasks.multi_question]\n"
                                   "context_tokens = [2048]\nquestions = 6\nexamples = 3\nseed = 1\nmax_new_tokens = 16\n"));
  EXPECT_EQ(p.multi_question.context_tokens, std::vector<int64_t>{2048});
  EXPECT_EQ(p.multi_question.questions, 6);
  EXPECT_EQ(p.multi_question.examples, 3);
  EXPECT_EQ(p.multi_question.seed, 1u);
  EXPECT_EQ(p.multi_question.max_new_tokens, 16);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"context_tokens = []", "'tasks.multi_question.context_tokens' lists no length"},
      {"context_tokens = [63]", "'tasks.multi_question.context_tokens' must be in [64, 16777216] (got 63)"},
      {"questions = 0", "'tasks.multi_question.questions' must be >= 1 (got 0)"},
      {"examples = 0", "'tasks.multi_question.examples' must be >= 1 (got 0)"},
      {"examples = 200000\nquestions = 9", "2000000 prompts, more than 1000000"},  // 1 x 200000 x (9 + 1)
      {"seed = -2", "'tasks.multi_question.seed' must be >= 0 (got -2)"},
      {"max_new_tokens = 0", "'tasks.multi_question.max_new_tokens' must be >= 1 (got 0)"},
      {"question = 3", "did you mean 'questions'?"},
  };
  for (const auto& [toml, expect] : cases) {
    const std::string e = error(base("[tasks]\nrun = [\"multi_question\"]\n[tasks.multi_question]\n" + toml + "\n"));
    EXPECT_NE(e.find("cfg.toml:"), std::string::npos) << toml << ": " << e;
    EXPECT_NE(e.find(expect), std::string::npos) << toml << ": " << e;
  }
}

TEST_F(Config, SweepOverAnUnknownKey) {
  const std::string e = error(base("", "[sweep]\n\"scorer.snapkv.windw\" = [16, 32]\n"));
  EXPECT_NE(e.find("plugin 'org.ripplekv.scorer.snapkv' has no parameter 'windw'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'window'?"), std::string::npos) << e;
  // model.path is a run-level sweep key now (each value a run of its own); other [model] keys cannot be swept
  EXPECT_NE(error(base("", "[sweep]\n\"model.threads\" = [1, 2]\n")).find("cannot be swept"), std::string::npos);
  const std::string a = error(base("", "[sweep]\n\"model.path\" = [\"a\"]\n"));
  EXPECT_NE(a.find("'model.path': '" + (dir / "a").string() + "' does not exist"), std::string::npos) << a;
}

// Regression: "allocator.plugin." (an empty component) silently overrode the "allocator.plugin" axis while
// results.jsonl recorded the other value. Empty components and two keys naming one setting are errors.
TEST_F(Config, SweepKeysWithEmptyComponentsOrNamingOneSettingTwiceAreRejected) {
  for (const char* key : {"allocator.plugin.", ".allocator.plugin", "scorer..window", "scorer.snapkv..window", "."}) {
    const std::string e = error(base("", std::string("[sweep]\n\"") + key + "\" = [\"uniform\"]\n"));
    EXPECT_NE(e.find("'sweep." + std::string(key) + "'"), std::string::npos) << key << ": " << e;
    EXPECT_NE(e.find("no empty components"), std::string::npos) << key << ": " << e;
  }
  const std::string e = error(base("", "[sweep]\n\"allocator.plugin\" = [\"uniform\", \"pyramid\"]\n"
                                       "\"allocator.plugin.\" = [\"ripplekv\"]\n"));
  EXPECT_NE(e.find("cfg.toml:"), std::string::npos) << e;
  EXPECT_NE(e.find("no empty components"), std::string::npos) << e;
  // The same param through a plugin's short id and (for a plugin whose id has no dot) its full id is one setting;
  // distinct settings stay fine.
  EXPECT_EQ(load(base("", "[sweep]\n\"scorer.snapkv.window\" = [8, 16]\n\"scorer.snapkv.kernel\" = [5, 7]\n")).cells.size(),
            5u);
}

TEST_F(Config, CalibrationAndEvaluationMustBeDisjoint) {
  std::string t = base();
  t.replace(t.find("files = [\"b.txt\"]"), 17, "files = [\"a.txt\"]");
  EXPECT_NE(error(t).find("is also a calibration file; calibration and evaluation sets must be disjoint"),
            std::string::npos)
      << error(t);
  // the same text under another name (a copy, or a symlink) is the same text
  fs::copy_file(dir / "a.txt", dir / "copy_of_a.txt");
  fs::create_symlink(dir / "a.txt", dir / "link_to_a.txt");
  for (const char* other : {"copy_of_a.txt", "link_to_a.txt"}) {
    t = base();
    t.replace(t.find("files = [\"b.txt\"]"), 17, std::string("files = [\"") + other + "\"]");
    EXPECT_NE(error(t).find("has the same content as calibration file"), std::string::npos) << error(t);
  }
}

TEST_F(Config, ANonFiniteBaseValueIsRefusedEvenWhenTheSweepOverridesIt) {
  std::string t = base("", "[sweep]\n\"budget.fraction\" = [0.1, 0.2]\n");
  t.replace(t.find("fraction = 0.2"), 14, "fraction = nan");
  const std::string e = error(t);
  EXPECT_NE(e.find("budget.fraction"), std::string::npos) << e;
  EXPECT_NE(e.find("not a finite number"), std::string::npos) << e;
}

TEST_F(Config, MissingFilesAreNamed) {
  std::string t = base();
  t.replace(t.find("files = [\"b.txt\"]"), 17, "files = [\"nope.txt\"]");
  EXPECT_NE(error(t).find("file 'nope.txt'"), std::string::npos) << error(t);
  EXPECT_NE(error(t).find("does not exist"), std::string::npos);
  t = base();
  t.replace(t.find("model.gguf"), 10, "none.gguf");
  EXPECT_NE(error(t).find("'model.path': '"), std::string::npos) << error(t);
  EXPECT_NE(error(t).find("fetches SmolLM2-135M and Gemma 3 270M"), std::string::npos) << error(t);
  // A missing fetched asset names the fetch that brings it: Qwen's needs --model (it is not fetched by default).
  t = base();
  t.replace(t.find("model.gguf"), 10, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
  EXPECT_NE(error(t).find("scripts/fetch-assets --model qwen2.5-coder-1.5b fetches it"), std::string::npos) << error(t);
  t = base();
  t.replace(t.find("model.gguf"), 10, "gemma-3-270m-q4_k_m.gguf");
  EXPECT_NE(error(t).find("(scripts/fetch-assets fetches it)"), std::string::npos) << error(t);
}

// ${VAR} in a path: expanded once (a value that itself holds "${...}" is not expanded again, so it cannot loop), and
// an unset variable is an error naming the variable and the key rather than an empty string.
TEST_F(Config, PathVariablesExpandOnceAndAnUnsetOneIsNamed) {
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "model.gguf") << "model";
  ::setenv("RKV_TEST_MODEL_DIR", "sub", 1);
  std::string t = base();
  t.replace(t.find("\"model.gguf\""), 12, "\"${RKV_TEST_MODEL_DIR}/model.gguf\"");
  EXPECT_EQ(load(t).model_path, (dir / "sub" / "model.gguf").string());
  ::setenv("RKV_TEST_MODEL_DIR", "${RKV_TEST_MODEL_DIR}", 1);  // expanding this again would never end
  EXPECT_NE(error(t).find("model.path"), std::string::npos) << error(t);
  EXPECT_NE(error(t).find("${RKV_TEST_MODEL_DIR}/model.gguf"), std::string::npos) << error(t);
  ::unsetenv("RKV_TEST_MODEL_DIR");
  EXPECT_NE(error(t).find("cfg.toml:2: 'model.path': '${RKV_TEST_MODEL_DIR}/model.gguf' names the environment variable "
                          "${RKV_TEST_MODEL_DIR}, which is not set"),
            std::string::npos)
      << error(t);
}

TEST_F(Config, PluginCreationChecksRunAtValidation) {
  // snapkv refuses an even pooling kernel when it is created; validate creates every plugin once.
  const std::string e = error(base("[scorer.snapkv]\nkernel = 4\n").replace(base().find("[scorer.snapkv]\nwindow = 16\n"), 27, ""));
  EXPECT_NE(e.find("plugin 'org.ripplekv.scorer.snapkv'"), std::string::npos) << e;
  EXPECT_NE(e.find("odd"), std::string::npos) << e;
}

TEST_F(Config, AllocatorThatNeedsAProfileNeedsASignal) {
  std::string t = base();
  t.replace(t.find("[signal]\nplugin = \"perturbation_kl\"\n"), 35, "");
  EXPECT_NE(error(t).find("needs a sensitivity profile: add a [signal] section"), std::string::npos) << error(t);
}

// Per-head budgets: [allocator] heads names a per-head allocator (rkv.allocator/2) composed after the layer allocator;
// labels and effective keys carry it; a per-layer allocator as heads, or a per-head one as the layer allocator under
// heads, is refused at validate time naming the key (it used to fail in the middle of a run).
TEST_F(Config, PerHeadAllocatorsAreCheckedAtValidate) {
  std::string t = base("[allocator.adakv]\nalpha_safeguard = 0.5\n", "[sweep]\n\"allocator.heads\" = [\"none\", \"adakv\"]\n");
  const rkv::RunPlan p = load(t);
  ASSERT_EQ(p.cells.size(), 3u);  // full cache, none, adakv
  EXPECT_FALSE(p.cells[1].config.allocator->heads);
  ASSERT_TRUE(p.cells[2].config.allocator->heads);
  EXPECT_EQ(p.cells[2].config.allocator->heads->id, "org.ripplekv.allocator.adakv");
  EXPECT_EQ(p.cells[2].config.allocator->heads->params.to_string(), "alpha_safeguard=0.5");
  EXPECT_EQ(p.cells[2].label, "ripplekv(perturbation_kl)/adakv + snapkv @ f=0.2");
  EXPECT_NE(p.cells[1].effective_key, p.cells[2].effective_key);
  std::string e = error(base("", "[sweep]\n\"allocator.heads\" = [\"adakv\", \"uniform\"]\n"));
  EXPECT_NE(e.find("'org.ripplekv.allocator.uniform' is not a per-head allocator"), std::string::npos) << e;
  EXPECT_NE(e.find("cfg.toml"), std::string::npos) << e;
  std::string only = base();
  only.replace(only.find("plugin = \"ripplekv\""), 19, "plugin = \"adakv\"\nheads = \"adakv\"");
  e = error(only);
  EXPECT_NE(e.find("'allocator.plugin': 'org.ripplekv.allocator.adakv' gives no layer budgets"), std::string::npos) << e;
  e = error(base("", "[sweep]\n\"allocator.heads\" = [\"adakv\", 5]\n"));
  EXPECT_NE(e.find("allocator.heads"), std::string::npos) << e;
  std::string alone = base();
  alone.replace(alone.find("plugin = \"ripplekv\""), 19, "plugin = \"adakv\"");
  EXPECT_NO_THROW(load(alone));  // a per-head allocator alone splits B itself
}

TEST_F(Config, DecodePolicy) {
  EXPECT_EQ(load(base()).cells[1].config.decode.policy, "none");
  const rkv::RunPlan p = load(base("[compression.decode]\npolicy = \"rolling\"\nsinks = 2\n"));
  EXPECT_EQ(p.cells[1].config.decode.policy, "rolling");
  EXPECT_EQ(p.cells[1].config.decode.sinks, 2);
  EXPECT_EQ(p.cells[0].config.decode.policy, "none");  // the full-cache reference keeps every entry
  EXPECT_NE(p.cells[1].label.find("decode rolling(sinks=2)"), std::string::npos) << p.cells[1].label;
  const rkv::RunPlan h = load(base("[compression.decode]\npolicy = \"h2o\"\nrecent = 8\n"));
  EXPECT_EQ(h.cells[1].config.decode.describe(), "h2o(recent=8)");
  const rkv::RunPlan q = load(base("[compression.decode]\npolicy = \"periodic\"\ninterval = 32\n"));
  EXPECT_EQ(q.cells[1].config.decode.describe(), "periodic(interval=32,target=budget)");
  const std::string bad = error(base("[compression.decode]\npolicy = \"h20\"\n"));
  EXPECT_NE(bad.find("compression.decode.policy"), std::string::npos) << bad;
  EXPECT_NE(bad.find("did you mean 'h2o'"), std::string::npos) << bad;
  EXPECT_NE(bad.find("cfg.toml"), std::string::npos) << bad;
  EXPECT_NE(error(base("[compression.decode]\nsinks = -1\n")).find("compression.decode.sinks"), std::string::npos);
  EXPECT_NE(error(base("[compression.decode]\nsinks = 2000000\n")).find("<= 1000000"), std::string::npos);
  EXPECT_NE(error(base("[compression.decode]\nwindow = 3\n")).find("compression.decode.window"), std::string::npos);
  EXPECT_NE(error(base("[compression.decode]\ninterval = 0\n")).find("compression.decode.interval' must be >= 1"),
            std::string::npos);
  EXPECT_NE(error(base("[compression.decode]\ntarget = 0\n")).find("compression.decode.target' must be >= 1"),
            std::string::npos);
  EXPECT_NE(error(base("[compression.decode]\nrecent = 99999999999\n")).find("compression.decode.recent' must be <="),
            std::string::npos);
}

TEST_F(Config, PeriodicWithAScorerThatCannotScoreWhileDecodingFailsAtValidate) {
  std::string text = base("[compression.decode]\npolicy = \"periodic\"\n");
  text.replace(text.find("plugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 16"), 45,
               "plugin = \"h2o\"\n[scorer.h2o]\nnormalize = true");
  const std::string e = error(text);
  EXPECT_NE(e.find("scorer 'org.ripplekv.scorer.h2o' with "), std::string::npos) << e;
  EXPECT_NE(e.find("normalize=true"), std::string::npos) << e;
  EXPECT_NE(e.find("does not support decode-time scoring"), std::string::npos) << e;
  text.replace(text.find("normalize = true"), 16, "normalize = false");
  EXPECT_NO_THROW(load(text));  // unnormalized h2o re-scores while decoding
}

// What a scorer declares is checked at validate time as the run checks it, not only when a decode policy or chunked
// compression needs it: tests/plugins/wov_scorer.cpp with decode = true asks for the value-output norms (a prefill-only
// statistic) at decode time, and is refused before any model is loaded; without it the config is valid.
TEST_F(Config, AScorerDeclaringAPrefillOnlyStatisticAtDecodeTimeFailsAtValidate) {
  std::string text = "plugin_paths = [\"" RKV_TEST_BINARY_DIR "/tests/plugins/test_wov\"]\n" + base();
  text.replace(text.find("plugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 16"), 45,
               "plugin = \"org.test.wov\"\n[scorer.wov]\ndecode = true");
  const std::string e = error(text);
  EXPECT_NE(e.find("scorer 'org.test.wov' asks for the value-output norms at decode time"), std::string::npos) << e;
  text.replace(text.find("decode = true"), 13, "decode = false");
  EXPECT_NO_THROW(load(text));
}

TEST_F(Config, DecodePolicyIsASweepableCellSetting) {
  const rkv::RunPlan p =
      load(base("", "[sweep]\n\"compression.decode.policy\" = [\"none\", \"rolling\", \"h2o\", \"periodic\"]\n"));
  ASSERT_EQ(p.cells.size(), 5u);  // the full cache, then one cell per policy
  std::set<std::string> keys;
  for (size_t i = 1; i < p.cells.size(); ++i) keys.insert(p.cells[i].effective_key);
  EXPECT_EQ(keys.size(), 4u);  // four distinct computations
  EXPECT_EQ(p.cells[3].config.decode.policy, "h2o");
  EXPECT_EQ(p.cells[3].values["compression.decode.policy"], "h2o");
  const std::string e = error(base("", "[sweep]\n\"compression.query_aware\" = [true]\n"));
  EXPECT_NE(e.find("only the decode policy, the codec, sharing and the joint plan are swept"), std::string::npos) << e;
}

}  // namespace

TEST_F(Config, BudgetLayersIsASetOfNonNegativeIndices) {
  std::string t = base();
  t.replace(t.find("fraction = 0.2"), 14, "fraction = 0.2\nlayers = [1, 1, 2]");
  EXPECT_NE(error(t).find("cfg.toml:18: 'budget.layers'"), std::string::npos) << error(t);
  EXPECT_NE(error(t).find("lists layer 1 twice"), std::string::npos) << error(t);
  t = base();
  t.replace(t.find("fraction = 0.2"), 14, "fraction = 0.2\nlayers = [0, -1]");
  EXPECT_NE(error(t).find("must hold layer indices in [0, 100000] (got -1)"), std::string::npos) << error(t);
  t = base();
  t.replace(t.find("fraction = 0.2"), 14, "fraction = 0.2\nlayers = [3, 0, 2]");
  EXPECT_EQ(load(t).compressible_layers, (std::vector<int64_t>{3, 0, 2}));
}

TEST_F(Config, CompressionConfigRefusesMisspeltSectionsAndDuplicateLayers) {
  const auto compression_error = [&](const std::string& text) -> std::string {
    const fs::path p = dir / "compress.toml";
    std::ofstream(p, std::ios::trunc) << text;
    try {
      rkv::load_compression_config(p.string());
    } catch (const rkv::InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string ok = "[scorer]\nplugin = \"snapkv\"\n[allocator]\nplugin = \"uniform\"\n[budget]\nfraction = 0.3\n";
  EXPECT_EQ(compression_error(ok), "(no error)");
  EXPECT_EQ(compression_error(base()), "(no error)");  // a whole run config is a compression config too
  const std::string typo = compression_error(ok + "[scorr.snapkv]\nwindow = 3\n");
  EXPECT_NE(typo.find("scorr"), std::string::npos) << typo;
  EXPECT_NE(typo.find("did you mean 'scorer'"), std::string::npos) << typo;
  const std::string dup = compression_error(ok + "layers = [3, 3]\n");
  EXPECT_NE(dup.find("lists layer 3 twice"), std::string::npos) << dup;
}

// [compression] rerotate (key re-rotation to contiguous positions): off by default, a boolean, read by run configs
// and compression configs alike; a wrong type or a misspelling names the key and its line.
TEST_F(Config, RerotateIsABooleanOffByDefault) {
  EXPECT_FALSE(load(base()).rerotate);
  EXPECT_TRUE(load(base("[compression]\nrerotate = true\n")).rerotate);
  EXPECT_FALSE(load(base("[compression]\nrerotate = false\nquery_aware = true\n")).rerotate);
  const std::string type = error(base("[compression]\nrerotate = 1\n"));
  EXPECT_NE(type.find("cfg.toml:19: 'compression.rerotate' must be true or false"), std::string::npos) << type;
  const std::string typo = error(base("[compression]\nrerotat = true\n"));
  EXPECT_NE(typo.find("'compression.rerotat' is not a known key"), std::string::npos) << typo;
  EXPECT_NE(typo.find("did you mean 'rerotate'"), std::string::npos) << typo;

  const fs::path p = dir / "compress.toml";
  const std::string ok = "[scorer]\nplugin = \"snapkv\"\n[allocator]\nplugin = \"uniform\"\n[budget]\nfraction = 0.3\n";
  std::ofstream(p, std::ios::trunc) << ok;
  EXPECT_FALSE(rkv::load_compression_config(p.string()).rerotate);
  std::ofstream(p, std::ios::trunc) << ok << "[compression]\nrerotate = true\n";
  EXPECT_TRUE(rkv::load_compression_config(p.string()).rerotate);
  for (const std::string bad : {"rerotate = \"yes\"\n", "rerotat = true\n"}) {
    std::ofstream(p, std::ios::trunc) << ok << "[compression]\n" << bad;
    try {
      rkv::load_compression_config(p.string());
      ADD_FAILURE() << "no error for " << bad;
    } catch (const rkv::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("compression.rerotat"), std::string::npos) << e.what();
    }
  }
}

namespace {

/// base() with `keys` added to its [model] section.
std::string with_model_keys(std::string text, const std::string& keys) {
  const std::string head = "[model]\npath = \"model.gguf\"\n";
  return text.replace(0, head.size(), head + keys);
}

TEST_F(Config, ModelWeightsDefaultsToQuantizedAndRejectsOtherValuesNamingTheKey) {
  EXPECT_EQ(load(base()).weights, rkv::WeightStorage::quantized);
  EXPECT_EQ(load(with_model_keys(base(), "weights = \"f32\"\n")).weights, rkv::WeightStorage::f32);
  EXPECT_EQ(load(with_model_keys(base(), "weights = \"quantized\"\n")).weights, rkv::WeightStorage::quantized);
  const std::string bad = error(with_model_keys(base(), "weights = \"q4_0\"\n"));
  EXPECT_NE(bad.find("model.weights"), std::string::npos) << bad;
  EXPECT_NE(bad.find("cfg.toml"), std::string::npos) << bad;
  EXPECT_NE(bad.find("\"quantized\""), std::string::npos) << bad;
  const std::string not_string = error(with_model_keys(base(), "weights = 32\n"));
  EXPECT_NE(not_string.find("model.weights"), std::string::npos) << not_string;
}

TEST_F(Config, BackendAndComputeDtype) {
  EXPECT_EQ(load(base()).backend, "cpu");
  EXPECT_EQ(load(base()).dtype, "f32");
  const rkv::RunPlan p = load(with_model_keys(base(), "backend = \"cuda\"\ndtype = \"bf16\"\n"));
  EXPECT_EQ(p.backend, "cuda");
  EXPECT_EQ(p.dtype, "bf16");
  EXPECT_EQ(load(with_model_keys(base(), "backend = \"auto\"\n")).backend, "auto");
  const std::string bad_dtype = error(with_model_keys(base(), "dtype = \"fp16\"\n"));
  EXPECT_NE(bad_dtype.find("model.dtype"), std::string::npos) << bad_dtype;
  EXPECT_NE(bad_dtype.find("cfg.toml"), std::string::npos) << bad_dtype;
  // bf16 with the cpu backend parses (--backend cuda may still replace the backend); running it is refused by the
  // backend check, which names the config's [model] section.
  const rkv::RunPlan bf16_cpu = load(with_model_keys(base(), "dtype = \"bf16\"\n"));
  try {
    rkv::check_plan_backend(bf16_cpu, rkv::plan_backend_options(bf16_cpu));
    FAIL() << "bf16 on the cpu backend accepted";
  } catch (const rkv::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cfg.toml [model]: model.dtype = bf16: the cpu backend computes in f32 only"), std::string::npos) << m;
  }
  rkv::RunPlan overridden = bf16_cpu;
  overridden.backend_from_command_line = true;
  try {
    rkv::check_plan_backend(overridden, rkv::plan_backend_options(overridden));
    FAIL() << "bf16 on the cpu backend accepted";
  } catch (const rkv::InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--backend/--dtype: ", 0), 0u) << e.what();
  }
  const std::string tpu = error(with_model_keys(base(), "backend = \"tpu\"\n"));
  EXPECT_NE(tpu.find("model.backend"), std::string::npos) << tpu;
}

}  // namespace

namespace {

std::vector<std::string> labels_of(const rkv::RunPlan& p) {
  std::vector<std::string> out;
  for (const auto& c : p.cells) out.push_back(c.label);
  return out;
}

// Labels: every swept key whose values differ between cells appears in the label, a plugin's params inside
// its parentheses; keys with one value do not; labels are unique; the group is the label without the budget.
TEST_F(Config, LabelsNameEverySweptSettingThatDiffersAndAreUnique) {
  const rkv::RunPlan p = load(base("", "[sweep]\n\"allocator.plugin\" = [\"uniform\"]\n"
                                        "\"scorer.snapkv.window\" = [16, 32]\n\"budget.fraction\" = [0.1, 0.3]\n"));
  // Sweep keys in sorted order, the first varying fastest: budget.fraction before scorer.snapkv.window.
  EXPECT_EQ(labels_of(p), (std::vector<std::string>{"full cache", "uniform + snapkv(window=16) @ f=0.1",
                                                    "uniform + snapkv(window=16) @ f=0.3",
                                                    "uniform + snapkv(window=32) @ f=0.1",
                                                    "uniform + snapkv(window=32) @ f=0.3"}));
  EXPECT_EQ(p.cells[1].group, "uniform + snapkv(window=16)");
  EXPECT_EQ(p.cells[2].group, p.cells[1].group);  // one line across budgets
  EXPECT_EQ(p.cells[3].group, "uniform + snapkv(window=32)");
  EXPECT_EQ(p.cells[0].group, "full cache");
  // Params of the signal inside its parentheses (a key with one value, r, is not named); decode params through the
  // policy's description. Keys in sorted order: the decode sinks vary fastest.
  const rkv::RunPlan q = load(base("", "[sweep]\n\"signal.perturbation_kl.alpha\" = [0.01, 0.02]\n"
                                        "\"allocator.ripplekv.r\" = [1.5]\n\"compression.decode.policy\" = [\"rolling\"]\n"
                                        "\"compression.decode.sinks\" = [2, 4]\n"));
  EXPECT_EQ(q.cells[1].label, "ripplekv(perturbation_kl(alpha=0.01)) + snapkv @ f=0.2, decode rolling(sinks=2)");
  EXPECT_EQ(q.cells[4].label, "ripplekv(perturbation_kl(alpha=0.02)) + snapkv @ f=0.2, decode rolling(sinks=4)");
}

// A param only one `methods` table sets tells that method apart: it is named in its label (the methods that leave it
// at its base value name nothing). Regression: the three perturbation_kl methods of configs/signals.toml were all
// labelled "ripplekv(perturbation_kl) + snapkv @ f=0.1 []".
TEST_F(Config, AParamOnlyOneMethodSetsIsNamedInItsLabel) {
  const rkv::RunPlan p = load(base("", "[sweep]\nmethods = [{ \"signal.plugin\" = \"perturbation_kl\" },\n"
                                        "{ \"signal.perturbation_kl.draws\" = 8 },\n"
                                        "{ \"signal.perturbation_kl.alpha\" = 0.2 },\n"
                                        "{ \"signal.plugin\" = \"depth\" }]\n"));
  EXPECT_EQ(labels_of(p), (std::vector<std::string>{"full cache", "ripplekv(perturbation_kl) + snapkv @ f=0.2",
                                                    "ripplekv(perturbation_kl(draws=8)) + snapkv @ f=0.2",
                                                    "ripplekv(perturbation_kl(alpha=0.2)) + snapkv @ f=0.2",
                                                    "ripplekv(depth) + snapkv @ f=0.2"}));
}

TEST_F(Config, CellsThatWouldShareALabelGainTheSweptValuesThatSetThemApart) {
  // snapkv's window does not touch the h2o cells: without the fallback both h2o cells would read "uniform + h2o @
  // f=0.2" (one zig-zag line in the plot).
  const rkv::RunPlan p = load(base("", "[sweep]\n\"allocator.plugin\" = [\"uniform\"]\n"
                                        "\"scorer.plugin\" = [\"snapkv\", \"h2o\"]\n\"scorer.snapkv.window\" = [16, 32]\n"));
  const std::vector<std::string> labels = labels_of(p);
  EXPECT_EQ(std::set<std::string>(labels.begin(), labels.end()).size(), labels.size());
  EXPECT_EQ(labels[1], "uniform + snapkv(window=16) @ f=0.2");
  EXPECT_EQ(labels[2], "uniform + h2o @ f=0.2 [scorer.snapkv.window=16]");  // only what differs between the two
  EXPECT_EQ(labels[4], "uniform + h2o @ f=0.2 [scorer.snapkv.window=32]");
  EXPECT_NE(p.cells[2].group, p.cells[4].group);
}

}  // namespace

// ---- --set KEY=VALUE (runner/plan/config_overrides.hpp; issue 40) -------------------------------------------------

namespace {

rkv::RunPlan load_set(const fs::path& dir, const std::string& text, const std::vector<std::string>& sets) {
  return rkv::load_run_plan_from_string(text, "cfg.toml", dir.string(), sets);
}

std::string set_error(const fs::path& dir, const std::string& text, const std::vector<std::string>& sets) {
  try {
    load_set(dir, text, sets);
  } catch (const rkv::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_F(Config, SetOverridesKeysWithTomlValuesAndBareWordsAsStrings) {
  const rkv::RunPlan p = load_set(dir, base(), {"budget.fraction=0.35", "scorer.plugin=streamingllm",
                                                "model.threads = 3", "scorer.snapkv.window=32"});
  ASSERT_EQ(p.cells.size(), 2u);
  EXPECT_DOUBLE_EQ(*p.cells[1].config.budget_fraction, 0.35);
  EXPECT_EQ(p.cells[1].config.scorer->id, "org.ripplekv.scorer.streamingllm");
  EXPECT_EQ(p.threads, 3);
  // The recorded config is the effective one: loading it again gives the same plan identity.
  EXPECT_EQ(p.config_text.rfind("# the effective config: cfg.toml with --set budget.fraction=0.35", 0), 0u);
  const rkv::RunPlan again = load(p.config_text);
  EXPECT_EQ(again.base_sha256, p.base_sha256);
  EXPECT_EQ(again.run_id, p.run_id);
  EXPECT_NE(p.base_sha256, load(base()).base_sha256);
  // A later override of the same key wins; a quoted sweep key takes an array.
  const rkv::RunPlan q = load_set(dir, base(), {"budget.fraction=0.1", "budget.fraction=0.3",
                                                "sweep.\"budget.fraction\"=[0.1, 0.2]"});
  ASSERT_EQ(q.cells.size(), 3u);  // the full cache, then f = 0.1 and 0.2
  EXPECT_DOUBLE_EQ(*q.cells[1].config.budget_fraction, 0.1);
  EXPECT_DOUBLE_EQ(*q.cells[2].config.budget_fraction, 0.2);
  // Without overrides the file's own text is recorded.
  EXPECT_EQ(load_set(dir, base(), {}).config_text, base());
}

TEST_F(Config, SetErrorsNameTheKeyAndSayItCameFromSet) {
  std::string e = set_error(dir, base(), {"budget.fraction=\"half\""});
  EXPECT_NE(e.find("cfg.toml with --set: 'budget.fraction'"), std::string::npos) << e;
  e = set_error(dir, base(), {"budget.fractoin=0.3"});
  EXPECT_NE(e.find("'budget.fractoin' is not a known key"), std::string::npos) << e;
  EXPECT_NE(e.find("with --set"), std::string::npos) << e;
  e = set_error(dir, base(), {"budget.fraction"});
  EXPECT_NE(e.find("--set 'budget.fraction': expected KEY=VALUE"), std::string::npos) << e;
  e = set_error(dir, base(), {"budget.fraction=[0.1"});
  EXPECT_NE(e.find("--set 'budget.fraction=[0.1': not a TOML key and value"), std::string::npos) << e;
  e = set_error(dir, base(), {"budget.fraction.x=1"});
  EXPECT_NE(e.find("'budget.fraction' is a value in the config, not a table"), std::string::npos) << e;
  e = set_error(dir, base(), {"=1"});
  EXPECT_NE(e.find("the key is empty"), std::string::npos) << e;
  e = set_error(dir, base(), {"budget.fraction=1.5"});  // range-checked where it is read, like the file's values
  EXPECT_NE(e.find("'budget.fraction'"), std::string::npos) << e;
}

TEST(ConfigKeys, ChangedKeysNameWhatDiffersOutsideTheSweep) {
  const std::vector<std::string> d =
      rkv::changed_config_keys("[budget]\nfraction = 0.5\n[model]\nthreads = 1\n[sweep]\nx = [1]\n",
                               "[budget]\nfraction = 0.25\n[scorer]\nplugin = \"h2o\"\n[sweep]\nx = [2]\n");
  EXPECT_EQ(d, (std::vector<std::string>{"budget.fraction: 0.5 then, 0.25 now", "model.threads: 1 then, unset now",
                                         "scorer.plugin: unset then, 'h2o' now"}));
  EXPECT_TRUE(rkv::changed_config_keys("[a]\nb = 1\n", "[a]\nb = 1\n").empty());
  EXPECT_TRUE(rkv::changed_config_keys("not toml [", "[a]\nb = 1\n").empty());
}

// ---- [sweep] over the run-level keys model.path and data.eval.seed (runner/plan/run_axes.hpp; issue 40) -----------

TEST_F(Config, RunLevelSweepKeysMakeOneRunPerCombinationEachAnOrdinaryConfig) {
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other" / "model.gguf") << "another model";
  std::ofstream(dir / "m-2.gguf") << "a third";
  const rkv::RunPlan p = load(base("", "[sweep]\n\"budget.fraction\" = [0.1, 0.2]\n"
                                       "\"model.path\" = [\"model.gguf\", \"other/model.gguf\", \"m-2.gguf\"]\n"
                                       "\"data.eval.seed\" = [3, 5]\n"));
  ASSERT_EQ(p.runs.size(), 6u);  // 3 models x 2 seeds, the seed fastest (whatever [sweep]'s order)
  EXPECT_EQ(p.run_axis_keys, (std::vector<std::string>{"data.eval.seed", "model.path"}));
  // names: the file name without .gguf, then the seed; two paths of one file name each get 6 hex digits of a hash of
  // the path as written (so a reordered list keeps each model's folder)
  const std::string a = "model-" + rkv::hex16(rkv::fnv1a64(std::string("model.gguf"))).substr(0, 6);
  const std::string b = "model-" + rkv::hex16(rkv::fnv1a64(std::string("other/model.gguf"))).substr(0, 6);
  const std::vector<std::string> names = {a + "_seed-3", a + "_seed-5", b + "_seed-3",
                                          b + "_seed-5", "m-2_seed-3",  "m-2_seed-5"};
  for (size_t k = 0; k < names.size(); ++k) EXPECT_EQ(p.runs[k].name, names[k]) << k;
  EXPECT_EQ(p.runs[3].values, (nlohmann::json{{"model.path", "other/model.gguf"}, {"data.eval.seed", 5}}));
  // The plan itself is the first run's: its model, its seed, its cells (full cache + 2 budgets).
  EXPECT_EQ(p.model_path, (dir / "model.gguf").string());
  EXPECT_EQ(p.eval.seed, 3u);
  EXPECT_EQ(p.cells.size(), 3u);
  EXPECT_NE(p.config_text.find("\"model.path\" = [\"model.gguf\""), std::string::npos);  // the sweep's own text
  // Each run's config text is an ordinary config: its values set, no run-level sweep key, the other sweep kept.
  for (size_t k = 0; k < p.runs.size(); ++k) {
    const rkv::RunPlan r = rkv::load_run_plan_from_string(p.runs[k].config_text, "cfg.toml", p.base_dir);
    EXPECT_TRUE(r.runs.empty());
    EXPECT_EQ(r.eval.seed, k % 2 == 0 ? 3u : 5u) << k;
    EXPECT_EQ(r.model_path, (dir / (k < 2 ? "model.gguf" : k < 4 ? "other/model.gguf" : "m-2.gguf")).string());
    EXPECT_EQ(r.cells.size(), 3u);
    EXPECT_EQ(r.config_text.rfind("# run " + names[k] + " of the sweep in cfg.toml: ", 0), 0u) << r.config_text;
    EXPECT_EQ(r.config_text.find("model.path\" ="), std::string::npos);
  }
  // Runs of the same sweep differ in their base config (what --resume compares), so each is a run of its own.
  EXPECT_NE(rkv::load_run_plan_from_string(p.runs[0].config_text, "cfg.toml", p.base_dir).base_sha256,
            rkv::load_run_plan_from_string(p.runs[1].config_text, "cfg.toml", p.base_dir).base_sha256);
  // Only run-level keys swept: [sweep] is gone from each run's config; one value is one run.
  const rkv::RunPlan one = load(base("", "[sweep]\n\"data.eval.seed\" = [9]\n"));
  ASSERT_EQ(one.runs.size(), 1u);
  EXPECT_EQ(one.runs[0].name, "seed-9");
  EXPECT_EQ(one.runs[0].config_text.find("[sweep]"), std::string::npos);
  EXPECT_TRUE(load(base()).runs.empty());  // an ordinary config has no runs
  // The order of the list changes no name; a name never starts with '-' or '.', and a run of other characters (a
  // UTF-8 letter's bytes, spaces) is one '-'.
  const rkv::RunPlan rev = load(base("", "[sweep]\n\"model.path\" = [\"other/model.gguf\", \"model.gguf\"]\n"));
  ASSERT_EQ(rev.runs.size(), 2u);
  EXPECT_EQ(rev.runs[0].name, b);
  EXPECT_EQ(rev.runs[1].name, a);
  std::ofstream(dir / "-x \xc3\xa9t\xc3\xa9 y.gguf") << "a fourth";
  const rkv::RunPlan odd = load(base("", "[sweep]\n\"model.path\" = [\"-x \xc3\xa9t\xc3\xa9 y.gguf\"]\n"));
  EXPECT_EQ(odd.runs[0].name, "run-x-t-y");
}

TEST_F(Config, RunLevelSweepKeysAreCheckedNamingTheKeyAndTheRun) {
  auto err = [&](const std::string& sweep) { return error(base("", "[sweep]\n" + sweep)); };
  EXPECT_NE(err("\"data.eval.seed\" = []\n").find("'sweep.\"data.eval.seed\"' must be a non-empty array of seeds"),
            std::string::npos);
  EXPECT_NE(err("\"data.eval.seed\" = [1, 1]\n").find("'1' is listed twice"), std::string::npos);
  EXPECT_NE(err("\"data.eval.seed\" = [-1]\n").find("every value must be an integer seed"), std::string::npos);
  EXPECT_NE(err("\"data.eval.seed\" = [1.5]\n").find("every value must be an integer seed"), std::string::npos);
  EXPECT_NE(err("\"model.path\" = [\"\"]\n").find("every value must be a non-empty string"), std::string::npos);
  EXPECT_NE(err("\"model.path\" = 3\n").find("must be a non-empty array of model paths"), std::string::npos);
  // A path that is not there: the model.path error, naming the run.
  const std::string missing = err("\"model.path\" = [\"model.gguf\", \"gone.gguf\"]\n");
  EXPECT_NE(missing.find("'model.path': '" + (dir / "gone.gguf").string() + "' does not exist"), std::string::npos)
      << missing;
  EXPECT_NE(missing.find("(in run gone of the sweep: {\"model.path\":\"gone.gguf\"})"), std::string::npos) << missing;
  // Not inside a method, and no other run-level key.
  EXPECT_NE(err("methods = [{ \"model.path\" = \"model.gguf\" }]\n").find("is a run-level key: sweep it on its own"),
            std::string::npos);
  EXPECT_NE(err("\"data.eval.examples\" = [1, 2]\n").find("or are the run-level keys model.path and data.eval.seed"),
            std::string::npos);
  // Two spellings of one file would run one model twice.
  const std::string twice = err("\"model.path\" = [\"model.gguf\", \"./model.gguf\"]\n");
  EXPECT_NE(twice.find("names the file '" + (dir / "model.gguf").string() + "' twice ('model.gguf' and "
                       "'./model.gguf')"), std::string::npos) << twice;
  // The whole sweep (runs x cells) within [output] max_cells.
  const std::string big = error(base("[output]\nmax_cells = 5\n", "[sweep]\n\"budget.fraction\" = [0.1, 0.2]\n"
                                                                 "\"data.eval.seed\" = [1, 2]\n"));
  EXPECT_NE(big.find("[sweep] makes 2 runs of 3 cells, more than [output] max_cells = 5"), std::string::npos) << big;
}
