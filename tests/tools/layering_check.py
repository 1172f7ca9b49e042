#!/usr/bin/env python3
"""layering_check.py - the include rules between the folders of src/ and include/.

The library is built in layers, each using only those below it:

  util  ->  pm (flush, fence, map, sim)  ->  heap  ->  pool  ->  framework, listdb
  util  ->  indexes (the plug-ins: public headers and util only)  ->  baselines
  server, compat: the public headers only (<tips/...>) and their own folder

A quoted include "DIR/file.h" in src/FOLDER/ must name FOLDER itself or a folder that
ALLOWED lists for it; a quoted include without a folder must be a file of the same
directory (or a header CMake generates). The public headers in include/ include only
<tips/...> and system headers, never a quoted path. A new folder in src/ must be added
to ALLOWED, so that its place in the order is decided, not found later.

usage: layering_check.py SOURCE_DIR
"""
import pathlib
import re
import sys

ALLOWED = {
    "util": {"util"},
    "pm": {"pm", "util"},
    "heap": {"heap", "pm", "util"},
    "pool": {"pool", "heap", "pm", "util"},
    "framework": {"framework", "pool", "heap", "pm", "util"},
    "listdb": {"listdb", "pool", "heap", "pm", "util"},
    "indexes": {"indexes", "util"},
    "baselines": {"baselines", "indexes", "util"},
    "server": {"server"},
    "compat": {"compat"},  # old exported names over the public API: public headers only
}
GENERATED = {"indexes_list.h"}  # written by CMakeLists.txt into the build tree
QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    root = pathlib.Path(sys.argv[1])
    problems, checked = [], 0
    for folder in sorted(p for p in (root / "src").iterdir() if p.is_dir()):
        name = folder.name
        if name not in ALLOWED:
            problems.append("src/%s/: a folder without a place in the layering "
                            "(add it to ALLOWED in %s)" % (name, pathlib.Path(__file__).name))
            continue
        for f in sorted(folder.rglob("*.[ch]")):
            checked += 1
            for inc in QUOTED.findall(f.read_text()):
                rel = f.relative_to(root)
                if "/" not in inc:
                    if not (f.parent / inc).exists() and inc not in GENERATED:
                        problems.append("%s: \"%s\" is not a file of its directory" % (rel, inc))
                    continue
                target = inc.split("/", 1)[0]
                if target not in ALLOWED[name]:
                    problems.append("%s includes \"%s\": src/%s/ may include only %s" %
                                    (rel, inc, name, ", ".join(sorted(ALLOWED[name]))))
    for f in sorted((root / "include").rglob("*.h")):
        checked += 1
        for inc in QUOTED.findall(f.read_text()):
            problems.append("%s includes \"%s\": a public header includes only <tips/...> "
                            "and system headers" % (f.relative_to(root), inc))
    for p in problems:
        print("FAIL: " + p, file=sys.stderr)
    if problems:
        return 1
    print("ok: %d files of src/ and include/ follow the layering" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
