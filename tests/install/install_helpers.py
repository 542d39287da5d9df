"""Shared steps of the install tests: install this build into a prefix, build the out-of-tree knorm example against
it, run the installed CLI. Paths come from the environment ctest sets (tests/install/CMakeLists.txt)."""
import os
import subprocess

BUILD = os.environ["RKV_BUILD_DIR"]
SRC = os.environ["RKV_SOURCE_DIR"]
VERSION = os.environ["RKV_VERSION"]
CMAKE = os.environ.get("RKV_CMAKE", "cmake")
CC = os.environ.get("RKV_C_COMPILER", "cc")
HERE = os.path.dirname(os.path.abspath(__file__))
# A sanitized build (RIPPLEKV_SANITIZE) installs an instrumented libripplekv: programs that link it must be
# instrumented too (the ASan runtime has to come first). Plugins do not link libripplekv and need nothing.
SANITIZE_FLAGS = ["-fsanitize=address,undefined"] if os.environ.get("RKV_SANITIZE", "").upper() in (
    "ON", "1", "TRUE", "YES") else []
KNORM_SRC = os.path.join(SRC, "plugins", "examples", "knorm")
KNORM_ID = "org.example.scorer.keynorm"  # "keynorm": the built-in org.ripplekv.scorer.knorm owns "knorm"
BUILTIN_IDS = {
    "org.ripplekv.allocator.adakv", "org.ripplekv.allocator.pyramid", "org.ripplekv.allocator.ripplekv",
    "org.ripplekv.allocator.uniform", "org.ripplekv.allocator.manual",
    "org.ripplekv.scorer.h2o", "org.ripplekv.scorer.snapkv", "org.ripplekv.scorer.streamingllm",
    "org.ripplekv.scorer.knorm", "org.ripplekv.scorer.keydiff", "org.ripplekv.scorer.lagkv", "org.ripplekv.scorer.cur",
    "org.ripplekv.scorer.tova", "org.ripplekv.scorer.observed_attention", "org.ripplekv.scorer.chunkkv",
    "org.ripplekv.scorer.random", "org.ripplekv.scorer.non_causal_attention",
    "org.ripplekv.scorer.expected_attention", "org.ripplekv.scorer.leverage", "org.ripplekv.scorer.compactor",
    "org.ripplekv.scorer.criticalkv", "org.ripplekv.scorer.defensivekv", "org.ripplekv.allocator.global_topk",
    "org.ripplekv.signal.depth", "org.ripplekv.signal.layer_local", "org.ripplekv.signal.perturbation_kl",
    "org.ripplekv.signal.cake", "org.ripplekv.allocator.cake", "org.ripplekv.scorer.cake",
    "org.ripplekv.signal.squeezeattention", "org.ripplekv.allocator.squeezeattention",
    "org.ripplekv.allocator.dynamickv",
}
BUILTIN_LIBS = {
    "rkv_allocator_adakv.so", "rkv_allocator_pyramid.so", "rkv_allocator_ripplekv.so", "rkv_allocator_uniform.so",
    "rkv_scorer_h2o.so", "rkv_allocator_manual.so", "rkv_scorer_knorm.so", "rkv_scorer_keydiff.so",
    "rkv_scorer_lagkv.so", "rkv_scorer_cur.so", "rkv_scorer_tova.so", "rkv_scorer_observed_attention.so",
    "rkv_scorer_chunkkv.so", "rkv_scorer_random.so", "rkv_scorer_non_causal_attention.so",
    "rkv_scorer_expected_attention.so", "rkv_scorer_leverage.so", "rkv_scorer_compactor.so", "rkv_scorer_criticalkv.so",
    "rkv_scorer_defensivekv.so", "rkv_allocator_global_topk.so",
    "rkv_scorer_snapkv.so", "rkv_scorer_streamingllm.so", "rkv_signal_depth.so", "rkv_signal_layer_local.so",
    "rkv_signal_perturbation_kl.so", "rkv_signal_cake.so", "rkv_allocator_cake.so", "rkv_scorer_cake.so",
    "rkv_signal_squeezeattention.so", "rkv_allocator_squeezeattention.so", "rkv_allocator_dynamickv.so",
}


def clean_env(**extra):
    """The environment for installed programs: no plugin path, no library path that could reach the build tree."""
    env = dict(os.environ)
    for k in ("RIPPLEKV_PLUGIN_PATH", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH"):
        env.pop(k, None)
    env.update(extra)
    return env


def check(cmd, what, env=None, cwd=None, timeout=600):
    """Runs cmd; raises AssertionError with its output when it fails. Returns the CompletedProcess."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env or clean_env(), cwd=cwd, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("%s failed (exit %d): %s\nstdout:\n%s\nstderr:\n%s" %
                             (what, p.returncode, " ".join(cmd), p.stdout[-4000:], p.stderr[-4000:]))
    return p


def install(prefix):
    """`cmake --install <build> --prefix <prefix>`; says to build everything first when a built file is missing."""
    p = subprocess.run([CMAKE, "--install", BUILD, "--prefix", prefix], capture_output=True, text=True,
                       env=clean_env(), timeout=600)
    if p.returncode != 0:
        hint = ""
        if "file INSTALL cannot find" in p.stderr:
            hint = "\n(a target with an install rule is not built: build all targets first, e.g. scripts/build.sh)"
        raise AssertionError("cmake --install %s --prefix %s failed (exit %d):\n%s%s" %
                             (BUILD, prefix, p.returncode, p.stderr[-4000:], hint))


def configure_and_build(src, build, prefix, *defs):
    """Plain CMake, as a third party would run it: configure src against the installed prefix, then build."""
    check([CMAKE, "-S", src, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release", *defs],
          "configure " + src)
    check([CMAKE, "--build", build, "-j", "2"], "build " + src)


def build_knorm(prefix, build):
    """Builds plugins/examples/knorm out of tree against prefix; returns the path of knorm.so."""
    configure_and_build(KNORM_SRC, build, prefix)
    so = os.path.join(build, "knorm.so")
    if not os.path.isfile(so):
        raise AssertionError("knorm example built, but %s is missing" % so)
    return so


def cli(prefix):
    return os.path.join(prefix, "bin", "ripplekv")
