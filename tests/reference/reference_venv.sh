# Sourced by the tests/reference/make_*.sh scripts.
# reference_venv VENV REQUIREMENTS WHO NOTE makes the pinned venv
# VENV from REQUIREMENTS (python3, or $PYTHON) unless it already holds exactly that file's pins for this Python (a
# stamp of the file's sha256 and the Python version); WHO and NOTE name the script and the cost in its message.
reference_venv() {
  local venv=$1 requirements=$2 who=$3 note=$4 python=${PYTHON:-python3} want
  want="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" -c 'import sys; print(sys.version.split()[0])')"
  if ! { [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.ripplekv-stamp" 2>/dev/null)" = "$want" ]; }; then
    echo "$who: building $venv from ${requirements##*/} ($note)"
    "$python" -m venv --clear "$venv"
    "$venv/bin/pip" install --disable-pip-version-check -r "$requirements"
    echo "$want" >"$venv/.ripplekv-stamp"
  fi
}

# reference_checkout SRC REPO COMMIT FILE WHO clones github.com/REPO into SRC and checks out COMMIT, unless SRC already
# holds FILE (a path inside the checkout: an existing checkout given by the caller's environment is used as it is).
reference_checkout() {
  local src=$1 repo=$2 commit=$3 file=$4 who=$5
  if [ ! -f "$src/$file" ]; then
    echo "$who: cloning $repo at $commit into $src (once)"
    git clone --quiet "https://github.com/$repo" "$src"
    git -C "$src" checkout --quiet "$commit"
  fi
}
