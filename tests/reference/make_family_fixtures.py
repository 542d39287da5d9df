#!/usr/bin/env python3
"""Reference fixtures of the model families ripplekv runs, from transformers and llama.cpp's own converter.

For each family a small random model is built by transformers from a config (no download), its norm weights moved
off 1 so a loader that drops or shifts one is caught, and saved as a Hugging Face folder (float32 safetensors). The
folder is converted to GGUF by llama.cpp's `convert_hf_to_gguf.py` (the vendored llama.cpp of the pinned
llama-cpp-python sdist, with its own gguf-py) at f32 and q8_0. transformers then computes, in float64 with eager
attention, the logits of every position of a fixed prompt and of 8 greedy decode steps after it.

The tokenizer is a byte-level BPE of 512 entries trained on Austen by the `tokenizers` library (GPT-2's
pre-tokenization). llama.cpp's converter names a BPE pre-tokenizer by the hash of a known published tokenizer's
output, which a new one cannot have: it is told "gpt-2", which is what this tokenizer's pre-tokenization is. The
converter's sentencepiece attempt, made first for some families, is skipped when the folder has no tokenizer.model
(as it is when sentencepiece is installed; it is not in the pinned venv), and Gemma 2's converter, which knows only
sentencepiece vocabularies, and Phi-3's, which takes a byte-level BPE only under the class name GPT2Tokenizer, write
this one as the others do (`_set_vocab_gpt2`). Nothing else of the converter is
touched: the tensors, norms (Gemma's 1 + w) and hyperparameters are its own.

Writes, per family, OUT/<family>/: hf/ (the folder), model-f32.gguf, model-q8_0.gguf, logits.f32 (float32
little-endian [T + 8, V]: the prompt's T positions, then the logits after each greedy step), reference.json
(ids, greedy ids, shapes, versions, and what each file is). Families with a sliding window whose GGUF the converter
writes without it (mistral: llama.cpp's llama architecture has no window) also get logits-nowindow.f32, the same
model run by transformers with the window removed: what the GGUF holds.

Usage: make_family_fixtures.py --llama-cpp DIR --austen FILE --out DIR [--family NAME ...]
"""

import argparse
import copy
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import tokenizers
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

PROMPT_TOKENS = 80
DECODE_STEPS = 8
VOCAB = 512


def families():
    """name -> (config, note). Small shapes, GQA everywhere, head dims 64 and 128. A family's seed is its index here:
    add new families at the end, so the others' files stay the same."""
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  max_position_embeddings=4096, initializer_range=0.15, rms_norm_eps=1e-5)
    return {
        "llama3": (transformers.LlamaConfig(
            **common, num_attention_heads=4, num_key_value_heads=2, head_dim=64, rope_theta=500000.0,
            tie_word_embeddings=True,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 256}),
            "Llama 3.1 layout: llama3 RoPE scaling (original context 256, so most frequencies are scaled), tied "
            "embeddings, head_dim 64 (4 heads, 2 KV heads)"),
        "mistral": (transformers.MistralConfig(
            **common, num_attention_heads=4, num_key_value_heads=1, head_dim=64, rope_theta=10000.0,
            sliding_window=32, tie_word_embeddings=False),
            "Mistral 7B v0.1 layout: a sliding window of 32 tokens (the prompt is 80), head_dim 64 (4 heads, 1 KV head)"),
        "qwen3": (transformers.Qwen3Config(
            **common, num_attention_heads=2, num_key_value_heads=1, head_dim=128, rope_theta=1000000.0,
            tie_word_embeddings=False),
            "Qwen3 layout: per-head RMSNorm of q and k before RoPE, no QKV bias, head_dim 128 (2 heads, 1 KV head)"),
        "olmo2": (transformers.Olmo2Config(
            **dict(common, hidden_size=128), num_attention_heads=2, num_key_value_heads=1, rope_theta=500000.0,
            tie_word_embeddings=False),
            "OLMo 2 layout: RMSNorm after attention and after the MLP (none before), q/k RMSNorm over the whole "
            "projection, hidden 128, head_dim 64 (2 heads, 1 KV head)"),
        "gemma2": (transformers.Gemma2Config(
            **dict(common, rms_norm_eps=1e-6), num_attention_heads=2, num_key_value_heads=1, head_dim=64,
            rope_theta=10000.0, query_pre_attn_scalar=64, sliding_window=32, attn_logit_softcapping=3.0,
            final_logit_softcapping=10.0, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True),
            "Gemma 2 layout: layers 0 slides (window 32, the prompt is 80) and 1 is global, attention scores soft-capped "
            "at 3 and final logits at 10 (small caps, so both act on these scores), norms before and after attention "
            "and the MLP stored as w for x (1 + w), embeddings times sqrt(64), GeGLU, head_dim 64 (2 heads, 1 KV head)"),
        "phi3": (transformers.Phi3Config(
            **dict(common, hidden_size=128), num_attention_heads=2, num_key_value_heads=1, rope_theta=10000.0,
            sliding_window=32, original_max_position_embeddings=4096, rope_scaling=None, tie_word_embeddings=False,
            pad_token_id=0, bos_token_id=0, eos_token_id=0),
            "Phi-3 mini layout: one fused qkv_proj and one fused gate_up_proj, a sliding window of 32 tokens on every "
            "layer (the prompt is 80), no RoPE scaling, hidden 128, head_dim 64 (2 heads, 1 KV head)"),
        "gemma3": (transformers.Gemma3TextConfig(
            **dict(common, rms_norm_eps=1e-6), num_attention_heads=2, num_key_value_heads=1, head_dim=64,
            rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 8.0},
            query_pre_attn_scalar=64, sliding_window=32, layer_types=["sliding_attention", "full_attention"],
            final_logit_softcapping=None, attn_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh",
            tie_word_embeddings=True),
            "Gemma 3 layout (Gemma3ForCausalLM, model_type gemma3_text): layer 0 slides (window 32, RoPE base 1e4) "
            "and layer 1 is global (RoPE base 1e6, linear scaling 8), per-head Q/K RMSNorm, norms before and after "
            "attention and the MLP, all stored as w for x (1 + w), embeddings times sqrt(64), GeGLU, head_dim 64"),
    }


# Families whose GGUF llama.cpp's converter writes without part of the config: how to make the config it holds.
GGUF_HOLDS = {
    "mistral": (lambda c: setattr(c, "sliding_window", None),
                "no sliding window (the converter writes Mistral as `llama`, which has none)"),
    "gemma3": (lambda c: setattr(c, "layer_types", ["sliding_attention" if (i + 1) % 6 else "full_attention"
                                                    for i in range(c.num_hidden_layers)]),
               "llama.cpp's fixed Gemma 3 pattern, every 6th layer global (the converter writes no layer types), so "
               "both layers slide"),
}


def train_tokenizer(austen_text):
    """A byte-level BPE of VOCAB entries (GPT-2 pre-tokenization), trained on the first 400,000 characters."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([austen_text[:400000]], trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>")


def build_model(config, seed):
    """The family's model with seeded random weights; every norm weight set to 1 + 0.2 N(0, 1)."""
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    return model.eval()


def convert(llama_cpp, hf_dir, outtype, out_file, model_name):
    """llama.cpp's convert_hf_to_gguf.py in a child process (see the module docstring for its two shims)."""
    shim = (
        "import sys, runpy\n"
        f"sys.path[:0] = [{str(llama_cpp / 'gguf-py')!r}, {str(llama_cpp)!r}]\n"
        "import conversion.base as base\n"
        "base.TextModel.get_vocab_base_pre = lambda self, tokenizer: 'gpt-2'\n"
        "spm = base.TextModel._set_vocab_sentencepiece\n"
        "def no_spm(self, *a, **k):\n"
        "    if not (self.dir_model / 'tokenizer.model').is_file(): raise FileNotFoundError('no tokenizer.model')\n"
        "    return spm(self, *a, **k)\n"
        "base.TextModel._set_vocab_sentencepiece = no_spm\n"
        "import conversion.gemma as gemma\n"
        "gemma.Gemma2Model.set_vocab = lambda self: self._set_vocab_gpt2()\n"
        "import conversion.phi as phi\n"
        "phi.Phi3MiniModel.set_vocab = lambda self: self._set_vocab_gpt2()\n"
        f"sys.argv = ['convert_hf_to_gguf.py', {str(hf_dir)!r}, '--outtype', {outtype!r}, '--outfile', {str(out_file)!r},"
        f" '--model-name', {model_name!r}]\n"
        f"runpy.run_path({str(llama_cpp / 'convert_hf_to_gguf.py')!r}, run_name='__main__')\n"
    )
    subprocess.run([sys.executable, "-c", shim], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@torch.no_grad()
def reference_logits(model, ids):
    """float64 logits [T + DECODE_STEPS, V]: every prompt position, then each greedy step's; and the greedy ids."""
    m = model.double()
    seq = torch.tensor([ids], dtype=torch.long)
    rows = [m(seq).logits[0]]
    greedy = []
    for _ in range(DECODE_STEPS):
        nxt = int(torch.argmax(rows[-1][-1]))
        greedy.append(nxt)
        seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
        rows.append(m(seq).logits[0, -1:])
    model.float()
    return torch.cat(rows).numpy(), greedy


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", type=Path, required=True, help="the vendored llama.cpp folder")
    ap.add_argument("--austen", type=Path, required=True, help="an Austen text (the tokenizer's training text)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--family", action="append", help="only these families (default: all)")
    args = ap.parse_args()

    text = args.austen.read_text(encoding="utf-8")
    tokenizer = train_tokenizer(text)
    ids = tokenizer(text[5000:8000])["input_ids"][:PROMPT_TOKENS]
    assert len(ids) == PROMPT_TOKENS
    llama_version = (args.llama_cpp / ".." / ".." / "PKG-INFO").resolve()  # the sdist's, naming its version
    for seed, (name, (config, note)) in enumerate(families().items()):
        if args.family and name not in args.family:
            continue
        out = args.out / name
        if out.exists():
            shutil.rmtree(out)
        hf = out / "hf"
        model = build_model(config, seed)
        model.save_pretrained(hf, safe_serialization=True)
        tokenizer.save_pretrained(hf)
        for t in ("f32", "q8_0"):
            convert(args.llama_cpp, hf, t, out / f"model-{t}.gguf", f"ripplekv random {name}")
        logits, greedy = reference_logits(model, ids)
        logits.astype("<f4").tofile(out / "logits.f32")
        files = {"hf": "the Hugging Face folder (float32 safetensors, tokenizer.json)",
                 "model-f32.gguf": "llama.cpp's converter, --outtype f32",
                 "model-q8_0.gguf": "llama.cpp's converter, --outtype q8_0",
                 "logits.f32": f"transformers float64 eager logits as float32 [{PROMPT_TOKENS + DECODE_STEPS}, {VOCAB}]"}
        gguf_logits = "logits.f32"
        if name in GGUF_HOLDS:  # the converter drops part of the config: the GGUF is checked against what it holds
            edit, what = GGUF_HOLDS[name]
            held = copy.deepcopy(config)
            edit(held)
            plain = build_model(held, seed)
            plain.load_state_dict(model.state_dict())
            held_logits, greedy_gguf = reference_logits(plain, ids)
            held_logits.astype("<f4").tofile(out / "logits-gguf.f32")
            files["logits-gguf.f32"] = "the same weights with the config the GGUF holds: " + what
            gguf_logits = "logits-gguf.f32"
        ref = {
            "family": name, "note": note, "ids": ids, "greedy_ids": greedy, "prompt_tokens": PROMPT_TOKENS,
            "decode_steps": DECODE_STEPS, "vocab_size": VOCAB, "seed": seed, "gguf_logits": gguf_logits,
            "hf_logits": "logits.f32", "files": files,
            "sha256": {f: sha256(out / f) for f in ("model-f32.gguf", "model-q8_0.gguf", "logits.f32")},
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "tokenizers": tokenizers.__version__, "numpy": np.__version__,
                         "llama_cpp_python": re.search(r"^Version: (\S+)$", llama_version.read_text(), re.M).group(1)
                         if llama_version.exists() else str(args.llama_cpp)},
            "config": json.loads(config.to_json_string()),
        }
        if gguf_logits != "logits.f32":
            ref["greedy_ids_gguf"] = greedy_gguf
        (out / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")
        print(f"{name}: {out} ({sum(f.stat().st_size for f in out.rglob('*') if f.is_file())} bytes)")


if __name__ == "__main__":
    main()
