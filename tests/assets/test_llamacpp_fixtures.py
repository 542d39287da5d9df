#!/usr/bin/env python3
"""Checks that the committed llama.cpp fixtures (tests/fixtures/llamacpp/) are complete and self-consistent, and
that they were made from the assets scripts/fetch-assets pins (standard library only).

The GGUF sha256 in the fixtures must equal the one pinned in scripts/fetch-assets; each logits file must hold
n_positions x n_vocab finite float16 values; the Austen texts must be verbatim passages of the extracted novels
(checked when <cache>/austen is present). Exit status 77 (a ctest skip) when every test that ran was skipped.
"""

import json
import math
import os
import re
import struct
import sys
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "llamacpp")
AUSTEN = os.path.join(os.environ.get("RIPPLEKV_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "ripplekv"),
                      "austen")
NOVEL_OF_SOURCE = {"Persuasion": "persuasion", "Pride and Prejudice": "prideprejudice",
                   "Northanger Abbey": "northangerabbey"}


def load(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


def pinned_gguf_sha256():
    with open(os.path.join(REPO, "scripts", "fetch-assets"), encoding="utf-8") as f:
        return re.search(r"^gguf_sha256=([0-9a-f]{64})$", f.read(), re.M).group(1)


def austen_text_or_skip(test, source):
    novel = NOVEL_OF_SOURCE[source.split(",")[0]]
    path = os.path.join(AUSTEN, f"{novel}.txt")
    if not os.path.exists(path):
        message = f"missing asset {path}; fetch it with scripts/fetch-assets"
        if os.environ.get("CI") == "true":
            test.fail(message + " (CI=true)")
        test.skipTest(message)
    with open(path, encoding="utf-8") as f:
        return f.read()


class FixturesTest(unittest.TestCase):
    def test_austen_tokens(self):
        fx = load("austen_tokens.json")
        self.assertEqual(fx["model_sha256"], pinned_gguf_sha256())
        self.assertFalse(fx["add_bos"])
        self.assertFalse(fx["parse_special"])
        self.assertTrue(3000 <= len(fx["text"].encode("utf-8")) <= 4500)
        self.assertTrue(all(isinstance(i, int) and 0 <= i < 49152 for i in fx["ids"]))
        # Byte-level BPE: every token covers at least one byte, and English prose averages well over 2 bytes a token.
        self.assertTrue(len(fx["text"]) / 6 < len(fx["ids"]) < len(fx["text"].encode("utf-8")))

    def test_logits(self):
        fx = load("logits.json")
        self.assertEqual(fx["model_sha256"], pinned_gguf_sha256())
        self.assertEqual((fx["n_vocab"], fx["dtype"], fx["byte_order"]), (49152, "float16", "little"))
        self.assertEqual(len(fx["prompts"]), 3)
        for i, prompt in enumerate(fx["prompts"]):
            with self.subTest(prompt["name"]):
                n = prompt["n_positions"]
                self.assertEqual(prompt["logits_file"], f"logits_{i}.f16")
                self.assertEqual(prompt["first_position"], len(prompt["ids"]) - n)
                self.assertGreaterEqual(prompt["first_position"], 0)
                with open(os.path.join(FIXTURES, prompt["logits_file"]), "rb") as f:
                    raw = f.read()
                self.assertEqual(len(raw), 2 * n * fx["n_vocab"])
                values = struct.unpack(f"<{len(raw) // 2}e", raw)
                self.assertTrue(all(math.isfinite(v) for v in values))
                # Logits of a trained LM: not constant, moderate size.
                self.assertTrue(1.0 < max(values) < 100.0 and min(values) > -100.0)
        chat = fx["prompts"][0]
        self.assertTrue(chat["parse_special"])
        self.assertEqual(chat["ids"][0], 1)                         # <|im_start|>
        self.assertEqual(chat["text"][-len("<|im_start|>assistant\n"):], "<|im_start|>assistant\n")
        self.assertEqual([len(p["ids"]) > 0 for p in fx["prompts"]], [True] * 3)

    def test_passages_are_verbatim_austen(self):
        passages = [load("austen_tokens.json")] + [p for p in load("logits.json")["prompts"] if p["name"] != "chat"]
        for passage in passages:
            with self.subTest(passage["source"]):
                self.assertIn(passage["text"], austen_text_or_skip(self, passage["source"]))


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    skipped = {getattr(test, "test_case", test).id() for test, _ in result.skipped}  # subtests: their test
    sys.exit(77 if result.testsRun and len(skipped) == result.testsRun else 0)
