#include "runner/records/output_folder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"

namespace fs = std::filesystem;

namespace rkv {

OutputFolderLock::OutputFolderLock(const std::string& out) {
  std::error_code ec;
  fs::create_directories(fs::path(out), ec);
  if (ec) throw InputError("output folder '" + out + "': cannot be created: " + ec.message());
  const std::string path = (fs::path(out) / ".ripplekv.lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError("output folder '" + out + "': cannot open the lock file '" + path + "': " + std::strerror(errno));
  int rc;
  while ((rc = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    const int err = errno;
    std::string holder;
    char buf[32] = {};
    if (::pread(fd_, buf, sizeof buf - 1, 0) > 0) holder = buf;
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw InputError("output folder '" + out + "' is in use by another ripplekv process (pid " +
                       (holder.empty() ? std::string("unknown") : holder) + ", lock file '" + path +
                       "'); wait for it to finish or choose another --out folder");
    throw InputError("output folder '" + out + "': cannot lock '" + path + "': " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    ::close(fd_);
    fd_ = -1;
    throw InputError("output folder '" + out + "': cannot write the lock file '" + path + "'");
  }
}

OutputFolderLock::~OutputFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays (removing it would race with a new holder)
}

bool is_ripplekv_output_folder(const std::string& out) {
  std::error_code ec;
  const fs::path o(out);
  return fs::exists(o / "run.json", ec) || fs::is_directory(o / "cells", ec) || fs::is_directory(o / "partial", ec) ||
         fs::exists(o / "merge.json", ec);
}

void check_output_folder_is_ours(const std::string& out, bool force, const std::string& what) {
  std::error_code ec;
  if (force || !fs::is_directory(out, ec) || is_ripplekv_output_folder(out)) return;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    if (e.path().filename() == ".ripplekv.lock") continue;
    throw InputError(what + ": output folder '" + out + "' is not empty and holds no ripplekv run (no run.json, " +
                     "cells/ or merge.json; it has '" + e.path().filename().string() + "'); its files would be " +
                     "overwritten. Choose an empty or new folder, or pass --force");
  }
}

RunIdentity prepare_output_folder(const RunPlan& plan, const std::string& out, bool resume, bool force) {
  std::error_code ec;
  fs::create_directories(fs::path(out) / "cells", ec);
  if (ec) throw InputError("output folder '" + out + "': cannot be created: " + ec.message());
  if (::access(out.c_str(), W_OK) != 0) throw InputError("output folder '" + out + "' is not writable");
  RunIdentity id;
  id.run_id = plan.run_id;
  id.config_sha256 = plan.config_sha256;
  id.base_sha256 = plan.base_sha256;
  const fs::path run_json = fs::path(out) / "run.json";
  if (fs::exists(run_json)) {
    nlohmann::json old;
    try {
      old = nlohmann::json::parse(read_file(run_json.string()));
    } catch (const nlohmann::json::exception&) {
      old = nullptr;
    }
    // Finished cells, or examples an interrupted run finished (partial/, runner/records/checkpoint.hpp).
    const bool has_cells = !fs::is_empty(fs::path(out) / "cells", ec) ||
                           (fs::is_directory(fs::path(out) / "partial", ec) && !fs::is_empty(fs::path(out) / "partial", ec));
    if (resume) {
      // A hand-edited run.json may hold anything under base_sha256: anything but the same string is a change.
      const nlohmann::json* old_base = old.is_object() && old.contains("base_sha256") ? &old["base_sha256"] : nullptr;
      const std::string then = old_base ? (old_base->is_string() ? old_base->get<std::string>() : old_base->dump()) : "";
      if (old.is_object() && then != plan.base_sha256)
        throw InputError("--resume: the non-swept part of the config has changed since the run in '" + out +
                         "' (base config sha256 " + (old_base ? then.substr(0, 12) : std::string("?")) + " then, " +
                         plan.base_sha256.substr(0, 12) +
                         " now); results would not be comparable. Use another --out folder, or restore the config");
    } else if (has_cells && !force) {
      throw InputError("output folder '" + out + "' already holds a run; pass --resume to continue it, --force to " +
                       "start over (its finished cells are deleted), or choose another --out folder");
    }
  }
  return id;
}

void write_run_identity(const RunPlan& plan, const std::string& out, bool resume, int shard_index, int shard_count,
                        bool force) {
  std::error_code ec;
  if (force && !resume) {  // start over: no cell of an earlier run may reach this run's report or a later merge
    std::vector<fs::path> stale;
    for (const auto& e : fs::directory_iterator(fs::path(out) / "cells", ec))
      if (e.path().extension() == ".json") stale.push_back(e.path());
    for (const auto& e : fs::directory_iterator(fs::path(out) / "partial", ec))
      if (e.path().extension() == ".jsonl") stale.push_back(e.path());
    for (const auto& f : stale) fs::remove(f, ec);
  }
  nlohmann::json j;
  j["run_id"] = plan.run_id;
  j["config_sha256"] = plan.config_sha256;
  j["base_sha256"] = plan.base_sha256;
  j["config_path"] = plan.config_path;
  j["shard"] = std::to_string(shard_index) + "/" + std::to_string(shard_count);
  j["cells"] = nlohmann::json::array();
  for (const auto& c : plan.cells)
    j["cells"].push_back({{"id", c.id}, {"label", c.label}, {"group", c.group}, {"cell", c.values}});
  write_file_atomically((fs::path(out) / "run.json").string(), j.dump(2) + "\n");
  write_file_atomically((fs::path(out) / "config.toml").string(), plan.config_text);
}

}  // namespace rkv
