// The LongBench JSONL reader (eval/longbench_records.hpp): good records, and the errors a user sees for bad lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "core/errors.hpp"
#include "eval/longbench_records.hpp"

namespace {

namespace fs = std::filesystem;

const char* kGood =
    R"({"input": "Who wrote Emma?", "context": "Emma is a novel by Jane Austen.",)"
    R"( "answers": ["Jane Austen", "Austen"],)"
    R"( "length": 6, "dataset": "hotpotqa", "language": "en", "all_classes": null, "_id": "abc123"})";

// The message of the InputError `f` throws ("" when it throws nothing).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const rkv::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LongBenchRecords, ParsesAllFields) {
  const rkv::LongBenchRecord r = rkv::parse_longbench_record(kGood, "data/hotpotqa.jsonl", 7);
  EXPECT_EQ(r.input, "Who wrote Emma?");
  EXPECT_EQ(r.context, "Emma is a novel by Jane Austen.");
  EXPECT_EQ(r.answers, (std::vector<std::string>{"Jane Austen", "Austen"}));
  EXPECT_FALSE(r.all_classes.has_value());
  EXPECT_EQ(r.length, 6);
  EXPECT_EQ(r.dataset, "hotpotqa");
  EXPECT_EQ(r.language, "en");
  EXPECT_EQ(r.id, "abc123");
  EXPECT_EQ(r.source, "data/hotpotqa.jsonl:7");
}

TEST(LongBenchRecords, ClassesAndOptionalKeys) {
  const auto r = rkv::parse_longbench_record(
      R"({"input": "q", "context": "c", "answers": ["Date"], "all_classes": ["Date", "City"], "length": 0,)"
      R"( "dataset": "trec", "extra": 1})",
      "t.jsonl", 1);
  ASSERT_TRUE(r.all_classes.has_value());
  EXPECT_EQ(*r.all_classes, (std::vector<std::string>{"Date", "City"}));
  EXPECT_EQ(r.id, "");
  EXPECT_EQ(r.language, "");
}

TEST(LongBenchRecords, BadJsonNamesFileAndLine) {
  const std::string msg = error_of([] { rkv::parse_longbench_record(R"({"input": "q", )", "data/x.jsonl", 3); });
  EXPECT_NE(msg.find("data/x.jsonl:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  // Invalid UTF-8 inside a string is not JSON either.
  EXPECT_NE(error_of([] { rkv::parse_longbench_record("{\"input\": \"\xFF\"}", "f", 1); }).find("not valid JSON"),
            std::string::npos);
  // A JSON value that is not an object.
  const std::string arr = error_of([] { rkv::parse_longbench_record("[1, 2]", "f", 2); });
  EXPECT_NE(arr.find("f:2: a LongBench record must be a JSON object, got array"), std::string::npos) << arr;
}

TEST(LongBenchRecords, MissingKeyIsNamed) {
  const std::string msg = error_of([] {
    rkv::parse_longbench_record(R"({"input": "q", "context": "c", "all_classes": null, "length": 1, "dataset": "d"})",
                                "data/y.jsonl", 12);
  });
  EXPECT_EQ(msg, "data/y.jsonl:12: missing key 'answers'");
  const std::string no_classes = error_of([] {
    rkv::parse_longbench_record(R"({"input": "q", "context": "c", "answers": ["a"], "length": 1, "dataset": "d"})",
                                "f", 1);
  });
  EXPECT_EQ(no_classes, "f:1: missing key 'all_classes'");
}

TEST(LongBenchRecords, WrongTypesAreNamed) {
  const auto parse = [](const std::string& answers, const std::string& length, const std::string& classes) {
    return error_of([&] {
      rkv::parse_longbench_record(R"({"input": "q", "context": "c", "answers": )" + answers + R"(, "length": )" +
                                      length + R"(, "all_classes": )" + classes + R"(, "dataset": "d"})",
                                  "f", 4);
    });
  };
  EXPECT_EQ(parse(R"("Paris")", "1", "null"), "f:4: key 'answers' must be an array of strings, got string");
  EXPECT_EQ(parse(R"(["a", 2])", "1", "null"),
            "f:4: key 'answers' must be an array of strings, element 1 is integer");
  EXPECT_EQ(parse("[]", "1", "null"), "f:4: key 'answers' is empty; a LongBench record needs at least one answer");
  EXPECT_EQ(parse(R"(["a"])", "1.5", "null"), "f:4: key 'length' must be an integer, got number");
  EXPECT_EQ(parse(R"(["a"])", R"("7")", "null"), "f:4: key 'length' must be an integer, got string");
  EXPECT_EQ(parse(R"(["a"])", "-1", "null"), "f:4: key 'length' must be >= 0, got -1");
  EXPECT_EQ(parse(R"(["a"])", "1", R"("Date")"), "f:4: key 'all_classes' must be an array of strings, got string");
  const std::string input = error_of([] {
    rkv::parse_longbench_record(
        R"({"input": null, "context": "c", "answers": ["a"], "length": 1, "all_classes": null, "dataset": "d"})",
        "f", 5);
  });
  EXPECT_EQ(input, "f:5: key 'input' must be a string, got null");
}

class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("rkv_longbench_" + std::to_string(::getpid()) + "_" + test->name() + ".jsonl");
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { fs::remove(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(LongBenchRecords, ReadsAFileSkippingBlankLines) {
  // Line 1 with a byte order mark, line 2 blank, line 3 with CRLF.
  const std::string second =
      R"({"input": "", "context": "doc", "answers": ["sum"], "all_classes": null, "length": 3,)"
      R"( "dataset": "gov_report"})";
  TempFile f(std::string("\xEF\xBB\xBF") + kGood + "\n\n" + second + "\r\n");
  const auto records = rkv::read_longbench_jsonl(f.path());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].dataset, "hotpotqa");
  EXPECT_EQ(records[1].dataset, "gov_report");
  EXPECT_EQ(records[1].source, f.path().string() + ":3");
  EXPECT_EQ(rkv::read_longbench_jsonl(f.path(), 1).size(), 1u);
}

TEST(LongBenchRecords, FileErrors) {
  TempFile bad(std::string(kGood) + "\n{oops}\n");
  const std::string msg = error_of([&] { rkv::read_longbench_jsonl(bad.path()); });
  EXPECT_NE(msg.find(bad.path().string() + ":2: not valid JSON"), std::string::npos) << msg;
  TempFile empty("\n  \n");
  EXPECT_NE(error_of([&] { rkv::read_longbench_jsonl(empty.path()); }).find("holds no record"), std::string::npos);
  const std::string missing = error_of([] { rkv::read_longbench_jsonl("/nonexistent/ripplekv/lb.jsonl"); });
  EXPECT_NE(missing.find("cannot open LongBench file /nonexistent/ripplekv/lb.jsonl"), std::string::npos) << missing;
}

}  // namespace
