"""The ripplekv side of the end-to-end kvpress comparison on SmolLM2 (standard library only): the prompts, the budgets,
the config that reproduces kvpress's presses, running `ripplekv run --dump kept` and counting differing positions.

Used by tests/reference/compare_kvpress_smollm2.py (which adds kvpress's side and writes the fixtures) and by
tests/scorers/test_kvpress_e2e.py (the slow test that re-runs ripplekv against the committed kvpress positions).

Prompts: PROMPTS, excerpts of the fetched Austen novels. Each excerpt is written to a text file and tokenized by
`ripplekv tokenize` (no BOS, as the runner's text windows); the file's M ids are one lm_fidelity window of
prefix_tokens T = M - CONTINUATION plus CONTINUATION tokens, so the run's only window starts at token 0 (a file of
exactly one window length: host/runner/tasks/text_windows.hpp) and its prompt is ids[:T]. run_ripplekv checks that in the
run's examples.jsonl (token offset 0, T prompt tokens, the sha256 of the M ids).

Budgets: kvpress' compression_ratio r keeps n = int(T (1 - r)) positions per layer and KV head (kvpress'
compute_n_kept; n_kept() below is the same expression); ripplekv gets `[budget] tokens = n` with the uniform
allocator, so both keep exactly n per layer and head.
"""
import hashlib
import json
import os
import struct
import subprocess

# (novel under <cache>/austen, first character: the excerpt starts after the first blank line at or after it)
PROMPTS = [("prideprejudice", 100000), ("emma", 300000), ("persuasion", 200000)]
EXCERPT_CHARS = 3000  # then up to the next line end: about 800 SmolLM2 tokens
CONTINUATION = 4
RATIOS = [0.9, 0.7, 0.5]  # kvpress compression_ratio = share removed: 10%, 30%, 50% kept

# method: (kvpress press class name, its arguments (kvpress' defaults), ripplekv scorer plugin, the params that
# reproduce the press (README "kvpress presses and conventions"))
METHODS = {
    "snapkv": ("SnapKVPress", {}, "snapkv", {"window": 64, "kernel": 5, "pooling": "avg", "gqa": "mean"}),
    "streamingllm": ("StreamingLLMPress", {}, "streamingllm", {"sinks": 4}),
    "knorm": ("KnormPress", {}, "knorm", {}),
}


def n_kept(T, ratio):
    """kvpress 0.5.5 compute_n_kept: int(T * (1 - compression_ratio))."""
    return int(T * (1 - ratio))


def excerpt(austen_dir, novel, start):
    """(text, first character): from the first blank line at or after `start`, EXCERPT_CHARS characters, then to the
    next line end."""
    with open(os.path.join(austen_dir, novel + ".txt"), encoding="utf-8") as f:
        text = f.read()
    s = text.index("\n\n", start) + 2
    e = text.index("\n", s + EXCERPT_CHARS)
    return text[s:e], s


def tokenize(ripplekv, model, path):
    """Token ids of a text file by `ripplekv tokenize` (no BOS, special tokens not parsed)."""
    out = subprocess.run([ripplekv, "tokenize", "--model", model, "--text-file", path], check=True,
                         capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def ids_sha256(ids):
    """sha256 of the ids as little-endian int32 (ripplekv's examples.jsonl `ids_sha256`)."""
    return hashlib.sha256(struct.pack("<%di" % len(ids), *ids)).hexdigest()


def write_prompt(austen_dir, work, novel, start):
    """Writes the excerpt of PROMPTS entry (novel, start) under `work`; returns (name, path, text, first char)."""
    text, first_char = excerpt(austen_dir, novel, start)
    name = f"{novel}-{first_char}"
    path = os.path.join(work, name + ".txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return name, path, text, first_char


def ripplekv_config(prompt_file, T, n_kept_list, model, threads=2):
    """The TOML of one prompt's run: every METHODS scorer x every budget in n_kept_list, uniform allocator, f32."""
    q = json.dumps  # strings, ints and floats print the same in TOML
    lines = [
        "# written by tests/reference/kvpress_e2e.py",
        "[model]", f"path = {q(model)}", 'backend = "cpu"', f"threads = {threads}", 'weights = "f32"',
        "[data.calibration]  # required by the schema; unused: the uniform allocator needs no profile",
        'files = ["austen:emma"]', "examples = 1", "prefix_tokens = 16", "window_tokens = 4",
        "[data.eval]", f"files = [{q(prompt_file)}]", "examples = 1", f"prefix_tokens = {T}", "seed = 0",
        "[scorer]", f"plugin = {q(next(iter(METHODS.values()))[2])}",
    ]
    for _, _, plugin, params in METHODS.values():
        if params:
            lines.append(f"[scorer.{plugin}]")
            lines += [f"{k} = {q(v)}" for k, v in params.items()]
    lines += [
        "[allocator]", 'plugin = "uniform"',
        "[budget]", f"tokens = {n_kept_list[0]}",
        "[tasks]", 'run = ["lm_fidelity"]', "[tasks.lm_fidelity]", f"continuation_tokens = {CONTINUATION}",
        "[sweep]", '"scorer.plugin" = [%s]' % ", ".join(q(m[2]) for m in METHODS.values()),
        '"budget.tokens" = [%s]' % ", ".join(str(n) for n in n_kept_list),
        "[output]", "bootstrap_resamples = 100",
    ]
    return "\n".join(lines) + "\n"


def run_ripplekv(ripplekv, model, work, name, prompt_file, window_ids, n_kept_list):
    """{(plugin, n): [layer][head] -> ascending kept positions} from `ripplekv run --dump kept` on one prompt file
    whose ids are `window_ids` (the prompt: window_ids[:-CONTINUATION]). Raises AssertionError when the run's window
    is not that prompt."""
    T = len(window_ids) - CONTINUATION
    config = os.path.join(work, name + ".toml")
    with open(config, "w") as f:
        f.write(ripplekv_config(prompt_file, T, n_kept_list, model))
    out = os.path.join(work, name + "-run")
    subprocess.run([ripplekv, "run", config, "--out", out, "--force", "--dump", "kept", "--quiet"], check=True)
    with open(os.path.join(out, "examples.jsonl")) as f:
        inputs = [json.loads(line).get("input") for line in f]
    for inp in inputs:
        assert inp and inp["token_offset"] == 0 and inp["prompt_tokens"] == T and \
            inp["ids_sha256"] == ids_sha256(window_ids), inp
    with open(os.path.join(out, "run.json")) as f:
        cells = json.load(f)["cells"]
    kept = {}
    for c in cells:
        v = c["cell"]
        if not v:
            continue  # the full-cache cell
        layers = {}
        with open(os.path.join(out, "dumps", "kept", c["id"] + ".jsonl")) as f:
            for line in f:
                r = json.loads(line)
                assert r["T"] == T, r
                layers.setdefault(r["layer"], {})[r["head"]] = r["positions"]
        kept[(v["scorer.plugin"], int(v["budget.tokens"]))] = [[layers[l][h] for h in sorted(layers[l])]
                                                               for l in sorted(layers)]
    return kept


def positions_mask(positions):
    """Kept positions as a hex bit mask (bit p set: position p kept)."""
    m = 0
    for p in positions:
        m |= 1 << p
    return format(m, "x")


def mask_positions(mask, T):
    m = int(mask, 16)
    return [p for p in range(T) if (m >> p) & 1]


def swapped(kvpress_heads, ripplekv_heads):
    """Per KV head (kvpress only, ripplekv only) positions of one layer; both sides must keep as many per head."""
    out = []
    for a, b in zip(kvpress_heads, ripplekv_heads, strict=True):
        assert len(a) == len(b), (len(a), len(b))
        out.append((sorted(set(a) - set(b)), sorted(set(b) - set(a))))
    return out
