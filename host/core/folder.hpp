// A folder ripplekv writes into, opened once and used only through its descriptor, so that nothing planted inside it
// (a symbolic link, a FIFO, a folder where a file goes, a link where a subfolder goes) can make a write, a rename or a
// delete land outside it.
//
// Anyone who can write into an output folder (a shared runs/, a group-writable project folder) can plant names there
// between two of our calls. A path string is resolved again on every call, so "out/cells/x.json" may reach anywhere
// once "cells" is replaced by a link. A Folder resolves its own path once (the folder the user named: its last
// component must not be a link) and everything below it one component at a time with O_NOFOLLOW, relative to the
// descriptor: openat/mkdirat/renameat/unlinkat. Subfolders must be real folders owned by this process's user; files
// are written with a temporary of an unpredictable name created with O_EXCL, then renamed over the target, and a
// target that exists must be a regular file (a link, FIFO, device or folder there is refused, never written through).
//
// Paths below a Folder (`rel`) are relative, '/'-separated, without "." or ".." components or an empty component.
//
// Thread rules: a Folder is an immutable handle (copies share the descriptor, closed with the last copy); its
// operations may be called from several threads, but two writers of one name race as any two writers do (the run's
// folder lock, runner/records/output_folder.hpp, keeps one writer per output folder).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rkv {

class Folder {
 public:
  /// Opens the folder `path` names (creating it and its parents with mode 0755 when `create`). Its parents are
  /// resolved as the user wrote them (they may be links); the folder itself must be a folder and, unless
  /// `follow_link` (the folder of a file the user named, e.g. `profile --out x/y.json`), not a link.
  /// Throws rkv::InputError "<what> '<path>': <why>" when it is missing (and not `create`), a link, not a folder, or
  /// cannot be created or opened. `what` names the role in messages ("output folder").
  static Folder open(const std::string& path, bool create, const std::string& what = "output folder",
                     bool follow_link = false);

  /// The subfolder `rel` (one or more components), each component created (mode 0755) when missing and `create`.
  /// Each must be a real folder (not a link) owned by this process's effective user: rkv::InputError naming the path
  /// and what is there otherwise (or when missing and not `create`).
  Folder sub(const std::string& rel, bool create = true) const;
  /// sub(rel, false) when `rel` exists (as anything), std::nullopt when it does not.
  std::optional<Folder> find_sub(const std::string& rel) const;

  /// The path it was opened with (for messages), and `rel` below it.
  const std::string& path() const { return path_; }
  std::string path_of(const std::string& rel) const;
  /// Its descriptor (O_DIRECTORY, O_CLOEXEC); owned by the Folder: never close it.
  int fd() const { return *fd_; }

  /// What is at `rel`, not following a link at its last component (links in between are refused as by sub()).
  enum class Kind { missing, regular, directory, link, other };
  Kind kind(const std::string& rel) const;

  /// Replaces `rel` with `content` atomically: a temporary ".<name>.tmp.<16 random hex>" created beside it with
  /// O_CREAT|O_EXCL|O_NOFOLLOW (mode 0644), written, fsync'ed and renamed over it; parent folders created as by sub().
  /// An existing target that is not a regular file (a link, FIFO, device, folder) is rkv::InputError naming it, or,
  /// with `replace_special` (a user's --force), replaced by the rename (never written through; a folder still
  /// refuses). rkv::InputError naming the path when the disk is full or a file size limit is reached (the temporary
  /// is removed and the old file stays).
  void write_atomically(const std::string& rel, const std::string& content, bool replace_special = false) const;

  /// The whole content of the regular file `rel`, opened with O_NOFOLLOW|O_NONBLOCK (a link, FIFO or device is
  /// rkv::InputError naming it, as core/regular_file.hpp for paths). `what` names the role, `max_bytes` bounds it.
  std::string read(const std::string& rel, const std::string& what, uint64_t max_bytes = UINT64_MAX) const;

  /// Opens the existing regular file `rel` for appending (O_WRONLY|O_APPEND|O_NOFOLLOW|O_CLOEXEC); the caller owns
  /// and closes the descriptor. rkv::InputError naming it when it is missing, a link or not a regular file.
  int open_append(const std::string& rel) const;

  /// Opens (creating, mode 0644) the regular file `rel` read-write without following a link or blocking on a FIFO;
  /// the caller owns and closes the descriptor. rkv::InputError naming it when it is anything but a regular file.
  int open_or_create(const std::string& rel) const;

  /// The names of the regular files directly in this folder ending with `suffix` (all when empty), sorted; links and
  /// other kinds are left out.
  std::vector<std::string> list_files(const std::string& suffix = "") const;
  /// True when the folder holds nothing but the names in `except`.
  bool empty_except(const std::vector<std::string>& except) const;

  /// Removes the file (or link: the link itself, never its target) `rel`; a missing one is fine. rkv::InputError when
  /// it is a folder or cannot be removed.
  void remove(const std::string& rel) const;

 private:
  Folder(std::shared_ptr<const int> fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  /// The folder holding `rel`'s last component (this one, or a subfolder as by sub(parent, create)) and that name.
  std::pair<Folder, std::string> parent_of(const std::string& rel, bool create) const;

  std::shared_ptr<const int> fd_;
  std::string path_;
};

/// Splits `rel` at '/' into components; rkv::InputError naming `rel` for an absolute path, an empty component, "."
/// or "..".
std::vector<std::string> relative_components(const std::string& rel);

/// A temporary private folder (mkdtemp under $TMPDIR, else /tmp; mode 0700) removed with everything in it when
/// destroyed: where external programs such as gnuplot write, so that they never open a name in an output folder.
class PrivateTempFolder {
 public:
  /// rkv::InputError when it cannot be created.
  explicit PrivateTempFolder(const std::string& prefix = "ripplekv");
  ~PrivateTempFolder();
  PrivateTempFolder(const PrivateTempFolder&) = delete;
  PrivateTempFolder& operator=(const PrivateTempFolder&) = delete;
  const std::string& path() const { return path_; }
  const Folder& folder() const { return folder_; }

 private:
  std::string path_;
  Folder folder_;
};

}  // namespace rkv
