#!/usr/bin/env python3
"""Writes Jane Austen's six novels as plain text from an unpacked R package `janeaustenr` (standard library only).

Usage: extract_austen.py PACKAGE_DIR OUT_DIR
  PACKAGE_DIR  the installed package folder, e.g. <dpkg-deb -x root>/usr/lib/R/site-library/janeaustenr
  OUT_DIR      receives emma.txt, persuasion.txt, mansfieldpark.txt, northangerabbey.txt, prideprejudice.txt,
               sensesensibility.txt

Each novel is an R character vector with one element per line of the Project Gutenberg text (blank lines are
empty strings). The output is those elements joined by "\\n" (no newline after the last line), UTF-8. The data is
read from the package's lazy-load database (data/Rdata.rdx + data/Rdata.rdb) or, for packages built without
LazyData, from data/<name>.rda, with the project's own reader of R's serialization format (scripts/rdata.py).
Exit status 1 with a message naming the file when the data is missing or malformed.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdata  # noqa: E402

NOVELS = ["emma", "persuasion", "mansfieldpark", "northangerabbey", "prideprejudice", "sensesensibility"]


def load_package_data(package_dir):
    """Returns {variable name: value} for every data object of the R package at `package_dir`."""
    data_dir = os.path.join(package_dir, "data")
    base = os.path.join(data_dir, "Rdata")
    if os.path.exists(base + ".rdx") and os.path.exists(base + ".rdb"):
        return rdata.read_lazyload_db(base)
    values = {}
    if os.path.isdir(data_dir):
        for name in sorted(os.listdir(data_dir)):
            if name.endswith((".rda", ".RData")):
                values.update(rdata.read_rda(os.path.join(data_dir, name)))
    if not values:
        raise rdata.RDataError(f"{data_dir}: no lazy-load database (Rdata.rdx/.rdb) and no .rda files")
    return values


def novel_text(values, name, source):
    """The text of novel `name`: its character vector joined by newlines. Raises RDataError if absent or not text."""
    if name not in values:
        raise rdata.RDataError(f"{source}: no data object '{name}' (found: {', '.join(sorted(values))})")
    lines = values[name]
    if not isinstance(lines, rdata.RVector) or lines.rtype != "character":
        raise rdata.RDataError(f"{source}: '{name}' is not a character vector")
    if any(line is None for line in lines):
        raise rdata.RDataError(f"{source}: '{name}' contains NA lines")
    return "\n".join(lines)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    package_dir, out_dir = argv[1], argv[2]
    try:
        values = load_package_data(package_dir)
        texts = {name: novel_text(values, name, package_dir) for name in NOVELS}
    except (rdata.RDataError, OSError) as e:
        print(f"extract_austen: {e}", file=sys.stderr)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    for name, text in texts.items():
        path = os.path.join(out_dir, f"{name}.txt")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
        print(f"  {path}: {text.count(chr(10)) + 1} lines, {len(text.encode('utf-8'))} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
