// Test helper: renders chat templates with jinja2 (tests/tokenizer/render_chat_template.py run by the reference venv,
// <cache>/venv from scripts/fetch-assets), so the C++ chat templates are compared with the real Jinja output.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/assets.hpp"
#include "tokenizer/chat_template.hpp"

namespace rkv_test {

inline std::filesystem::path venv_python() { return asset_cache_dir() / "venv" / "bin" / "python"; }

struct ChatCase {
  std::vector<rkv::ChatMessage> messages;
  bool add_generation_prompt;
};

struct JinjaResult {
  bool error = false;
  std::string text;  ///< the rendering, or the error message
};

/// Renders every case with jinja2. Throws std::runtime_error when the script cannot run.
inline std::vector<JinjaResult> render_with_jinja(const std::string& tmpl, const std::string& bos,
                                                  const std::string& eos, const std::vector<ChatCase>& cases) {
  nlohmann::json req;
  req["template"] = tmpl;
  req["bos_token"] = bos;
  req["eos_token"] = eos;
  req["cases"] = nlohmann::json::array();
  for (const auto& c : cases) {
    nlohmann::json msgs = nlohmann::json::array();
    for (const auto& m : c.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
    req["cases"].push_back({{"messages", msgs}, {"add_generation_prompt", c.add_generation_prompt}});
  }
  static int counter = 0;
  const auto base = std::filesystem::temp_directory_path() /
                    ("rkv_jinja_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string in = base.string() + ".in.json", out = base.string() + ".out.json";
  std::ofstream(in) << req.dump();
  const std::string script = std::string(RKV_TEST_SOURCE_DIR) + "/tests/tokenizer/render_chat_template.py";
  const std::string cmd = "'" + venv_python().string() + "' '" + script + "' '" + in + "' '" + out + "'";
  const int rc = std::system(cmd.c_str());
  std::filesystem::remove(in);
  if (rc != 0) throw std::runtime_error("render_chat_template.py failed: " + cmd);
  std::ifstream f(out);
  const nlohmann::json res = nlohmann::json::parse(f);
  f.close();
  std::filesystem::remove(out);
  std::vector<JinjaResult> results;
  for (const auto& r : res) {
    JinjaResult jr;
    jr.error = r.contains("error");
    jr.text = jr.error ? r["error"].get<std::string>() : r["text"].get<std::string>();
    results.push_back(jr);
  }
  return results;
}

/// Conversations that exercise every rule of the families: system or not, alternation, whitespace to trim (ASCII and
/// Unicode), non-ASCII text, roles a family rejects, the empty conversation.
inline std::vector<ChatCase> chat_cases() {
  std::vector<std::vector<rkv::ChatMessage>> convs = {
      {{"user", "Hello"}},
      {{"system", "You are terse."}, {"user", "What is 2+2?"}},
      {{"user", "Hi"}, {"assistant", "  Hello there!  "}, {"user", "Tell me a joke.\n"}},
      {{"system", "  S  "}, {"user", "  padded  "}, {"assistant", "answer"}, {"user", "again"}},
      {{"user", "\xC3\x9Cn\xC3\xAF\x63\xC3\xB6\x64\xC3\xA9 \xF0\x9F\x98\x80\xE3\x80\x80"},  // "Ünïcödé 😀" + U+3000
       {"assistant", "\xC2\xA0ok\xE2\x80\x83\x1F"}},                                       // U+00A0 ok U+2003 U+001F
      {{"user", "one"}, {"user", "two"}},
      {{"assistant", "first"}},
      {{"system", "only a system message"}},
      {{"user", "q"}, {"assistant", "a"}, {"tool", "result"}},
      {},
  };
  std::vector<ChatCase> cases;
  for (const auto& c : convs)
    for (bool gen : {false, true}) cases.push_back({c, gen});
  return cases;
}

}  // namespace rkv_test
