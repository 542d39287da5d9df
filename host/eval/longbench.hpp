// The LongBench task (THUDM/LongBench v1, English datasets): per-dataset prompt templates, max new tokens, metric and
// chat-template rule, LongBench's middle truncation, and the scoring of predictions.
//
// How a runner evaluates LongBench (what LongBench's pred.py + eval.py do), one call per step:
//
//   auto records = read_longbench_jsonl(path);                       // eval/longbench_records.hpp
//   for (const LongBenchRecord& rec : records) {
//     LongBenchDataset ds = longbench_dataset(rec.dataset, overrides[rec.dataset]);  // table + the config's overrides
//     check_longbench_record(rec, ds);                                // once, at load/validate time
//     std::vector<int32_t> prompt = longbench_prompt_ids(rec, ds, tokenizer, &chat, max_length);
//     //   = format the template, tokenize, middle-truncate to max_length tokens, chat template unless ds skips it
//     // prefill `prompt` (full cache), compress, then decode greedily on the compressed cache: at most
//     // ds.max_new_tokens new tokens, stop after a token in longbench_stop_ids(ds, tokenizer), and never stop before
//     // ds.min_new_tokens tokens (samsum: the stop tokens are masked out of the first step, as HF's min_length).
//     std::string pred = longbench_prediction(tokenizer, generated);   // decode without special tokens
//     double score = longbench_example_score(ds, pred, rec);           // in [0, 1]: max over the answers
//   }
//   double dataset_score = longbench_dataset_score(scores);             // 100 * mean, LongBench's number
//
// `max_length` is the prompt budget in tokens before the chat template is added (LongBench's model2maxlen: 3500 for
// its 4k-context chat models, i.e. the context minus room for the template and the answer); it must leave
// max_new_tokens + the chat template's tokens free in the model's context.
//
// The built-in table is LongBench v1's config/dataset2prompt.json, config/dataset2maxlen.json and eval.py
// dataset2metric for the 16 English datasets (THUDM/LongBench at 8ae23fd: narrativeqa reads "as concisely"; older
// copies of the file spell it "asconcisely" -- a config override can restore that). The Chinese datasets
// (multifieldqa_zh, dureader, vcsum, lsht, passage_retrieval_zh) are not included: their metrics need the jieba
// segmenter.
//
// Thread rules: everything here is pure or reads only its arguments; safe to call concurrently.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/longbench_records.hpp"

namespace rkv {

class Tokenizer;
class ChatTemplate;

/// The metric functions of eval/metrics_text.hpp, as LongBench's eval.py assigns them.
enum class LongBenchMetric { qa_f1, rouge, classification, retrieval, count, code_sim };

/// LongBench's name of the metric function: "qa_f1_score", "rouge_score", "classification_score", "retrieval_score",
/// "count_score", "code_sim_score".
const char* longbench_metric_name(LongBenchMetric metric);

/// Everything the runner needs to know about one dataset.
struct LongBenchDataset {
  std::string name;             ///< e.g. "hotpotqa"
  std::string prompt_template;  ///< Python str.format template over the record's fields ({context}, {input}, ...)
  int max_new_tokens = 0;       ///< dataset2maxlen
  LongBenchMetric metric = LongBenchMetric::qa_f1;
  /// Whether the prompt is wrapped in the model's chat template. False for trec, triviaqa, samsum, lcc, repobench-p
  /// (pred.py: "chat models are better off without build prompts on these tasks"; lsht is the sixth, Chinese).
  bool use_chat_template = true;
  /// eval.py keeps only the first line of the prediction (after leading newlines) for trec, triviaqa, samsum.
  bool first_line_only = false;
  /// pred.py stops samsum at the newline token too (eos_token_id = [eos, last id of encode("\n")]).
  bool stop_at_newline = false;
  /// pred.py's min_length = context + 1 for samsum: no stop token may be the first generated token.
  int min_new_tokens = 0;
};

/// The 16 English datasets in LongBench's order: narrativeqa, qasper, multifieldqa_en, hotpotqa, 2wikimqa, musique,
/// gov_report, qmsum, multi_news, trec, triviaqa, samsum, passage_count, passage_retrieval_en, lcc, repobench-p.
const std::vector<LongBenchDataset>& longbench_datasets();

/// The built-in entry for `name`, or nullptr. A LongBench-E name ("hotpotqa_e") finds its base dataset.
const LongBenchDataset* find_longbench_dataset(std::string_view name);

/// Per-dataset settings a config may override (unset fields keep the built-in value).
struct LongBenchOverride {
  std::optional<std::string> prompt_template;
  std::optional<int> max_new_tokens;
  std::optional<bool> use_chat_template;
};

/// The dataset `name` with `override` applied. Throws rkv::InputError for an unknown name (listing the known ones),
/// a template check_prompt_template rejects, or max_new_tokens < 1.
LongBenchDataset longbench_dataset(std::string_view name, const LongBenchOverride& override = {});

/// The record fields a template may name: context, input, dataset, language, _id, length.
const std::vector<std::string>& longbench_template_fields();

/// Checks a template as Python's str.format(**record) would parse it: "{name}" for a field of
/// longbench_template_fields(), "{{" and "}}" for literal braces. Throws rkv::InputError, starting with `what` (e.g.
/// "longbench.hotpotqa.prompt"), for an unknown field, a positional "{}"/"{0}", a conversion or format spec
/// ("{input!r}", "{length:5}", not supported), an unmatched "{" or a single "}".
void check_prompt_template(std::string_view template_text, std::string_view what);

/// template.format(**record): each "{field}" replaced by the record's value ("length" as a decimal integer),
/// "{{"/"}}" by one brace. Throws rkv::InputError as check_prompt_template does.
std::string format_longbench_prompt(std::string_view template_text, const LongBenchRecord& record);

/// LongBench's middle truncation: when ids.size() > max_length, half = max_length / 2 (integer division) and the result
/// is ids[0, half) followed by the last half ids (2 * half tokens: max_length - 1 for an odd max_length); otherwise
/// `ids` unchanged. Throws rkv::InputError when max_length < 2 (Python's tokenized[-0:] would keep everything).
std::vector<int32_t> truncate_middle(const std::vector<int32_t>& ids, size_t max_length);

/// The prompt token ids of one record, as pred.py builds them:
///  1. text = format_longbench_prompt(ds.prompt_template, record);
///  2. ids = tokenizer.encode(text, tokenizer.add_bos_by_default(), parse_special = true) (HF tokenizer(prompt));
///  3. if ids.size() > max_length: text = decode(first half, no special tokens) + decode(last half, no special tokens)
///     (truncate_middle's halves, decoded and re-joined as text, skip_special_tokens = True);
///  4. with ds.use_chat_template: text = chat->apply({{"user", text}}, add_generation_prompt = true) and
///     ids = encode(text, add_bos = false, parse_special = true) (the template writes BOS itself where the family has
///     one); without: ids = encode(text, tokenizer.add_bos_by_default(), parse_special = true).
/// The result can differ from max_length by a few tokens (re-tokenization at the cut, the chat template), as in
/// LongBench. Throws rkv::InputError when ds.use_chat_template and `chat` is null, and as the steps above.
std::vector<int32_t> longbench_prompt_ids(const LongBenchRecord& record, const LongBenchDataset& ds,
                                          const Tokenizer& tokenizer, const ChatTemplate* chat, size_t max_length);

/// Tokens that end generation: the tokenizer's end-of-generation ids, plus for ds.stop_at_newline the last id of
/// encode("\n") (pred.py's samsum rule). Sorted, unique.
std::vector<int32_t> longbench_stop_ids(const LongBenchDataset& ds, const Tokenizer& tokenizer);

/// The prediction text of the generated ids (prompt excluded): decode without special tokens (render_special = false,
/// HF skip_special_tokens = True), so a final end-of-generation token adds nothing.
std::string longbench_prediction(const Tokenizer& tokenizer, const std::vector<int32_t>& generated);

/// eval.py's post-processing: for ds.first_line_only, prediction.lstrip("\n").split("\n")[0]; else unchanged.
std::string longbench_postprocess(const LongBenchDataset& ds, std::string_view prediction);

/// One metric on one (prediction, ground truth) pair (eval/metrics_text.hpp). `all_classes` is used by
/// classification only. Throws rkv::InputError as the metric does (retrieval without "Paragraph N").
double longbench_metric(LongBenchMetric metric, std::string_view prediction, std::string_view ground_truth,
                        const std::vector<std::string>& all_classes);

/// eval.py's score of one example: post-process the prediction, then max(0, metric(prediction, answer)) over the
/// record's answers. In [0, 1]. Throws rkv::InputError (naming record.source) for a classification dataset whose record
/// has no all_classes, and as longbench_metric.
double longbench_example_score(const LongBenchDataset& ds, std::string_view prediction, const LongBenchRecord& record);

/// eval.py's dataset score: 100 * sum(scores) / n (summed in order), unrounded. NaN for no scores.
double longbench_dataset_score(const std::vector<double>& example_scores);

/// Python's round(x, ndigits) for a finite double (eval.py reports round(score, 2)): the decimal value with `ndigits`
/// digits after the point nearest to x's exact binary value, ties to even, read back as a double.
double python_round_ndigits(double x, int ndigits);

/// LongBench-E's length bucket of a record's `length`: "0-4k" (< 4000), "4-8k" (< 8000), "8k+".
const char* longbench_e_bucket(int64_t length);

/// Checks that a record can be scored for `ds`: a classification dataset needs all_classes, passage_retrieval needs
/// "Paragraph N" in every answer. Throws rkv::InputError naming record.source and what is wrong.
void check_longbench_record(const LongBenchRecord& record, const LongBenchDataset& ds);

}  // namespace rkv
