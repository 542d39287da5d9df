#include "runner/tasks/longbench.hpp"

#include <algorithm>

#include "eval/longbench.hpp"
#include "eval/longbench_records.hpp"
#include "runner/decode/loop.hpp"
#include "tokenizer/chat_template.hpp"

namespace rkv {

namespace {

/// A LongBench example: its record, its dataset's settings and its stop ids.
struct LongBenchExample : TaskPayload {
  LongBenchRecord record;
  LongBenchDataset dataset;
  std::vector<int32_t> stop_ids;
};

/// The dataset of `record` with the config's overrides of its prompt and answer length.
LongBenchDataset dataset_of(const LongBenchRecord& record, const LongBenchConfig& config) {
  LongBenchOverride ov;
  if (auto it = config.datasets.find(record.dataset); it != config.datasets.end()) {
    if (!it->second.prompt.empty()) ov.prompt_template = it->second.prompt;
    if (it->second.max_new_tokens > 0) ov.max_new_tokens = static_cast<int>(it->second.max_new_tokens);
  }
  return longbench_dataset(record.dataset, ov);
}

class LongBenchTask : public Task {
 public:
  std::string name() const override { return "longbench"; }

  /// Prompts are middle-truncated to fit (max_context_tokens, default the model's context length).
  void check_fits_context(const RunPlan&, int64_t) const override {}

  /// Every record of every file, in file order.
  std::vector<TaskExample> build_examples(const RunPlan& plan, const Tokenizer& tok,
                                          const ModelConfig& model) const override {
    std::vector<LongBenchRecord> records;
    for (const auto& f : plan.longbench.files) {
      std::vector<LongBenchRecord> more = read_longbench_jsonl(f);
      records.insert(records.end(), more.begin(), more.end());
    }
    const ChatTemplate chat = ChatTemplate::for_tokenizer(tok);
    const size_t max_len = static_cast<size_t>(plan.longbench.max_context_tokens > 0
                                                   ? plan.longbench.max_context_tokens
                                                   : std::max<int64_t>(model.context_length, 2));
    std::vector<TaskExample> out;
    for (size_t i = 0; i < records.size(); ++i) {
      auto data = std::make_shared<LongBenchExample>();
      data->record = records[i];
      data->dataset = dataset_of(records[i], plan.longbench);
      data->stop_ids = longbench_stop_ids(data->dataset, tok);
      TaskExample ex;
      ex.task = name();
      ex.index = static_cast<int64_t>(i);
      ex.prompt = longbench_prompt_ids(records[i], data->dataset, tok, &chat, max_len);
      const auto n = static_cast<int64_t>(ex.prompt.size());
      ex.input = {records[i].dataset, -1, n, n, records[i].id, token_ids_sha256(ex.prompt)};
      ex.payload = data;
      out.push_back(std::move(ex));
    }
    return out;
  }

  TaskScore score(Backend& backend, const Tokenizer& tok, const PrefilledPrompt& prompt, const TaskExample& example,
                  const TaskPayload*, ScoredCache& cache) const override {
    const auto& data = static_cast<const LongBenchExample&>(*example.payload);
    const GreedyResult r = answer_greedily(backend, prompt.last_logits, *cache.cache, cache.start_pos, {},
                                           data.dataset.max_new_tokens, data.stop_ids, cache.decode);
    TaskScore s;
    s.values[data.dataset.name] =
        100.0 * longbench_example_score(data.dataset, longbench_prediction(tok, r.tokens), data.record);
    s.decode_tokens_per_second = r.tokens_per_second;
    return s;
  }

  nlohmann::json manifest_settings(const RunPlan& plan) const override {
    return {{"max_context_tokens", plan.longbench.max_context_tokens},
            {"max_new_tokens", "per dataset (LongBench dataset2maxlen unless overridden)"}};
  }
};

}  // namespace

const Task& longbench_task() {
  static const LongBenchTask task;
  return task;
}

}  // namespace rkv
