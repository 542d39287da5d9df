// `ripplekv tokenize`: prints the token ids of a text file, the convention of llama.cpp's .inp/.out vocabulary vectors
// (no BOS, special-token texts treated as plain text unless --parse-special).
#include <boost/program_options.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace po = boost::program_options;

namespace {

int run_tokenize(const std::vector<std::string>& args) {
  std::string model, text_file;
  po::options_description opts(
      "usage: ripplekv tokenize --model MODEL --text-file FILE [--add-bos] [--parse-special]\n\n"
      "Prints the token ids of the whole content of FILE, space-separated on one line. MODEL is a GGUF file (only its\n"
      "metadata is read) or a Hugging Face model folder with tokenizer.json.\n\noptions");
  opts.add_options()("help,h", "show this help")("model", po::value(&model), "GGUF file or HF model folder")(
      "text-file", po::value(&text_file), "text to tokenize (read as raw bytes)")(
      "add-bos", po::bool_switch(), "prepend the BOS token")(
      "parse-special", po::bool_switch(), "recognize special-token texts such as <|im_start|> in the text");
  po::variables_map vm = rkv::cli::parse_command_line(args, opts, nullptr, "");
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (model.empty()) throw rkv::cli::UsageError("--model is required");
  if (text_file.empty()) throw rkv::cli::UsageError("--text-file is required");

  // A FIFO, a device such as /dev/zero or a folder is refused without blocking.
  const std::string text = rkv::read_regular_file(text_file, "--text-file");

  const rkv::Tokenizer tok = rkv::Tokenizer::from_path(model);
  const std::vector<int32_t> ids = tok.encode(text, vm["add-bos"].as<bool>(), vm["parse-special"].as<bool>());
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::cout << line << "\n";
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("tokenize", "print the token ids of a text file", run_tokenize);
