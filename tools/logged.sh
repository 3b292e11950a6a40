# Sourced by the test runners (tools/run-tests.sh, tools/sanitize.sh).
#
#   logged LOG COMMAND...
#
# Runs COMMAND with its stdout and stderr shown and appended to LOG, then
# sets logged_status to COMMAND's exit status and logged_kept to 1 if LOG
# holds all of its output, else 0.  When LOG could not be written (tee
# failed: a full disk, for one), it says so, with the free space where LOG
# is: a run that passed but lost its log must not look like a test that
# failed, nor the reverse.  Both exit statuses come back through a
# command substitution (fd 3), not a file, which a full disk would lose:
# without bash, the exit status of a pipe's first command is out of
# reach.  COMMAND runs with fds 3 and 4 closed, so that a process it
# leaves behind does not hold the substitution open.
logged() {
    logged_log=$1
    shift
    { logged_codes=$(
          { { "$@" 2>&1 3>&- 4>&-; echo "c$?" >&3; } |
                tee -a "$logged_log" >&4 3>&-
            echo "t$?"; } 3>&1); } 4>&1
    logged_status=125
    logged_kept=0
    for logged_code in $logged_codes; do
        case $logged_code in
        c*) logged_status=${logged_code#c} ;;
        t0) logged_kept=1 ;;
        esac
    done
    if [ "$logged_kept" = 0 ]; then
        echo "*** could not write all of $logged_log (free space there:" \
             "$(df -Ph "$(dirname "$logged_log")" 2>/dev/null |
                awk 'NR == 2 { print $4 }'))"
    fi
}
