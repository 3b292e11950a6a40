#!/usr/bin/env python3
"""Check that the series' copies of stock ceval.c code still match it.

Patch 0002 pushes the frames of CALL_PY_EXACT_ARGS and CALL_PY_WITH_DEFAULTS
itself when a PEP 523 hook is installed: the macro PERF_CALL_PY(defaults),
at the end of _PyEval_EvalFrameDefault(), is a copy of those two
instructions' bodies written as one macro (a constant parameter picks the
instruction).  The patch leaves the stock bodies alone, so a later 3.11.x,
or a distribution's backport that changes them, still takes the series with
zero fuzz and the copy silently goes on doing what 3.11.2 did.  This check
catches that: it compares the copy with the stock bodies of the tree the
series applies to.

How it compares.  Both sides are cut into C tokens and statements (`;`, `{`
and `}` end a statement; comments, white space and line continuations are
gone), then normalised, then compared statement by statement:

  * the copy is instantiated for each value of its parameter, and the
    constant folded: `0 ? A : B` is B, `1 && C` is C, a loop whose
    condition is `0 && C` is gone;
  * the copy's names are renamed to the stock ones (RENAMES);
  * on both sides, `int N = A->B;` (a local that only names a field) is
    inlined; `DEOPT_IF(A || B, X)` is two DEOPT_IFs; the operands of a
    lone `==` / `!=` in a DEOPT_IF are put in a fixed order; after
    `DEOPT_IF(a != b, X)`, the longer of a and b is written as the shorter;
  * the differences the copy is meant to have are mapped to a common form
    (INTENDED: its own hook test, where it goes with the new frame, a
    pointer to the arguments in place of STACK_SHRINK).

Whatever differs after that is drift, and is printed as a diff of the
normalised statements with what to do about it.  A difference the check
does not know (the copy changed on purpose, say) fails too: then teach the
tables below, with the reason.

    check-copies.py [--stock FILE | --git-dir DIR] [--copy FILE | --patches DIR] [-v]

--stock is a ceval.c (stock, or with the series applied: the lines the
series adds to the stock bodies are ignored); by default the stock file is
Python/ceval.c of tag `upstream` in --git-dir (default build/src.git).
--copy is the patch of the series that defines PERF_CALL_PY, or a ceval.c
that does (default: the patch of DIR/series that does; DIR is --patches,
default patches).  Exit status 0 when the copies match, 1 when they
drift, 2 when an input cannot be read.
"""

import argparse
import difflib
import os
import re
import subprocess
import sys

# The stock instruction each instance of the copy stands for.
PAIRS = [
    ("CALL_PY_EXACT_ARGS", "0"),
    ("CALL_PY_WITH_DEFAULTS", "1"),
]
MACRO = "PERF_CALL_PY"

# The copy's names for the stock ones.
RENAMES = {
    "self_arg": "is_meth",
    "given": "argcount",
    "callee": "new_frame",
    "value": "def",
}

# Statements the series adds to the stock bodies (ignored there, so that
# --stock may be a ceval.c with the series applied): by first token.
SERIES_LINES = {"PERF_TRAMPOLINE_GOTO_IF_HOOKED"}

# Statements that are meant to differ, mapped to one common form: (side,
# statement, common form or None to drop it, why).
INTENDED = [
    ("stock", "assert(call_shape.kwnames == NULL);", None,
     "the copy is entered from after this assert"),
    ("stock", "DEOPT_IF(tstate->interp->eval_frame, CALL);", "<hook test>",
     "stock deoptimizes under any hook, the copy under any but the perf"
     " trampoline's"),
    ("copy", "DEOPT_IF(!PERF_TRAMPOLINE_HOOK_REREAD(tstate), CALL);",
     "<hook test>", "(the same)"),
    ("stock", "goto start_frame;", "<run the new frame>",
     "the copy runs the new frame through its trampoline"),
    ("copy", "goto perf_trampoline_frame;", "<run the new frame>",
     "(the same)"),
]

TOKEN = re.compile(r"""
      (?P<space>\s+)
    | (?P<comment>/\*.*?\*/|//[^\n]*)
    | (?P<cont>\\\n)
    | (?P<tok>"(?:\\.|[^"\\\n])*"
             |'(?:\\.|[^'\\\n])*'
             |[A-Za-z_]\w*
             |\d\w*
             |->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\#\#
             |[^\s])
""", re.S | re.X)


class Failure(Exception):
    """An input that cannot be read or understood (exit status 2)."""


def tokenize(text):
    tokens = []
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if m is None:
            raise Failure(f"cannot tokenize at {text[pos:pos + 40]!r}")
        if m.lastgroup == "tok":
            tokens.append(m.group())
        pos = m.end()
    return tokens


def statements(tokens):
    """Split tokens into statements: `;` at depth 0 ends one (included), so
    does `{` (a for/if header); `}` is a statement of its own."""
    result, current, depth = [], [], 0
    for t in tokens:
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        if t == "}" and depth == 0:
            if current:
                result.append(current)
            result.append(["}"])
            current = []
            continue
        current.append(t)
        if depth == 0 and t in (";", "{"):
            result.append(current)
            current = []
    if current:
        result.append(current)
    return result


def render(stmt):
    """A statement as C text, spaced about as the source is."""
    text = " ".join(stmt)
    for pat, rep in ((r" ?(->|\.) ?", r"\1"),         # a->b, a.b
                     (r"([(\[]) ", r"\1"),              # (a, [a
                     (r" ([)\],;])", r"\1"),            # a), a], a, a;
                     (r"(\w|\]) ([(\[])", r"\1\2"),    # f(a), a[i]
                     (r"(\*|!) (?=[\w*(])", r"\1"),      # *p, **p, !a
                     (r" (\+\+|--)", r"\1"),           # i++
                     (r"\b(if|for|while|switch)\(", r"\1 (")):
        text = re.sub(pat, rep, text)
    return text


def render_all(stmts):
    """Statements as C text, indented by block."""
    lines, depth = [], 0
    for s in stmts:
        depth -= s == ["}"]
        lines.append("    " * depth + render(s))
        depth += s[-1] == "{"
    return lines


def key(stmt_text):
    return tuple(tokenize(stmt_text))


# --- reading the two sides --------------------------------------------------

def read_source(path):
    """A C file, or the text a patch adds (its + lines) when it is one."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise Failure(f"cannot read {path}: {e.strerror}")
    if re.search(r"^diff --git |^--- a/", text, re.M):
        text = "".join(line[1:] + "\n" for line in text.splitlines()
                       if line.startswith("+") and not line.startswith("+++ "))
    return text


def stock_body(text, name, where):
    """The statements of TARGET(name) { ... }."""
    m = re.search(r"\bTARGET\(\s*%s\s*\)\s*\{" % re.escape(name), text)
    if m is None:
        raise Failure(f"{where}: no TARGET({name}) found")
    tokens = tokenize(text[m.end():])
    depth = 1
    for i, t in enumerate(tokens):
        depth += {"{": 1, "}": -1}.get(t, 0)
        if depth == 0:
            break
    else:
        raise Failure(f"{where}: TARGET({name}) has no closing brace")
    line = text.count("\n", 0, m.start()) + 1
    return statements(tokens[:i]), line


def copy_macro(text, where):
    """The parameter and the statements of #define MACRO(param) { ... }."""
    m = re.search(r"^[ \t]*#[ \t]*define[ \t]+%s\((\w+)\)" % MACRO, text, re.M)
    if m is None:
        raise Failure(f"{where}: no #define {MACRO}(...) found")
    lines = []
    for line in text[m.end():].split("\n"):
        lines.append(line.rstrip().rstrip("\\"))
        if not line.rstrip().endswith("\\"):
            break
    tokens = tokenize("\n".join(lines))
    if not tokens or tokens[0] != "{" or tokens[-1] != "}":
        raise Failure(f"{where}: {MACRO}'s body is not one {{ }} block")
    return m.group(1), statements(tokens[1:-1])


# --- normalisation -------------------------------------------------------------

def strip_single_parens(stmt):
    """`(x)` is x when x is one token and the parentheses are no call."""
    out = list(stmt)
    i = 0
    while i + 2 < len(out):
        if (out[i] == "(" and out[i + 2] == ")"
                and re.fullmatch(r"\w+", out[i + 1])
                and not (i > 0 and re.fullmatch(r"\w+|\)|\]", out[i - 1]))):
            del out[i + 2]
            del out[i]
            i = max(i - 1, 0)
        else:
            i += 1
    return out


def top_level_split(tokens, seps):
    """Split tokens at separators (one of seps) outside parentheses."""
    parts, current, depth = [], [], 0
    for t in tokens:
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        if depth == 0 and t in seps:
            parts.append(current)
            parts.append([t])
            current = []
        else:
            current.append(t)
    parts.append(current)
    return parts


def fold_constants(stmts, where):
    """Fold the parameter's constant: ternaries, `1 &&`, `0 &&` loops."""
    out = []
    i = 0
    while i < len(stmts):
        s = list(stmts[i])
        # `(` or `,` then `0 ?` / `1 ?`: keep one branch (up to the end of
        # that argument).
        j = 0
        while j + 1 < len(s):
            if s[j] in ("0", "1") and s[j + 1] == "?" and j > 0 and s[j - 1] in ("(", ","):
                depth, k, colon = 0, j + 2, None
                while k < len(s):
                    if s[k] in "([":
                        depth += 1
                    elif s[k] in ")]":
                        if depth == 0:
                            break
                        depth -= 1
                    elif depth == 0 and s[k] == ":" and colon is None:
                        colon = k
                    elif depth == 0 and s[k] == ",":
                        break
                    k += 1
                if colon is None:
                    raise Failure(f"{where}: cannot fold {render(s)}")
                keep = s[j + 2:colon] if s[j] == "1" else s[colon + 1:k]
                s[j:k] = keep
            j += 1
        # A loop header whose condition starts with a constant.
        if s[:2] == ["for", "("] and s[-1] == "{":
            parts = top_level_split(s[2:-2], {";"})
            cond = parts[2] if len(parts) == 5 else []
            if cond[:2] == ["0", "&&"]:
                depth = 1
                i += 1
                while i < len(stmts) and depth:
                    depth += stmts[i][-1] == "{"
                    depth -= stmts[i] == ["}"]
                    i += 1
                continue
        # `1 && C` (as an operand: after `(`, `;`, `,` or `&&`) is C.
        j = 1
        while j + 1 < len(s):
            if s[j:j + 2] == ["1", "&&"] and s[j - 1] in ("(", ";", ",", "&&"):
                del s[j:j + 2]
            else:
                j += 1
        out.append(s)
        i += 1
    return out


def replace_seq(stmt, old, new):
    out, i = [], 0
    while i < len(stmt):
        if stmt[i:i + len(old)] == old:
            out.extend(new)
            i += len(old)
        else:
            out.append(stmt[i])
            i += 1
    return out


def assigned(name, stmts):
    """Whether a statement assigns name."""
    return any(s[k] == name and k + 1 < len(s)
               and re.fullmatch(r"=|[-+*/%&|^]=|<<=|>>=|\+\+|--", s[k + 1])
               for s in stmts for k in range(len(s)))


def inline_field_aliases(stmts):
    """`int N = A->B;`: N is A->B (when nothing assigns N again)."""
    out = []
    for n, s in enumerate(stmts):
        if (len(s) == 7 and re.fullmatch(r"\w+", s[0]) and s[2] == "="
                and s[4] == "->" and s[6] == ";"
                and not assigned(s[1], stmts[n + 1:])):
            name, expr = s[1], s[3:6]
            stmts[n + 1:] = [[t2 for t in st for t2 in (expr if t == name else [t])]
                             for st in stmts[n + 1:]]
            continue
        out.append(s)
    return out


def deopt_parts(s):
    """The condition and the rest of `DEOPT_IF(cond, X);`, or None."""
    if s[:2] != ["DEOPT_IF", "("] or s[-2:] != [")", ";"]:
        return None
    args = top_level_split(s[2:-2], {","})
    if len(args) != 3:
        return None
    return args[0], args[2]


def split_deopt_or(stmts):
    out = []
    for s in stmts:
        parts = deopt_parts(s)
        if parts is None:
            out.append(s)
            continue
        cond, target = parts
        for c in top_level_split(cond, {"||"})[::2]:
            out.append(["DEOPT_IF", "("] + c + [","] + target + [")", ";"])
    return out


def order_comparisons(stmts):
    out = []
    for s in stmts:
        parts = deopt_parts(s)
        if parts is not None:
            cond, target = parts
            pieces = top_level_split(cond, {"==", "!=", "&&", "||", "?", ":"})
            if len(pieces) == 3 and pieces[1][0] in ("==", "!="):
                a, b = sorted([pieces[0], pieces[2]], key=lambda p: (len(p), p))
                s = ["DEOPT_IF", "("] + a + pieces[1] + b + [","] + target + [")", ";"]
        out.append(s)
    return out


def propagate_equalities(stmts):
    """After `DEOPT_IF(a != b, X)` (a the shorter), write b as a."""
    out = []
    equal = []
    for s in stmts:
        for a, b in equal:
            s = replace_seq(s, b, a)
        parts = deopt_parts(s)
        if parts is not None:
            pieces = top_level_split(parts[0], {"==", "!=", "&&", "||", "?", ":"})
            if len(pieces) == 3 and pieces[1] == ["!="]:
                equal.append((pieces[0], pieces[2]))
        out.append(s)
    return out


def args_pointer(stmts, where):
    """The copy keeps a pointer to the arguments and leaves stack_pointer
    alone until it pops the call: the same as stock's STACK_SHRINK(argcount)
    first, the pointer's uses then being stack_pointer's, and the final
    `stack_pointer = args - (E)` a STACK_SHRINK(E)."""
    out, alias = [], None
    for s in stmts:
        if (alias is None and len(s) == 9 and s[:3] == ["PyObject", "*", "*"]
                and s[4:7] == ["=", "stack_pointer", "-"]
                and re.fullmatch(r"\w+", s[3]) and re.fullmatch(r"\w+", s[7])):
            alias = s[3]
            out.append(["STACK_SHRINK", "(", s[7], ")", ";"])
            continue
        if alias is not None:
            if s[:4] == ["stack_pointer", "=", alias, "-"] and s[-1] == ";":
                out.append(["STACK_SHRINK"] + strip_outer(s[4:-1]) + [";"])
                alias = None
                continue
            if "stack_pointer" in s:
                raise Failure(f"{where}: stack_pointer used while {alias} points"
                              f" to the arguments: {render(s)}")
            s = ["stack_pointer" if t == alias else t for t in s]
        out.append(s)
    return out


def strip_outer(tokens):
    """tokens as one parenthesized expression: `(E)` stays, E is `(E)`."""
    if tokens[:1] == ["("] and tokens[-1:] == [")"]:
        depth = 0
        for n, t in enumerate(tokens):
            depth += {"(": 1, ")": -1}.get(t, 0)
            if depth == 0:
                break
        if n == len(tokens) - 1:
            return tokens
    return ["("] + tokens + [")"]


def intended(stmts, side):
    table = {key(stmt): common for s, stmt, common, _ in INTENDED if s == side}
    out = []
    for s in stmts:
        common = table.get(tuple(s), s)
        if common is None:
            continue
        out.append([common] if isinstance(common, str) else common)
    return out


def normalise_common(stmts):
    stmts = inline_field_aliases(stmts)
    stmts = split_deopt_or(stmts)
    stmts = order_comparisons(stmts)
    stmts = propagate_equalities(stmts)
    return stmts


def normalise_stock(stmts):
    stmts = [strip_single_parens(s) for s in stmts if s[0] not in SERIES_LINES]
    return normalise_common(intended(stmts, "stock"))


def normalise_copy(param, value, stmts, where):
    stmts = [[value if t == param else t for t in s] for s in stmts]
    stmts = [strip_single_parens(s) for s in stmts]
    stmts = fold_constants(stmts, where)
    stmts = [[RENAMES.get(t, t) for t in s] for s in stmts]
    stmts = args_pointer(stmts, where)
    return normalise_common(intended(stmts, "copy"))


# --- the check -----------------------------------------------------------------

def default_copy(patchdir):
    series = os.path.join(patchdir, "series")
    try:
        with open(series, encoding="utf-8") as f:
            names = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    except OSError as e:
        raise Failure(f"cannot read {series}: {e.strerror}"
                      " (run from the project's top directory, or give --copy)")
    for name in names:
        path = os.path.join(patchdir, name)
        if re.search(r"^\+[ \t]*#[ \t]*define[ \t]+%s\(" % MACRO,
                     read_source_raw(path), re.M):
            return path
    raise Failure(f"no patch of {series} defines {MACRO}")


def read_source_raw(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise Failure(f"cannot read {path}: {e.strerror}")


def stock_text(args):
    if args.stock:
        return read_source(args.stock), args.stock
    where = f"{args.git_dir}:upstream:Python/ceval.c"
    try:
        text = subprocess.run(
            ["git", f"--git-dir={args.git_dir}", "show", "upstream:Python/ceval.c"],
            check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        raise Failure(f"cannot read {where}: {detail.strip()}"
                      " (`make tree` unpacks it, or give --stock FILE)")
    return text, where


def main():
    parser = argparse.ArgumentParser(
        description="Check the series' copies of stock ceval.c code for drift.")
    parser.add_argument("--stock", help="a ceval.c to take the stock bodies from")
    parser.add_argument("--git-dir", default="build/src.git",
                        help="repository whose tag `upstream` is the pristine tree"
                             " (default build/src.git)")
    parser.add_argument("--copy", help="the patch, or ceval.c, defining " + MACRO)
    parser.add_argument("--patches", default="patches",
                        help="where to look for the --copy patch, by its series"
                             " (default patches)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print the normalised statements of both sides")
    args = parser.parse_args()
    try:
        stock, stock_where = stock_text(args)
        copy_where = args.copy or default_copy(args.patches)
        param, copy = copy_macro(read_source(copy_where), copy_where)
        drifted = 0
        for name, value in PAIRS:
            body, line = stock_body(stock, name, stock_where)
            want = render_all(normalise_stock(body))
            have = render_all(normalise_copy(param, value, copy, copy_where))
            label = f"{MACRO}({value})"
            if args.verbose:
                print(f"--- TARGET({name}), normalised:")
                print("\n".join("    " + s for s in want))
                print(f"--- {label}, normalised:")
                print("\n".join("    " + s for s in have))
            if want == have:
                print(f"ok: {label} in {copy_where} matches TARGET({name})"
                      f" of {stock_where} ({len(want)} statements)")
                continue
            drifted += 1
            print(f"error: {label} in {copy_where} no longer matches"
                  f" TARGET({name}) of {stock_where}:{line}", file=sys.stderr)
            print("       (normalised statements; - stock, + our copy)",
                  file=sys.stderr)
            for d in difflib.unified_diff(want, have, f"TARGET({name})", label,
                                          lineterm="", n=2):
                print("    " + d, file=sys.stderr)
        if drifted:
            print(f"""\
What to do: {MACRO} (in {copy_where},
at the end of _PyEval_EvalFrameDefault) is our copy of the frame push of
{' and '.join(n for n, _ in PAIRS)}, and must do what they do.
If the stock body changed (a later 3.11.x, or a backport: the series still
applies with zero fuzz), port the change to the copy in patch 0002, then
check again.  If the copy was changed on purpose, teach
tools/check-copies.py the difference (RENAMES, INTENDED), saying why.""",
                  file=sys.stderr)
            return 1
        return 0
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
