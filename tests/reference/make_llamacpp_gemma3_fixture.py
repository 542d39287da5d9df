#!/usr/bin/env python3
"""Makes tests/fixtures/llamacpp/gemma3_logits.{json,f16}: llama.cpp's logits for Gemma 3 270M on 1,100 tokens of Austen.

Run with the pinned llama-cpp-python venv that tests/reference/make_llamacpp_fixtures.sh builds
(<cache>/venv-llamacpp: llama-cpp-python 0.3.36 from source, whose llama.cpp has gemma3 with its sliding-window
("iSWA") KV cache). Inputs come from scripts/fetch-assets: <cache>/models/gemma-3-270m-q4_k_m.gguf and
<cache>/austen/prideprejudice.txt. Output (format in tests/fixtures/llamacpp/README.md):
  gemma3_logits.json  the text tokenized (12,000 characters of Pride and Prejudice from Chapter 1), the exact ids
                      fed (BOS + its first 1,099 tokens) and the positions whose logits are stored
  gemma3_logits.f16   llama.cpp's logits at those positions, little-endian float16 [n_positions, n_vocab]; one
                      prefill of exactly the listed ids, logits_all

The positions lie on both sides of the 512-token window (and the last ones predict past position 1,000), so a
forward without the window or with one RoPE base disagrees with them.

Usage: <cache>/venv-llamacpp/bin/python make_llamacpp_gemma3_fixture.py --model GGUF --austen DIR [--out DIR]
"""

import argparse
import hashlib
import json
import os
import platform
import sys

import llama_cpp
import llama_cpp.llama_cpp as llama_c_api
import numpy as np

N_TOKENS = 1100
POSITIONS = [100, 300, 511, 512, 600, 800, 1000, 1099]  # 4 MB of float16 at 262,144 logits each
N_THREADS = 2
START = "It is a truth universally acknowledged"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_params_without_extra_buffers(default=llama_c_api.llama_model_default_params):
    """llama.cpp's default model params with use_extra_bufts off (as make_llamacpp_fixtures.py: the AMX repacking
    buffers fault with SIGILL on VMs that report AMX without enabling it)."""
    params = default()
    params.use_extra_bufts = False
    return params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--austen", required=True, help="folder of the extracted novels (<cache>/austen)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "llamacpp"))
    args = ap.parse_args()

    llama_c_api.llama_model_default_params = model_params_without_extra_buffers
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=2048, n_batch=2048, n_ubatch=2048, n_threads=N_THREADS,
                          n_threads_batch=N_THREADS, logits_all=True, seed=0, verbose=False)
    with open(os.path.join(args.austen, "prideprejudice.txt"), encoding="utf-8") as f:
        text = f.read()
    at = text.find(START)
    if at < 0:
        sys.exit(f"make_llamacpp_gemma3_fixture: '{START}' not found in prideprejudice.txt")
    excerpt = text[at : at + 12000]
    ids = llm.tokenize(excerpt.encode("utf-8"), add_bos=True, special=False)[:N_TOKENS]
    if len(ids) != N_TOKENS or ids[0] != llm.token_bos():
        sys.exit("make_llamacpp_gemma3_fixture: expected BOS + 1,099 text tokens")
    llm.reset()
    llm.eval(ids)
    scores = np.asarray(llm.scores[:N_TOKENS], dtype=np.float32)[POSITIONS]
    os.makedirs(args.out, exist_ok=True)
    scores.astype("<f2").tofile(os.path.join(args.out, "gemma3_logits.f16"))
    record = {
        "model": "gemma-3-270m-q4_k_m.gguf", "model_sha256": sha256_file(args.model), "n_vocab": llm.n_vocab(),
        "dtype": "float16", "byte_order": "little", "source": "Pride and Prejudice, Chapter 1 on (BOS + 1,099 tokens)",
        "text": excerpt, "ids": ids, "positions": POSITIONS, "logits_file": "gemma3_logits.f16",
        "generator": {"llama_cpp_python": llama_cpp.__version__, "python": platform.python_version(),
                      "machine": platform.machine(),
                      "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
                      "settings": {"n_ctx": 2048, "n_batch": 2048, "n_ubatch": 2048, "n_threads": N_THREADS,
                                   "logits_all": True, "use_extra_bufts": False, "add_bos": True}},
    }
    with open(os.path.join(args.out, "gemma3_logits.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"gemma3_logits.f16: positions {POSITIONS}, max |logit| {float(np.abs(scores).max()):.2f}")


if __name__ == "__main__":
    main()
