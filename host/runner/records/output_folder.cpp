#include "runner/records/output_folder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <optional>
#include <vector>

#include "core/errors.hpp"
#include "runner/plan/config_overrides.hpp"

namespace rkv {

OutputFolderLock::OutputFolderLock(const Folder& out) {
  const std::string path = out.path_of(".ripplekv.lock");
  // A link, FIFO or folder planted there is refused, never followed, and so is a hard link to a file elsewhere
  // (it would be truncated below).
  fd_ = out.open_or_create(".ripplekv.lock");
  struct stat st {};
  ::fstat(fd_, &st);
  out_ = out;
  dev_ = static_cast<uint64_t>(st.st_dev), ino_ = static_cast<uint64_t>(st.st_ino);
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
      throw InputError("output folder '" + out.path() + "' is in use by another ripplekv process (pid " +
                       (holder.empty() ? std::string("unknown") : holder) + ", lock file '" + path +
                       "'); wait for it to finish or choose another --out folder");
    throw InputError("output folder '" + out.path() + "': cannot lock '" + path + "': " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    ::close(fd_);
    fd_ = -1;
    throw InputError("output folder '" + out.path() + "': cannot write the lock file '" + path + "'");
  }
}

void OutputFolderLock::check_held() const {
  // The folder's path must still name the folder this process opened: one moved away (and maybe replaced by another
  // run's folder) would have the run's report assembled from someone else's cells at the path.
  struct stat here {}, opened {};
  if (out_ && (::stat(out_->path().c_str(), &here) != 0 || ::fstat(out_->fd(), &opened) != 0 ||
               here.st_dev != opened.st_dev || here.st_ino != opened.st_ino))
    throw InputError("output folder '" + out_->path() + "' was moved or replaced while this process wrote it; " +
                     "stopping before writing anything more (its finished cells are in the folder that was moved; " +
                     "continue there with --resume)");
  struct stat st {};
  if (fd_ >= 0 && out_ && ::fstatat(out_->fd(), ".ripplekv.lock", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      static_cast<uint64_t>(st.st_dev) == dev_ && static_cast<uint64_t>(st.st_ino) == ino_)
    return;
  throw InputError("output folder '" + (out_ ? out_->path() : std::string("?")) + "': its lock file '.ripplekv.lock' " +
                   "was removed or replaced while this process held it, so another process may be writing the folder; " +
                   "stopping before writing anything more (rerun with --resume once no other process writes it)");
}

OutputFolderLock::~OutputFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays (removing it would race with a new holder)
}

namespace {

bool is_hex(const nlohmann::json& v, size_t digits) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  return s.size() == digits && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

bool is_ripplekv_record(const std::string& record, const std::string& schema) {
  const nlohmann::json j = nlohmann::json::parse(record, nullptr, false);
  if (!j.is_object()) return false;
  if (j.contains("schema") && j["schema"] != schema) return false;
  if (schema == kRunSchema)
    return is_hex(j.value("run_id", nlohmann::json()), 16) && is_hex(j.value("config_sha256", nlohmann::json()), 64) &&
           is_hex(j.value("base_sha256", nlohmann::json()), 64) && j.contains("cells") && j["cells"].is_array();
  if (schema == kMergeSchema) {
    if (!j.contains("inputs") || !j["inputs"].is_array()) return false;
    for (const auto& i : j["inputs"])
      if (!i.is_string()) return false;
    return j.contains("schema") || j.size() == 1;  // before the schema key, merge.json held "inputs" alone
  }
  if (schema == kCompareSchema) {
    if (!j.contains("schema")) return false;
    for (const char* key : {"inputs", "names"}) {
      if (!j.contains(key) || !j[key].is_array()) return false;
      for (const auto& i : j[key])
        if (!i.is_string()) return false;
    }
    return true;
  }
  if (schema == kRunsSchema) {  // a sweep of runs: its runs' names and folders
    if (!j.contains("schema") || !j.contains("runs") || !j["runs"].is_array()) return false;
    for (const auto& r : j["runs"])
      if (!r.is_object() || !r.contains("name") || !r["name"].is_string() || !r.contains("folder") ||
          !r["folder"].is_string())
        return false;
    return true;
  }
  if (schema == kAnalysisSchema)
    return is_hex(j.value("model_sha256", nlohmann::json()), 64) && j.contains("fractions") &&
           j["fractions"].is_array() && j.contains("D") && j["D"].is_array();
  return false;
}

bool is_ripplekv_output_folder(const Folder& out) {
  for (const auto& [file, schema] : {std::pair{"run.json", kRunSchema}, std::pair{"merge.json", kMergeSchema},
                                     std::pair{"analysis.json", kAnalysisSchema},
                                     std::pair{"compare.json", kCompareSchema},
                                     std::pair{"runs.json", kRunsSchema}}) {
    if (out.kind(file) != Folder::Kind::regular) continue;
    try {
      if (is_ripplekv_record(out.read(file, "record", 64 << 20), schema)) return true;
    } catch (const InputError&) {
    }
  }
  return false;
}

Folder open_ripplekv_folder(const std::string& out, bool force, const std::string& what) {
  Folder folder = Folder::open(out, true);
  if (force || folder.empty_except({".ripplekv.lock"}) || is_ripplekv_output_folder(folder)) return folder;
  std::vector<std::string> names = folder.list_files();
  throw InputError(what + ": output folder '" + out + "' is not empty and holds no ripplekv run (no run.json, " +
                   "merge.json, analysis.json, compare.json or runs.json that is ripplekv's own record" +
                   (names.empty() ? std::string("") : "; it has '" + names.front() + "'") +
                   "); its files would be overwritten. Choose an empty or new folder, or pass --force");
}

RunIdentity prepare_output_folder(const RunPlan& plan, const Folder& out, bool resume, bool force) {
  const std::optional<Folder> cells = out.find_sub("cells");  // a real folder of this user's, never a link
  if (::faccessat(out.fd(), ".", W_OK, 0) != 0) throw InputError("output folder '" + out.path() + "' is not writable");
  RunIdentity id;
  id.run_id = plan.run_id;
  id.config_sha256 = plan.config_sha256;
  id.base_sha256 = plan.base_sha256;
  if (out.kind("run.json") != Folder::Kind::missing) {
    nlohmann::json old = nlohmann::json::parse(out.read("run.json", "run record", 64 << 20), nullptr, false);
    if (old.is_discarded()) old = nullptr;
    // Finished cells, or examples an interrupted run finished (partial/, runner/records/checkpoint.hpp).
    const std::optional<Folder> partial = out.find_sub("partial");
    const bool has_cells = (cells && !cells->empty_except({})) || (partial && !partial->empty_except({}));
    if (resume) {
      // A hand-edited run.json may hold anything under base_sha256: anything but the same string is a change.
      const nlohmann::json* old_base = old.is_object() && old.contains("base_sha256") ? &old["base_sha256"] : nullptr;
      const std::string then = old_base ? (old_base->is_string() ? old_base->get<std::string>() : old_base->dump()) : "";
      if (old.is_object() && then != plan.base_sha256) {
        // Name the keys that changed (the config.toml the run recorded against the effective config now).
        std::string keys;
        if (out.kind("config.toml") == Folder::Kind::regular)
          for (const std::string& k : changed_config_keys(out.read("config.toml", "recorded config", 64 << 20),
                                                          plan.config_text))
            keys += (keys.empty() ? "" : "; ") + k;
        throw InputError("--resume: the non-swept part of the config has changed since the run in '" + out.path() +
                         "' (" + (keys.empty() ? std::string("") : "changed: " + keys + "; ") + "base config sha256 " +
                         (old_base ? then.substr(0, 12) : std::string("?")) + " then, " +
                         plan.base_sha256.substr(0, 12) +
                         " now); results would not be comparable. Use another --out folder, or restore the config");
      }
    } else if (has_cells && !force) {
      throw InputError("output folder '" + out.path() + "' already holds a run; pass --resume to continue it, --force to " +
                       "start over (its finished cells are deleted), or choose another --out folder");
    }
  }
  return id;
}

void write_run_identity(const RunPlan& plan, const Folder& out, bool resume, int shard_index, int shard_count,
                        bool force) {
  // Start over (--force): no cell of an earlier run may reach this run's report or a later merge. Only in a folder
  // that held a run of ripplekv's (its run.json, read before it is replaced): --force into someone else's folder
  // writes there, but never deletes their files.
  bool held_run = false;
  if (force && !resume && out.kind("run.json") == Folder::Kind::regular) {
    try {
      held_run = is_ripplekv_record(out.read("run.json", "run record", 64 << 20), kRunSchema);
    } catch (const InputError&) {
    }
  }
  const Folder cells = out.sub("cells");  // created here, once the run starts: an empty cells/ is nobody's record
  if (held_run) {
    for (const std::string& f : cells.list_files(".json")) cells.remove(f);
    if (const std::optional<Folder> partial = out.find_sub("partial"))
      for (const std::string& f : partial->list_files(".jsonl")) partial->remove(f);
  }
  nlohmann::json j;
  j["schema"] = kRunSchema;
  j["run_id"] = plan.run_id;
  j["config_sha256"] = plan.config_sha256;
  j["base_sha256"] = plan.base_sha256;
  j["config_path"] = plan.config_path;
  j["shard"] = std::to_string(shard_index) + "/" + std::to_string(shard_count);
  j["cells"] = nlohmann::json::array();
  for (const auto& c : plan.cells)
    j["cells"].push_back({{"id", c.id}, {"label", c.label}, {"group", c.group}, {"cell", c.values}});
  out.write_atomically("run.json", j.dump(2) + "\n");
  out.write_atomically("config.toml", plan.config_text);
}

}  // namespace rkv
