#!/usr/bin/env python3
"""conversion_cost.py - the conversion-cost table of docs/indexes.md.

For each index source src/indexes/NAME.c (every file listed in TIPS_INDEXES of the root
CMakeLists.txt), counts its lines of code (lines that are not blank and not only a
comment) and its hook sites: the uses of IDX_ALLOC, IDX_FREE and IDX_LOG in code
(IDX_LOG2, two ranges under one fence, and IDX_LOG_VALUE, a value overwritten in place
with no undo record, count as one IDX_LOG site each, and IDX_ALLOC_LOG,
a block and a range's undo record under one fence, as one IDX_ALLOC site; comments and the
#define lines of idx_hooks.h are not counted). Those sites are what
converting the volatile index into its TIPS plug-in took (the TIPS paper, §7.1, counts
5-9 changed lines per index). Prints a Markdown table.

Usage: scripts/conversion_cost.py [REPO_ROOT]
"""
import pathlib
import re
import sys

HOOKS = ("IDX_ALLOC", "IDX_FREE", "IDX_LOG")


def strip_comments(text):
    """C source without /* */ and // comments (string literals kept as they are)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def index_names(root):
    cmake = (root / "CMakeLists.txt").read_text()
    m = re.search(r'set\(TIPS_INDEXES\s+"([^"]*)"', cmake)
    if not m:
        sys.exit("conversion_cost.py: no TIPS_INDEXES list in CMakeLists.txt")
    return [n for n in m.group(1).split(";") if n]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    print("| index | lines of code | IDX_ALLOC | IDX_FREE | IDX_LOG | hook sites |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in index_names(root):
        code = strip_comments((root / "src" / "indexes" / (name + ".c")).read_text())
        loc = sum(1 for line in code.splitlines() if line.strip())
        counts = [len(re.findall(r"\b%s(2|_LOG|_VALUE)?\s*\(" % h, code)) for h in HOOKS]
        print("| %s | %d | %d | %d | %d | %d |" % (name, loc, *counts, sum(counts)))


if __name__ == "__main__":
    main()
