// The LongBench task (eval/longbench.hpp): the dataset table against LongBench v1's config files, templates filled
// for two datasets, middle truncation on toy sequences, prompt ids with a toy byte tokenizer, and example/dataset
// scoring with eval.py's post-processing.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/errors.hpp"
#include "eval/longbench.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using Ids = std::vector<int32_t>;
using rkv::LongBenchMetric;

rkv::LongBenchRecord make_record(const std::string& dataset, const std::string& input, const std::string& context,
                                 std::vector<std::string> answers) {
  rkv::LongBenchRecord r;
  r.dataset = dataset;
  r.input = input;
  r.context = context;
  r.answers = std::move(answers);
  r.length = 42;
  r.source = "test.jsonl:1";
  return r;
}

// ---- Dataset table --------------------------------------------------------------------------------------------------

TEST(LongBenchTable, MatchesLongBenchConfig) {
  // config/dataset2maxlen.json and eval.py dataset2metric of LongBench v1, English datasets, in LongBench's order.
  struct Row {
    const char* name;
    int max_new_tokens;
    LongBenchMetric metric;
  };
  const std::vector<Row> expected = {
      {"narrativeqa", 128, LongBenchMetric::qa_f1},      {"qasper", 128, LongBenchMetric::qa_f1},
      {"multifieldqa_en", 64, LongBenchMetric::qa_f1},   {"hotpotqa", 32, LongBenchMetric::qa_f1},
      {"2wikimqa", 32, LongBenchMetric::qa_f1},          {"musique", 32, LongBenchMetric::qa_f1},
      {"gov_report", 512, LongBenchMetric::rouge},       {"qmsum", 512, LongBenchMetric::rouge},
      {"multi_news", 512, LongBenchMetric::rouge},       {"trec", 64, LongBenchMetric::classification},
      {"triviaqa", 32, LongBenchMetric::qa_f1},          {"samsum", 128, LongBenchMetric::rouge},
      {"passage_count", 32, LongBenchMetric::count},     {"passage_retrieval_en", 32, LongBenchMetric::retrieval},
      {"lcc", 64, LongBenchMetric::code_sim},            {"repobench-p", 64, LongBenchMetric::code_sim},
  };
  const auto& table = rkv::longbench_datasets();
  ASSERT_EQ(table.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(table[i].name, expected[i].name);
    EXPECT_EQ(table[i].max_new_tokens, expected[i].max_new_tokens);
    EXPECT_EQ(table[i].metric, expected[i].metric);
    // pred.py: no chat template for trec, triviaqa, samsum, lsht, lcc, repobench-p.
    const std::string n = expected[i].name;
    const bool no_chat = n == "trec" || n == "triviaqa" || n == "samsum" || n == "lcc" || n == "repobench-p";
    EXPECT_EQ(table[i].use_chat_template, !no_chat);
    // eval.py: first line only for trec, triviaqa, samsum (and lsht).
    EXPECT_EQ(table[i].first_line_only, n == "trec" || n == "triviaqa" || n == "samsum");
    EXPECT_EQ(table[i].stop_at_newline, n == "samsum");
    EXPECT_EQ(table[i].min_new_tokens, n == "samsum" ? 1 : 0);
    EXPECT_NO_THROW(rkv::check_prompt_template(table[i].prompt_template, n));
  }
  EXPECT_STREQ(rkv::longbench_metric_name(LongBenchMetric::code_sim), "code_sim_score");
  EXPECT_STREQ(rkv::longbench_metric_name(LongBenchMetric::qa_f1), "qa_f1_score");
}

TEST(LongBenchTable, LookupAndOverrides) {
  EXPECT_EQ(rkv::find_longbench_dataset("hotpotqa")->name, "hotpotqa");
  EXPECT_EQ(rkv::find_longbench_dataset("hotpotqa_e")->name, "hotpotqa");  // LongBench-E
  EXPECT_EQ(rkv::find_longbench_dataset("dureader"), nullptr);             // Chinese: not included
  EXPECT_EQ(rkv::find_longbench_dataset("_e"), nullptr);
  try {
    rkv::longbench_dataset("hotpot");
    FAIL() << "no error";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown LongBench dataset 'hotpot'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("hotpotqa"), std::string::npos);
  }
  rkv::LongBenchOverride o;
  o.max_new_tokens = 5;
  o.prompt_template = "Q: {input}\nA:";
  o.use_chat_template = false;
  const auto ds = rkv::longbench_dataset("qasper", o);
  EXPECT_EQ(ds.max_new_tokens, 5);
  EXPECT_EQ(ds.prompt_template, "Q: {input}\nA:");
  EXPECT_FALSE(ds.use_chat_template);
  EXPECT_EQ(ds.metric, LongBenchMetric::qa_f1);
  rkv::LongBenchOverride bad;
  bad.max_new_tokens = 0;
  EXPECT_THROW(rkv::longbench_dataset("qasper", bad), rkv::InputError);
  rkv::LongBenchOverride bad_template;
  bad_template.prompt_template = "{question}";
  EXPECT_THROW(rkv::longbench_dataset("qasper", bad_template), rkv::InputError);
}

// ---- Prompt templates -----------------------------------------------------------------------------------------------

TEST(LongBenchPrompt, HotpotqaTemplateFilled) {
  const auto ds = rkv::longbench_dataset("hotpotqa");
  const auto rec = make_record("hotpotqa", "Who wrote Emma?", "Passage 1:\nEmma is a novel.", {"Jane Austen"});
  // dataset2prompt.json "hotpotqa", with {context} and {input} replaced.
  EXPECT_EQ(rkv::format_longbench_prompt(ds.prompt_template, rec),
            "Answer the question based on the given passages. Only give me the answer and do not output any other "
            "words.\n\nThe following are given passages.\nPassage 1:\nEmma is a novel.\n\nAnswer the question based on "
            "the given passages. Only give me the answer and do not output any other words.\n\nQuestion: Who wrote "
            "Emma?\nAnswer:");
}

TEST(LongBenchPrompt, CodeTemplatesFilled) {
  const auto lcc = rkv::longbench_dataset("lcc");
  const auto rec = make_record("lcc", "", "def f():\n    return 1\n", {"x = f()"});
  EXPECT_EQ(rkv::format_longbench_prompt(lcc.prompt_template, rec),
            "Please complete the code given below. \ndef f():\n    return 1\nNext line of code:\n");
  const auto repo = rkv::longbench_dataset("repobench-p");
  const auto rec2 = make_record("repobench-p", "class A:\n", "# a.py\n", {"pass"});
  EXPECT_EQ(rkv::format_longbench_prompt(repo.prompt_template, rec2),
            "Please complete the code given below. \n# a.py\nclass A:\nNext line of code:\n");
}

TEST(LongBenchPrompt, FormatRules) {
  auto rec = make_record("trec", "Q?", "C", {"a"});
  rec.id = "id7";
  rec.language = "en";
  // Doubled braces are literal braces; every record field can be named; the context may itself hold braces.
  EXPECT_EQ(rkv::format_longbench_prompt("{{x}} {input} {dataset} {language} {_id} {length}", rec),
            "{x} Q? trec en id7 42");
  rec.context = "{input}";
  EXPECT_EQ(rkv::format_longbench_prompt("[{context}]", rec), "[{input}]");
  for (const char* bad : {"{question}", "{}", "{0}", "{input!r}", "{length:5}", "a } b", "{context", "{a{b}}"}) {
    EXPECT_THROW(rkv::format_longbench_prompt(bad, rec), rkv::InputError) << bad;
    EXPECT_THROW(rkv::check_prompt_template(bad, "longbench.trec.prompt"), rkv::InputError) << bad;
  }
  try {
    rkv::check_prompt_template("Q: {question}", "longbench.trec.prompt");
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("longbench.trec.prompt: unknown field '{question}'"), std::string::npos)
        << e.what();
  }
}

// ---- Truncation -----------------------------------------------------------------------------------------------------

TEST(LongBenchTruncate, KeepsFirstAndLastHalf) {
  const Ids ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  // max 6: half 3 -> ids[:3] + ids[-3:] = 0 1 2 | 7 8 9.
  EXPECT_EQ(rkv::truncate_middle(ids, 6), (Ids{0, 1, 2, 7, 8, 9}));
  // max 5: half = int(5 / 2) = 2 -> 0 1 | 8 9 (4 tokens, one under max).
  EXPECT_EQ(rkv::truncate_middle(ids, 5), (Ids{0, 1, 8, 9}));
  // max 2: half 1 -> 0 | 9.
  EXPECT_EQ(rkv::truncate_middle(ids, 2), (Ids{0, 9}));
  // Not longer than max: unchanged.
  EXPECT_EQ(rkv::truncate_middle(ids, 10), ids);
  EXPECT_EQ(rkv::truncate_middle(ids, 11), ids);
  EXPECT_THROW(rkv::truncate_middle(ids, 1), rkv::InputError);
  EXPECT_THROW(rkv::truncate_middle(ids, 0), rkv::InputError);
}

// A byte tokenizer: ids 0..255 are the bytes (no merges), 256 "<|im_start|>", 257 "<|im_end|>", 258 "<s>" (BOS),
// all control tokens; "<|im_end|>" is an end-of-generation token by its text.
rkv::Tokenizer byte_tokenizer(bool add_bos) {
  rkv::VocabData v;
  v.source = "toy-bytes";
  v.type = rkv::VocabType::bpe;
  v.pre_name = "gpt-2";
  v.pre_regexes = rkv::find_pre_tokenizer_family("gpt-2")->regexes;
  for (int b = 0; b < 256; ++b) v.tokens.push_back({rkv::byte_level::encode(std::string(1, static_cast<char>(b)))});
  v.tokens.push_back({"<|im_start|>", 0, rkv::kTokenControl});
  v.tokens.push_back({"<|im_end|>", 0, rkv::kTokenControl});
  v.tokens.push_back({"<s>", 0, rkv::kTokenControl});
  v.bos = 258;
  v.add_bos = add_bos;
  return rkv::Tokenizer::from_vocab(v);
}

Ids bytes_of(const std::string& s) {
  Ids out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(LongBenchPromptIds, NoChatWithBosAndTruncation) {
  const auto tok = byte_tokenizer(/*add_bos=*/true);
  const auto ds = rkv::longbench_dataset("lcc");  // no chat template
  const auto rec = make_record("lcc", "", "def f():\n    return 1\n", {"x"});
  const std::string prompt = "Please complete the code given below. \ndef f():\n    return 1\nNext line of code:\n";
  const size_t L = prompt.size();
  // Fits: BOS + the prompt's bytes.
  EXPECT_EQ(rkv::longbench_prompt_ids(rec, ds, tok, nullptr, 1000), concat({{258}, bytes_of(prompt)}));
  // max_length 20: the L + 1 ids (BOS first) are cut to the first 10 and the last 10; decoding without special tokens
  // drops the BOS, so the text is prompt[0:9] + prompt[L-10:], re-tokenized with BOS: 1 + 9 + 10 = 20 ids.
  const std::string cut = prompt.substr(0, 9) + prompt.substr(L - 10);
  EXPECT_EQ(rkv::longbench_prompt_ids(rec, ds, tok, nullptr, 20), concat({{258}, bytes_of(cut)}));
  EXPECT_THROW(rkv::longbench_prompt_ids(rec, ds, tok, nullptr, 1), rkv::InputError);
}

TEST(LongBenchPromptIds, ChatTemplateWrapsTheTruncatedPrompt) {
  const auto tok = byte_tokenizer(/*add_bos=*/false);
  const auto chat = rkv::ChatTemplate::by_name("chatml", "", "", "");
  const auto ds = rkv::longbench_dataset("hotpotqa");
  const auto rec = make_record("hotpotqa", "Who wrote Emma?", "Passage 1:\nEmma is a novel.", {"Jane Austen"});
  const std::string prompt = rkv::format_longbench_prompt(ds.prompt_template, rec);
  const size_t L = prompt.size();
  // chatml: <|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n, special texts parsed to their ids.
  const auto wrap = [](const std::string& text) {
    return concat({{256}, bytes_of("user\n"), bytes_of(text), {257}, bytes_of("\n"), {256}, bytes_of("assistant\n")});
  };
  EXPECT_EQ(rkv::longbench_prompt_ids(rec, ds, tok, &chat, 10000), wrap(prompt));
  // max_length 40 (no BOS): prompt[0:20] + prompt[L-20:], then wrapped.
  EXPECT_EQ(rkv::longbench_prompt_ids(rec, ds, tok, &chat, 40), wrap(prompt.substr(0, 20) + prompt.substr(L - 20)));
  // A chat dataset without a chat template is an error; turning the template off in the config avoids it.
  EXPECT_THROW(rkv::longbench_prompt_ids(rec, ds, tok, nullptr, 10000), rkv::InputError);
  rkv::LongBenchOverride off;
  off.use_chat_template = false;
  EXPECT_EQ(rkv::longbench_prompt_ids(rec, rkv::longbench_dataset("hotpotqa", off), tok, nullptr, 10000),
            bytes_of(prompt));
}

TEST(LongBenchGeneration, StopIdsAndPrediction) {
  const auto tok = byte_tokenizer(false);
  // End of generation: <|im_end|> (257). samsum adds the last id of encode("\n") = byte 10.
  EXPECT_EQ(rkv::longbench_stop_ids(rkv::longbench_dataset("hotpotqa"), tok), (Ids{257}));
  EXPECT_EQ(rkv::longbench_stop_ids(rkv::longbench_dataset("samsum"), tok), (Ids{10, 257}));
  // Special tokens are left out of the prediction.
  EXPECT_EQ(rkv::longbench_prediction(tok, {'4', '2', 257}), "42");
}

// ---- Scoring --------------------------------------------------------------------------------------------------------

TEST(LongBenchScore, FirstLinePostProcessing) {
  const auto trivia = rkv::longbench_dataset("triviaqa");
  EXPECT_EQ(rkv::longbench_postprocess(trivia, "\n\nParis\nQuestion: next"), "Paris");
  EXPECT_EQ(rkv::longbench_postprocess(trivia, "\n\n"), "");
  EXPECT_EQ(rkv::longbench_postprocess(trivia, " Paris "), " Paris ");
  const auto hotpot = rkv::longbench_dataset("hotpotqa");
  EXPECT_EQ(rkv::longbench_postprocess(hotpot, "\nParis\nmore"), "\nParis\nmore");
}

TEST(LongBenchScore, MaxOverAnswers) {
  // triviaqa: the first line "Paris" against ["Paris", "City of Paris"]: F1 1 and F1 of [paris] vs [city, of, paris]
  // = 2 (1)(1/3) / (4/3) = 0.5 -> max 1.
  const auto trivia = rkv::longbench_dataset("triviaqa");
  const auto rec = make_record("triviaqa", "q", "c", {"Paris", "City of Paris"});
  EXPECT_DOUBLE_EQ(rkv::longbench_example_score(trivia, "\n\nParis\nQuestion: next", rec), 1.0);
  // hotpotqa keeps every line: [paris, more] vs [paris] -> P 1/2, R 1, F1 2/3.
  const auto hotpot = rkv::longbench_dataset("hotpotqa");
  EXPECT_DOUBLE_EQ(rkv::longbench_example_score(hotpot, "Paris\nmore", make_record("hotpotqa", "q", "c", {"Paris"})),
                   2.0 / 3.0);
  // trec (classification) uses the record's classes: first line "Date" -> [Date] -> 1.
  auto trec_rec = make_record("trec", "q", "c", {"Date"});
  trec_rec.all_classes = std::vector<std::string>{"Date", "City"};
  EXPECT_DOUBLE_EQ(rkv::longbench_example_score(rkv::longbench_dataset("trec"), "Date\nCity", trec_rec), 1.0);
  // passage_count: numbers [3, 4] against "3" -> 0.5.
  EXPECT_DOUBLE_EQ(
      rkv::longbench_example_score(rkv::longbench_dataset("passage_count"), "3 or 4",
                                   make_record("passage_count", "", "c", {"3"})),
      0.5);
}

TEST(LongBenchScore, RecordChecks) {
  const auto trec = rkv::longbench_dataset("trec");
  const auto no_classes = make_record("trec", "q", "c", {"Date"});
  EXPECT_THROW(rkv::check_longbench_record(no_classes, trec), rkv::InputError);
  try {
    rkv::longbench_example_score(trec, "Date", no_classes);
    FAIL() << "no error";
  } catch (const rkv::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("test.jsonl:1"), std::string::npos) << e.what();
  }
  const auto retrieval = rkv::longbench_dataset("passage_retrieval_en");
  EXPECT_NO_THROW(
      rkv::check_longbench_record(make_record("passage_retrieval_en", "a", "c", {"Paragraph 4"}), retrieval));
  EXPECT_THROW(rkv::check_longbench_record(make_record("passage_retrieval_en", "a", "c", {"4"}), retrieval),
               rkv::InputError);
}

TEST(LongBenchScore, DatasetScoreAndRounding) {
  // 100 * (1 + 0.5 + 0) / 3 = 50.
  EXPECT_DOUBLE_EQ(rkv::longbench_dataset_score({1.0, 0.5, 0.0}), 50.0);
  EXPECT_TRUE(std::isnan(rkv::longbench_dataset_score({})));
  // Python round(x, 2): 2/3 * 100 = 66.666... -> 66.67; 2.675 is 2.67499999... in binary -> 2.67; 0.125 is an exact
  // tie -> even 0.12; 0.375 -> 0.38.
  EXPECT_DOUBLE_EQ(rkv::python_round_ndigits(200.0 / 3.0, 2), 66.67);
  EXPECT_DOUBLE_EQ(rkv::python_round_ndigits(2.675, 2), 2.67);
  EXPECT_DOUBLE_EQ(rkv::python_round_ndigits(0.125, 2), 0.12);
  EXPECT_DOUBLE_EQ(rkv::python_round_ndigits(0.375, 2), 0.38);
  EXPECT_STREQ(rkv::longbench_e_bucket(3999), "0-4k");
  EXPECT_STREQ(rkv::longbench_e_bucket(4000), "4-8k");
  EXPECT_STREQ(rkv::longbench_e_bucket(8000), "8k+");
}

}  // namespace
