#include "core/atomic_file.hpp"

#include <filesystem>

#include "core/errors.hpp"
#include "core/folder.hpp"
#include "core/regular_file.hpp"

namespace rkv {

void write_file_atomically(const std::string& path, const std::string& content, bool replace_special) {
  const std::filesystem::path target(path);
  if (target.filename().empty()) throw InputError("cannot write '" + path + "': it names a folder, not a file");
  const std::string folder = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  Folder::open(folder, true, "folder", true).write_atomically(target.filename().string(), content, replace_special);
}

void write_json_atomically(const std::string& path, const nlohmann::json& json, bool replace_special) {
  write_file_atomically(path, json.dump(2) + "\n", replace_special);
}

std::string read_file(const std::string& path) { return read_regular_file(path, "file"); }

}  // namespace rkv
