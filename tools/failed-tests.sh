#!/bin/sh
# Print which tests failed in the output of unittest or regrtest, one test a
# line with the last line of its traceback under it (its assertion's
# message, or for a multi-line message such as assertEqual's diff, that
# message's last line), so that the end of a long log (what a CI shows)
# says it.
#
#   failed-tests.sh LOG...
#
# Verbose output (unittest, regrtest -v) has a block per failed test,
# "FAIL: " or "ERROR: " after a line of 70 "="; regrtest without -v has
# only "test NAME failed -- ..." (with the traceback of a single failure,
# or "multiple errors occurred") or "test NAME crashed -- ...", which are
# printed with the last line of their traceback when a log has no block.
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
        function quiet_emit() {
            if (qhead == "") return
            quiet[nq++] = "  " substr(qhead, 1, 300) \
                          (qlast != "" ? "\n      " substr(qlast, 1, 300) : "")
            qhead = ""; qlast = ""
        }
        /^(FAIL|ERROR): / && prev ~ /^==========/ && length(prev) == 70 {
            emit(); head = $0; prev = $0; next
        }
        /^(----------|==========)/ && length($0) == 70 {
            if (head != "") { if (tb) emit(); else tb = 1 }
            quiet_emit(); prev = $0; next
        }
        head != "" && tb && NF { last = $0 }
        /^test [^ ]+ (failed|crashed)/ { quiet_emit(); qhead = $0; prev = $0; next }
        qhead != "" { if (NF) qlast = $0; else quiet_emit() }
        { prev = $0 }
        END {
            emit(); quiet_emit()
            if (n == 0) for (k = 0; k < nq && k < 40; k++) print quiet[k]
            if (n > 40) printf "  (%d more in %s)\n", n - 40, file
            else if (n || nq) printf "  (the output is in %s)\n", file
        }' "$log"
done
exit 0
