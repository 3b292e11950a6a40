/*
 * cpython-perf: the entry points of the perf trampoline subsystem.
 *
 * Everything that starts the machinery from outside: the PyUnstable_ C
 * API, start-up (-X perf, -X perf_jit, PYTHONPERFSUPPORT,
 * PYTHON_PERF_JIT_SUPPORT) and the sys functions
 * (sys.activate_stack_trampoline() and friends).
 *
 * JIT compilers and agents inside the process describe their own code in
 * the same map, through the same file as the trampolines: one writer for
 * all, safe to call from any thread, with or without the GIL, whether or
 * not a trampoline backend is active.  Their lines are assembled here,
 * outside _PyPerf_files_lock, and appended under it.  Their memory comes
 * from malloc(): a caller without the GIL must not wait for it, and
 * PyMem_Raw*() do when tracemalloc traces them (3.11's hooks take the GIL).
 *
 * The sys functions are here, where CPython 3.12+ has them in
 * Python/sysmodule.c: sysmodule.c then needs one small hunk
 * (patches/0003), and the functions, their Argument Clinic code
 * (Python/clinic/perf_api.c.h) and their stubs where there are no
 * trampolines stay next to the rest of the subsystem.
 *
 * This file calls the core (Python/perf_trampoline.c: activation, the
 * map's file), the writer, the hex of the symbol names and the start-up
 * of live activation (Python/perf_live.c); nothing of the subsystem calls
 * it.
 */

#include "Python.h"
#include "pycore_pystate.h"       // _PyInterpreterState_GET()
#include "perf_internal.h"

#include <errno.h>
#include <stdlib.h>               // malloc(), strtol()
#include <string.h>

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <fcntl.h>                // open()
#include <sys/stat.h>             // fstat()
#include <unistd.h>

/* ---- The C API (PyUnstable_*) ------------------------------------------- */

int
PyUnstable_PerfMapState_Init(void)
{
    pthread_mutex_lock(&_PyPerf_files_lock);
    _PyPerfFile *map = _PyPerf_OpenMap();
    pthread_mutex_unlock(&_PyPerf_files_lock);
    return map == NULL ? -1 : 0;
}

int
PyUnstable_WritePerfMapEntry(const void *code_addr, unsigned int code_size,
                             const char *entry_name)
{
    if (entry_name == NULL) {
        return -1;
    }
    size_t len = strlen(entry_name);
    char small[512];
    char *line = small;
    if (len + 2 * 16 + 3 > sizeof(small)) {
        line = malloc(len + 2 * 16 + 3);
        if (line == NULL) {
            return -1;
        }
    }
    char *p = _PyPerf_PutHex(line, (uintptr_t)code_addr);
    *p++ = ' ';
    p = _PyPerf_PutHex(p, code_size);
    *p++ = ' ';
    for (size_t i = 0; i < len; i++) {
        /* one record per line, whatever the name holds */
        unsigned char c = (unsigned char)entry_name[i];
        *p++ = (char)(c < 0x20 || c == 0x7f ? '?' : c);
    }
    *p++ = '\n';
    pthread_mutex_lock(&_PyPerf_files_lock);
    _PyPerfFile *map = _PyPerf_OpenMap();
    /* (through the writer: /tmp's reserve is kept, and a record written
       in part taken back) */
    int rc = map == NULL ? -1 : _PyPerfFile_Write(map, line,
                                                  (size_t)(p - line));
    pthread_mutex_unlock(&_PyPerf_files_lock);
    if (line != small) {
        free(line);
    }
    return rc;
}

/* Close the map, unless the trampolines still write to it. */
void
PyUnstable_PerfMapState_Fini(void)
{
    pthread_mutex_lock(&_PyPerf_files_lock);
    _PyPerf_CloseMap();
    pthread_mutex_unlock(&_PyPerf_files_lock);
}

/* Append the content of another process's map (a parent's, typically) to
   this process's. */
int
PyUnstable_CopyPerfMapFile(const char *parent_filename)
{
    if (parent_filename == NULL) {
        return -1;
    }
    int from = open(parent_filename, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (from < 0) {
        return -1;
    }
    /* Room for one more byte: the newline of a last line without one. */
    size_t room = PERF_RECORD_MAX;
    char *buf = malloc(room + 1);
    int rc = buf == NULL ? -1 : 0;
    pthread_mutex_lock(&_PyPerf_files_lock);
    _PyPerfFile *map = rc == 0 ? _PyPerf_OpenMap() : NULL;
    if (map == NULL) {
        rc = -1;
    }
    else if (_PyPerfFile_Flush(map) < 0) {
        /* Those records were marked written: all again, next time. */
        _PyPerfCode_NewGeneration();
        rc = -1;
    }
    struct stat a, b;
    if (rc == 0 && (fstat(from, &a) < 0 || !S_ISREG(a.st_mode)
                    || fstat(_PyPerfFile_Fd(map), &b) < 0
                    || (a.st_dev == b.st_dev && a.st_ino == b.st_ino)))
    {
        rc = -1;
    }
    /* Whole lines only, each write() ending at the end of a line: another
       writer of the map (a JIT of the process that writes it on its own)
       may append between two of these writes. */
    size_t have = 0;
    while (rc == 0) {
        if (have == room) {
            /* A line longer than the buffer. */
            char *bigger = realloc(buf, 2 * room + 1);
            if (bigger == NULL) {
                rc = -1;
                break;
            }
            buf = bigger;
            room *= 2;
        }
        ssize_t n = read(from, buf + have, room - have);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            rc = -1;
            break;
        }
        if (n == 0) {
            if (have > 0) {
                buf[have++] = '\n';
                rc = _PyPerfFile_Write(map, buf, have);
            }
            break;
        }
        have += (size_t)n;
        char *last = memrchr(buf, '\n', have);
        if (last != NULL) {
            size_t lines = (size_t)(last + 1 - buf);
            rc = _PyPerfFile_Write(map, buf, lines);
            TEST_POINT("copied");
            memmove(buf, buf + lines, have - lines);
            have -= lines;
        }
    }
    pthread_mutex_unlock(&_PyPerf_files_lock);
    free(buf);
    close(from);
    return rc;
}

/* Give `co` its trampoline now (a pre-fork server's master, before it
   forks its workers, so that they share the trampolines and their
   names).  0 on success or when it has one; -1 when no backend is active
   or the trampoline could not be made. */
int
PyUnstable_PerfTrampoline_CompileCode(PyCodeObject *co)
{
    if (co == NULL || _PyPerf_Active() == NULL) {
        return -1;
    }
    if (_PyPerfTrampoline_Of(co) != NULL) {
        return 0;
    }
    if (_PyPerf_NewTrampoline(co) == NULL) {
        return -1;
    }
    /* Its record on disk now, not with the next ones: the workers this
       is for may copy the map. */
    return _PyPerfTrampoline_Flush();
}

/* Upstream's switch between two behaviours of a forked child.  Here the
   child always keeps its inherited trampolines and their names; its own
   files describe those it runs, or, with the setting on, all of them at
   once (as upstream's child copies its parent's map). */
int
PyUnstable_PerfTrampoline_SetPersistAfterFork(int enable)
{
    _PyPerf_SetPersistAfterFork(enable);
    return enable;
}

#else /* !PY_HAVE_PERF_TRAMPOLINE */

int
PyUnstable_PerfMapState_Init(void)
{
    return -1;
}

int
PyUnstable_WritePerfMapEntry(const void *Py_UNUSED(code_addr),
                             unsigned int Py_UNUSED(code_size),
                             const char *Py_UNUSED(entry_name))
{
    return -1;
}

void
PyUnstable_PerfMapState_Fini(void)
{
}

int
PyUnstable_CopyPerfMapFile(const char *Py_UNUSED(parent_filename))
{
    return -1;
}

int
PyUnstable_PerfTrampoline_CompileCode(PyCodeObject *Py_UNUSED(co))
{
    return -1;
}

int
PyUnstable_PerfTrampoline_SetPersistAfterFork(int Py_UNUSED(enable))
{
    return 0;
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */


/* ---- Start-up ----------------------------------------------------------- */

/* The value of -X NAME: NULL when absent, L"" when given without "=". */
static const wchar_t *
find_xoption(const PyConfig *config, const wchar_t *name)
{
    const wchar_t *found = NULL;
    size_t len = wcslen(name);
    for (Py_ssize_t i = 0; i < config->xoptions.length; i++) {
        const wchar_t *opt = config->xoptions.items[i];
        if (wcsncmp(opt, name, len) == 0
            && (opt[len] == L'\0' || opt[len] == L'='))
        {
            found = opt[len] == L'=' ? opt + len + 1 : opt + len;
        }
    }
    return found;
}

/* -X disable_remote_debug (with or without a value) or a non-empty
   PYTHON_DISABLE_REMOTE_DEBUG (unless -E or -I), as CPython 3.14 names
   them: live activation is refused. */
static int
live_disabled(const PyConfig *config)
{
    const char *value = config->use_environment
                        ? getenv("PYTHON_DISABLE_REMOTE_DEBUG") : NULL;
    return (find_xoption(config, L"disable_remote_debug") != NULL
            || (value != NULL && value[0] != '\0'));
}

/* An environment variable that enables a backend: an integer other than
   zero, read as CPython 3.12+ reads it (strtol() with nothing after the
   digits, leading blanks allowed, within the range of a C int).  Unset or
   empty: nothing.  Anything else is ignored with a RuntimeWarning (3.12+
   ignores it silently). */
static int
env_enables(const PyConfig *config, const char *name)
{
    const char *value = config->use_environment ? getenv(name) : NULL;
    if (value == NULL || value[0] == '\0') {
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (end != value && *end == '\0' && errno == 0
        && v >= INT_MIN && v <= INT_MAX)
    {
        return v != 0;
    }
    _PyPerf_Warn("%s='%.100s' is not an integer in the range of a C int; "
                 "ignored", name, value);
    return 0;
}

#ifdef PY_HAVE_PERF_TRAMPOLINE
/* A size for /tmp's limit: digits, then K, M or G (binary multiples), or
   "unlimited" (-1).  -2 if `s` is neither. */
static int64_t
parse_size(const char *s)
{
    if (strcmp(s, "unlimited") == 0) {
        return -1;
    }
    int64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10) {
            return -2;
        }
        v = v * 10 + (*p - '0');
    }
    if (p == s) {
        return -2;
    }
    int shift = 0;
    switch (*p) {
        case '\0': break;
        case 'K': case 'k': shift = 10; p++; break;
        case 'M': case 'm': shift = 20; p++; break;
        case 'G': case 'g': shift = 30; p++; break;
        default: return -2;
    }
    if (*p != '\0' || v > (INT64_MAX >> shift)) {
        return -2;
    }
    return v << shift;
}

/* The bytes of replaced trampoline files a process keeps in /tmp:
   PYTHON_PERF_TMP_LIMIT, then -X perf_tmp_limit over it.  A value that is
   not a size gets a RuntimeWarning and leaves the default. */
static void
set_tmp_limit(const PyConfig *config)
{
    char buf[128];
    const char *sources[2] = {NULL, NULL};
    const char *env = config->use_environment
                      ? getenv("PYTHON_PERF_TMP_LIMIT") : NULL;
    if (env != NULL && env[0] != '\0') {
        sources[0] = env;
    }
    const wchar_t *x = find_xoption(config, L"perf_tmp_limit");
    if (x != NULL) {
        size_t i = 0;
        for (; x[i] != L'\0' && i + 1 < sizeof(buf); i++) {
            /* (anything but ASCII is not a size) */
            buf[i] = (x[i] > 0 && x[i] < 128) ? (char)x[i] : '?';
        }
        buf[i] = '\0';
        /* (a value too long for `buf` is not a size either) */
        sources[1] = x[i] == L'\0' ? buf : "(too long)";
    }
    const char *names[2] = {"PYTHON_PERF_TMP_LIMIT", "-X perf_tmp_limit"};
    for (int k = 0; k < 2; k++) {
        if (sources[k] == NULL) {
            continue;
        }
        int64_t limit = parse_size(sources[k]);
        if (limit == -2) {
            _PyPerf_Warn("%s='%.100s' is not a size (bytes, with K, M or G, "
                         "or 'unlimited'); ignored", names[k], sources[k]);
            continue;
        }
        _PyPerf_SetTmpLimit(limit);
    }
}
#endif

/* Lines asked for at start-up: PYTHON_PERF_LINES (an integer, as the
   other variables), then -X perf_lines over it: on without a value or
   with 1, off with 0; another value gets a warning and is ignored. */
static int
lines_asked(const PyConfig *config)
{
    int lines = env_enables(config, "PYTHON_PERF_LINES");
    const wchar_t *x = find_xoption(config, L"perf_lines");
    if (x != NULL) {
        if (x[0] == L'\0' || (x[0] == L'1' && x[1] == L'\0')) {
            lines = 1;
        }
        else if (x[0] == L'0' && x[1] == L'\0') {
            lines = 0;
        }
        else {
            _PyPerf_Warn("-X perf_lines='%.100ls' is not 0 or 1; ignored", x);
        }
    }
    return lines;
}

void
_PyPerfTrampoline_InitFromConfig(const PyConfig *config)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    set_tmp_limit(config);
    _PyPerf_AllowActivation();
    _PyPerf_PublishTestHook();
#endif
    /* Live activation (Python/perf_live.c): ready from here on, before
       -X perf activates, so that its block already says so. */
    _PyPerfLive_Start(live_disabled(config));
    /* Later sources override earlier ones: the perf_jit spelling over
       the perf one, -X over the environment. */
    const char *backend = NULL;
    if (env_enables(config, "PYTHONPERFSUPPORT")) {
        backend = "perf";
    }
    if (env_enables(config, "PYTHON_PERF_JIT_SUPPORT")) {
        backend = "perf_jit";
    }
    if (find_xoption(config, L"perf") != NULL) {
        backend = "perf";
    }
    if (find_xoption(config, L"perf_jit") != NULL) {
        backend = "perf_jit";
    }
    int lines = lines_asked(config);
    if (lines && backend == NULL) {
        backend = "perf";
    }
    if (backend == NULL) {
        return;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
#  ifdef PY_HAVE_PERF_LINES
    if (lines && _PyPerf_EvalFrameLines == NULL) {
        /* (a series without the patch of the second evaluator) */
        _PyPerf_Warn("perf lines not available in this build; "
                     "%s runs without them", backend);
        lines = 0;
    }
#  else
    if (lines) {
        _PyPerf_Warn("perf lines not available on this platform; "
                     "perf runs without them");
        lines = 0;
    }
#  endif
    if (_PyPerf_Activate(backend, lines) < 0) {
        PyErr_WriteUnraisable(NULL);
    }
#else
    _PyPerf_Warn("perf trampoline not available on this platform; %s "
                 "ignored", backend);
#endif
}


/* ---- The sys API -------------------------------------------------------- */

/*[clinic input]
module sys
[clinic start generated code]*/
/*[clinic end generated code: output=da39a3ee5e6b4b0d input=3726b388feee8cea]*/

#include "clinic/perf_api.c.h"

/*[clinic input]
sys.activate_stack_trampoline

    backend: object
    /
    *
    lines: bool(accept={int}) = False

Start naming Python functions for perf, with the given backend.

"perf" writes /tmp/perf-PID.map for frame-pointer profiles
(perf record -g); "perf_jit" writes /tmp/jit-PID.dump with unwind
tables for perf record --call-graph dwarf and perf inject --jit.
With lines=True, each Python frame in perf's samples also carries the
line it is on.
[clinic start generated code]*/

static PyObject *
sys_activate_stack_trampoline_impl(PyObject *module, PyObject *backend,
                                   int lines)
/*[clinic end generated code: output=2e6ecb623da5a165 input=492b0a68af46ff7a]*/
{
    /* `backend` is converted here, not by Argument Clinic: with a keyword
       beside it, Clinic's messages would number it ("argument 1"), where
       CPython 3.12+, whose function has the one argument, does not. */
    if (!PyUnicode_Check(backend)) {
        PyErr_Format(PyExc_TypeError,
                     "activate_stack_trampoline() argument must be str, "
                     "not %.50s",
                     backend == Py_None ? "None" : Py_TYPE(backend)->tp_name);
        return NULL;
    }
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(backend, &len);
    if (name == NULL) {
        return NULL;
    }
    if (strlen(name) != (size_t)len) {
        PyErr_SetString(PyExc_ValueError, "embedded null character");
        return NULL;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    if (_PyPerf_Activate(name, lines != 0) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
#else
    (void)lines;
    PyErr_SetString(PyExc_ValueError, "perf trampoline not available");
    return NULL;
#endif
}

/*[clinic input]
sys.deactivate_stack_trampoline

Stop naming Python functions for perf.

Calls already running keep their trampolines; new calls get none.
Does nothing when no backend is active, and in a sub-interpreter.
[clinic start generated code]*/

static PyObject *
sys_deactivate_stack_trampoline_impl(PyObject *module)
/*[clinic end generated code: output=b50da25465df0ef1 input=8e34aab939e08b2e]*/
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    /* Trampolines are the main interpreter's: a sub-interpreter has none
       to turn off. */
    if (_PyInterpreterState_GET() == _PyInterpreterState_Main()) {
        _PyPerf_Deactivate();
        _PyPerf_WarnLostRecords();
    }
#endif
    Py_RETURN_NONE;
}

/*[clinic input]
sys.is_stack_trampoline_active

Return True if a perf trampoline backend is active.
[clinic start generated code]*/

static PyObject *
sys_is_stack_trampoline_active_impl(PyObject *module)
/*[clinic end generated code: output=ab2746de0ad9d293 input=8a92a3ba08f05b5f]*/
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    PyInterpreterState *interp = _PyInterpreterState_GET();
    if (_PyPerf_Active() != NULL
        && interp->eval_frame == _PyPerfTrampoline_EvalFrame)
    {
        Py_RETURN_TRUE;
    }
#endif
    Py_RETURN_FALSE;
}

PyMethodDef _PyPerfTrampoline_SysMethods[] = {
    SYS_ACTIVATE_STACK_TRAMPOLINE_METHODDEF
    SYS_DEACTIVATE_STACK_TRAMPOLINE_METHODDEF
    SYS_IS_STACK_TRAMPOLINE_ACTIVE_METHODDEF
    {NULL, NULL, 0, NULL}
};
