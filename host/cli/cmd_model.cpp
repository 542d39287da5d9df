// `ripplekv model info MODEL`: what the loader makes of a model file or folder.
#include <boost/program_options.hpp>

#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "core/errors.hpp"
#include "model/model.hpp"

namespace po = boost::program_options;

namespace {

std::string human_count(int64_t n) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  if (n >= 1000000000) {
    s << n / 1e9 << "B";
  } else if (n >= 1000000) {
    s << n / 1e6 << "M";
  } else {
    s << n;
  }
  return s.str();
}

void print_info(const rkv::Model& m, std::ostream& os) {
  const rkv::ModelConfig& c = m.config;
  os << "path:              " << m.path << "\n"
     << "format:            " << m.format << "\n"
     << "sha256:            " << m.sha256 << "\n"
     << "architecture:      " << c.architecture << "\n";
  if (m.gguf) {
    if (const auto* name = m.gguf->find("general.name"); name && name->type == rkv::GgufType::STRING) {
      os << "name:              " << name->str << "\n";
    }
  }
  os << "layers:            " << c.n_layers << "\n"
     << "hidden size:       " << c.d_model << "\n"
     << "heads:             " << c.n_heads << "\n"
     << "KV heads:          " << c.n_kv_heads << " (group size " << c.group_size() << ")\n"
     << "head dim:          " << c.head_dim << "\n"
     << "feed-forward size: " << c.d_ff << "\n"
     << "vocab size:        " << c.vocab_size << "\n"
     << "context length:    " << c.context_length << "\n"
     << "rope:              theta " << c.rope_theta << ", rotate_half (NeoX) pairs, scaling " << c.rope_scaling.type;
  if (c.rope_scaling.type == "linear") os << " (factor " << c.rope_scaling.factor << ")";
  if (c.rope_scaling.type == "llama3") {
    os << " (factor " << c.rope_scaling.factor << ", low " << c.rope_scaling.low_freq_factor << ", high "
       << c.rope_scaling.high_freq_factor << ", original context " << c.rope_scaling.original_context_length << ")";
  }
  if (c.rope_freq_factors) os << ", per-frequency factors from rope_freqs.weight";
  os << "\n"
     << "rms norm eps:      " << c.rms_eps << "\n"
     << "tied embeddings:   " << (c.tied_embeddings ? "yes" : "no") << "\n"
     << "qkv bias:          " << (c.qkv_bias ? "yes" : "no") << "\n";
  if (c.sliding_window > 0) os << "sliding window:    " << c.sliding_window << " (not applied: longer contexts are refused)\n";
  std::map<std::string, int> types;
  for (const auto& t : m.source_tensors) ++types[t.type];
  os << "tensor types:      ";
  bool first = true;
  for (const auto& [type, count] : types) {
    os << (first ? "" : ", ") << type << " x" << count;
    first = false;
  }
  os << " (" << m.source_tensors.size() << " tensors; computed in f32)\n"
     << "parameters:        " << m.parameter_count() << " (" << human_count(m.parameter_count()) << ")\n"
     << "KV bytes/token:    " << c.kv_bytes_per_token() << " (f32 keys and values, all layers)\n";
}

int run_model(const std::vector<std::string>& args) {
  const char* usage =
      "usage: ripplekv model info MODEL\n\n"
      "Loads MODEL (a GGUF file or a Hugging Face folder with config.json and *.safetensors) and prints its\n"
      "architecture, sizes, rope settings, tensor types, parameter count and KV-cache bytes per token.\n";
  if (args.empty()) throw rkv::cli::UsageError("missing subcommand (expected 'info'); see 'ripplekv model --help'");
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << usage;
    return 0;
  }
  if (args[0] != "info") throw rkv::cli::UsageError("unknown subcommand '" + args[0] + "' (expected 'info')");
  std::string model;
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")("model", po::value(&model), "GGUF file or HF model folder");
  po::positional_options_description pos;
  pos.add("model", 1);
  po::variables_map vm = rkv::cli::parse_command_line(std::vector<std::string>(args.begin() + 1, args.end()), opts, &pos, "");
  if (vm.count("help")) {
    std::cout << usage << "\n" << opts << "\n";
    return 0;
  }
  if (model.empty()) throw rkv::cli::UsageError("missing MODEL; see 'ripplekv model --help'");
  print_info(rkv::load_model(model), std::cout);
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("model", "inspect a model (model info MODEL)", run_model);
