#!/usr/bin/env python3
"""Regenerates tests/fixtures/llamacpp/ with llama.cpp (through llama-cpp-python) on the SmolLM2 GGUF.

Run through tests/reference/make_llamacpp_fixtures.sh, which makes the pinned venv this needs
(<cache>/venv-llamacpp, llama-cpp-python built from source). Inputs come from scripts/fetch-assets:
<cache>/models/SmolLM2-135M-Instruct.Q4_1.gguf and <cache>/austen/*.txt. Output (format in
tests/fixtures/llamacpp/README.md):
  austen_tokens.json  llama.cpp's tokenization of about 4 KB of Persuasion (no BOS, special tokens not parsed)
  logits.json         three prompts: their exact ids and where their logits are
  logits_<i>.f16      llama.cpp's logits for the last 16 positions of prompt i, little-endian float16
                      [n_positions, n_vocab], one prefill of exactly the listed ids (no BOS added), logits_all

Usage: make_llamacpp_fixtures.py --model GGUF --austen DIR [--out DIR]
"""

import argparse
import hashlib
import json
import os
import platform
import re
import sys

import jinja2.sandbox
import llama_cpp
import llama_cpp.llama_cpp as llama_c_api
import numpy as np

N_POSITIONS = 16   # logits kept per prompt (the last positions)
N_CTX = 1024       # enough for every prompt here
N_THREADS = 2

# Texts cut from the extracted novels (<cache>/austen/<novel>.txt). `start` is the exact text the passage begins
# with; the passage ends at the paragraph (tokens fixture) or sentence (logits prompts) boundary that brings it
# closest to the target size.
TOKENS_PASSAGE = {"novel": "persuasion", "source": "Persuasion, Chapter 1 (opening)", "start": "Chapter 1\n",
                  "target_bytes": 3800}
LOGIT_PASSAGES = [
    {"novel": "prideprejudice", "source": "Pride and Prejudice, Chapter 1 (opening)",
     "start": "It is a truth universally acknowledged", "target_tokens": 100},
    {"novel": "northangerabbey", "source": "Northanger Abbey, Chapter 1 (opening)",
     "start": "No one who had ever seen Catherine Morland", "target_tokens": 300},
]
CHAT_QUESTION = "What is the capital of France?"


def write_json(path, value):
    """Writes `value` as indented UTF-8 JSON with each list of numbers kept on one line."""
    text = json.dumps(value, ensure_ascii=False, indent=1)
    text = re.sub(r"\[\s*(-?\d[\d\s,.-]*?)\s*\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def novel_from(austen_dir, novel, start):
    """The text of `novel` from the first occurrence of `start` on."""
    with open(os.path.join(austen_dir, f"{novel}.txt"), encoding="utf-8") as f:
        text = f.read()
    at = text.find(start)
    if at < 0:
        sys.exit(f"make_llamacpp_fixtures: '{start}' not found in {novel}.txt")
    return text[at:]


def paragraph_cut(text, target_bytes):
    """The prefix of `text` ending at the paragraph end (before a blank line) closest to `target_bytes` bytes."""
    ends = [m.start() for m in re.finditer(r"\n\n", text)]
    best = min(ends, key=lambda e: abs(len(text[:e].encode("utf-8")) - target_bytes))
    return text[:best]


def sentence_cut(llm, text, target_tokens):
    """The prefix of `text` ending after a sentence (., ! or ? and any closing quote, before whitespace) whose
    token count is closest to `target_tokens` (ties: the shorter)."""
    window = text[: target_tokens * 12]
    ends = [m.end() for m in re.finditer(r"[.!?][\"']?(?=\s)", window)]
    scored = [(abs(len(tokenize(llm, window[:e], special=False)) - target_tokens), e) for e in ends]
    return window[: min(scored)[1]]


def tokenize(llm, text, special):
    """llama.cpp's token ids of `text`: no BOS added; `special` parses special-token text such as <|im_start|>."""
    return llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)


def check_round_trip(llm, text, ids):
    back = llm.detokenize(ids).decode("utf-8")
    if back != text:
        sys.exit("make_llamacpp_fixtures: llama.cpp's detokenization does not reproduce the text")


def chat_prompt(llm):
    """The model's own chat template (GGUF tokenizer.chat_template) rendered the Hugging Face way (jinja2 sandbox,
    trim_blocks, lstrip_blocks) for one user message, with the generation prompt."""
    template = llm.metadata["tokenizer.chat_template"]
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=[{"role": "user", "content": CHAT_QUESTION}],
                                            add_generation_prompt=True)


def last_logits(llm, ids):
    """Prefills exactly `ids` in a fresh context and returns the logits of the last N_POSITIONS positions,
    float32 [N_POSITIONS, n_vocab]."""
    llm.reset()
    llm._ctx.kv_cache_clear()
    llm.eval(ids)
    scores = np.asarray(llm.scores[: len(ids)], dtype=np.float32)
    return scores[len(ids) - N_POSITIONS:]


def model_params_without_extra_buffers(default=llama_c_api.llama_model_default_params):
    """llama.cpp's default model params with use_extra_bufts off. The extra (repacking) buffer types include the
    AMX one, whose tile instructions fault with SIGILL on CPUs/VMs that report AMX but do not enable it (the
    machine these fixtures were made on). Llama() does not expose the field, so its default-params call is wrapped."""
    params = default()
    params.use_extra_bufts = False
    return params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--austen", required=True, help="folder of the extracted novels (<cache>/austen)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "llamacpp"))
    args = ap.parse_args()

    llama_c_api.llama_model_default_params = model_params_without_extra_buffers
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX, n_threads=N_THREADS,
                          n_threads_batch=N_THREADS, logits_all=True, seed=0, verbose=False)
    n_vocab = llm.n_vocab()
    generator = {
        "llama_cpp_python": llama_cpp.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        "settings": {"n_ctx": N_CTX, "n_batch": N_CTX, "n_ubatch": N_CTX, "n_threads": N_THREADS,
                     "logits_all": True, "use_extra_bufts": False, "kv_cache_type": "f16 (llama-cpp-python default)", "add_bos": False},
    }
    os.makedirs(args.out, exist_ok=True)

    # 1. Tokenization of a few pages of Austen.
    spec = TOKENS_PASSAGE
    text = paragraph_cut(novel_from(args.austen, spec["novel"], spec["start"]), spec["target_bytes"])
    ids = tokenize(llm, text, special=False)
    check_round_trip(llm, text, ids)
    write_json(os.path.join(args.out, "austen_tokens.json"),
               {"source": spec["source"], "text": text, "ids": ids, "add_bos": False, "parse_special": False,
                "model_sha256": sha256_file(args.model), "generator": generator})
    print(f"austen_tokens.json: {len(text.encode('utf-8'))} bytes of {spec['source']} -> {len(ids)} ids")

    # 2. Logits of three prompts.
    prompts = [{"name": "chat", "source": f"SmolLM2 chat template, one user message: {CHAT_QUESTION}",
                "text": chat_prompt(llm), "parse_special": True}]
    for spec in LOGIT_PASSAGES:
        passage = sentence_cut(llm, novel_from(args.austen, spec["novel"], spec["start"]), spec["target_tokens"])
        prompts.append({"name": f"austen_{spec['target_tokens']}", "source": spec["source"], "text": passage,
                        "parse_special": False})
    records = []
    for i, prompt in enumerate(prompts):
        ids = tokenize(llm, prompt["text"], special=prompt["parse_special"])
        logits = last_logits(llm, ids)
        name = f"logits_{i}.f16"
        logits.astype("<f2").tofile(os.path.join(args.out, name))
        records.append({**prompt, "ids": ids, "logits_file": name, "n_positions": N_POSITIONS,
                        "first_position": len(ids) - N_POSITIONS})
        print(f"{name}: prompt {prompt['name']} ({len(ids)} ids), logits of positions "
              f"{len(ids) - N_POSITIONS}..{len(ids) - 1}, max |logit| {float(np.abs(logits).max()):.2f}")
    write_json(os.path.join(args.out, "logits.json"),
               {"model_sha256": sha256_file(args.model), "n_vocab": n_vocab, "dtype": "float16",
                "byte_order": "little", "generator": generator, "prompts": records})


if __name__ == "__main__":
    main()
