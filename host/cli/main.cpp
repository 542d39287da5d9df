// The `ripplekv` command-line program: dispatches to the subcommands registered in host/cli/cmd_*.cpp.
#include <algorithm>
#include <csignal>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "core/errors.hpp"
#include "core/format.hpp"
#include "ripplekv/build_info.hpp"

namespace rkv::cli {

static std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}

bool register_command(const Command& command) {
  auto& r = registry();
  r.push_back(command);
  std::sort(r.begin(), r.end(), [](const Command& a, const Command& b) { return std::string(a.name) < b.name; });
  return true;
}

const std::vector<Command>& commands() { return registry(); }

static void print_help(std::ostream& os) {
  os << "ripplekv " << RIPPLEKV_VERSION_STRING << " - KV-cache compression research framework\n\n"
     << "usage: ripplekv <command> [options]   (ripplekv <command> --help for its options)\n\n"
     << "commands:\n";
  for (const auto& c : commands()) os << "  " << c.name << std::string(c.name[0] && std::string(c.name).size() < 12 ? 12 - std::string(c.name).size() : 1, ' ') << c.summary << "\n";
  os << "  help        show this help\n\noptions:\n  --version   print the version\n  --help      show this help\n";
}

}  // namespace rkv::cli

int main(int argc, char** argv) {
  using namespace rkv::cli;
  // Past the file size limit (ulimit -f) a write would kill the process by SIGXFSZ, with no message and a temporary
  // file left behind. Ignored, the write fails with EFBIG instead, which every writer handles as it handles a full
  // disk: a clear error naming the file, the temporary removed, finished cells kept (core/folder.hpp).
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_help(std::cerr);
    return 2;
  }
  const std::string name = args[0];
  if (name == "--version" || name == "version") {
    std::cout << "ripplekv " << RIPPLEKV_VERSION_STRING << "\n";
    return 0;
  }
  if (name == "help" || name == "--help" || name == "-h") {
    print_help(std::cout);
    return 0;
  }
  // "ripplekv <command>: <message>", without repeating the command when the library's message already starts with it
  // (the library names its entry point for callers of the C API and Python, e.g. "analyze: no [signal] ...").
  const auto message = [&name](const std::exception& e) {
    const std::string what = e.what();
    const bool named = what.rfind(name + ": ", 0) == 0 || what.rfind(name + " ", 0) == 0;
    return "ripplekv " + (named ? what : name + ": " + what);
  };
  for (const auto& c : commands()) {
    if (name != c.name) continue;
    try {
      return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
    } catch (const UsageError& e) {
      std::cerr << message(e) << "\n";
      return 2;
    } catch (const rkv::InputError& e) {
      std::cerr << rkv::printable_message(message(e)) << "\n";  // it may echo any bytes a user's file holds
      return 2;
    } catch (const std::exception& e) {
      std::cerr << "ripplekv " << name << ": internal error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "ripplekv: unknown command '" << name << "' (see 'ripplekv help')\n";
  return 2;
}
