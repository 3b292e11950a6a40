"""Run CPython's test suite in the three perf modes and compare the results.

    suite-modes.py --python PY --out DIR [--jobs N] [--timeout S]
                   [--exclude TEST ...] [--known FILE.md] [TEST ...]

Runs `PY -m test -jN --junit-xml ...` (the given test modules, or the whole
suite) three times: with perf support off, with PYTHONPERFSUPPORT=1 and with
PYTHON_PERF_JIT_SUPPORT=1.  The feature is turned on by environment
variables, so that every child interpreter a test starts has it too.  The
caller's other PYTHON* variables are removed.

Results are compared per test module (regrtest's verdict) and per test case
(the JUnit XML).  Every result that is not the same in the three modes is a
difference; a difference is allowed only if the "Known differences" section
of the Markdown file --known lists it (make test and make regrtest-perf give
Doc/cpython-perf/developing.md; an item "- `ID`, `ID` (MODE, MODE): reason",
where an ID is a test module or a test case id as unittest prints it).
Listed differences that did not show up are reported too (only for modules
that ran).

Each run gets a /tmp of its own (a mount namespace, when we may make one),
removed afterwards with the perf files the run made (/tmp/perf-PID.map,
jit-PID.dump, jitted-PID-N.so, py-perf-PID-N.so, told by name as
`python -m perf_trampoline clean` tells them: _perf_clean.pid_of()).
Where no mount namespace can be made, the run's files stay in the shared
/tmp: which of the files that appear there during a run are the run's
cannot be told (a test or profiler running meanwhile writes the same
names, and may still need them after its process has ended), so none is
removed; the summary says how many appeared and the command that removes
them.  A run with the feature on must have written files of its backend
from at least two processes (regrtest's workers are child processes):
otherwise the variable did not reach them, and that is a failure.

A test module that fails in a mode is run again, alone, in the same
mode, as CPython's own CI does: a test that depends on timing may fail on
a loaded machine in any mode.  The second run's results count; the first
failure is printed, marked as such, so that a test that fails only now
and then with the feature on stays visible.

The off mode must also pass on its own: a test that fails in it (and so,
most likely, in every mode, which the comparison cannot see) is a failure
of the run, unless --known lists it for (off).  The suite runs with
SIGINT and SIGQUIT at their default disposition: a job started in the
background by a non-interactive shell inherits them ignored, and the
signal tests of test_signal, test_threading, test_pdb and others then
fail in every mode.

Logs and XML files stay in DIR.  Ends with one summary line; the exit
status is non-zero on any unexplained difference or failed check.

It runs under the interpreter under test (make test, make regrtest-perf),
or any Python 3: _perf_clean is that interpreter's, else this checkout's
Lib/.
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

# Last on the path: the running interpreter's own modules come first.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "Lib"))
import _perf_clean  # noqa: E402
from private_tmp import possible as private_tmp_possible  # noqa: E402

MODES = {
    "off": {},
    "perf": {"PYTHONPERFSUPPORT": "1"},
    "perf_jit": {"PYTHON_PERF_JIT_SUPPORT": "1"},
}
# The files each backend writes, in /tmp; perf inject writes the third
# kind, and both backends the trampoline files (arenas).
PERF_FILES = {
    "perf": "perf-*.map",
    "perf_jit": "jit-*.dump",
    "inject": "jitted-*.so",
    "arenas": "py-perf-*.so",
}

# regrtest's progress line: "0:01:02 load avg: 1.00 [ 3/30/1] test_x passed"
PROGRESS = re.compile(r"\[\s*\d+/\d+(?:/\d+)?\] (test_\w+(?:\.\w+)*) "
                      r"(passed|failed \(env changed\)|failed|skipped"
                      r"|crashed|ran no tests|timed out|interrupted)")
MODULE_STATUS = {
    "passed": "pass",
    # regrtest counts it as a success unless --fail-env-changed
    "failed (env changed)": "pass",
    "failed": "fail",
    "crashed": "fail",
    "timed out": "fail",
    "interrupted": "fail",
    "skipped": "skip",
    "ran no tests": "skip",
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--python", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=int, default=1800,
                   help="seconds per test module (regrtest --timeout)")
    p.add_argument("--exclude", action="append", default=[])
    p.add_argument("--known", metavar="FILE.md",
                   help="a Markdown file with a 'Known differences' "
                        "section (Doc/cpython-perf/developing.md)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--reuse", action="store_true",
                   help="compare the results already in DIR, run nothing")
    p.add_argument("tests", nargs="*")
    return p.parse_args()


def read_known(path):
    """{(id, mode): reason} from the list of known differences of the
    Markdown file `path`.

    The list is the section whose heading says "Known differences"; each
    item is "- `ID`, `ID` (MODE, MODE): reason", continued on indented
    lines; an ID is a test module or a test case id.  Lines in fenced code
    blocks are no headings.  A file without such a section is an error
    (the list moved, and --known was not told).
    """
    known = {}
    if not path:
        return known
    items = []
    in_section = False
    found = False
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_fence = not in_fence
            if in_fence or line.startswith("```"):
                continue
            if line.startswith("#"):
                in_section = "known differences" in line.lower()
                found = found or in_section
            elif in_section and line.startswith("- "):
                items.append(line.strip())
            elif in_section and items and line.startswith("  "):
                items[-1] += " " + line.strip()
    if not found:
        sys.exit(f"{path}: no section headed 'Known differences'")
    item = re.compile(r"- ((?:`[\w.]+`,? )+)\(([\w, ]+)\):\s*(.*)")
    for text in items:
        m = item.fullmatch(text)
        if not m:
            sys.exit(f"{path}: a known difference must read "
                     f"'- `TEST`, ... (MODE, ...): reason', not: {text}")
        for mode in m.group(2).split(","):
            mode = mode.strip()
            if mode not in MODES or mode == "off":
                sys.exit(f"{path}: unknown mode {mode!r} in: {text}")
            for name in re.findall(r"`([\w.]+)`", m.group(1)):
                known[(name, mode)] = m.group(3)
    return known


def perf_files(root):
    """{kind: set of names} of the perf files in `root`."""
    found = {kind: set() for kind in PERF_FILES}
    for name in os.listdir(root):
        if _perf_clean.pid_of(name) is None:
            continue
        for kind, pattern in PERF_FILES.items():
            if fnmatch.fnmatchcase(name, pattern):
                found[kind].add(name)
                break
    return found


def default_signals():
    """In the suite's process: SIGINT and SIGQUIT as a terminal gives
    them, whatever the caller's shell left ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def run_mode(args, mode, private_tmp, tests=None, name=None):
    out = os.path.abspath(args.out)
    name = name or mode
    log_path = os.path.join(out, f"{name}.log")
    xml_path = os.path.join(out, f"{name}.xml")
    for path in (log_path, xml_path):
        if os.path.exists(path):
            os.unlink(path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(MODES[mode])
    cmd = [os.path.abspath(args.python), "-m", "test", f"-j{args.jobs}",
           f"--timeout={args.timeout}", f"--junit-xml={xml_path}"]
    if tests:
        cmd += tests
    elif args.tests:
        cmd += [t for t in args.tests if t not in args.exclude]
    elif args.exclude:
        # the whole suite but these ("-x": the arguments are exclusions)
        cmd += ["-x"] + args.exclude

    tmp_root = "/tmp"
    if private_tmp:
        tmp_root = os.path.join(out, f"tmp-{name}")
        shutil.rmtree(tmp_root, ignore_errors=True)
        os.makedirs(tmp_root)
        os.chmod(tmp_root, 0o1777)
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /tmp && exec "$@"', tmp_root] + cmd
    before = perf_files(tmp_root)

    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL,
                            preexec_fn=default_signals).returncode
    elapsed = time.monotonic() - start

    after = perf_files(tmp_root)
    made = {kind: after[kind] - before[kind] for kind in PERF_FILES}
    left = 0
    if private_tmp:
        shutil.rmtree(tmp_root, ignore_errors=True)
    else:
        # Left where they are: see the module's docstring.
        left = sum(1 for names in made.values() for name in names
                   if not _perf_clean.is_running(_perf_clean.pid_of(name)))
    run = {
        "rc": rc, "time": elapsed, "log": log_path, "xml": xml_path,
        "files": {kind: len(files) for kind, files in made.items()},
        "left": left, "private_tmp": private_tmp,
    }
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(run, f)
    return run


def rerun_failures(args, mode, run, known, private_tmp):
    """Run the modules that failed in `run` again, alone, in `mode`;
    their second results replace the first.  Returns the modules that
    passed the second time, with what failed the first."""
    def unexplained(module):
        if (module, mode) in known:
            return False
        cases = [c for c, v in run["cases"].get(module, {}).items()
                 if "fail" in v]
        # (no case failed: the module crashed or timed out)
        return not cases or any((c, mode) not in known for c in cases)
    failed = [m for m, v in sorted(run["modules"].items())
              if v == "fail" and unexplained(m)]
    if not failed:
        return []
    if args.reuse:
        path = os.path.join(args.out, f"{mode}-again.json")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            again = json.load(f)
    else:
        again = run_mode(args, mode, private_tmp, tests=failed,
                         name=f"{mode}-again")
    modules = module_results(again["log"])
    cases = case_results(again["xml"])
    flaky = []
    for module in failed:
        first = [c for c, v in sorted(run["cases"].get(module, {}).items())
                 if "fail" in v]
        if modules.get(module) == "pass":
            flaky.append((module, first))
        if module in modules:
            run["modules"][module] = modules[module]
        if module in cases:
            run["cases"][module] = cases[module]
    return flaky


def module_results(log_path):
    """{module: status} from regrtest's progress lines."""
    results = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            m = PROGRESS.search(line)
            if m:
                results[m.group(1)] = MODULE_STATUS[m.group(2)]
    return results


def case_results(xml_path):
    """{module: {case id: status}} from the JUnit XML regrtest wrote."""
    cases = {}
    if not os.path.exists(xml_path):
        return cases
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        name = case.get("name", "")
        if case.find("error") is not None or case.find("failure") is not None:
            status = "fail"
        elif case.find("skipped") is not None:
            status = "skip"
        elif case.find("output") is not None:
            status = "xfail"
        elif case.find("outcome") is not None:
            status = "xpass"
        else:
            status = "pass"
        parts = name.split(".")
        module = parts[1] if parts[0] == "test" and len(parts) > 1 else parts[0]
        per = cases.setdefault(module, {})
        # the same id can run more than once (a base class in two modules)
        per[name] = per.get(name, "") + ("," if name in per else "") + status
    return cases


def failure_text(xml_path, case_id, limit=12):
    if not os.path.exists(xml_path):
        return ""
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        if case.get("name") == case_id:
            for tag in ("failure", "error"):
                e = case.find(tag)
                if e is not None:
                    lines = (e.text or "").rstrip().splitlines()
                    return "\n".join("        " + l for l in lines[-limit:])
    return ""


def main():
    args = parse_args()
    modes = args.modes.split(",")
    os.makedirs(args.out, exist_ok=True)
    if not args.reuse and os.path.exists(os.path.join(args.out,
                                                      "problems.txt")):
        os.unlink(os.path.join(args.out, "problems.txt"))
    known = read_known(args.known)
    private_tmp = private_tmp_possible([args.python, args.out])
    print(f"suite-modes: {len(args.tests) or 'all'} test modules, -j{args.jobs}"
          f", excluded: {' '.join(args.exclude) or 'none'}; perf files go to "
          + ("a private /tmp per mode" if private_tmp else
             "the shared /tmp, where they stay (no private /tmp here)"),
          flush=True)

    runs = {}
    problems = []
    for mode in modes:
        if args.reuse:
            with open(os.path.join(args.out, f"{mode}.json")) as f:
                run = runs[mode] = json.load(f)
        else:
            run = runs[mode] = run_mode(args, mode, private_tmp)
        run["modules"] = module_results(run["log"])
        run["cases"] = case_results(run["xml"])
        for module, cases in rerun_failures(args, mode, run, known,
                                            private_tmp):
            print(f"{mode:>8}: {module} failed, then passed when run again "
                  f"alone (first run: {', '.join(cases) or 'no test case'};"
                  f" see {run['log']})", flush=True)
            for case in cases:
                text = failure_text(run["xml"], case, limit=6)
                if text:
                    print(text)
        counts = {s: sum(1 for v in run["modules"].values() if v == s)
                  for s in ("pass", "fail", "skip")}
        ncases = sum(len(c) for c in run["cases"].values())
        npass = sum(1 for c in run["cases"].values()
                    for v in c.values() if v == "pass")
        files = run["files"]
        fate = ("removed" if run.get("private_tmp", True)
                else "left in /tmp")
        print(f"{mode:>8}: {len(run['modules'])} run, {counts['pass']} passed,"
              f" {counts['fail']} failed, {counts['skip']} skipped;"
              f" {ncases} test cases, {npass} passed;"
              f" {int(run['time'] // 60)}:{int(run['time'] % 60):02d};"
              f" files made: "
              f"{files['perf']} maps, {files['perf_jit']} dumps,"
              f" {files['inject']} jitted .so, {files['arenas']} arena"
              f" files ({fate})", flush=True)
        if not run["modules"]:
            problems.append(f"{mode}: no test ran (see {run['log']})")
        if mode != "off" and files[mode] < 2:
            problems.append(f"{mode}: the suite's processes wrote "
                            f"{files[mode]} {PERF_FILES[mode]} files: the "
                            f"feature did not reach them")

    # The first mode (off) must pass by itself: what fails there fails in
    # every mode, and the comparison below would not see it.
    base = modes[0]
    failed_alone = []
    for module, verdict in sorted(runs[base]["modules"].items()):
        if verdict != "fail" or (module, base) in known:
            continue
        cases = [case for case, v in
                 sorted(runs[base]["cases"].get(module, {}).items())
                 if v == "fail" and (case, base) not in known]
        failed_alone.append(f"{module}" + (f" ({', '.join(cases)})"
                                            if cases else ""))
    problems += [f"{base}: failed: {f}" for f in failed_alone]

    # Compare every mode with the first one (off).
    seen = set()
    unexplained = []
    modules = set()
    for run in runs.values():
        modules |= set(run["modules"])
    for module in sorted(modules):
        for mode in modes[1:]:
            a, b = runs[base], runs[mode]
            ma, mb = a["modules"].get(module), b["modules"].get(module)
            ca, cb = a["cases"].get(module), b["cases"].get(module)
            diffs = []
            if ca is not None and cb is not None:
                for case in sorted(set(ca) | set(cb)):
                    sa, sb = ca.get(case, "missing"), cb.get(case, "missing")
                    if sa != sb:
                        diffs.append((case, sa, sb))
            if ma == mb and not diffs:
                continue
            module_known = (module, mode) in known
            if module_known:
                seen.add((module, mode))
            print(f"difference: {module}: {base} {ma}, {mode} {mb}"
                  + (" (known)" if module_known else ""))
            if ma != mb and (ca is None or cb is None):
                if not module_known:
                    unexplained.append(f"{module} ({mode})")
                    print(f"    no per-test results in {mode if cb is None else base}"
                          f": the module crashed or timed out; see "
                          f"{runs[mode if cb is None else base]['log']}")
                continue
            if ma != mb and not diffs and not module_known:
                unexplained.append(f"{module} ({mode})")
            for case, sa, sb in diffs:
                case_known = (case, mode) in known
                if case_known:
                    seen.add((case, mode))
                print(f"    {case}: {base} {sa}, {mode} {sb}"
                      + (" (known)" if case_known or module_known else ""))
                if not (case_known or module_known):
                    unexplained.append(f"{case} ({mode})")
                    text = failure_text(b["xml"] if sb == "fail" else a["xml"],
                                        case)
                    if text:
                        print(text)

    stale = []
    for (name, mode) in sorted(known):
        module = name.split(".")[1] if name.startswith("test.") else name
        if mode in runs and module in modules and (name, mode) not in seen:
            stale.append(f"{name} ({mode})")
    if stale:
        print("listed as known differences but the same in all modes now: "
              + ", ".join(stale))

    left = sum(run.get("left", 0) for run in runs.values())
    if left:
        print(f"suite-modes: {left} perf files of ended processes appeared "
              f"in /tmp during the runs (some may be another program's): "
              f"they stay; `python -m perf_trampoline clean` removes such "
              f"files once no recording needs them")

    problems += [f"unexplained difference: {u}" for u in unexplained]
    for p in problems:
        print(p)
    # (for the caller's final summary: a CI log often keeps only the end)
    with open(os.path.join(args.out, "problems.txt"), "w") as f:
        f.writelines(p + "\n" for p in problems)
    summary = (f"suite-modes: {len(modules)} test modules in "
               f"{len(modes)} modes: {len(unexplained)} unexplained "
               f"differences, {len(seen)} known, {len(stale)} known ones "
               f"gone, {len(problems) - len(unexplained)} other problems")
    print(summary)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
