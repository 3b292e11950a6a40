#!/bin/sh
# Profile examples/demo.py with perf under -X perf and print the report.
#
#   demo.sh PYTHON SCRIPT
set -eu
py=$1 script=$2
data=build/demo.perf.data
command -v perf >/dev/null 2>&1 || {
    echo "error: perf is not installed (Debian: apt-get install linux-perf)" >&2
    exit 1
}
echo "+ perf record -F 999 -g -o $data -- $py -X perf $script"
perf record -F 999 -g -o "$data" -- "$py" -X perf "$script" 2>&1 | grep -v '^\[ perf record'
echo "+ perf report -i $data --stdio --no-children -G"
report=$(perf report -i "$data" --stdio --no-children -G --percent-limit 5 2>/dev/null)
echo "$report" | sed -n '1,80p'
for f in foo bar baz; do
    echo "$report" | grep -q "py::$f:" || {
        echo "error: py::$f does not appear in the report" >&2
        exit 1
    }
done
echo
echo "py::baz, py::bar and py::foo are named.  perf.data: $data; perf reads the"
echo "names from the trampolines' own ELF files, /tmp/py-perf-<pid>-<n>.so (the"
echo "perf map /tmp/perf-<pid>.map has them too).  Try: perf report -i $data"
