#!/usr/bin/env python3
"""docs_check.py - the counts and tables the docs print, regenerated and compared.

Each check reruns the command a document names and fails, printing both versions and
how to update the document, when the document says something else:

  conversion-cost  the table of docs/indexes.md against scripts/conversion_cost.py;
  campaigns        every "(`ctest -R "REGEX" ...`...): N campaigns" in docs/*.md against
                   the number of tests that regex selects in this build tree;
  test-count       the README's "N tests" (the default suite) against
                   `ctest -N -LE campaign` in this build tree. The count depends on the
                   configuration, so it is compared only in the reference one (every
                   index, the benchmarks, no sanitizer, redis-cli found); elsewhere the
                   check exits 77 and CTest reports it as skipped.
  references       no tracked file points at files that are not in the repository
                   (the design notes and papers the project was built from live
                   outside it: cite them by name and venue instead).

usage: docs_check.py CHECK SOURCE_DIR BUILD_DIR CTEST [reference=0|1]
"""
import pathlib
import re
import subprocess
import sys

SKIPPED = 77


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    return 1


def conversion_cost(src, build, ctest):
    doc = (src / "docs" / "indexes.md").read_text().splitlines()
    fresh = subprocess.run([sys.executable, str(src / "scripts" / "conversion_cost.py"), str(src)],
                           check=True, capture_output=True, text=True).stdout.splitlines()
    header = fresh[0]
    if header not in doc:
        return fail("docs/indexes.md has no conversion-cost table (header %r)" % header)
    i = doc.index(header)
    shown = []
    while i < len(doc) and doc[i].startswith("|"):
        shown.append(doc[i])
        i += 1
    if shown != fresh:
        return fail("docs/indexes.md's conversion-cost table is stale; scripts/conversion_cost.py "
                    "prints:\n%s\nthe document shows:\n%s" % ("\n".join(fresh), "\n".join(shown)))
    print("ok: docs/indexes.md conversion-cost table (%d indexes)" % (len(fresh) - 2))
    return 0


def ctest_count(build, ctest, *args):
    out = subprocess.run([ctest, "-N", *args], cwd=build, check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"Total Tests: (\d+)", out)
    if not m:
        raise SystemExit("docs_check.py: no 'Total Tests' in the output of ctest -N %s" % " ".join(args))
    return int(m.group(1))


CAMPAIGN = re.compile(r'`ctest -R "([^"]+)"[^`]*`[^:]*?:\s*(\d+) campaigns', re.S)


def campaigns(src, build, ctest):
    failures, seen = 0, 0
    for doc in sorted((src / "docs").glob("*.md")):
        for m in CAMPAIGN.finditer(doc.read_text()):
            seen += 1
            regex, said = m.group(1), int(m.group(2))
            got = ctest_count(build, ctest, "-R", regex)
            if got != said:
                failures += fail("%s says %d campaigns for ctest -R \"%s\"; it selects %d"
                                 % (doc.relative_to(src), said, regex, got))
            else:
                print("ok: %s: ctest -R \"%s\" selects %d campaigns" % (doc.relative_to(src), regex, got))
    if seen == 0:
        return fail("no \"(`ctest -R ...`): N campaigns\" sentence found in docs/*.md")
    return 1 if failures else 0


def test_count(src, build, ctest, reference):
    if not reference:
        print("test-count: SKIPPED: not the reference configuration (every index, the "
              "benchmarks, no sanitizer, redis-cli); the README counts that one")
        return SKIPPED
    readme = (src / "README.md").read_text()
    m = re.search(r"(\d+) tests; `\.ci/run`", readme)
    if not m:
        return fail("README.md has no \"N tests; `.ci/run`\" sentence")
    said, got = int(m.group(1)), ctest_count(build, ctest, "-LE", "campaign")
    if said != got:
        return fail("README.md says %d tests; ctest -N -LE campaign lists %d" % (said, got))
    print("ok: README.md: %d tests in the default suite" % got)
    return 0


# Built from pieces so that this file does not match itself.
OUTSIDE = [re.compile(p) for p in (r"DESIGN" r"\.md", r"\bpapers" r"/", r"\.\./shared" r"/")]


def references(src, build, ctest):
    files = subprocess.run(["git", "-C", str(src), "ls-files"], capture_output=True,
                           text=True)
    if files.returncode != 0:
        print("references: SKIPPED: %s is not a git checkout" % src)
        return SKIPPED
    bad = []
    for name in files.stdout.split():
        try:
            text = (src / name).read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if any(p.search(line) for p in OUTSIDE):
                bad.append("%s:%d: %s" % (name, no, line.strip()))
    if bad:
        return fail("references to files outside the repository:\n" + "\n".join(bad))
    print("ok: no tracked file refers to files outside the repository")
    return 0


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    check, src, build, ctest = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]), sys.argv[4]
    reference = len(sys.argv) > 5 and sys.argv[5] == "reference=1"
    if check == "conversion-cost":
        return conversion_cost(src, build, ctest)
    if check == "campaigns":
        return campaigns(src, build, ctest)
    if check == "test-count":
        return test_count(src, build, ctest, reference)
    if check == "references":
        return references(src, build, ctest)
    print("docs_check.py: unknown check %r" % check, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
