"""`ripplekv generate --compress` on SmolLM2: the per-layer budgets printed sum to B = floor(f T |A| + 0.5), the KV
bytes kept are that fraction of the full cache, and bad input (a profile-using allocator without --profile) is a
usage error. Skips (exit 77) without the model unless CI=true."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ["RIPPLEKV_BIN"]
CACHE = os.environ.get("RIPPLEKV_CACHE") or os.path.expanduser("~/.cache/ripplekv")
MODEL = os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


class GenerateCompress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(MODEL):
            if os.environ.get("CI") == "true":
                raise AssertionError("missing asset %s (CI=true)" % MODEL)
            print("skipping: missing asset %s; run scripts/fetch-assets" % MODEL)
            sys.exit(77)

    def config(self, allocator, extra=""):
        f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        f.write('[scorer]\nplugin = "streamingllm"\n[allocator]\nplugin = "%s"\n[budget]\nfraction = 0.25\n' % allocator)
        f.write(extra)
        f.close()
        return f.name

    def test_rolling_decode_keeps_the_cache_at_its_budget(self):
        """[compression.decode] policy = "rolling": after 12 decoded tokens the cache holds exactly what compression
        kept (KV bytes at the end == kept); with "none" it grows by 11 entries per layer and KV head (12 tokens, the
        last one is never fed back): 11 x 30 x 3 x (2 x 64 x 4 + 4) bytes more (by hand)."""
        prompt = "It is a truth universally acknowledged, that a single man in possession of a good fortune " * 6
        ends = {}
        for policy in ("none", "rolling"):
            cfg = self.config("uniform", '[compression.decode]\npolicy = "%s"\nsinks = 4\n' % policy)
            p = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", prompt, "--max-new-tokens", "12",
                                "--threads", "2", "--compress", cfg], capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stderr)
            kept = int(re.search(r"KV bytes (\d+) of", p.stderr).group(1))
            generated = int(re.search(r"\[(\d+) generated on the compressed cache", p.stderr).group(1))
            end = int(re.search(r"KV bytes at the end (\d+)", p.stderr).group(1))
            self.assertEqual(generated, 12, p.stderr)
            ends[policy] = (kept, end)
        self.assertEqual(ends["rolling"][1], ends["rolling"][0])
        self.assertEqual(ends["none"][1] - ends["none"][0], 11 * 30 * 3 * (2 * 64 * 4 + 4))

    def test_budgets_and_bytes(self):
        prompt = "It is a truth universally acknowledged, that a single man in possession of a good fortune " * 6
        p = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", prompt, "--max-new-tokens", "4",
                            "--threads", "2", "--compress", self.config("uniform")],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"compressed (\d+) prompt positions .*B = (\d+), KV bytes (\d+) of (\d+)", p.stderr)
        self.assertIsNotNone(m, p.stderr)
        T, B, kept, full = map(int, m.groups())
        self.assertEqual(B, int(0.25 * T * 30 + 0.5))
        budgets = [int(x) for x in re.search(r"\[budgets: ([\d ]+)\]", p.stderr).group(1).split()]
        self.assertEqual(len(budgets), 30)
        self.assertEqual(sum(budgets), B)
        self.assertEqual(kept, full * B // (30 * T))  # bytes are proportional to positions kept

    def test_rerotate_keeps_the_same_entries_and_a_misspelling_is_an_error(self):
        """[compression] rerotate = true re-rotates the kept keys in place: the same budgets and KV bytes as without,
        12 tokens decoded from the cache length; a wrong type is a usage error naming compression.rerotate."""
        prompt = "It is a truth universally acknowledged, that a single man in possession of a good fortune " * 6
        kept = {}
        for rerotate in ("false", "true"):
            p = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", prompt, "--max-new-tokens", "12",
                                "--threads", "2", "--compress",
                                self.config("uniform", "[compression]\nrerotate = %s\n" % rerotate)],
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(int(re.search(r"\[(\d+) generated on the compressed cache", p.stderr).group(1)), 12)
            kept[rerotate] = (re.search(r"\[budgets: ([\d ]+)\]", p.stderr).group(1),
                              int(re.search(r"KV bytes (\d+) of", p.stderr).group(1)))
        self.assertEqual(kept["true"], kept["false"])
        p = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", "Hello there", "--compress",
                            self.config("uniform", "[compression]\nrerotate = 1\n")],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("'compression.rerotate' must be true or false", p.stderr)

    def test_prompt_file_gives_the_prompts_output_and_repeated_warnings_are_folded(self):
        """--prompt-file FILE is --prompt with FILE's text: the same greedy tokens. With streamingllm's 8 sinks and
        b_l = 2 per layer, the host warns in every one of the 30 layers that b_l is below the protected count: one line
        for the 30 layers ("layers 0-29: ...")."""
        prompt = "It is a truth universally acknowledged, that a single man in possession of a good fortune " * 3
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(prompt)
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as c:
            c.write('[scorer]\nplugin = "streamingllm"\n[scorer.streamingllm]\nsinks = 8\n'
                    '[allocator]\nplugin = "uniform"\n[budget]\ntokens = 2\n')
        cfg = c.name
        outs = []
        for source in (["--prompt", prompt], ["--prompt-file", f.name]):
            p = subprocess.run([BIN, "generate", "--model", MODEL, *source, "--max-new-tokens", "6", "--threads", "2",
                                "--compress", cfg], capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stderr)
            outs.append(p.stdout)
            warnings = [l for l in p.stderr.splitlines() if l.startswith("warning: ")]
            self.assertEqual(len(warnings), len(set(warnings)), p.stderr)  # each distinct warning once
            self.assertTrue(any(l.startswith("warning: layers 0-29: budget b_l = 2 is below") for l in warnings), p.stderr)
        self.assertEqual(outs[0], outs[1])

    def test_profile_allocator_needs_profile(self):
        p = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", "Hello there", "--compress",
                            self.config("ripplekv")], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 2)
        self.assertIn("needs a sensitivity profile: give --profile FILE", p.stderr)

    def test_a_per_prompt_signal_needs_no_profile_file(self):
        """CAKE (`[signal] plugin = "cake"`, a per-prompt signal, with its allocator): the profile is computed on the
        prompt itself, so no --profile is asked for; every layer keeps at least snapkv's window of 32, and the budgets
        differ between layers (a uniform split would give every layer the same count within one)."""
        prompt = "It is a truth universally acknowledged, that a single man in possession of a good fortune " * 30
        cfg = self.config("cake", '[signal]\nplugin = "cake"\n')  # then under snapkv (window 32)
        text = open(cfg).read().replace('plugin = "streamingllm"', 'plugin = "snapkv"')
        open(cfg, "w").write(text)
        p = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", prompt, "--max-new-tokens", "2",
                            "--threads", "2", "--compress", cfg], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        budgets = [int(x) for x in re.search(r"\[budgets: ([0-9 ]+)\]", p.stderr).group(1).split()]
        self.assertEqual(len(budgets), 30)
        self.assertGreaterEqual(min(budgets), 32, p.stderr)
        self.assertGreater(max(budgets) - min(budgets), 100, p.stderr)
        profile = re.search(r"\[profile of this prompt \(org.ripplekv.signal.cake\):([0-9e.+\- ]+)\]", p.stderr)
        self.assertIsNotNone(profile, p.stderr)
        self.assertEqual(len(profile.group(1).split()), 30)

    def test_plugin_and_policy_errors_name_the_config(self):
        """A scorer param the plugin refuses when created (an even snapkv kernel), and a decode policy the scorer
        cannot serve (periodic under criticalkv, a prefill-only scorer): both errors start with the config's path, as
        the config's own errors do."""
        prompt = "It is a truth universally acknowledged, that a single man in possession of a good fortune " * 6
        for text, want in [('[scorer]\nplugin = "snapkv"\n[scorer.snapkv]\nkernel = 4\n',
                             "plugin 'org.ripplekv.scorer.snapkv': create failed"),
                            ('[scorer]\nplugin = "criticalkv"\n[compression.decode]\npolicy = "periodic"\n',
                             'compression.decode.policy = "periodic"')]:
            f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
            f.write(text + '[allocator]\nplugin = "uniform"\n[budget]\nfraction = 0.25\n')
            f.close()
            p = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", prompt, "--compress", f.name],
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("ripplekv generate: %s: %s" % (f.name, want), p.stderr)

if __name__ == "__main__":
    unittest.main()
