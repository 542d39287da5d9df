#!/usr/bin/env python3
"""Manual cross-check (not a ctest): `ripplekv tokenize` against llama.cpp's own tokenizer (llama-cpp-python, the
<cache>/venv-llamacpp that tests/reference/make_llamacpp_fixtures.sh makes) on whole files.

Usage: <cache>/venv-llamacpp/bin/python tests/tokenizer/crosscheck_llamacpp.py RIPPLEKV_BINARY MODEL.gguf FILE...
Prints, per file, "ok" with the token count or the first position where the ids differ; exits 1 on any difference.
Both sides tokenize the raw file bytes with no BOS and special tokens not parsed.
"""
import os
import subprocess
import sys

import llama_cpp


def main():
    binary, model, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    total = mismatched = 0
    for path in files:
        data = open(path, "rb").read()
        ref = llm.tokenize(data, add_bos=False, special=False)
        out = subprocess.run([binary, "tokenize", "--model", model, "--text-file", path],
                             capture_output=True, check=True).stdout.split()
        ours = [int(x) for x in out]
        total += len(ref)
        if ours == ref:
            print(f"ok       {os.path.basename(path)}: {len(ref)} tokens, {len(data)} bytes")
            continue
        mismatched += 1
        i = next((k for k, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
        print(f"MISMATCH {os.path.basename(path)} at id {i}: ours {ours[i:i + 5]} llama.cpp {ref[i:i + 5]}")
    print(f"{os.path.basename(model)}: {total} tokens in {len(files)} files, {mismatched} files differ")
    sys.exit(1 if mismatched else 0)


if __name__ == "__main__":
    main()
