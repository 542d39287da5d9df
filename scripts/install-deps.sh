#!/usr/bin/env bash
# Installs the Debian packages ripplekv builds and tests with, when any is missing. Safe to run repeatedly.
# --fuzz adds what scripts/fuzz.sh needs (clang, libFuzzer and the sanitizer runtimes, llvm-symbolizer); any other
# argument is one more Debian package name.
set -euo pipefail
packages=(
  cmake g++ make pkg-config git ca-certificates
  libboost-dev libboost-filesystem-dev libboost-program-options-dev
  libtomlplusplus-dev nlohmann-json3-dev libdlpack-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libpcre2-dev libssl-dev
  python3 python3-venv python3-pip gnuplot-nox
)
for arg in "$@"; do
  case "$arg" in
    --fuzz) packages+=(clang libclang-rt-14-dev llvm) ;;
    -*) echo "install-deps: unknown option '$arg' (use --fuzz or Debian package names)" >&2; exit 2 ;;
    *) packages+=("$arg") ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
