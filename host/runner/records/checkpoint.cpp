#include "runner/records/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <sstream>

#include "core/errors.hpp"

namespace rkv {

namespace {

nlohmann::json header_of(const std::string& cell_id, const CheckpointIdentity& id) {
  return {{"checkpoint", 1},           {"cell_id", cell_id},       {"base_sha256", id.base_sha256},
          {"model_sha256", id.model_sha256}, {"backend", id.backend}, {"compute_dtype", id.compute_dtype}};
}

/// Refuses a checkpoint of another run setting (as a resumed cell file is refused): rkv::InputError naming it.
void check_identity(const std::string& path, const nlohmann::json& h, const CheckpointIdentity& id) {
  const auto field = [&](const char* key) { return h.at(key).get<std::string>(); };
  if (field("base_sha256") != id.base_sha256)
    throw InputError("--resume: checkpoint '" + path + "' was computed with another non-swept config (base config " +
                     "sha256 " + field("base_sha256").substr(0, 12) + " then, " + id.base_sha256.substr(0, 12) +
                     " now); results would not be comparable. Use another --out folder, or restore the config");
  if (field("model_sha256") != id.model_sha256)
    throw InputError("--resume: checkpoint '" + path + "' was computed on model sha256 " + field("model_sha256") +
                     ", this run's model has " + id.model_sha256 + "; use another --out folder or the same model");
  if (field("backend") != id.backend || field("compute_dtype") != id.compute_dtype)
    throw InputError("--resume: checkpoint '" + path + "' was computed on backend " + field("backend") + " (" +
                     field("compute_dtype") + "); this run uses " + id.backend + " (" + id.compute_dtype + ")");
}

}  // namespace

std::string checkpoint_file(const std::string& cell_id) { return "partial/" + cell_id + ".jsonl"; }

std::string CellCheckpoint::Entry::line() const {
  return nlohmann::json({{"outcome", outcome.to_json()}, {"kept", kept}}).dump() + "\n";
}

CellCheckpoint::CellCheckpoint(const Folder& out, const std::string& cell_id, CheckpointIdentity identity,
                               bool resume)
    : out_(out), file_(checkpoint_file(cell_id)), path_(out.path_of(file_)) {
  if (resume && out_.kind(file_) != Folder::Kind::missing) {
    std::istringstream in(out_.read(file_, "checkpoint"));
    std::string line;
    try {
      if (!std::getline(in, line)) throw std::runtime_error("empty");
      const nlohmann::json h = nlohmann::json::parse(line);
      if (h.value("cell_id", std::string()) != cell_id) throw std::runtime_error("another cell's");
      check_identity(path_, h, identity);
      while (std::getline(in, line)) {
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception&) {
          if (in.peek() == EOF) break;  // the last line an interruption cut short
          throw;
        }
        entries_.push_back({ExampleOutcomeRecord::from_json(j.at("outcome")), j.at("kept").get<std::string>()});
      }
    } catch (const InputError&) {
      throw;
    } catch (const std::exception&) {
      std::cerr << "warning: checkpoint '" << path_ << "' is corrupt; the cell starts over\n";
      entries_.clear();
    }
  }
  std::string content = header_of(cell_id, identity).dump() + "\n";
  for (const Entry& e : entries_) content += e.line();
  out_.write_atomically(file_, content);  // creates partial/ (a real folder of this user's, never a link)
  fd_ = out_.open_append(file_);
}

CellCheckpoint::~CellCheckpoint() {
  if (fd_ >= 0) ::close(fd_);
}

const ExampleOutcomeRecord* CellCheckpoint::find(const std::string& task, int64_t index,
                                                 const std::string& ids_sha256) const {
  for (const Entry& e : entries_)
    if (e.outcome.task == task && e.outcome.example == index && e.outcome.input.ids_sha256 == ids_sha256)
      return &e.outcome;
  return nullptr;
}

void CellCheckpoint::write_line(const std::string& line) {
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw InputError("cannot write checkpoint '" + path_ + "': " + std::strerror(err) +
                       (err == EFBIG ? " (the file size limit, ulimit -f, was reached)" : ""));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd_) != 0) throw InputError("cannot write checkpoint '" + path_ + "': " + std::strerror(errno));
}

void CellCheckpoint::append(const ExampleOutcomeRecord& outcome, const std::string& kept_lines) {
  Entry e{outcome, kept_lines};
  write_line(e.line());
  entries_.push_back(std::move(e));
}

std::vector<ExampleOutcomeRecord> CellCheckpoint::outcomes() const {
  std::vector<ExampleOutcomeRecord> out;
  for (const Entry& e : entries_) out.push_back(e.outcome);
  return out;
}

std::string CellCheckpoint::kept_lines() const {
  std::string all;
  for (const Entry& e : entries_) all += e.kept;
  return all;
}

void CellCheckpoint::remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  try {
    out_.remove(file_);
  } catch (const InputError& e) {
    std::cerr << "warning: " << e.what() << "\n";
  }
}

}  // namespace rkv
