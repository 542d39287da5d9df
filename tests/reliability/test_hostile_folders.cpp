// Issue 37, class 1 (a shared output folder must not be a weapon) and class 3 (the shared profile cache), tried as
// an attacker who can write into the folder would: every path a real run, merge, analyze and profile write is
// replaced by a symbolic link to a file outside the folder (and by a dangling one), every subfolder by a link to a
// folder outside, and the command runs again (fresh with --force, --resume, --force over a finished run). The file
// outside must stay byte-identical and nothing may appear outside; the command may refuse (exit 2 naming the file)
// or replace the link itself, never crash. Folders that merely hold ripplekv's file names are not ripplekv's.
// The CLI is started with argument vectors (core/subprocess.hpp), never through a shell.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/child_process.hpp"
#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/folder.hpp"
#include "core/subprocess.hpp"
#include "runner/records/output_folder.hpp"
#include "synthetic_run.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kCli = std::string(RKV_TEST_BINARY_DIR) + "/bin/ripplekv";
const std::string kVictim = "the victim's file: ripplekv must never change it\n";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Every path below `root` (files, links and folders), relative, sorted.
std::vector<std::string> tree(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it)
    out.push_back(fs::relative(it->path(), root).string());
  std::sort(out.begin(), out.end());
  return out;
}

class HostileFolders : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rkv-hostile-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    rkv_test::write_synthetic_run_folder(dir);
    ::setenv("RIPPLEKV_CACHE", (dir / "cache").c_str(), 1);  // the profile cache of this test alone
    std::ofstream(dir / "cfg.toml") << config();
    outside = dir / "outside";
  }
  void TearDown() override {
    fs::remove_all(dir);
    ::unsetenv("RIPPLEKV_CACHE");
  }

  /// Two cells of lm_fidelity on the synthetic model with a sensitivity profile (depth signal), so that a run writes
  /// every kind of file: run.json, config.toml, cells/, profile.json, profiles/, results, report, plots/.
  static std::string config() {
    return "[model]\npath = \"model.gguf\"\nthreads = 1\n"
           "[data.calibration]\nfiles = [\"cal.txt\"]\nexamples = 2\nprefix_tokens = 32\nwindow_tokens = 8\n"
           "[data.eval]\nfiles = [\"eval.txt\"]\nexamples = 2\nprefix_tokens = 32\n"
           "[signal]\nplugin = \"depth\"\n[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"ripplekv\"\n"
           "[budget]\nfraction = 0.5\n[tasks.lm_fidelity]\ncontinuation_tokens = 8\n"
           "[output]\nbootstrap_resamples = 100\n";
  }

  /// Runs the CLI in `dir` (at most 120 s); returns its exit status and its output.
  std::pair<int, std::string> cli(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {kCli};
    argv.insert(argv.end(), args.begin(), args.end());
    const fs::path log = dir / "cli.log";
    const pid_t pid = rkv::start_program(argv, dir.string(), log.string());
    if (pid < 0) return {-1, "cannot start " + kCli};
    const int rc = rkv_test::finish(pid, 120);
    return {rc, rkv::read_file(log.string())};
  }

  /// A fresh folder outside every output folder holding one file, the victim.
  void reset_outside() const {
    fs::remove_all(outside);
    fs::create_directories(outside);
    std::ofstream(outside / "victim") << kVictim;
  }
  /// The outside folder holds the victim alone, unchanged, and `dangling` (a path a dangling link named) was not
  /// created. `what` says which try this was.
  void expect_outside_untouched(const std::string& what, const std::string& log) const {
    EXPECT_EQ(rkv::read_file((outside / "victim").string()), kVictim) << what << "\n" << log;
    EXPECT_EQ(tree(outside), std::vector<std::string>{"victim"}) << what << "\n" << log;
  }
  /// Replaces `rel` below `out` with a link to `target` (creating its parent folders).
  static void plant_link(const fs::path& out, const std::string& rel, const fs::path& target) {
    std::error_code ec;
    fs::remove_all(out / rel, ec);
    fs::create_directories((out / rel).parent_path());
    fs::create_symlink(target, out / rel);
  }
  static void copy_folder(const fs::path& from, const fs::path& to) {
    fs::remove_all(to);
    fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }

  fs::path dir, outside;
};

/// A command exited normally (0) or refused (2), never crashed or hung.
void expect_clean_exit(int rc, const std::string& what, const std::string& log) {
  EXPECT_TRUE(rc == 0 || rc == 2) << what << ": exit " << rc << "\n" << log;
}

// Every file and folder a finished run (with --dump kept,logits) holds, and the checkpoints a running one holds,
// replaced by links outside, for a fresh run (--force), a resumed one and a restarted one (--force).
TEST_F(HostileFolders, NoLinkPlantedInARunFolderChangesAnythingOutsideIt) {
  auto [rc, log] = cli({"run", "cfg.toml", "--out", "ref", "--quiet", "--dump", "kept,logits"});
  ASSERT_EQ(rc, 0) << log;
  std::vector<std::string> paths = tree(dir / "ref");
  for (const std::string& p : tree(dir / "ref" / "cells"))  // checkpoints exist only while a cell runs
    paths.push_back("partial/" + fs::path(p).stem().string() + ".jsonl");
  paths.push_back("partial");
  ASSERT_GE(paths.size(), 20u) << "expected run.json, config.toml, cells, plots, dumps, profiles, ...";
  for (const char* must : {"run.json", "config.toml", "report.md", "results.jsonl", "profile.json", "plots",
                           "dumps", ".ripplekv.lock"})
    ASSERT_NE(std::find(paths.begin(), paths.end(), must), paths.end()) << must;
  for (const std::string& rel : paths) {
    const bool folder = fs::is_directory(dir / "ref" / rel) || rel == "partial";
    for (const char* mode : {"fresh --force", "--resume", "--force over a run"}) {
      for (const bool dangling : {false, true}) {
        if (dangling && std::string(mode) == "--force over a run") continue;  // the same writes as --resume's
        reset_outside();
        const fs::path out = dir / "out";
        if (std::string(mode) == "fresh --force") {
          fs::remove_all(out);
          fs::create_directories(out);
        } else {
          copy_folder(dir / "ref", out);
        }
        const fs::path target = dangling ? outside / "created" : folder ? outside : outside / "victim";
        plant_link(out, rel, target);
        std::vector<std::string> args = {"run", "cfg.toml", "--out", "out", "--quiet", "--dump", "kept,logits"};
        args.push_back(std::string(mode) == "--resume" ? "--resume" : "--force");
        const std::string what = "link at '" + rel + "' -> " + target.string() + ", " + mode;
        std::tie(rc, log) = cli(args);
        expect_clean_exit(rc, what, log);
        expect_outside_untouched(what, log);
        if (rc == 2) EXPECT_TRUE(contains(log, rel.substr(0, rel.find('/'))) || contains(log, "link")) << what << log;
      }
    }
  }
}

// merge and analyze write into folders of their own; the same links planted in each of their paths.
TEST_F(HostileFolders, NoLinkPlantedInAMergeOrAnalysisFolderChangesAnythingOutsideIt) {
  auto [rc, log] = cli({"run", "cfg.toml", "--out", "ref", "--quiet"});
  ASSERT_EQ(rc, 0) << log;
  std::tie(rc, log) = cli({"merge", "ref", "--out", "merged", "--quiet"});
  ASSERT_EQ(rc, 0) << log;
  std::tie(rc, log) = cli({"analyze", "cfg.toml", "--out", "analysis", "--quiet", "--fractions", "0.5"});
  ASSERT_EQ(rc, 0) << log;
  ASSERT_TRUE(fs::exists(dir / "analysis" / "analysis.md"));
  {  // every profile the analysis read has its provenance, the oracle's (damage) included
    const auto a = nlohmann::json::parse(rkv::read_file((dir / "analysis" / "analysis.json").string()));
    std::set<std::string> signals;
    for (const auto& p : a.at("profiles")) {
      signals.insert(p.at("signal").get<std::string>());
      const std::string from = p.at("source").at("from");
      EXPECT_TRUE(from == "computed" || from == "cache") << p.dump();
      EXPECT_EQ(p["source"]["sha256"].get<std::string>().size(), 64u) << p.dump();
    }
    EXPECT_TRUE(signals.count("org.ripplekv.signal.depth")) << a["profiles"].dump();
    EXPECT_TRUE(signals.count("org.ripplekv.signal.damage")) << a["profiles"].dump();
  }
  for (const auto& [folder, args] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"merged", {"merge", "ref", "--out", "out", "--quiet"}},
           {"analysis", {"analyze", "cfg.toml", "--out", "out", "--quiet", "--fractions", "0.5"}}}) {
    for (const std::string& rel : tree(dir / folder)) {
      for (const bool dangling : {false, true}) {
        reset_outside();
        copy_folder(dir / folder, dir / "out");
        const bool is_dir = fs::is_directory(dir / folder / rel);
        const fs::path target = dangling ? outside / "created" : is_dir ? outside : outside / "victim";
        plant_link(dir / "out", rel, target);
        const std::string what = args[0] + ": link at '" + rel + "' -> " + target.string();
        std::tie(rc, log) = cli(args);
        expect_clean_exit(rc, what, log);
        expect_outside_untouched(what, log);
      }
    }
  }
}

// The output folder itself given as a link: refused (the user names the folder, not a link to it), nothing written.
TEST_F(HostileFolders, AnOutputFolderThatIsALinkIsRefused) {
  auto [ref_rc, ref_log] = cli({"run", "cfg.toml", "--out", "ref", "--quiet"});  // something to merge
  ASSERT_EQ(ref_rc, 0) << ref_log;
  reset_outside();
  fs::create_symlink(outside, dir / "out");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "cfg.toml", "--out", "out", "--quiet"},
        std::vector<std::string>{"run", "cfg.toml", "--out", "out", "--quiet", "--force"},
        std::vector<std::string>{"run", "cfg.toml", "--out", "out/.", "--quiet", "--force"},  // "LINK/." too
        std::vector<std::string>{"run", "cfg.toml", "--out", "out/./", "--quiet", "--force"},
        std::vector<std::string>{"merge", "ref", "--out", "out/.", "--quiet", "--force"},
        std::vector<std::string>{"analyze", "cfg.toml", "--out", "out", "--quiet", "--fractions", "0.5", "--force"}}) {
    auto [rc, log] = cli(args);
    EXPECT_EQ(rc, 2) << log;
    EXPECT_TRUE(contains(log, "output folder '" + args[3] + "' is a symbolic link, not a folder")) << log;
    expect_outside_untouched(args[0], log);
  }
}

// A folder counts as ripplekv's only when its run.json / merge.json / analysis.json parses as ripplekv's own record:
// file names alone (someone's run.json, an empty cells/) do not make it one.
TEST_F(HostileFolders, FoldersHoldingRipplekvsFileNamesAreNotRipplekvsFolders) {
  const fs::path theirs = dir / "theirs";
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"run.json", "{\"name\": \"my project\", \"cells\": []}\n"},
           {"merge.json", "{\"inputs\": [\"a\"], \"owner\": \"me\"}\n"},
           {"analysis.json", "[1, 2, 3]\n"},
           {"cells", ""}}) {
    fs::remove_all(theirs);
    fs::create_directories(theirs);
    if (name == "cells") fs::create_directories(theirs / "cells");
    else std::ofstream(theirs / name) << text;
    std::ofstream(theirs / "report.md") << "their report\n";
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"run", "cfg.toml", "--out", "theirs", "--quiet"},
          std::vector<std::string>{"analyze", "cfg.toml", "--out", "theirs", "--quiet", "--fractions", "0.5"}}) {
      auto [rc, log] = cli(args);
      EXPECT_EQ(rc, 2) << name << ": " << log;
      EXPECT_TRUE(contains(log, "holds no ripplekv run")) << name << ": " << log;
      EXPECT_EQ(rkv::read_file((theirs / "report.md").string()), "their report\n") << name;
      if (name != "cells") EXPECT_EQ(rkv::read_file((theirs / name).string()), text) << name;
    }
  }
  // --force writes into someone else's folder but deletes nothing of theirs (only a run's own cells start over).
  fs::remove_all(theirs);
  fs::create_directories(theirs / "cells");
  fs::create_directories(theirs / "partial");
  std::ofstream(theirs / "cells" / "important.json") << "{\"mine\": 1}\n";
  std::ofstream(theirs / "partial" / "notes.jsonl") << "{}\n";
  {
    auto [rc, log] = cli({"run", "cfg.toml", "--out", "theirs", "--quiet", "--force"});
    EXPECT_EQ(rc, 0) << log;
    EXPECT_EQ(rkv::read_file((theirs / "cells" / "important.json").string()), "{\"mine\": 1}\n");
    EXPECT_EQ(rkv::read_file((theirs / "partial" / "notes.jsonl").string()), "{}\n");
  }
  // ripplekv's own records are recognised: a finished run resumes, an analysis folder takes a new analysis.
  auto [rc, log] = cli({"run", "cfg.toml", "--out", "ref", "--quiet"});
  ASSERT_EQ(rc, 0) << log;
  std::tie(rc, log) = cli({"run", "cfg.toml", "--out", "ref", "--quiet", "--resume"});
  EXPECT_EQ(rc, 0) << log;
  EXPECT_EQ(nlohmann::json::parse(rkv::read_file((dir / "ref" / "run.json").string())).at("schema"), "ripplekv.run/1");
}

// `profile --out`: a link, a FIFO or a file that is not a profile is refused unless --force, and --force replaces
// the link itself (the file it pointed to stays as it was).
TEST_F(HostileFolders, ProfileOutRefusesLinksSpecialFilesAndForeignFilesUnlessForced) {
  reset_outside();
  fs::create_symlink(outside / "victim", dir / "link.json");
  auto [rc, log] = cli({"profile", "cfg.toml", "--out", "link.json"});
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "link.json")) << log;
  expect_outside_untouched("profile --out link", log);
  std::ofstream(dir / "notes.json") << "{\"mine\": true}\n";
  std::tie(rc, log) = cli({"profile", "cfg.toml", "--out", "notes.json"});
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "is not a ripplekv profile")) << log;
  EXPECT_EQ(rkv::read_file((dir / "notes.json").string()), "{\"mine\": true}\n");
  ASSERT_EQ(::mkfifo((dir / "pipe.json").c_str(), 0600), 0);
  std::tie(rc, log) = cli({"profile", "cfg.toml", "--out", "pipe.json"});  // would block a writer forever
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "FIFO")) << log;
  std::tie(rc, log) = cli({"profile", "cfg.toml", "--out", "link.json", "--force"});
  EXPECT_EQ(rc, 0) << log;
  expect_outside_untouched("profile --out link --force", log);
  EXPECT_FALSE(fs::is_symlink(dir / "link.json"));
  EXPECT_TRUE(nlohmann::json::parse(rkv::read_file((dir / "link.json").string())).contains("cache_key"));
  std::tie(rc, log) = cli({"profile", "cfg.toml", "--out", "link.json"});  // a profile of ripplekv's is replaced
  EXPECT_EQ(rc, 0) << log;
}

// Class 3: a FIFO at the cache path does not block the run; a cache folder or file of another user's, or writable by
// others, is not used (the profile is computed); the run says why on stderr and records where its profile came from.
TEST_F(HostileFolders, TheProfileCacheCannotHangOrSilentlySteerARun) {
  auto [rc, log] = cli({"profile", "cfg.toml", "--out", "p.json"});
  ASSERT_EQ(rc, 0) << log;
  const std::string key = nlohmann::json::parse(rkv::read_file((dir / "p.json").string())).at("cache_key");
  const fs::path cached = dir / "cache" / "profiles" / (key + ".json");
  ASSERT_TRUE(fs::is_regular_file(cached)) << cached;
  // A planted profile with the right key and other values, in a cache file other users can write: not used.
  nlohmann::json planted = nlohmann::json::parse(rkv::read_file(cached.string()));
  for (auto& v : planted["s"]) v = 1e6;
  std::ofstream(cached, std::ios::trunc) << planted.dump(2) << "\n";
  fs::permissions(cached, fs::perms::others_write, fs::perm_options::add);
  std::tie(rc, log) = cli({"run", "cfg.toml", "--out", "a"});
  ASSERT_EQ(rc, 0) << log;
  EXPECT_TRUE(contains(log, "run: warning: ignoring the profile cache file '" + cached.string() + "'")) << log;
  EXPECT_TRUE(contains(log, "other users can write it")) << log;
  const auto profile = nlohmann::json::parse(rkv::read_file((dir / "a" / "profile.json").string()));
  EXPECT_LT(profile.at("s")[0].get<double>(), 1e6);
  // The cell records where its profile came from.
  const fs::path cell = dir / "a" / "cells" / rkv::Folder::open((dir / "a" / "cells").string(), false).list_files()[0];
  const auto manifest = nlohmann::json::parse(rkv::read_file(cell.string())).at("manifest");
  ASSERT_TRUE(manifest.contains("profiles")) << manifest.dump();
  EXPECT_EQ(manifest["profiles"][0]["source"]["from"], "computed");
  // A FIFO at the cache path: skipped at once (never opened for reading, which would block).
  fs::remove(cached);
  ASSERT_EQ(::mkfifo(cached.c_str(), 0600), 0);
  std::tie(rc, log) = cli({"run", "cfg.toml", "--out", "b"});
  ASSERT_EQ(rc, 0) << log;  // a hang would be killed by cli() after 120 s and read as -2
  EXPECT_TRUE(contains(log, "not a regular file")) << log;
  // A cache folder writable by others: neither read nor written.
  fs::remove(cached);
  fs::permissions(dir / "cache" / "profiles", fs::perms::others_write, fs::perm_options::add);
  std::tie(rc, log) = cli({"run", "cfg.toml", "--out", "c"});
  ASSERT_EQ(rc, 0) << log;
  EXPECT_TRUE(contains(log, "not using the profile cache folder")) << log;
  EXPECT_FALSE(fs::exists(cached));
  // A trusted cache is used, and the cell names the file and its content's sha256.
  fs::permissions(dir / "cache" / "profiles", fs::perms::others_write, fs::perm_options::remove);
  std::tie(rc, log) = cli({"run", "cfg.toml", "--out", "d"});
  ASSERT_EQ(rc, 0) << log;
  std::tie(rc, log) = cli({"run", "cfg.toml", "--out", "e"});
  ASSERT_EQ(rc, 0) << log;
  const fs::path cell_e = dir / "e" / "cells" / rkv::Folder::open((dir / "e" / "cells").string(), false).list_files()[0];
  const auto source = nlohmann::json::parse(rkv::read_file(cell_e.string())).at("manifest")["profiles"][0]["source"];
  EXPECT_EQ(source["from"], "cache");
  EXPECT_EQ(source["path"], cached.string());
  EXPECT_EQ(source["sha256"].get<std::string>().size(), 64u);
}

// Class 5: past the file size limit a write fails with a clear error naming the file (EFBIG, not SIGXFSZ), no
// temporary is left, and what was written before stays.
TEST_F(HostileFolders, TheFileSizeLimitIsAnErrorNamingTheFileNotASignal) {
  const rkv::Folder out = rkv::Folder::open((dir / "small").string(), true);
  out.write_atomically("kept.txt", "finished\n");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child lowers its limit to 4 KiB and writes 64 KiB, as the CLI does (SIGXFSZ ignored)
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      out.write_atomically("big.txt", std::string(65536, 'x'));
    } catch (const rkv::InputError& e) {
      ::_exit(contains(e.what(), "big.txt") && contains(e.what(), "file size limit") ? 2 : 3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_EQ(tree(dir / "small"), std::vector<std::string>{"kept.txt"});  // no temporary left, the old file kept
  EXPECT_EQ(rkv::read_file((dir / "small" / "kept.txt").string()), "finished\n");
}

// Hard links are not symbolic links: a lock file or checkpoint that is a hard link to a file elsewhere would be
// written in place (the lock is truncated and gets the pid). Refused; files replaced by a rename are safe anyway.
TEST_F(HostileFolders, AHardLinkedLockOrCheckpointIsRefusedNotWrittenIn) {
  auto [rc, log] = cli({"run", "cfg.toml", "--out", "ref", "--quiet"});
  ASSERT_EQ(rc, 0) << log;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "cfg.toml", "--out", "out", "--quiet", "--resume"},
        std::vector<std::string>{"merge", "ref", "--out", "out", "--quiet", "--force"},
        std::vector<std::string>{"analyze", "cfg.toml", "--out", "out", "--quiet", "--fractions", "0.5"}}) {
    reset_outside();
    copy_folder(dir / "ref", dir / "out");
    fs::remove(dir / "out" / ".ripplekv.lock");
    fs::create_hard_link(outside / "victim", dir / "out" / ".ripplekv.lock");
    std::tie(rc, log) = cli(args);
    EXPECT_EQ(rc, 2) << args[0] << ": " << log;
    EXPECT_TRUE(contains(log, "hard link")) << log;
    EXPECT_EQ(rkv::read_file((outside / "victim").string()), kVictim) << args[0];
    fs::remove(dir / "out" / ".ripplekv.lock");
  }
  reset_outside();
  const rkv::Folder f = rkv::Folder::open((dir / "h").string(), true);
  fs::create_hard_link(outside / "victim", dir / "h" / "x.jsonl");
  EXPECT_THROW(f.open_append("x.jsonl"), rkv::InputError);
  expect_outside_untouched("open_append on a hard link", "");
}

// flock cannot stop an unlink or a rename: a lock file removed (or replaced) while a process holds it, or the folder
// moved away from its path, is noticed before the next result is written, so two writers (or two runs' cells) never
// share a report silently.
TEST_F(HostileFolders, ALockFileRemovedWhileHeldStopsItsHolder) {
  const rkv::Folder f = rkv::Folder::open((dir / "l").string(), true);
  const rkv::OutputFolderLock lock(f);
  EXPECT_NO_THROW(lock.check_held());
  fs::remove(dir / "l" / ".ripplekv.lock");
  const rkv::OutputFolderLock second(f);  // what a second writer would now get
  try {
    lock.check_held();
    ADD_FAILURE() << "the first holder did not notice";
  } catch (const rkv::InputError& e) {
    EXPECT_TRUE(contains(e.what(), "was removed or replaced while this process held it")) << e.what();
  }
  EXPECT_NO_THROW(second.check_held());
  // The folder moved away while its run holds it (and another folder put at its path): stop, do not assemble the
  // report from the cells at the path.
  fs::rename(dir / "l", dir / "l.moved");
  fs::create_directories(dir / "l");
  try {
    second.check_held();
    ADD_FAILURE() << "a moved folder was not noticed";
  } catch (const rkv::InputError& e) {
    EXPECT_TRUE(contains(e.what(), "was moved or replaced while this process wrote it")) << e.what();
  }
}

// The Folder primitives themselves: temporaries never reuse a planted name, subfolders must be real folders.
TEST_F(HostileFolders, FolderRefusesLinksWhereItsSubfoldersAndFilesGo) {
  reset_outside();
  const rkv::Folder out = rkv::Folder::open((dir / "f").string(), true);
  fs::create_symlink(outside, dir / "f" / "cells");
  EXPECT_THROW(out.sub("cells"), rkv::InputError);
  EXPECT_THROW(out.write_atomically("cells/x.json", "{}"), rkv::InputError);
  fs::create_symlink(outside / "victim", dir / "f" / "run.json");
  EXPECT_THROW(out.write_atomically("run.json", "{}"), rkv::InputError);
  EXPECT_THROW(out.read("run.json", "record"), rkv::InputError);
  EXPECT_THROW(out.open_append("run.json"), rkv::InputError);
  EXPECT_EQ(out.kind("run.json"), rkv::Folder::Kind::link);
  out.write_atomically("run.json", "{}", true);  // --force: the link itself is replaced
  EXPECT_EQ(out.kind("run.json"), rkv::Folder::Kind::regular);
  EXPECT_THROW(out.write_atomically("../escape", "x"), rkv::InputError);
  EXPECT_THROW(out.write_atomically("/tmp/escape", "x"), rkv::InputError);
  expect_outside_untouched("Folder primitives", "");
}

}  // namespace
