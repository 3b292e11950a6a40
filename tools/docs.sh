#!/bin/sh
# Build the HTML documentation of the patched tree with Debian's Sphinx
# (python3-sphinx, python3-docs-theme: tools/install-deps.sh), and fail on
# any warning that comes from our documentation.
#
#   docs.sh SRC OUT        e.g. docs.sh build/src build/docs
#
# Output: OUT/html (open OUT/html/howto/perf_profiling.html), the full
# Sphinx log in OUT/warnings.log.
#
# Which warnings count.  Sphinx runs in nitpicky mode (-n), so that a
# reference to a function, option, variable or label that does not exist is
# a warning, as are the references Sphinx always checks (:ref:, :doc:,
# :term:, toctree entries).  CPython 3.11.2's own pages were written for
# Sphinx 4.5 and are not nitpick-clean: with Debian 12's Sphinx 5.3 they give
# several thousand warnings, none of them ours and none that we may fix
# (they are CPython's files).  So the build runs to its end (no -W), and
# then a warning is ours, and fails the build, when it points
#   - into a file that exists only because of us (the overlay's Doc/ files),
#   - at a line that our patches add to a CPython file (from
#     `git diff upstream` of SRC, that is the whole series), or
#   - into our entries of Misc/NEWS.d (rendered at the top of the changelog).
# The others are counted and left in the log.
set -eu
src=$1 out=$2
# Debian's interpreter, which has Debian's Sphinx (a python3 found first on
# PATH, a pyenv or a venv, may not have it).
py=${SPHINX_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")/.." && pwd)

if ! "$py" -c 'import sphinx, python_docs_theme' 2>/dev/null; then
    echo "error: Sphinx and the Python docs theme are missing" >&2
    echo "       (Debian: tools/install-deps.sh, or apt-get install python3-sphinx python3-docs-theme)" >&2
    exit 1
fi
src=$(cd "$src" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The changelog page includes ../build/NEWS (relative to Doc/whatsnew):
# the tarball's Misc/NEWS, after a section made of our Misc/NEWS.d entries
# (CPython renders those with blurb, which Debian does not package).  It is
# written under OUT, not into the source tree.
news=$out/news
mkdir -p "$news/build" "$news/whatsnew"
ours=$news/ours.rst
{
    echo "cpython-perf (Linux perf support)"
    echo "================================="
    echo
    for dir in "$src"/Misc/NEWS.d/next/*/; do
        [ -d "$dir" ] || continue
        section=$(basename "$dir")
        echo "$section"
        echo "$section" | sed 's/./-/g'
        echo
        for entry in "$dir"*.rst; do
            [ -f "$entry" ] || continue
            issue=$(basename "$entry" | sed -n 's/.*\.gh-issue-\([0-9]*\)\..*/\1/p')
            # "- gh-issue-N: " then the text, indented under the bullet
            awk -v issue="$issue" 'NR == 1 { printf "- gh-issue-%s: %s\n", issue, $0; next }
                                   { print ($0 == "" ? "" : "  " $0) }' "$entry"
            echo
        done
    done
} > "$ours"
our_lines=$(wc -l < "$ours")
{
    sed -n '1,3p' "$src/Misc/NEWS"
    echo
    cat "$ours"
    sed -n '4,$p' "$src/Misc/NEWS"
} > "$news/build/NEWS"

# Our files and lines.
owned=$out/owned.txt
{
    for f in $(cd "$here" && find Doc -type f -name '*.rst'); do
        echo "$f 0 0"
    done
    git --git-dir="$src.git" --work-tree="$src" diff --no-color --no-ext-diff -U0 upstream -- Doc |
        awk '/^\+\+\+ b\// { file = substr($2, 3) }
             /^@@ / { split($3, a, ","); start = substr(a[1], 2); n = (a[2] == "" ? 1 : a[2]);
                      if (n > 0) print file, start, start + n - 1 }'
} > "$owned"
# The text our patches add to each CPython page, to tell our broken
# references from CPython's (Sphinx gives lines inside a table or a
# directive's content relative to it, so a line number alone can point
# at our lines by chance).
added=$out/added.txt
git --git-dir="$src.git" --work-tree="$src" diff --no-color --no-ext-diff -U0 upstream -- Doc |
    awk '/^\+\+\+ b\// { file = substr($2, 3); next }
         /^\+/ { print file "\t" substr($0, 2) }' > "$added"

start=$(date +%s)
echo "sphinx-build: $src/Doc -> $out/html (log: $out/warnings.log)"
rc=0
PY_MISC_NEWS_DIR=$news/whatsnew "$py" -m sphinx -b html -n -q -j auto \
    -d "$out/doctrees" -w "$out/warnings.log" \
    "$src/Doc" "$out/html" 2>/dev/null || rc=$?
end=$(date +%s)
if [ "$rc" -ne 0 ]; then
    tail -20 "$out/warnings.log" >&2
    echo "error: sphinx-build failed (exit status $rc)" >&2
    exit 1
fi

# A warning reads "PATH:LINE: WARNING: ..." (or "PATH: WARNING: ..." or,
# for text a directive inserted, "PATH:LINE:<...>: WARNING"); PATH is
# absolute under SRC/Doc, or "../build/NEWS" for the changelog's NEWS.
"$py" - "$src/Doc" "$owned" "$out/warnings.log" "$our_lines" "$added" <<'EOF'
import re, sys
docdir, owned_path, log_path, our_lines, added_path = sys.argv[1:6]
added = {}
for line in open(added_path, encoding="utf-8"):
    f, _, text = line.rstrip("\n").partition("\t")
    added[f] = added.get(f, "") + text + "\n"
our_lines = int(our_lines)
whole, ranges = set(), []
for line in open(owned_path):
    f, a, b = line.split()
    if a == "0":
        whole.add(f)
    else:
        ranges.append((f, int(a), int(b)))
ours, others = [], 0
text = open(log_path, encoding="utf-8", errors="replace").read()
# A warning may span several lines; each starts with its location.
warnings = re.split(r"\n(?=\S)", text.strip()) if text.strip() else []
for w in warnings:
    if "WARNING" not in w and "ERROR" not in w:
        continue
    m = re.match(r"(.*?\.rst|[^:]*NEWS)(?::(\d+))?[:<]", w)
    path = m.group(1) if m else ""
    lineno = int(m.group(2)) if m and m.group(2) else None
    t = re.search(r"reference target not found: (.*)", w)
    target = t.group(1).strip() if t else None
    rel = "Doc/" + path[len(docdir) + 1:] if path.startswith(docdir + "/") else path
    mine = (rel in whole
            or (lineno is not None
                and any(f == rel and a - 1 <= lineno <= b + 1 for f, a, b in ranges)
                and (target is None or target in added.get(rel, "")))
            or (rel.endswith("build/NEWS") and lineno is not None
                and lineno <= our_lines + 4))
    if mine:
        ours.append(w)
    else:
        others += 1
for w in ours:
    print(w)
print(f"{len(ours)} warning(s) from our files; {others} from CPython 3.11.2's "
      f"own pages with this Sphinx (not ours, left in the log)")
sys.exit(1 if ours else 0)
EOF
echo "html: $out/html/howto/perf_profiling.html ($((end - start)) s)"
