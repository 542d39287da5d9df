/* The C API from C99 (abi/ripplekv/ripplekv.h).
 *   test_capi unit   version, plugin listing, allocate with hand-computed budgets, errors with the message on the
 *                    context
 *   test_capi model  SmolLM2: tokenize/detokenize round trip, greedy chat generation naming Paris (with the first
 *                    struct layout and the current one), generation on a compressed cache (snapkv + uniform at
 *                    fraction 0.5: B = round(0.5 T L), L = 30 budgets summing to B, kept bytes B/(T L) of the full
 *                    cache), and its errors; the weights option (the resident set after opening: Q4_1 blocks
 *                    vs float32 matrices); exits 77 (skip) when the model file is absent, unless CI=true. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ripplekv/ripplekv.h>

static int failures = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                          \
    }                                                                      \
  } while (0)

#define CHECK_OK(ctx_err, call)                                                            \
  do {                                                                                     \
    rkv_status st_ = (call);                                                               \
    if (st_ != RKV_OK) {                                                                   \
      fprintf(stderr, "%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, (int)st_, ctx_err); \
      ++failures;                                                                          \
    }                                                                                      \
  } while (0)

/* The process's resident set in KiB (VmRSS of /proc/self/status), -1 when it cannot be read. */
static long rss_kib(void) {
  char line[256];
  long kib = -1;
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

static rkv_allocate_options alloc_options(const char* allocator) {
  rkv_allocate_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.allocator = allocator;
  return o;
}

static int test_unit(void) {
  rkv_context* ctx = NULL;
  char* json = NULL;
  int64_t b[4] = {0, 0, 0, 0};
  rkv_allocate_options o;
  static const double s[4] = {0.0, 1.0, 2.0, 3.0};

  CHECK(rkv_version() != NULL && strlen(rkv_version()) > 0);
  CHECK(rkv_context_create(&ctx) == RKV_OK && ctx != NULL);
  if (!ctx) return 1;
  CHECK(strcmp(rkv_context_last_error(ctx), "") == 0);

  /* plugin listing: JSON text naming the built-in allocators */
  CHECK_OK(rkv_context_last_error(ctx), rkv_plugins_json(ctx, &json));
  CHECK(json != NULL && json[0] == '[');
  CHECK(json != NULL && strstr(json, ".uniform\"") != NULL);
  CHECK(json != NULL && strstr(json, "allocator.ripplekv\"") != NULL);
  rkv_string_free(json);

  /* uniform, B = floor(0.1 * 100 * 4 + 0.5) = 40 over 4 layers -> 10 each */
  o = alloc_options("uniform");
  o.prefix_tokens = 100;
  o.budget_fraction = 0.1;
  o.n_layers = 4;
  CHECK_OK(rkv_context_last_error(ctx), rkv_allocate(ctx, &o, b, 4));
  CHECK(b[0] == 10 && b[1] == 10 && b[2] == 10 && b[3] == 10);

  /* uniform, B = 10 over 4 layers, T = 100: 2.5 each, floors 2 * 4 = 8, +1 to layers 0 and 1 -> 3, 3, 2, 2 */
  o = alloc_options("uniform");
  o.prefix_tokens = 100;
  o.budget_fraction = 0.025; /* floor(0.025 * 100 * 4 + 0.5) = 10 */
  o.n_layers = 4;
  CHECK_OK(rkv_context_last_error(ctx), rkv_allocate(ctx, &o, b, 4));
  CHECK(b[0] == 3 && b[1] == 3 && b[2] == 2 && b[3] == 2);

  /* ripplekv, s = [0, 1, 2, 3], T = 1000, F = 0.2: B = 800, C = 200; s^ = [0, 1/3, 2/3, 1], m = 1.5^s^ =
   * [1, 1.144714, 1.310371, 1.5] (mean 1.238771); raw 200 m / mean = [161.45, 184.82, 211.56, 242.17]; floors sum
   * 798, the two largest fractions (.82, .56) get +1 -> 161, 185, 212, 242 */
  o = alloc_options("ripplekv");
  o.profile = s;
  o.n_profile = 4;
  o.prefix_tokens = 1000;
  o.budget_fraction = 0.2;
  CHECK_OK(rkv_context_last_error(ctx), rkv_allocate(ctx, &o, b, 4));
  CHECK(b[0] == 161 && b[1] == 185 && b[2] == 212 && b[3] == 242);
  if (failures) fprintf(stderr, "ripplekv budgets: %lld %lld %lld %lld\n", (long long)b[0], (long long)b[1],
                        (long long)b[2], (long long)b[3]);

  /* errors: status and message on the context, cleared by the next successful call */
  o = alloc_options("no_such_allocator");
  o.prefix_tokens = 100;
  o.budget_fraction = 0.1;
  o.n_layers = 4;
  CHECK(rkv_allocate(ctx, &o, b, 4) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(rkv_context_last_error(ctx), "no_such_allocator") != NULL);
  o = alloc_options("uniform");
  o.prefix_tokens = 100;
  o.budget_fraction = 0.1;
  o.n_layers = 4;
  CHECK(rkv_allocate(ctx, &o, b, 3) == RKV_ERROR_INVALID_ARGUMENT); /* capacity below L */
  CHECK(strstr(rkv_context_last_error(ctx), "capacity") != NULL);
  o.budget_tokens = 5; /* both budget forms */
  CHECK(rkv_allocate(ctx, &o, b, 4) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(rkv_context_last_error(ctx), "set exactly one of budget_fraction and budget_tokens: both are set "
                                            "(budget_fraction 0.1, budget_tokens 5)") == 0);
  /* A NaN, negative or too large fraction is a bad fraction (before: "set exactly one ..." for NaN and negative). */
  o.budget_tokens = 0;
  o.budget_fraction = nan("");
  CHECK(rkv_allocate(ctx, &o, b, 4) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(rkv_context_last_error(ctx), "budget_fraction must be in (0, 1] (got nan)") == 0);
  o.budget_fraction = -0.5;
  CHECK(rkv_allocate(ctx, &o, b, 4) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(rkv_context_last_error(ctx), "budget_fraction must be in (0, 1] (got -0.5)") == 0);
  o.budget_fraction = 1.5;
  CHECK(rkv_allocate(ctx, &o, b, 4) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(rkv_context_last_error(ctx), "budget_fraction must be in (0, 1] (got 1.5)") == 0);
  /* Neither set: says both are 0. Negative tokens: names the tokens. */
  o.budget_fraction = 0;
  CHECK(rkv_allocate(ctx, &o, b, 4) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(rkv_context_last_error(ctx),
               "set exactly one of budget_fraction (in (0, 1]) and budget_tokens (>= 1): both are 0 (unset)") == 0);
  o.budget_tokens = -3;
  CHECK(rkv_allocate(ctx, &o, b, 4) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strcmp(rkv_context_last_error(ctx), "budget_tokens must be >= 1 (got -3)") == 0);
  o.struct_size = 8;
  CHECK(rkv_allocate(ctx, &o, b, 4) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(rkv_context_last_error(ctx), "struct_size") != NULL);
  {
    rkv_model_options mo;
    rkv_model* m = (rkv_model*)&mo; /* must be reset to NULL on failure */
    memset(&mo, 0, sizeof mo);
    mo.struct_size = sizeof mo;
    mo.path = "/nonexistent/model.gguf";
    CHECK(rkv_model_open(ctx, &mo, &m) == RKV_ERROR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK(strstr(rkv_context_last_error(ctx), "/nonexistent/model.gguf") != NULL);
    mo.weights = "q4_1"; /* not a weights setting: refused before the file is read */
    CHECK(rkv_model_open(ctx, &mo, &m) == RKV_ERROR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK(strstr(rkv_context_last_error(ctx), "weights") != NULL);
    mo.weights = NULL;
    mo.backend = "tpu";
    CHECK(rkv_model_open(ctx, &mo, &m) == RKV_ERROR_UNSUPPORTED);
    CHECK(strstr(rkv_context_last_error(ctx), "tpu") != NULL);
    /* cuda: refused with the reason where there is no device (or no CUDA build); with one, the missing file. */
    mo.backend = "cuda";
    {
      const rkv_status st = rkv_model_open(ctx, &mo, &m);
      CHECK(m == NULL);
      if (st == RKV_ERROR_UNSUPPORTED) {
        CHECK(strstr(rkv_context_last_error(ctx), "model.backend = cuda: ") != NULL);
      } else {
        CHECK(st == RKV_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(rkv_context_last_error(ctx), "/nonexistent/model.gguf") != NULL);
      }
    }
  }
  CHECK(rkv_results_json(ctx, "/nonexistent/run", &json) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(rkv_context_last_error(ctx), "results.jsonl") != NULL);
  CHECK_OK(rkv_context_last_error(ctx), rkv_plugins_json(ctx, &json));
  CHECK(strcmp(rkv_context_last_error(ctx), "") == 0);
  rkv_string_free(json);
  CHECK(rkv_plugins_json(NULL, &json) == RKV_ERROR_INVALID_ARGUMENT);

  rkv_context_destroy(ctx);
  return failures ? 1 : 0;
}

/* Writes `text` to `path`; returns 0 on success. */
static int write_text(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  if (!f) return 1;
  fputs(text, f);
  return fclose(f) != 0;
}

/* Reads the integer after `"key":` in a flat JSON object, or -1. */
static long json_int(const char* json, const char* key) {
  char pattern[64];
  const char* at;
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  at = strstr(json, pattern);
  return at ? strtol(at + strlen(pattern), NULL, 10) : -1;
}

/* rkv_generate with a compression config: snapkv + uniform at fraction 0.5, then the errors. */
static void test_compressed_generate(rkv_model* m) {
  const char* config = RKV_TEST_BINARY_DIR "/tests/capi/compress-snapkv-uniform.toml";
  const char* needs_profile = RKV_TEST_SOURCE_DIR "/configs/compress-snapkv-ripplekv.toml";
  rkv_generate_options go;
  char* text = NULL;
  char* info = NULL;
  long T, B, full, kept;
  const char* budgets;
  long sum = 0, count = 0;

  CHECK(write_text(config, "[scorer]\nplugin = \"snapkv\"\n[scorer.snapkv]\nwindow = 8\n"
                           "[allocator]\nplugin = \"uniform\"\n[budget]\nfraction = 0.5\n") == 0);
  memset(&go, 0, sizeof go);
  go.struct_size = sizeof go;
  go.prompt = "Read this and answer. The secret number is 4172. Many other words follow here, about the weather, "
              "the sea and the long road home. What is the secret number?";
  go.chat = 1;
  go.max_new_tokens = 16;
  go.compression_config = config;
  go.out_compression_json = &info;
  CHECK_OK(rkv_model_last_error(m), rkv_generate(m, &go, &text));
  CHECK(text != NULL && info != NULL);
  if (text && info) {
    printf("compressed generation: %s\n%s\n", text, info);
    CHECK(strstr(info, "\"scorer\":\"org.ripplekv.scorer.snapkv\"") != NULL);
    CHECK(strstr(info, "\"allocator\":\"org.ripplekv.allocator.uniform\"") != NULL);
    T = json_int(info, "prompt_tokens");
    B = json_int(info, "budget_total");
    full = json_int(info, "kv_bytes_full");
    kept = json_int(info, "kv_bytes_kept");
    CHECK(T > 40);
    CHECK(B == (long)(0.5 * (double)T * 30 + 0.5)); /* B = round(f T |A|), |A| = 30 layers */
    CHECK(kept == full * B / (30 * T));             /* bytes are proportional to the positions kept */
    budgets = strstr(info, "\"budgets\":[");
    CHECK(budgets != NULL);
    if (budgets) {
      const char* p = budgets + strlen("\"budgets\":[");
      while (*p && *p != ']') {
        char* end;
        long b = strtol(p, &end, 10);
        if (end == p) break;
        CHECK(b == B / 30 || b == B / 30 + 1); /* uniform: every layer within one position of B / L */
        sum += b;
        ++count;
        p = (*end == ',') ? end + 1 : end;
      }
      CHECK(count == 30);
      CHECK(sum == B);
    }
  }
  rkv_string_free(text);
  rkv_string_free(info);
  text = NULL;
  info = NULL;

  /* The ripplekv allocator needs a sensitivity profile. */
  go.compression_config = needs_profile;
  CHECK(rkv_generate(m, &go, &text) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(rkv_model_last_error(m), "needs a sensitivity profile") != NULL);
  CHECK(text == NULL && info == NULL);
  /* A config that does not exist is named. */
  go.compression_config = "/nonexistent/compress.toml";
  CHECK(rkv_generate(m, &go, &text) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(rkv_model_last_error(m), "/nonexistent/compress.toml") != NULL);
  /* A profile without a config is refused. */
  go.compression_config = NULL;
  go.profile_path = "profile.json";
  CHECK(rkv_generate(m, &go, &text) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(rkv_model_last_error(m), "profile_path") != NULL);
}

static int test_model(void) {
  char path[4096];
  const char* cache = getenv("RIPPLEKV_CACHE");
  const char* ci = getenv("CI");
  FILE* f;
  rkv_context* ctx = NULL;
  rkv_model* m = NULL;
  rkv_model_options mo;
  rkv_generate_options go;
  int32_t* ids = NULL;
  size_t n = 0;
  char* text = NULL;

  if (cache && cache[0])
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
  else
    snprintf(path, sizeof path, "%s/.cache/ripplekv/models/SmolLM2-135M-Instruct.Q4_1.gguf",
             getenv("HOME") ? getenv("HOME") : "");
  f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "model asset absent: %s\n", path);
    return (ci && strcmp(ci, "true") == 0) ? 1 : 77;
  }
  fclose(f);

  CHECK(rkv_context_create(&ctx) == RKV_OK);
  memset(&mo, 0, sizeof mo);
  mo.struct_size = sizeof mo;
  mo.path = path;
  mo.backend = "cpu";
  mo.threads = 2;
  /* bf16 is a cuda dtype: refused on cpu before the file is read. */
  mo.dtype = "bf16";
  CHECK(rkv_model_open(ctx, &mo, &m) == RKV_ERROR_UNSUPPORTED);
  CHECK(strstr(rkv_context_last_error(ctx), "model.dtype = bf16") != NULL);
  /* A caller built against the first layout (no dtype field) still opens a model: its dtype reads as f32. */
  mo.struct_size = RKV_MODEL_OPTIONS_SIZE_V0;
  CHECK_OK(rkv_context_last_error(ctx), rkv_model_open(ctx, &mo, &m));
  rkv_model_close(m);
  m = NULL;
  mo.struct_size = sizeof mo;
  mo.dtype = NULL;
  /* weights: SmolLM2-135M has 135M parameters, 94 MB of Q4_1 blocks in the file. "quantized" (the default) holds
     those blocks (the mapped file, about 100 MB resident); "f32" dequantizes every matrix (4 bytes a parameter, about
     540 MB). The resident set the open adds says which the model holds. */
  {
    long before = rss_kib();
    long added_quantized, added_f32;
    mo.weights = "quantized";
    CHECK_OK(rkv_context_last_error(ctx), rkv_model_open(ctx, &mo, &m));
    added_quantized = rss_kib() - before;
    rkv_model_close(m);
    before = rss_kib();
    mo.weights = "f32";
    CHECK_OK(rkv_context_last_error(ctx), rkv_model_open(ctx, &mo, &m));
    added_f32 = rss_kib() - before;
    rkv_model_close(m);
    printf("resident set added by rkv_model_open: weights = quantized %ld KiB, f32 %ld KiB\n", added_quantized,
           added_f32);
    CHECK(before > 0);
    CHECK(added_quantized < 250 * 1024);
    CHECK(added_f32 > 400 * 1024);
    /* A caller built against the second layout (up to dtype) never sets weights: whatever lies past its struct_size
       is not read, and the model opens with the default. */
    mo.weights = "not read";
    mo.struct_size = RKV_MODEL_OPTIONS_SIZE_V1;
    CHECK_OK(rkv_context_last_error(ctx), rkv_model_open(ctx, &mo, &m));
    rkv_model_close(m);
    mo.struct_size = sizeof mo;
    mo.weights = NULL;
  }
  m = NULL;
  CHECK_OK(rkv_context_last_error(ctx), rkv_model_open(ctx, &mo, &m));
  if (!m) return 1;

  /* SmolLM2 (GPT-2 BPE, no BOS by default): "Hello world" is two tokens, and decodes back to itself */
  CHECK_OK(rkv_model_last_error(m), rkv_tokenize(m, "Hello world", 1, 0, &ids, &n));
  CHECK(n == 2);
  CHECK_OK(rkv_model_last_error(m), rkv_detokenize(m, ids, n, 0, &text));
  CHECK(text != NULL && strcmp(text, "Hello world") == 0);
  rkv_string_free(text);
  rkv_ids_free(ids);
  {
    const int32_t bad = 1 << 30;
    CHECK(rkv_detokenize(m, &bad, 1, 0, &text) == RKV_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(rkv_model_last_error(m), "vocabulary") != NULL);
  }

  memset(&go, 0, sizeof go);
  go.struct_size = sizeof go;
  go.prompt = "What is the capital of France?";
  go.chat = 1;
  go.max_new_tokens = 24;
  CHECK_OK(rkv_model_last_error(m), rkv_generate(m, &go, &text));
  CHECK(text != NULL && strstr(text, "Paris") != NULL);
  printf("generated: %s\n", text ? text : "(null)");
  rkv_string_free(text);

  /* A caller built against the first layout (no compression fields) still works. */
  go.struct_size = RKV_GENERATE_OPTIONS_SIZE_V0;
  go.compression_config = "this field is past the caller's struct and must not be read";
  CHECK_OK(rkv_model_last_error(m), rkv_generate(m, &go, &text));
  CHECK(text != NULL && strstr(text, "Paris") != NULL);
  rkv_string_free(text);
  go.struct_size = RKV_GENERATE_OPTIONS_SIZE_V0 - 1;
  CHECK(rkv_generate(m, &go, &text) == RKV_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(rkv_model_last_error(m), "struct_size") != NULL);

  test_compressed_generate(m);

  rkv_model_close(m);
  rkv_context_destroy(ctx);
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "unit") == 0) return test_unit();
  if (argc == 2 && strcmp(argv[1], "model") == 0) return test_model();
  fprintf(stderr, "usage: %s unit|model\n", argv[0]);
  return 2;
}
