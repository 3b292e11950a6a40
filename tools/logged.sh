# Sourced by the test runners (tools/run-tests.sh, tools/sanitize.sh).
#
#   logged LOG COMMAND...
#
# Runs COMMAND with its stdout and stderr shown and appended to LOG, then
# sets logged_status to COMMAND's exit status and logged_kept to 1 if LOG
# holds all of its output, else 0.  When LOG could not be written (tee
# failed: a full disk, for one), it says so, with the free space where LOG
# is: a run that passed but lost its log must not look like a test that
# failed, nor the reverse.  The status travels through a file beside LOG,
# the exit status of a pipe's first command being out of reach without
# bash; if that file cannot be written either, the status is 125.
logged() {
    logged_log=$1
    shift
    { "$@" 2>&1; echo $? > "$logged_log.rc"; } | tee -a "$logged_log"
    if [ $? = 0 ]; then
        logged_kept=1
    else
        logged_kept=0
        echo "*** could not write all of $logged_log (free space there:" \
             "$(df -Ph "$(dirname "$logged_log")" 2>/dev/null |
                awk 'NR == 2 { print $4 }'))"
    fi
    logged_status=$(cat "$logged_log.rc" 2>/dev/null)
    rm -f "$logged_log.rc"
    case $logged_status in
    [0-9]*) ;;
    *)  echo "*** could not write $logged_log.rc: the exit status of" \
             "$1 is lost"
        logged_status=125 ;;
    esac
}
