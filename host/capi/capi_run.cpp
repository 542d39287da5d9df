// C API: sensitivity profile, ablation run with progress and cancellation, reading results (ripplekv.h).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "capi/capi_handles.hpp"
#include "core/regular_file.hpp"
#include "runner/plan/config.hpp"
#include "runner/profile/profile.hpp"
#include "runner/run/run.hpp"

using rkv::capi::guarded;
using rkv::capi::require;

namespace {

/// Polls the caller's cancel function every 20 ms on its own thread and on demand (poll_now), never from two threads
/// at once; sets `flag` once it returns nonzero. Stops and joins in the destructor.
class CancelWatcher {
 public:
  CancelWatcher(rkv_cancel_fn fn, void* user, std::atomic<bool>& flag) : fn_(fn), user_(user), flag_(flag) {
    if (fn_) thread_ = std::thread([this] { loop(); });
  }
  ~CancelWatcher() {
    {
      std::lock_guard<std::mutex> lk(stop_mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void poll_now() {
    if (!fn_) return;
    std::lock_guard<std::mutex> lk(call_mu_);
    if (fn_(user_) != 0) flag_.store(true);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(stop_mu_);
    while (!stop_ && !flag_.load()) {
      cv_.wait_for(lk, std::chrono::milliseconds(20), [this] { return stop_; });
      if (stop_) break;
      lk.unlock();
      poll_now();
      lk.lock();
    }
  }
  rkv_cancel_fn fn_;
  void* user_;
  std::atomic<bool>& flag_;
  std::mutex call_mu_, stop_mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

extern "C" {

rkv_status rkv_profile(rkv_context* ctx, const char* config_path, int32_t threads, char** out_json) {
  if (!ctx) return RKV_ERROR_INVALID_ARGUMENT;
  return guarded(ctx->last_error, [&] {
    require(config_path, "config_path");
    require(out_json, "out_json");
    if (threads < 0) throw rkv::InputError("threads must be >= 0");
    const rkv::RunPlan plan = rkv::load_run_plan(config_path);
    const rkv::CellConfig* cell = nullptr;
    for (const auto& c : plan.cells)
      if (c.config.signal) {
        cell = &c.config;
        break;
      }
    if (!cell) throw rkv::InputError(plan.config_path + " has no [signal] section");
    const rkv::Model model = rkv::load_model(plan.model_path, rkv::weights_for_backend(plan.backend, plan.weights));
    const rkv::Tokenizer tok =
        model.gguf ? rkv::Tokenizer::from_gguf(*model.gguf) : rkv::Tokenizer::from_path(plan.model_path);
    rkv::ProfileRequest req = rkv::make_profile_request(plan, *cell, model, tok, "");
    if (threads > 0) req.threads = threads;
    req.bootstrap_resamples = static_cast<int>(plan.bootstrap_resamples);
    *out_json = rkv::capi::copy_string(rkv::compute_profile(req).to_json().dump());
  });
}

rkv_status rkv_run(rkv_context* ctx, const rkv_run_options* o) {
  if (!ctx) return RKV_ERROR_INVALID_ARGUMENT;
  return guarded(ctx->last_error, [&] {
    require(o, "options");
    if (o->struct_size < sizeof(rkv_run_options))
      throw rkv::InputError("rkv_run_options.struct_size " + std::to_string(o->struct_size) + " is too small");
    if ((o->config_path != nullptr) == (o->config_text != nullptr))
      throw rkv::InputError("set exactly one of config_path and config_text");
    if (o->threads < 0) throw rkv::InputError("threads must be >= 0");
    const rkv::RunPlan plan =
        o->config_path ? rkv::load_run_plan(o->config_path)
                       : rkv::load_run_plan_from_string(o->config_text, "<config text>",
                                                        std::filesystem::current_path().string());
    std::atomic<bool> cancel{false};
    CancelWatcher watcher(o->cancel, o->user_data, cancel);
    watcher.poll_now();
    rkv::RunOptions ro;
    ro.out_dir = o->out_dir ? std::string(o->out_dir) : plan.output_dir;
    if (ro.out_dir.empty()) throw rkv::InputError("no output folder: set out_dir or [output] dir in the config");
    ro.resume = o->resume != 0;
    ro.quiet = true;
    ro.threads = o->threads;
    ro.cancel = &cancel;
    const rkv_progress_fn progress = o->progress;
    void* user = o->user_data;
    ro.progress = [&](int64_t done, int64_t total, const std::string& label) {
      if (progress) progress(done, total, label.c_str(), user);
      watcher.poll_now();
    };
    if (cancel.load()) throw rkv::Cancelled();
    rkv::run_ablation(plan, ro);
  });
}

namespace {

/// Appends the records of `folder`/results.jsonl to `all`, each with "run": `run` when it is not empty. The file must
/// be a regular file of at most 1 GiB (a FIFO, a device or a link to one is refused, never read).
void append_results(const std::filesystem::path& folder, const std::string& run, nlohmann::json& all) {
  const std::string path = (folder / "results.jsonl").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw rkv::InputError(path + ": cannot open (no finished run in this folder?)");
  std::istringstream in(rkv::read_regular_file(path, "results", uint64_t{1} << 30));
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      nlohmann::json record = nlohmann::json::parse(line);
      if (!run.empty() && record.is_object()) record["run"] = run;
      all.push_back(std::move(record));
    } catch (const nlohmann::json::exception& e) {
      throw rkv::InputError(path + ":" + std::to_string(n) + ": not a JSON record: " + e.what());
    }
  }
}

/// The runs a sweep folder's runs.json lists (name each), or empty when `out` holds no runs.json. Only names of
/// plain folders under runs/ are accepted (a runs.json cannot point the reader elsewhere).
std::vector<std::string> sweep_runs(const std::filesystem::path& out) {
  const std::filesystem::path path = out / "runs.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  const nlohmann::json j = nlohmann::json::parse(rkv::read_regular_file(path.string(), "sweep record", 64 << 20),
                                                 nullptr, false);
  auto text = [](const nlohmann::json& o, const char* key) {
    return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
  };
  if (text(j, "schema") != "ripplekv.runs/1" || !j.contains("runs") || !j["runs"].is_array() || j["runs"].empty())
    throw rkv::InputError(path.string() + ": not ripplekv's record of a sweep of runs (schema ripplekv.runs/1, a "
                          "non-empty runs array)");
  std::vector<std::string> names;
  for (const auto& r : j["runs"]) {
    const std::string name = text(r, "name");
    const std::filesystem::path folder = out / "runs" / name;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        text(r, "folder") != "runs/" + name || std::filesystem::is_symlink(folder, ec) ||
        std::filesystem::is_symlink(out / "runs", ec))
      throw rkv::InputError(path.string() + ": a run that is not a folder under runs/ (nor a link): " + r.dump());
    names.push_back(name);
  }
  return names;
}

}  // namespace

rkv_status rkv_results_json(rkv_context* ctx, const char* out_dir, char** out_json) {
  if (!ctx) return RKV_ERROR_INVALID_ARGUMENT;
  return guarded(ctx->last_error, [&] {
    require(out_dir, "out_dir");
    require(out_json, "out_json");
    const std::filesystem::path out(out_dir);
    nlohmann::json all = nlohmann::json::array();
    std::error_code ec;
    const std::vector<std::string> runs =
        std::filesystem::exists(out / "results.jsonl", ec) ? std::vector<std::string>{} : sweep_runs(out);
    if (runs.empty()) append_results(out, "", all);
    for (const std::string& name : runs) append_results(out / "runs" / name, name, all);
    *out_json = rkv::capi::copy_string(all.dump());
  });
}

}  // extern "C"
