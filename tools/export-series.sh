#!/bin/sh
# Export the series packagers apply: one patch per logical change, new
# files included, configure.ac changed by a patch of its own.
#
#   export-series.sh SRC PATCHDIR OUTDIR OVERLAY-FILE...
#
# SRC is the prepared tree (`make` builds from it; a git work tree whose
# repository SRC.git has the pristine tarball as tag `upstream`).  The
# exported series, applied to the pristine tree, gives SRC minus the files
# autoconf generates (configure, pyconfig.h.in, aclocal.m4).  Its order:
#
#   1. configure.ac: the probes (header tools/export/configure.txt);
#   2. each patch of PATCHDIR/series, with its own header, its diff taken
#      anew from SRC, and the new files its change needs (NEW_FILES below);
#      a CPython file that several patches of the series touch is exported
#      progressively: each of them gets the difference between the file
#      after the patches before it and after itself (the series applied to
#      the pristine files, as tools/prepare-tree.sh applies it), the last
#      one the difference up to SRC's file, which must be the same;
#   3. the tests, then the docs (headers tools/export/tests.txt, docs.txt).
#
# Every overlay file must belong to one exported patch; one that belongs to
# none stops the export and is named.
set -euf    # no pathname expansion: the patterns below are matched with case
src=$1 patchdir=$2 out=$3
shift 3
# Blurb's NEWS directories have spaces in their names ("Core and
# Builtins"): in the lists below, which split on spaces, a space of a file
# name is carried as \001, and put back where the name is used.
SP=$(printf '\001')
overlay=""
for f in "$@"; do
    overlay="$overlay $(printf '%s' "$f" | tr ' ' "$SP")"
done
unspace() {
    printf '%s\n' "$1" | tr "$SP" ' '
}
here=$(cd "$(dirname "$0")" && pwd)
headers=$here/export
gitdir=$(cd "$src.git" && pwd)
author="cpython-perf developers <dev@cpython-perf.invalid>"

# New files, by the patch (of PATCHDIR/series, or tests / docs) that adds
# them.  Patterns are shell globs.
new_files_of() {
    case $1 in
        0001-build-*)
            echo Python/perf_trampoline.c Python/perf_codes.c \
                 Python/perf_jit_trampoline.c Python/perf_unwind.c \
                 Python/perf_map.c Python/perf_arena.c Python/perf_elf.c \
                 Python/perf_elf_image.c Python/perf_lines.c \
                 Python/perf_seal.c Python/perf_kept.c \
                 Python/perf_debugger.c \
                 Python/perf_file.c \
                 Python/perf_names.c Python/perf_stack.c Python/perf_api.c \
                 Python/perf_live.c \
                 Python/perf_internal.h \
                 Python/clinic/perf_api.c.h \
                 Python/asm_trampoline.S Include/internal/pycore_perf_trampoline.h \
                 Include/internal/pycore_perf_live.h ;;
        0013-build-train-pgo-*)
            echo Lib/test/perf_pgo_task.py ;;
        0015-ceval-a-second-evaluator-*)
            echo Python/perf_lines_eval.h ;;
        0011-live-activation-*)
            echo Lib/perf_trampoline.py Lib/_perf_live.py Lib/_perf_remote.py \
                 Lib/_perf_record.py Lib/_perf_archive.py Lib/_perf_collapse.py \
                 Lib/_perf_clean.py ;;
        tests) echo 'Lib/test/*' ;;
        docs)  echo 'Doc/*' 'Misc/*' ;;
    esac
}

# Forwarded: (DEP-3), for a patch whose header has no Forwarded: line of
# its own (a fix of a bug that upstream has too says where it would go).
# The features are backports of what CPython 3.12+ has in its own form,
# and 3.11 takes no new features.
forwarded_of() {
    echo "not-needed (a backport: CPython 3.12+ has perf support of its own, 3.11 takes no new features)"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
index=$tmp/index
sgit() {
    GIT_INDEX_FILE=$index git --git-dir="$gitdir" --work-tree="$src" "$@"
}

# The files of CPython that more than one patch of the series touches, and
# for each the last patch that does.
patches_of_series=$(grep -v '^#' "$patchdir/series" | grep .)
files_of_patch() {
    sed -n 's|^+++ b/\([^	 ]*\).*|\1|p' "$patchdir/$1"
}
multi=$(for p in $patches_of_series; do files_of_patch "$p" | sort -u; done |
        sort | uniq -d)
: > "$tmp/last"
for p in $patches_of_series; do
    for f in $(files_of_patch "$p"); do
        case " $(echo $multi) " in *" $f "*) echo "$f $p" >> "$tmp/last" ;; esac
    done
done
last_patch_of() {
    awk -v f="$1" '$1 == f { p = $2 } END { print p }' "$tmp/last"
}
is_multi() {
    case " $(echo $multi) " in *" $1 "*) return 0 ;; esac
    return 1
}
# For those: every file the series touches, pristine, in a stage where the
# patches are applied one by one as they are exported (before/ keeps each
# file as it was before the current patch).
if [ -n "$multi" ]; then
    mkdir -p "$tmp/stage" "$tmp/before"
    for p in $patches_of_series; do files_of_patch "$p"; done | sort -u |
    while read -r f; do
        mkdir -p "$tmp/stage/$(dirname "$f")"
        git --git-dir="$gitdir" show "upstream:$f" > "$tmp/stage/$f" 2>/dev/null ||
            rm -f "$tmp/stage/$f"
    done
fi

# Put FILE into the index with the content of PATH (absent: removed), in
# the mode upstream gives it.
index_put() {
    if [ -f "$2" ]; then
        mode=$(git --git-dir="$gitdir" ls-tree upstream -- "$1" | cut -c1-6)
        blob=$(git --git-dir="$gitdir" hash-object -w -- "$2")
        sgit update-index --add --cacheinfo "${mode:-100644},$blob,$1"
    else
        sgit update-index --force-remove -- "$1"
    fi
}

# The diff of FILES: from the pristine tree (plus, for the files of
# several patches, their state before the current one) to SRC's versions
# (or, for such a file when a later patch touches it too, its state after
# the current one).  New files are included.
diff_of() {
    nargs=$#
    for a in "$@"; do
        set -- "$@" "$(unspace "$a")"
    done
    shift "$nargs"
    sgit read-tree upstream
    base=upstream
    : > "$tmp/plain"
    for f in "$@"; do
        if is_multi "$f"; then
            index_put "$f" "$tmp/before/$f"
            base=""
        else
            # (NUL-separated: names may hold spaces)
            printf '%s\0' "$f" >> "$tmp/plain"
        fi
    done
    [ -n "$base" ] || base=$(sgit write-tree)
    [ ! -s "$tmp/plain" ] ||
        sgit add -f -A --pathspec-from-file="$tmp/plain" --pathspec-file-nul
    for f in "$@"; do
        is_multi "$f" || continue
        if [ "$(last_patch_of "$f")" = "$current" ]; then
            sgit add -f -A -- "$f"
        else
            index_put "$f" "$tmp/stage/$f"
        fi
    done
    sgit diff --cached --no-color --no-ext-diff --no-renames --full-index "$base" -- "$@"
}

# Before exporting patch P: note the state of its files of several
# patches, then apply it to the stage.  After the last patch touching such
# a file, the stage must hold SRC's version of it (else SRC has an edit
# that no patch carries, which the last one would take).
stage_patch() {
    current=$1
    [ -n "$multi" ] || return 0
    for f in $(files_of_patch "$1"); do
        is_multi "$f" || continue
        rm -f "$tmp/before/$f"
        if [ -f "$tmp/stage/$f" ]; then
            mkdir -p "$tmp/before/$(dirname "$f")"
            cp "$tmp/stage/$f" "$tmp/before/$f"
        fi
    done
    patch -d "$tmp/stage" -p1 -F0 -N -s --no-backup-if-mismatch -r - \
            < "$patchdir/$1" || {
        echo "error: $patchdir/$1 does not apply exactly to the pristine tree" >&2
        echo "       plus the patches before it" >&2
        exit 1
    }
    for f in $(files_of_patch "$1"); do
        is_multi "$f" || continue
        [ "$(last_patch_of "$f")" = "$1" ] || continue
        cmp -s "$tmp/stage/$f" "$src/$f" || {
            echo "error: $src/$f is not the series applied to the pristine $f" >&2
            echo "       (an edit in $src that no patch carries: $f is touched by" >&2
            echo "       several patches, refresh them by hand)" >&2
            exit 1
        }
    done
}
current=""

# The date of the last commit of this project that changed any of PATHS
# (relative to the project's root), for Last-Update.
last_update() {
    (cd "$here/.." && git log -1 --format=%cs -- "$@" 2>/dev/null) | grep . ||
        date -u +%Y-%m-%d
}

# emit NAME HEADER-FILE PROJECT-PATHS -- FILES: writes OUT/NNNN-NAME.patch.
n=0
emit() {
    name=$1 header=$2 paths=$3
    shift 3
    n=$((n + 1))
    file=$(printf '%04d-%s.patch' "$n" "$name")
    subject=$(sed -n 's/^Subject: //p' "$header" | head -1)
    [ -n "$subject" ] || { echo "error: $header has no Subject: line" >&2; exit 1; }
    {
        echo "From: $author"
        echo "Subject: $subject"
        # A header that says where its change would go upstream is believed.
        fwd=$(sed -n 's/^Forwarded: //p' "$header" | head -1)
        echo "Forwarded: ${fwd:-$(forwarded_of "$name")}"
        echo "Last-Update: $(last_update $paths)"
        echo
        # The description: the header's text after its Subject line.
        sed -e '0,/^Subject: /d' -e '/^diff --git /,$d' "$header" |
            awk 'NF { while (blank > 0) { print ""; blank-- } print; seen = 1; next }
                 seen { blank++ }'
        echo "---"
        diff_of "$@"
    } > "$out/$file"
    grep -q '^diff --git ' "$out/$file" || {
        echo "error: $file changes nothing (are $* in $src?)" >&2; exit 1; }
    echo "$file" >> "$out/series"
    # What the exported patches cover, for the completeness check.
    for f in "$@"; do unspace "$f"; done >> "$tmp/covered"
}

# Written aside, then moved into place whole: an export that fails leaves
# no series behind that make would take for done.
final=$out out=$out.new
trap 'rm -rf "$tmp" "$out"' EXIT
rm -rf "$out"
mkdir -p "$out"
: > "$out/series"
: > "$tmp/covered"

emit configure-probe-perf-trampoline-and-frame-pointers "$headers/configure.txt" \
    "configure.ac.fragment tools/export/configure.txt" configure.ac

claimed=""
for p in $(grep -v '^#' "$patchdir/series" | grep .); do
    name=${p%.patch}
    name=${name#[0-9][0-9][0-9][0-9]-}
    files=$(sed -n 's|^+++ b/\([^	 ]*\).*|\1|p' "$patchdir/$p")
    extra=""
    for pattern in $(new_files_of "$p"); do
        for f in $overlay; do
            case $f in $pattern) extra="$extra $f" ;; esac
        done
    done
    claimed="$claimed $extra"
    stage_patch "$p"
    # shellcheck disable=SC2086
    emit "$name" "$patchdir/$p" "$patchdir/$p $extra" $files $extra
    current=""
done

for group in tests:tests-perf-trampoline-perf-maps-storms docs:doc-howto-perf-profiling; do
    name=${group#*:} group=${group%%:*}
    files=""
    for pattern in $(new_files_of $group); do
        for f in $overlay; do
            case " $claimed " in *" $f "*) continue ;; esac
            case $f in $pattern) files="$files $f" ;; esac
        done
    done
    claimed="$claimed $files"
    [ -z "$files" ] && continue
    # shellcheck disable=SC2086
    emit "$name" "$headers/$group.txt" "$headers/$group.txt $files" $files
done

# Every changed or new file of SRC is in exactly one exported patch.
for f in $overlay; do
    case " $claimed " in *" $f "*) ;; *)
        echo "error: the overlay file $f belongs to no exported patch:" >&2
        echo "       add it to new_files_of() in tools/export-series.sh" >&2
        exit 1 ;;
    esac
done
git --git-dir="$gitdir" --work-tree="$src" diff --name-only upstream |
    grep -v -x -e configure -e pyconfig.h.in -e aclocal.m4 | sort > "$tmp/changed"
sort "$tmp/covered" > "$tmp/covered.sorted"
# (Files of several patches of the series excepted: progressive, above.)
dups=$(uniq -d "$tmp/covered.sorted" | while read -r f; do
           is_multi "$f" || echo "$f"; done)
[ -z "$dups" ] || { echo "error: in more than one exported patch: $dups" >&2; exit 1; }
missing=$(comm -23 "$tmp/changed" "$tmp/covered.sorted")
[ -z "$missing" ] || {
    echo "error: changed in $src but in no exported patch: $missing" >&2
    echo "       (a patch of $patchdir/series must own it)" >&2
    exit 1
}
cp "$headers/README" "$out/README"
rm -rf "$final"
mv "$out" "$final"
echo "exported $n patches to $final/ (series, README)"
