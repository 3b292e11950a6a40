#!/bin/sh
# Print which tests failed in the output of unittest or regrtest, one test a
# line with the last line of its traceback under it (its assertion's
# message), so that the end of a long log (what a CI shows) says it.
#
#   failed-tests.sh LOG...
#
# Prints nothing for a log without failures.  At most 40 tests a log.
set -u
for log in "$@"; do
    [ -r "$log" ] || continue
    awk -v file="$log" '
        function emit() {
            if (head == "") return
            if (n++ < 40) printf "  %s\n      %s\n", head, substr(last, 1, 300)
            head = ""; last = ""; tb = 0
        }
        /^(FAIL|ERROR): / { emit(); head = $0; next }
        head != "" && /^(----------|==========)/ && length($0) == 70 {
            if (tb) emit(); else tb = 1
            next
        }
        head != "" && tb && NF { last = $0 }
        END {
            emit()
            if (n > 40) printf "  (%d more in %s)\n", n - 40, file
            else if (n) printf "  (tracebacks in %s)\n", file
        }' "$log"
done
