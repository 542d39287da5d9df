// `ripplekv generate`: text generation on a backend (cpu by default; greedy by default).
#include <boost/program_options.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>

#include "backend/backend.hpp"
#include "cli/command.hpp"
#include "cli/command_line.hpp"
#include "runner/decode/generate_compressed.hpp"
#include "runner/decode/generate.hpp"
#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "model/model.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace po = boost::program_options;

namespace {

/// Length of the longest prefix of s that does not end inside a UTF-8 sequence.
size_t complete_utf8_prefix(const std::string& s) {
  size_t n = s.size();
  size_t back = 0;
  while (back < 4 && back < n && (static_cast<unsigned char>(s[n - 1 - back]) & 0xC0) == 0x80) ++back;
  if (back == n) return n;
  const unsigned char lead = static_cast<unsigned char>(s[n - 1 - back]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return need > back + 1 ? n - 1 - back : n;
}

/// `warnings` with repeats folded, in first-seen order: the same text once with "(N times)", and a per-layer text
/// ("layer L: ...", as the host's selection writes it) once for all layers that gave it ("layers 0-29: ...").
std::vector<std::string> fold_warnings(const std::vector<std::string>& warnings) {
  struct Group {
    std::string text;
    std::vector<long> layers;  ///< empty: not a per-layer warning
    int count = 0;
  };
  std::vector<Group> groups;
  for (const std::string& w : warnings) {
    std::string text = w;
    long layer = -1;
    if (w.rfind("layer ", 0) == 0) {  // "layer <digits>: rest"
      size_t i = 6;
      while (i < w.size() && std::isdigit(static_cast<unsigned char>(w[i]))) ++i;
      if (i > 6 && w.compare(i, 2, ": ") == 0) layer = std::stol(w.substr(6, i - 6)), text = w.substr(i + 2);
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return g.text == text && g.layers.empty() == (layer < 0); });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{text, {}, 0});
    ++it->count;
    if (layer >= 0) it->layers.push_back(layer);
  }
  std::vector<std::string> out;
  for (const Group& g : groups) {
    if (g.layers.empty()) {
      out.push_back(g.text + (g.count > 1 ? " (" + std::to_string(g.count) + " times)" : std::string()));
      continue;
    }
    std::vector<long> ls = g.layers;
    std::sort(ls.begin(), ls.end());
    ls.erase(std::unique(ls.begin(), ls.end()), ls.end());
    std::string ranges;  // "0-5, 7, 9-29"
    for (size_t i = 0; i < ls.size();) {
      size_t j = i;
      while (j + 1 < ls.size() && ls[j + 1] == ls[j] + 1) ++j;
      ranges += (ranges.empty() ? "" : ", ") + std::to_string(ls[i]) + (j > i ? "-" + std::to_string(ls[j]) : "");
      i = j + 1;
    }
    out.push_back((ls.size() > 1 ? "layers " : "layer ") + ranges + ": " + g.text);
  }
  return out;
}

/// generate --compress: prefill, compress as the config says, print budgets and bytes, decode greedily.
int print_compressed_generation(rkv::Backend& backend, const rkv::Tokenizer& tok, const std::vector<int32_t>& ids,
                                const std::string& config_path, const std::string& profile_path, int64_t max_new,
                                float temperature) {
  if (temperature > 0.0f) throw rkv::cli::UsageError("--compress decodes greedily; drop --temperature");
  const rkv::CompressedGeneration g = rkv::generate_compressed(backend, tok, ids, config_path, profile_path, max_new);
  std::cerr << "[" << backend.description() << "]\n";
  std::cerr << "[compressed " << g.prompt_tokens << " prompt positions with " << g.scorer << " + " << g.allocator
            << (g.heads.empty() ? "" : " / per head " + g.heads) << ": B = " << g.budget_total << ", KV bytes " << g.bytes_kept << " of " << g.bytes_full << " ("
            << 100.0 * static_cast<double>(g.bytes_kept) / static_cast<double>(g.bytes_full) << "%)]\n[budgets:";
  for (int64_t b : g.budgets) std::cerr << " " << b;
  std::cerr << "]\n[decode policy: " << g.decode << "]\n";
  if (!g.prompt_profile.empty()) {  // a per-prompt signal's s_l, what the allocator read
    std::cerr << "[profile of this prompt (" << g.signal << "):";
    for (double s : g.prompt_profile) std::cerr << " " << s;
    std::cerr << "]\n";
  }
  if (!g.head_budgets.empty()) {  // per model layer, the entries each KV head keeps
    std::cerr << "[per-head budgets:";
    for (const auto& row : g.head_budgets) {
      std::cerr << " [";
      for (size_t h = 0; h < row.size(); ++h) std::cerr << (h ? " " : "") << row[h];
      std::cerr << "]";
    }
    std::cerr << "]\n";
  }
  for (const std::string& w : fold_warnings(g.warnings)) std::cerr << "warning: " << w << "\n";
  std::cout << tok.decode(g.tokens, false) << std::endl;
  std::cerr << "[" << g.tokens.size() << " generated on the compressed cache, decode " << g.decode_tokens_per_second
            << " tok/s; KV bytes at the end " << g.bytes_end << "]\n";
  return 0;
}

int run_generate(const std::vector<std::string>& args) {
  std::string model_path, prompt, prompt_file, system, template_name, compress_path, profile_path, backend_kind = "cpu",
              dtype = "f32", weights = "quantized";
  int64_t max_new = 256;
  float temperature = 0.0f, top_p = 1.0f;
  uint64_t seed = 0;
  int threads = 0;
  po::options_description opts(
      "usage: ripplekv generate --model MODEL (--prompt TEXT | --prompt-file FILE) [--chat] [--max-new-tokens N]\n"
      "                         [--temperature X] [--top-p P] [--seed S] [--threads N] [--backend cpu|cuda|auto]\n"
      "                         [--dtype f32|bf16] [--weights quantized|f32] [--compress CONFIG [--profile FILE]]\n\n"
      "Generates a continuation of TEXT (the whole of FILE with --prompt-file, a regular file of at most 64 MiB, read\n"
      "as UTF-8 bytes; or, with --chat, the assistant's answer to TEXT as a user message, using the\n"
      "model's chat template) and prints it. Greedy unless --temperature > 0. Stops at any end-of-generation token of\n"
      "the model or after N tokens, or at the model's context length (a longer prompt is an error). Timing goes to\n"
      "stderr. --backend: cpu (f32, default), cuda (--dtype f32 or bf16), or auto (cuda when this build has it and a\n"
      "device is present); a backend that cannot be had is an error before the model is read.\n"
      "--weights (cpu): quantized (default) keeps a GGUF's Q8_0/Q4_0/Q4_1 matrices in their blocks and requantizes\n"
      "other quantized types and F16/BF16 matrices (GGUF or Hugging Face folder) to Q8_0 (fast decode); F32 matrices\n"
      "stay f32; f32 dequantizes every weight at load (exact, 4-8x the memory).\n"
      "With --compress, the prompt's cache is compressed after prefill by the cell CONFIG describes, through the\n"
      "cell sequence of every run cell (docs/ARCHITECTURE.md \"Data flow\"): [scorer] with any [[scorer.route]],\n"
      "[allocator], [budget] with fraction, tokens or bytes_fraction (the run config schema); [compression.share]\n"
      "drops shared layers' caches (docs/DECISIONS.md \"Depth-wise sharing\"); [compression.codec] stores the kept entries\n"
      "packed (docs/DECISIONS.md \"KV precision: codecs\"); [compression.decode] sets the decode policy: none, rolling, h2o or\n"
      "periodic (docs/DECISIONS.md \"Compression while decoding\"); [compression.joint] is a run setting (its plan needs damage\n"
      "measured on a run's calibration split), and so is [prefill] compress_between_chunks = true (the prompt is\n"
      "prefilled in one shot here). Other sections are ignored; the backend is --backend's. Decoding\n"
      "continues greedily on the compressed cache; the per-layer budgets and the KV bytes kept and at the end go to\n"
      "stderr.\n"
      "[compression] rerotate = true re-rotates the kept keys to positions 0 .. n - 1 after compaction and decodes\n"
      "from the cache length instead of the prompt length (kvpress KeyRerotationPress; default false).\n"
      "A cell that reads a sensitivity profile (an allocator such as ripplekv, codec layer_bits = \"profile\", share\n"
      "count = k) reads it from --profile FILE (a profile.json from `ripplekv profile` or a run), unless its [signal]\n"
      "is a per-prompt signal (cake, squeezeattention): that profile is computed on this prompt and --profile is not\n"
      "read.\n\noptions");
  opts.add_options()("help,h", "show this help")("model", po::value(&model_path), "GGUF file or HF model folder")(
      "prompt", po::value(&prompt), "prompt text")("prompt-file", po::value(&prompt_file), "read the prompt from a file")("chat", po::bool_switch(), "wrap the prompt in the chat template")(
      "system", po::value(&system), "system message (with --chat)")(
      "chat-template", po::value(&template_name), "template family to use instead of detecting it (chatml, llama3, llama2, mistral, gemma, phi3)")(
      "max-new-tokens", po::value(&max_new)->default_value(256), "maximum number of generated tokens")(
      "temperature", po::value(&temperature)->default_value(0.0f), "sampling temperature; 0 = greedy")(
      "top-p", po::value(&top_p)->default_value(1.0f), "nucleus sampling mass in (0, 1]")(
      "seed", po::value(&seed)->default_value(0), "random seed for sampling")(
      "threads", po::value(&threads)->default_value(0), "CPU threads (0 = all available cores)")(
      "backend", po::value(&backend_kind)->default_value("cpu"), "cpu, cuda or auto")(
      "dtype", po::value(&dtype)->default_value("f32"), "compute dtype: f32, or bf16 (cuda only)")(
      "weights", po::value(&weights)->default_value("quantized"), "cpu weights: quantized or f32")(
      "compress", po::value(&compress_path), "compression config TOML ([scorer], [allocator], [budget])")(
      "profile", po::value(&profile_path), "profile.json for a cell that reads a sensitivity profile");
  po::variables_map vm = rkv::cli::parse_command_line(args, opts, nullptr, "");
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (model_path.empty()) throw rkv::cli::UsageError("--model is required");
  if (vm.count("prompt") && vm.count("prompt-file"))
    throw rkv::cli::UsageError("--prompt and --prompt-file exclude each other (give the prompt once)");
  if (!vm.count("prompt") && !vm.count("prompt-file")) throw rkv::cli::UsageError("--prompt or --prompt-file is required");
  if (max_new < 0) throw rkv::cli::UsageError("--max-new-tokens must be >= 0");
  if (max_new > 1000000) throw rkv::cli::UsageError("--max-new-tokens must be at most 1000000");
  if (threads < 0) throw rkv::cli::UsageError("--threads must be >= 0");
  if (weights != "quantized" && weights != "f32") throw rkv::cli::UsageError("--weights must be quantized or f32");
  if (!(top_p > 0.0f && top_p <= 1.0f)) throw rkv::cli::UsageError("--top-p must be in (0, 1]");
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) throw rkv::cli::UsageError("--temperature must be >= 0");
  const bool chat = vm["chat"].as<bool>();
  if (!chat && (vm.count("system") || vm.count("chat-template"))) {
    throw rkv::cli::UsageError("--system and --chat-template need --chat");
  }
  if (vm.count("prompt-file")) prompt = rkv::read_regular_file(prompt_file, "--prompt-file", 64u << 20);
  rkv::BackendOptions backend_options;
  backend_options.threads = threads;
  backend_options.dtype = dtype;
  try {  // before the model is loaded; the message says where the setting came from, as run's does
    rkv::check_backend_available(backend_kind, backend_options);
  } catch (const rkv::InputError& e) {
    throw rkv::InputError(std::string("--backend/--dtype: ") + e.what());
  }

  const rkv::Model model = rkv::load_model(
      model_path, rkv::weights_for_backend(backend_kind, weights == "f32" ? rkv::WeightStorage::f32
                                                                          : rkv::WeightStorage::quantized));
  const rkv::Tokenizer tok = model.gguf ? rkv::Tokenizer::from_gguf(*model.gguf) : rkv::Tokenizer::from_path(model_path);
  if (tok.n_vocab() > model.config.vocab_size) {
    throw rkv::InputError(model_path + ": the tokenizer has " + std::to_string(tok.n_vocab()) +
                          " tokens but the model only " + std::to_string(model.config.vocab_size));
  }
  std::vector<int32_t> ids;
  if (chat) {
    const rkv::ChatTemplate tmpl = rkv::ChatTemplate::for_tokenizer(tok, template_name);
    std::vector<rkv::ChatMessage> messages;
    if (vm.count("system")) messages.push_back({"system", system});
    messages.push_back({"user", prompt});
    ids = tok.encode(tmpl.apply(messages, true), tok.add_bos_by_default(), true);
  } else {
    ids = tok.encode(prompt, tok.add_bos_by_default(), false);
  }
  if (ids.empty()) throw rkv::cli::UsageError("the prompt encodes to no tokens");
  // The model's trained context length bounds prompt + generation (when the model states one): a longer prompt is a
  // clear error (nothing is truncated silently), and generation stops at the context length with a note.
  const int64_t n_ctx = model.config.context_length, n_prompt = static_cast<int64_t>(ids.size());
  if (n_ctx > 0 && n_prompt > n_ctx)
    throw rkv::InputError("the prompt has " + std::to_string(n_prompt) + " tokens, more than the model's context length " +
                          std::to_string(n_ctx) + "; shorten it");
  if (n_ctx > 0 && n_prompt + max_new > n_ctx) {
    max_new = n_ctx - n_prompt;
    std::cerr << "[--max-new-tokens lowered to " << max_new << ": the prompt has " << n_prompt
              << " tokens and the model's context length is " << n_ctx << "]\n";
  }

  if (compress_path.empty() && !profile_path.empty()) throw rkv::cli::UsageError("--profile needs --compress");
  const std::unique_ptr<rkv::Backend> backend = rkv::make_backend(backend_kind, model, backend_options);
  if (!compress_path.empty())
    return print_compressed_generation(*backend, tok, ids, compress_path, profile_path, max_new, temperature);

  rkv::GenerateOptions g;
  g.max_new_tokens = max_new;
  g.sampling = {temperature, top_p, seed};
  g.stop_ids = tok.end_of_generation_ids();
  std::vector<int32_t> out;
  size_t printed = 0;
  const auto res = rkv::generate(*backend, ids, g, [&](int32_t id) {
    out.push_back(id);
    const std::string text = tok.decode(out, false);
    const size_t upto = complete_utf8_prefix(text);
    if (upto > printed) {
      std::cout << text.substr(printed, upto - printed) << std::flush;
      printed = upto;
    }
    return true;
  });
  const std::string text = tok.decode(out, false);
  if (text.size() > printed) std::cout << text.substr(printed);
  std::cout << std::endl;
  std::cerr << "[" << ids.size() << " prompt tokens, " << res.tokens.size() << " generated"
            << (res.stopped ? ", stopped at end-of-generation" : "") << "; prefill "
            << static_cast<double>(ids.size()) / std::max(res.prefill_seconds, 1e-9) << " tok/s, decode "
            << static_cast<double>(res.tokens.size()) / std::max(res.decode_seconds, 1e-9) << " tok/s, "
            << backend->description() << "]\n";
  return 0;
}

}  // namespace

RKV_CLI_COMMAND("generate", "generate text with a model (cpu or cuda backend)", run_generate);
