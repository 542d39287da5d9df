// `ripplekv tokenize`: the printed ids equal the expected ids of llama.cpp's vocabulary vectors, and usage or input
// errors exit with code 2.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/assets.hpp"
#include "tokenizer/vector_files.hpp"

namespace {

namespace fs = std::filesystem;

struct CliResult {
  int exit_code;
  std::string out;
};

CliResult run_cli(const std::string& args) {
  const std::string cmd = std::string(RKV_TEST_BINARY_DIR) + "/bin/ripplekv tokenize " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "\n";
}

TEST(CmdTokenize, PrintsTheVectorIds) {
  const fs::path dir = rkv_test::tokenizer_vectors_dir();
  const fs::path text_file = fs::temp_directory_path() / ("rkv_cmd_tok_" + std::to_string(::getpid()) + ".txt");
  int checked = 0;
  for (const std::string vocab : {"gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2", "starcoder"}) {
    const std::string path = (dir / ("ggml-vocab-" + vocab + ".gguf")).string();
    RKV_REQUIRE_ASSET(path);
    const auto cases = rkv_test::read_vocab_cases(path);
    // The longest case (mixed scripts, emoji, code) and two whitespace-only ones.
    std::size_t longest = 0;
    for (std::size_t i = 0; i < cases.size(); ++i)
      if (cases[i].text.size() > cases[longest].text.size()) longest = i;
    for (std::size_t i : {longest, std::size_t{3}, std::size_t{7}}) {
      std::ofstream(text_file, std::ios::binary) << cases[i].text;
      const CliResult r = run_cli("--model '" + path + "' --text-file '" + text_file.string() + "'");
      EXPECT_EQ(r.exit_code, 0) << vocab;
      EXPECT_EQ(r.out, join(cases[i].ids)) << vocab << " case " << i;
      ++checked;
    }
  }
  fs::remove(text_file);
  EXPECT_EQ(checked, 18);
}

TEST(CmdTokenize, UsageAndInputErrorsExitWith2) {
  EXPECT_EQ(run_cli("--help").exit_code, 0);
  EXPECT_EQ(run_cli("").exit_code, 2);                                               // no --model
  EXPECT_EQ(run_cli("--model x.gguf").exit_code, 2);                                 // no --text-file
  EXPECT_EQ(run_cli("--model /nonexistent.gguf --text-file /nonexistent").exit_code, 2);
  EXPECT_EQ(run_cli("--bogus").exit_code, 2);
  const fs::path text_file = fs::temp_directory_path() / ("rkv_cmd_tok_e_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(text_file) << "hello";
  EXPECT_EQ(run_cli("--model /nonexistent.gguf --text-file '" + text_file.string() + "'").exit_code, 2);
  EXPECT_EQ(run_cli("--model '" + text_file.string() + "' --text-file '" + text_file.string() + "'").exit_code, 2);
  fs::remove(text_file);
}

}  // namespace
