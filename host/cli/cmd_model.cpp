// `ripplekv model info MODEL [--sha256]`: what the loader makes of a model file or folder, from its headers alone
// (model/model.hpp describe_model; the text is model/model_info.hpp).
#include <boost/program_options.hpp>

#include <iostream>

#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "core/errors.hpp"
#include "model/model.hpp"
#include "model/model_info.hpp"

namespace po = boost::program_options;

namespace {

int run_model(const std::vector<std::string>& args) {
  const char* usage =
      "usage: ripplekv model info MODEL [--sha256]\n\n"
      "Reads the headers of MODEL (a GGUF file's metadata and tensor infos, or a Hugging Face folder's config.json\n"
      "and *.safetensors headers; no weights) and prints its architecture, sizes, rope settings, tensor types,\n"
      "parameter count and KV-cache bytes per token, after the checks a load makes (missing or misshapen tensors\n"
      "are errors). --sha256 also prints the SHA-256 that identifies the weights, which reads the whole file (a\n"
      "GGUF: the file's own sha256; a Hugging Face folder: the sha256 of its manifest, one \"<file> <sha256>\" line\n"
      "per file).\n";
  if (args.empty()) throw rkv::cli::UsageError("missing subcommand (expected 'info'); see 'ripplekv model --help'");
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << usage;
    return 0;
  }
  if (args[0] != "info") throw rkv::cli::UsageError("unknown subcommand '" + args[0] + "' (expected 'info')");
  std::string model;
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("model", po::value(&model), "GGUF file or HF model folder")(
      "sha256", "also hash the weights (reads every byte of the model)");
  po::positional_options_description pos;
  pos.add("model", 1);
  po::variables_map vm = rkv::cli::parse_command_line(std::vector<std::string>(args.begin() + 1, args.end()), opts, &pos, "");
  if (vm.count("help")) {
    std::cout << usage << "\n" << opts << "\n";
    return 0;
  }
  if (model.empty()) throw rkv::cli::UsageError("missing MODEL; see 'ripplekv model --help'");
  rkv::Model m = rkv::describe_model(model);  // headers only: no weights, no hash
  if (vm.count("sha256")) m.sha256 = rkv::model_sha256(model);
  rkv::print_model_info(m, std::cout);
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("model", "inspect a model (model info MODEL)", run_model);
