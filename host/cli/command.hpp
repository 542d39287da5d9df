// Subcommands of the `ripplekv` CLI. Each subcommand lives in its own file (host/cli/cmd_<name>.cpp) and registers
// itself with RKV_CLI_COMMAND; main.cpp only dispatches.
//
// Exit codes: 0 success, 2 usage or input errors (throw rkv::cli::UsageError or rkv::InputError),
// 1 internal errors (any other exception). Errors go to stderr as one line.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace rkv::cli {

/// Thrown for a bad command line or bad input; main prints "ripplekv <cmd>: <message>" and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One subcommand. `run` receives the arguments after the subcommand name and returns the exit code.
struct Command {
  const char* name;
  const char* summary;  ///< one line for `ripplekv help`
  int (*run)(const std::vector<std::string>& args);
};

/// Registers a subcommand (called from static initializers; not thread-safe, nor needs to be).
bool register_command(const Command& command);
/// All registered subcommands, sorted by name.
const std::vector<Command>& commands();

}  // namespace rkv::cli

#define RKV_CLI_CONCAT2(a, b) a##b
#define RKV_CLI_CONCAT(a, b) RKV_CLI_CONCAT2(a, b)
/// Register `fn` (int(const std::vector<std::string>&)) as subcommand `name`.
#define RKV_CLI_COMMAND(name, summary, fn) \
  static const bool RKV_CLI_CONCAT(rkv_cli_registered_, __LINE__) = ::rkv::cli::register_command({name, summary, fn})
