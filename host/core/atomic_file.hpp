// Writing files so that nothing already written is lost: write a temporary file beside the target, flush it to
// disk, then rename it over the target (rename is atomic on POSIX file systems). A reader sees the old file or the
// new one, never a half-written one; an interrupted writer leaves at most a stray "*.tmp.*" file.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace rkv {

/// Atomically replaces `path` with `content`. Creates parent folders. Throws rkv::InputError naming the path when
/// the folder is not writable or the disk is full.
void write_file_atomically(const std::string& path, const std::string& content);

/// write_file_atomically of `json` written with an indent of 2 and a final newline (profiles, run records).
void write_json_atomically(const std::string& path, const nlohmann::json& json);

/// Reads a whole regular file; throws rkv::InputError naming the path when it cannot be read or is not a regular
/// file (a FIFO, a device such as /dev/zero, a folder: see core/regular_file.hpp).
std::string read_file(const std::string& path);

}  // namespace rkv
