// LongBench datasets, prompts, truncation and scoring (see longbench.hpp).
#include "eval/longbench.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/errors.hpp"
#include "eval/metrics_text.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {
namespace {

// LongBench v1 config/dataset2prompt.json (THUDM/LongBench 8ae23fd), config/dataset2maxlen.json, eval.py
// dataset2metric, and pred.py's / eval.py's dataset lists, for the English datasets.
std::vector<LongBenchDataset> make_table() {
  using M = LongBenchMetric;
  std::vector<LongBenchDataset> d;
  d.push_back({"narrativeqa",
      "You are given a story, which can be either a novel or a movie script, and a question. Answer the question as "
      "concisely as you can, using a single phrase if possible. Do not provide any explanation.\n"
      "\n"
      "Story: {context}\n"
      "\n"
      "Now, answer the question based on the story as concisely as you can, using a single phrase if possible. Do "
      "not provide any explanation.\n"
      "\n"
      "Question: {input}\n"
      "\n"
      "Answer:",
      128, M::qa_f1, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"qasper",
      "You are given a scientific article and a question. Answer the question as concisely as you can, using a "
      "single phrase or sentence if possible. If the question cannot be answered based on the information in the "
      "article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or "
      "\"unanswerable\". Do not provide any explanation.\n"
      "\n"
      "Article: {context}\n"
      "\n"
      " Answer the question based on the above article as concisely as you can, using a single phrase or sentence if "
      "possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". "
      "If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any "
      "explanation.\n"
      "\n"
      "Question: {input}\n"
      "\n"
      "Answer:",
      128, M::qa_f1, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"multifieldqa_en",
      "Read the following text and answer briefly.\n"
      "\n"
      "{context}\n"
      "\n"
      "Now, answer the following question based on the above text, only give me the answer and do not output any "
      "other words.\n"
      "\n"
      "Question: {input}\n"
      "Answer:",
      64, M::qa_f1, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"hotpotqa",
      "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
      "\n"
      "The following are given passages.\n"
      "{context}\n"
      "\n"
      "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
      "\n"
      "Question: {input}\n"
      "Answer:",
      32, M::qa_f1, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"2wikimqa",
      "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
      "\n"
      "The following are given passages.\n"
      "{context}\n"
      "\n"
      "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
      "\n"
      "Question: {input}\n"
      "Answer:",
      32, M::qa_f1, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"musique",
      "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
      "\n"
      "The following are given passages.\n"
      "{context}\n"
      "\n"
      "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
      "\n"
      "Question: {input}\n"
      "Answer:",
      32, M::qa_f1, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"gov_report",
      "You are given a report by a government agency. Write a one-page summary of the report.\n"
      "\n"
      "Report:\n"
      "{context}\n"
      "\n"
      "Now, write a one-page summary of the report.\n"
      "\n"
      "Summary:",
      512, M::rouge, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"qmsum",
      "You are given a meeting transcript and a query containing a question or instruction. Answer the query in one "
      "or more sentences.\n"
      "\n"
      "Transcript:\n"
      "{context}\n"
      "\n"
      "Now, answer the query based on the above meeting transcript in one or more sentences.\n"
      "\n"
      "Query: {input}\n"
      "Answer:",
      512, M::rouge, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"multi_news",
      "You are given several news passages. Write a one-page summary of all news. \n"
      "\n"
      "News:\n"
      "{context}\n"
      "\n"
      "Now, write a one-page summary of all the news.\n"
      "\n"
      "Summary:",
      512, M::rouge, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"trec",
      "Please determine the type of the question below. Here are some examples of questions.\n"
      "\n"
      "{context}\n"
      "{input}",
      64, M::classification, /*use_chat_template=*/false, /*first_line_only=*/true,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"triviaqa",
      "Answer the question based on the given passage. Only give me the answer and do not output any other words. "
      "The following are some examples.\n"
      "\n"
      "{context}\n"
      "\n"
      "{input}",
      32, M::qa_f1, /*use_chat_template=*/false, /*first_line_only=*/true,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"samsum",
      "Summarize the dialogue into a few short sentences. The following are some examples.\n"
      "\n"
      "{context}\n"
      "\n"
      "{input}",
      128, M::rouge, /*use_chat_template=*/false, /*first_line_only=*/true,
      /*stop_at_newline=*/true, /*min_new_tokens=*/1});
  d.push_back({"passage_count",
      "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read "
      "these paragraphs and determine how many unique paragraphs there are after removing duplicates. In other "
      "words, how many non-repeating paragraphs are there in total?\n"
      "\n"
      "{context}\n"
      "\n"
      "Please enter the final count of unique paragraphs after removing duplicates. The output format should only "
      "contain the number, such as 1, 2, 3, and so on.\n"
      "\n"
      "The final answer is: ",
      32, M::count, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"passage_retrieval_en",
      "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph the abstract "
      "is from.\n"
      "\n"
      "{context}\n"
      "\n"
      "The following is an abstract.\n"
      "\n"
      "{input}\n"
      "\n"
      "Please enter the number of the paragraph that the abstract is from. The answer format must be like "
      "\"Paragraph 1\", \"Paragraph 2\", etc.\n"
      "\n"
      "The answer is: ",
      32, M::retrieval, /*use_chat_template=*/true, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"lcc",
      "Please complete the code given below. \n"
      "{context}Next line of code:\n",
      64, M::code_sim, /*use_chat_template=*/false, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  d.push_back({"repobench-p",
      "Please complete the code given below. \n"
      "{context}{input}Next line of code:\n",
      64, M::code_sim, /*use_chat_template=*/false, /*first_line_only=*/false,
      /*stop_at_newline=*/false, /*min_new_tokens=*/0});
  return d;
}

}  // namespace

const char* longbench_metric_name(LongBenchMetric metric) {
  switch (metric) {
    case LongBenchMetric::qa_f1: return "qa_f1_score";
    case LongBenchMetric::rouge: return "rouge_score";
    case LongBenchMetric::classification: return "classification_score";
    case LongBenchMetric::retrieval: return "retrieval_score";
    case LongBenchMetric::count: return "count_score";
    case LongBenchMetric::code_sim: return "code_sim_score";
  }
  return "unknown";
}

const std::vector<LongBenchDataset>& longbench_datasets() {
  static const std::vector<LongBenchDataset> table = make_table();
  return table;
}

const LongBenchDataset* find_longbench_dataset(std::string_view name) {
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& d : longbench_datasets()) {
      if (d.name == name) return &d;
    }
    // LongBench-E: "<name>_e".
    if (pass == 0 && name.size() > 2 && name.substr(name.size() - 2) == "_e") {
      name = name.substr(0, name.size() - 2);
    } else {
      break;
    }
  }
  return nullptr;
}

LongBenchDataset longbench_dataset(std::string_view name, const LongBenchOverride& override) {
  const LongBenchDataset* found = find_longbench_dataset(name);
  if (!found) {
    std::string known;
    for (const auto& d : longbench_datasets()) known += (known.empty() ? "" : ", ") + d.name;
    throw InputError("unknown LongBench dataset '" + std::string(name) + "'; the English datasets are: " + known +
                     " (a LongBench-E name '<dataset>_e' is accepted too)");
  }
  LongBenchDataset ds = *found;
  if (override.prompt_template) {
    check_prompt_template(*override.prompt_template, "longbench." + ds.name + ".prompt");
    ds.prompt_template = *override.prompt_template;
  }
  if (override.max_new_tokens) {
    if (*override.max_new_tokens < 1) {
      throw InputError("longbench." + ds.name + ".max_new_tokens must be >= 1, got " +
                       std::to_string(*override.max_new_tokens));
    }
    ds.max_new_tokens = *override.max_new_tokens;
  }
  if (override.use_chat_template) ds.use_chat_template = *override.use_chat_template;
  return ds;
}

// ---- Prompt templates -----------------------------------------------------------------------------------------------

const std::vector<std::string>& longbench_template_fields() {
  static const std::vector<std::string> fields = {"context", "input", "dataset", "language", "_id", "length"};
  return fields;
}

namespace {

// Walks a str.format template: literal text goes to `out` (when not null), each field name to `field`.
template <typename OnField>
void parse_template(std::string_view t, std::string_view what, std::string* out, OnField field) {
  const auto fail = [&](const std::string& msg) {
    throw InputError(std::string(what) + ": " + msg + " in prompt template \"" +
                     std::string(t.substr(0, std::min<size_t>(t.size(), 120))) + (t.size() > 120 ? "...\"" : "\""));
  };
  size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == '{') {
      if (i + 1 < t.size() && t[i + 1] == '{') {
        if (out) *out += '{';
        i += 2;
        continue;
      }
      const size_t close = t.find('}', i + 1);
      if (close == std::string_view::npos) {
        fail("'{' at byte " + std::to_string(i) + " is never closed (write '{{' for a brace)");
      }
      const std::string_view name = t.substr(i + 1, close - i - 1);
      if (name.find('{') != std::string_view::npos) fail("nested '{' in field '{" + std::string(name) + "}'");
      if (name.find_first_of("!:") != std::string_view::npos) {
        fail("field '{" + std::string(name) + "}' has a conversion or format spec, which is not supported");
      }
      if (name.empty() || name.find_first_not_of("0123456789") == std::string_view::npos) {
        fail("positional field '{" + std::string(name) + "}' (LongBench formats with named record fields only)");
      }
      const auto& fields = longbench_template_fields();
      if (std::find(fields.begin(), fields.end(), name) == fields.end()) {
        std::string known;
        for (const auto& f : fields) known += (known.empty() ? "{" : ", {") + f + "}";
        fail("unknown field '{" + std::string(name) + "}' (known: " + known + ")");
      }
      field(name);
      i = close + 1;
    } else if (c == '}') {
      if (i + 1 < t.size() && t[i + 1] == '}') {
        if (out) *out += '}';
        i += 2;
        continue;
      }
      fail("single '}' at byte " + std::to_string(i) + " (write '}}' for a brace)");
    } else {
      if (out) *out += c;
      ++i;
    }
  }
}

}  // namespace

void check_prompt_template(std::string_view template_text, std::string_view what) {
  parse_template(template_text, what, nullptr, [](std::string_view) {});
}

std::string format_longbench_prompt(std::string_view template_text, const LongBenchRecord& record) {
  std::string out;
  out.reserve(template_text.size() + record.context.size() + record.input.size());
  const std::string what = "prompt for " + record.source;
  parse_template(template_text, what, &out, [&](std::string_view name) {
    if (name == "context") out += record.context;
    else if (name == "input") out += record.input;
    else if (name == "dataset") out += record.dataset;
    else if (name == "language") out += record.language;
    else if (name == "_id") out += record.id;
    else if (name == "length") out += std::to_string(record.length);
  });
  return out;
}

// ---- Truncation and prompt ids --------------------------------------------------------------------------------------

std::vector<int32_t> truncate_middle(const std::vector<int32_t>& ids, size_t max_length) {
  if (max_length < 2) {
    throw InputError("LongBench truncation needs max_length >= 2 tokens, got " + std::to_string(max_length));
  }
  if (ids.size() <= max_length) return ids;
  const size_t half = max_length / 2;
  std::vector<int32_t> out(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(half));
  out.insert(out.end(), ids.end() - static_cast<std::ptrdiff_t>(half), ids.end());
  return out;
}

std::vector<int32_t> longbench_prompt_ids(const LongBenchRecord& record, const LongBenchDataset& ds,
                                          const Tokenizer& tokenizer, const ChatTemplate* chat, size_t max_length) {
  if (ds.use_chat_template && !chat) {
    throw InputError("LongBench dataset '" + ds.name +
                     "' uses the chat template, but no chat template was given (the model has none: name one, or "
                     "set the dataset's chat template off)");
  }
  if (max_length < 2) truncate_middle({}, max_length);  // its error, whatever the prompt's length
  std::string text = format_longbench_prompt(ds.prompt_template, record);
  const std::vector<int32_t> ids = tokenizer.encode(text, tokenizer.add_bos_by_default(), /*parse_special=*/true);
  if (ids.size() > max_length) {
    const std::vector<int32_t> kept = truncate_middle(ids, max_length);
    const size_t half = kept.size() / 2;
    const std::vector<int32_t> head(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(half));
    const std::vector<int32_t> tail(kept.begin() + static_cast<std::ptrdiff_t>(half), kept.end());
    text = tokenizer.decode(head, /*render_special=*/false) + tokenizer.decode(tail, /*render_special=*/false);
  }
  if (ds.use_chat_template) {
    const std::string wrapped = chat->apply({ChatMessage{"user", text}}, /*add_generation_prompt=*/true);
    return tokenizer.encode(wrapped, /*add_bos=*/false, /*parse_special=*/true);
  }
  return tokenizer.encode(text, tokenizer.add_bos_by_default(), /*parse_special=*/true);
}

std::vector<int32_t> longbench_stop_ids(const LongBenchDataset& ds, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids = tokenizer.end_of_generation_ids();
  if (ds.stop_at_newline) {
    const std::vector<int32_t> nl = tokenizer.encode("\n", /*add_bos=*/false, /*parse_special=*/false);
    if (!nl.empty()) ids.push_back(nl.back());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string longbench_prediction(const Tokenizer& tokenizer, const std::vector<int32_t>& generated) {
  return tokenizer.decode(generated, /*render_special=*/false);
}

// ---- Scoring --------------------------------------------------------------------------------------------------------

std::string longbench_postprocess(const LongBenchDataset& ds, std::string_view prediction) {
  if (!ds.first_line_only) return std::string(prediction);
  const size_t start = prediction.find_first_not_of('\n');
  if (start == std::string_view::npos) return "";
  const std::string_view rest = prediction.substr(start);
  return std::string(rest.substr(0, rest.find('\n')));
}

double longbench_metric(LongBenchMetric metric, std::string_view prediction, std::string_view ground_truth,
                        const std::vector<std::string>& all_classes) {
  switch (metric) {
    case LongBenchMetric::qa_f1: return qa_f1_score(prediction, ground_truth);
    case LongBenchMetric::rouge: return rouge_score(prediction, ground_truth);
    case LongBenchMetric::classification: return classification_score(prediction, ground_truth, all_classes);
    case LongBenchMetric::retrieval: return retrieval_score(prediction, ground_truth);
    case LongBenchMetric::count: return count_score(prediction, ground_truth);
    case LongBenchMetric::code_sim: return code_sim_score(prediction, ground_truth);
  }
  throw std::logic_error("longbench_metric: unknown metric");
}

void check_longbench_record(const LongBenchRecord& record, const LongBenchDataset& ds) {
  if (ds.metric == LongBenchMetric::classification && !record.all_classes) {
    throw InputError(record.source + ": dataset '" + ds.name +
                     "' is scored by classification and needs 'all_classes' (an array of the class names), got null");
  }
  if (ds.metric == LongBenchMetric::retrieval) {
    for (const auto& a : record.answers) {
      try {
        retrieval_score("", a);
      } catch (const InputError&) {
        throw InputError(record.source + ": dataset '" + ds.name +
                         "' needs answers of the form \"Paragraph N\", got \"" + a.substr(0, 80) + "\"");
      }
    }
  }
}

double longbench_example_score(const LongBenchDataset& ds, std::string_view prediction, const LongBenchRecord& record) {
  static const std::vector<std::string> no_classes;
  if (ds.metric == LongBenchMetric::classification && !record.all_classes) check_longbench_record(record, ds);
  const std::vector<std::string>& classes = record.all_classes ? *record.all_classes : no_classes;
  const std::string pred = longbench_postprocess(ds, prediction);
  double score = 0.0;
  for (const auto& truth : record.answers) {
    try {
      score = std::max(score, longbench_metric(ds.metric, pred, truth, classes));
    } catch (const InputError& e) {
      throw InputError(record.source + ": " + e.what());
    }
  }
  return score;
}

double longbench_dataset_score(const std::vector<double>& example_scores) {
  if (example_scores.empty()) return std::numeric_limits<double>::quiet_NaN();
  double total = 0.0;
  for (double s : example_scores) total += s;
  return 100 * total / static_cast<double>(example_scores.size());
}

double python_round_ndigits(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits < 0 || ndigits > 300) throw InputError("python_round_ndigits: ndigits must be in [0, 300]");
  // glibc's printf rounds the exact binary value to `ndigits` decimals, ties to even: what CPython's round() does
  // through _Py_dg_dtoa(mode 3).
  std::vector<char> buf(static_cast<size_t>(ndigits) + 400);
  std::snprintf(buf.data(), buf.size(), "%.*f", ndigits, x);
  return std::strtod(buf.data(), nullptr);
}

const char* longbench_e_bucket(int64_t length) {
  if (length < 4000) return "0-4k";
  if (length < 8000) return "4-8k";
  return "8k+";
}

}  // namespace rkv
