#!/usr/bin/env python3
"""Writes a llama GGUF as a float32 Hugging Face folder (config.json + model.safetensors), Q/K in Hugging Face order.

Reading, dequantization and un-permutation come from hf_reference.py (the `gguf` package, independent of ripplekv).
Usage: gguf_to_hf.py --model GGUF --out DIR
"""

import argparse
import json
import os
import sys

from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import load_hf_weights  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cfg, w = load_hf_weights(args.model)
    os.makedirs(args.out, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": cfg["d_model"],
        "intermediate_size": cfg["d_ff"],
        "num_attention_heads": cfg["n_heads"],
        "num_key_value_heads": cfg["n_kv_heads"],
        "num_hidden_layers": cfg["n_layers"],
        "rms_norm_eps": cfg["rms_eps"],
        "rope_theta": cfg["rope_theta"],
        "max_position_embeddings": cfg["context_length"],
        "vocab_size": cfg["vocab_size"],
        "hidden_act": "silu",
        "tie_word_embeddings": cfg["tied"],
        "torch_dtype": "float32",
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file(w, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    main()
