/*
 * cpython-perf: live activation, so that a running process can be asked
 * to name its Python functions for perf without being restarted.
 *
 * `python -m perf_trampoline activate PID` (Lib/perf_trampoline.py) has
 * the process PID do what sys.activate_stack_trampoline(backend) would do
 * if the program called it itself (with --lines, lines=True; with
 * --no-lines, lines=False): in its main interpreter, with the GIL held,
 * between two bytecodes.  The requester needs no debugger and the
 * process no thread of its own for it: it writes a request into a control
 * block of this file, through /proc/PID/mem (the permission of a ptrace
 * attach), and sets the main interpreter's eval breaker, which the
 * evaluator tests anyway.  The evaluator then calls
 * eval_frame_handle_pending(), which serves the request here.  While no
 * request comes, nothing is paid: no test is added to the call path or
 * to any bytecode.
 *
 * The control block
 * -----------------
 * One exported data symbol, _PyPerf_Live, in the dynamic symbol table of
 * `python` (linked with -export-dynamic) or of libpython3.11.so.  The
 * requester finds it with /proc/PID/maps and the .dynsym of the mapped
 * file.  Native byte order, fixed offsets, every field naturally aligned:
 *
 *     off  type      field         meaning
 *     0    char[8]   magic         "PyPerfL\0"
 *     8    uint32    version       1
 *     12   uint32    size          sizeof the block (480; 456 before
 *                                  served_request was added, 464 before
 *                                  flags, 472 before lines)
 *     16   uint64    eval_breaker  address of the main interpreter's
 *                                  ceval.eval_breaker (an int32); 0 while
 *                                  not ready, disabled or finalizing
 *     24   uint32    state         0 starting, 1 ready, 2 disabled (-X
 *                                  disable_remote_debug or
 *                                  PYTHON_DISABLE_REMOTE_DEBUG), 3
 *                                  finalizing
 *     28   uint32    pid           getpid() of the process that owns the
 *                                  block (a child of os.fork() rewrites
 *                                  it)
 *     32   uint32    request       set by the requester: 0 none, 1
 *                                  activate perf, 2 activate perf_jit, 3
 *                                  deactivate, 4 seal the trampoline
 *                                  file that still takes names (its
 *                                  build-id final: a recording that ends
 *                                  while the process runs caches it);
 *                                  codes 1 and 2 ORed with 0x100 turn
 *                                  line trampolines on, with 0x200 off
 *                                  (without either: lines as they are);
 *                                  cleared when served
 *     36   uint32    (reserved)
 *     40   uint64    request_id    set by the requester before `request`:
 *                                  its own token (random)
 *     48   uint64    served_id     the request_id of the last request
 *                                  served, written last
 *     56   int32     result        0 done, 1 done but the backend's file
 *                                  could not be made (the warning went to
 *                                  the process's stderr), 2 refused (see
 *                                  message), 3 unknown request code
 *     60   int32     error         errno of result 1, else 0
 *     64   uint32    active        0 none, 1 perf, 2 perf_jit
 *     68   uint32    (reserved)
 *     72   char[256] file          the active backend's file, or ""
 *     328  char[128] message       why a request was refused, or ""
 *     456  uint32    served_request the request code served with
 *                                  served_id (blocks of 464 bytes and
 *                                  more)
 *     460  uint32    (reserved)
 *     464  uint32    flags         how the interpreter was built, constant:
 *                                  1 frame pointers (PY_HAVE_FRAME_POINTERS),
 *                                  2 trampolines (PY_HAVE_PERF_TRAMPOLINE);
 *                                  what `record --pid` needs without
 *                                  running the process's program (in a
 *                                  container, it may not run on the host)
 *                                  (blocks of 472 bytes and more)
 *     468  uint32    (reserved)
 *     472  uint32    lines         1 while the active backend gives new
 *                                  calls line trampolines, else 0
 *                                  (blocks of 480 bytes and more)
 *     476  uint32    (reserved)
 *
 * Fields may be added at the end only (`size` grows, `version` stays).
 * `active` and `file` stay current whatever changes the backend (the sys
 * functions, start-up, a forked child moving to its own files, a backend
 * that a failed write turned off): the core tells this file through
 * _PyPerf_observer, so that `python -m perf_trampoline status` only reads.
 *
 * A request, step by step
 * -----------------------
 * The requester checks magic, version, size and pid, and that the state
 * is "ready", before any write; then writes request_id, then request,
 * then 1 into *eval_breaker.  COMPUTE_EVAL_BREAKER() in ceval.c ORs in
 * "a request is pending" for the main interpreter, so a recomputation by
 * another thread cannot lose it for good; a requester that raced one
 * pokes again while `request` is still set.  eval_frame_handle_pending()
 * calls _PyPerfLive_Serve(), which takes `request` and clears it in one
 * atomic exchange (a request written while it acts is then served next,
 * not lost, and none is half taken), then reads request_id; raises the
 * audit event cpython.perf_trampoline.live_request (a hook that raises
 * refuses the request); acts; writes result, error, message, active,
 * file and served_request, and finally served_id.  Two requesters writing
 * at once may pair one's code with the other's id: served_request says
 * which code was served, and a requester trusts only a match of both.
 * Whether the process takes requests at all (opted out, not ready yet,
 * finalizing) is decided from its own copy of the state, never from the
 * block, which requesters can write.  The
 * breaker is recomputed at the end of eval_frame_handle_pending(), as
 * 3.11 does on Windows only, so that a stray poke costs one call, not a
 * breaker set for ever.  A process blocked in a system call serves the
 * request when it next runs Python code.
 *
 * Serving never fails the bytecode it interrupts: a refusal (a PEP 523
 * evaluator of someone else's installed, finalization, live activation
 * disabled) goes into result and message, and no exception is left set.
 * Only the main interpreter serves; a child of os.fork() (of
 * PyOS_AfterFork_Child()) starts with no request pending and its own
 * pid.  Built --without-remote-debug, none of this is compiled
 * (Py_REMOTE_DEBUG undefined): there is no block, and the requester,
 * finding our other symbols, says that live activation is disabled.
 *
 * This file calls the core (Python/perf_trampoline.c: _PyPerf_Activate(),
 * _PyPerf_Deactivate(), _PyPerf_Active()); the core calls it only through
 * the observer it registers, and Python/perf_api.c starts it.
 */

#include "Python.h"
#include "pycore_interp.h"        // PyInterpreterState.ceval
#include "pycore_pyerrors.h"      // _PyErr_Fetch()
#include "pycore_pystate.h"       // _PyInterpreterState_Main()
#include "perf_internal.h"

#ifdef Py_REMOTE_DEBUG

#include <errno.h>
#include <stddef.h>               // offsetof()
#include <string.h>
#include <unistd.h>               // getpid()

/* The layout is an interface: these hold it. */
#define LAYOUT(field, off) \
    _Static_assert(offsetof(_PyPerfLiveBlock, field) == (off), \
                  "_PyPerfLiveBlock." #field " moved")
LAYOUT(magic, 0);
LAYOUT(version, 8);
LAYOUT(size, 12);
LAYOUT(eval_breaker, 16);
LAYOUT(state, 24);
LAYOUT(pid, 28);
LAYOUT(request, 32);
LAYOUT(request_id, 40);
LAYOUT(served_id, 48);
LAYOUT(result, 56);
LAYOUT(error, 60);
LAYOUT(active, 64);
LAYOUT(file, 72);
LAYOUT(message, 328);
LAYOUT(served_request, 456);
LAYOUT(flags, 464);
LAYOUT(lines, 472);
_Static_assert(sizeof(_PyPerfLiveBlock) == 480,
              "_PyPerfLiveBlock changed size");
_Static_assert(sizeof(((PyInterpreterState *)0)->ceval.eval_breaker) == 4,
              "the requester writes an int32 into eval_breaker");

#ifdef PY_HAVE_FRAME_POINTERS
#  define FLAG_FRAME_POINTERS _PyPerfLive_FRAME_POINTERS
#else
#  define FLAG_FRAME_POINTERS 0
#endif
#ifdef PY_HAVE_PERF_TRAMPOLINE
#  define FLAG_TRAMPOLINE _PyPerfLive_TRAMPOLINE
#else
#  define FLAG_TRAMPOLINE 0
#endif

_PyPerfLiveBlock _PyPerf_Live = {
    .magic = _PyPerfLive_MAGIC,
    .version = _PyPerfLive_VERSION,
    .size = sizeof(_PyPerfLiveBlock),
    .flags = FLAG_FRAME_POINTERS | FLAG_TRAMPOLINE,
};

/* Stores of the fields a requester reads after it saw another one change:
   ordered (x86_64 keeps them so anyway; the compiler must too). */
#if defined(__GNUC__) || defined(__clang__)
#  define STORE_FENCE() __atomic_thread_fence(__ATOMIC_RELEASE)
#else
#  define STORE_FENCE() ((void)0)
#endif

/* Copy `text` into a field of `size` bytes, cut, NUL-terminated, the rest
   zeroed (a reader never sees the tail of an older text). */
static void
put_field(char *field, size_t size, const char *text)
{
    size_t len = strlen(text);
    if (len >= size) {
        len = size - 1;
    }
    memcpy(field, text, len);
    memset(field + len, 0, size - len);
}

/* The block's state as this process set it.  Requesters can write the
   block, `state` included: what the process decided (opted out, not ready
   yet, finalizing) is read from here, never from the block. */
static uint32_t own_state = _PyPerfLive_STARTING;

static void
set_state(uint32_t state)
{
    own_state = state;
    _PyPerf_Live.state = state;
}

/* Take the pending request code, clearing it in the same step: a request
   written meanwhile is served next, never lost, and never half taken. */
static uint32_t
take_request(void)
{
#if defined(__GNUC__) || defined(__clang__)
    return __atomic_exchange_n(&_PyPerf_Live.request, _PyPerfLive_NONE,
                               __ATOMIC_ACQ_REL);
#else
    /* (not atomic: a compiler without GNU C's atomics gets a read and a
       clear, which a requester writing at the same moment can lose) */
    uint32_t request = _PyPerf_Live.request;
    _PyPerf_Live.request = _PyPerfLive_NONE;
    return request;
#endif
}

/* ---- Keeping `active` and `file` current ------------------------------ */

#ifdef PY_HAVE_PERF_TRAMPOLINE
static void
publish_active(void)
{
    _PyPerfLiveBlock *b = &_PyPerf_Live;
    const _PyPerfBackend *be = _PyPerf_Active();
    char file[sizeof(b->file)] = "";
    uint32_t active = 0;
    uint32_t lines = 0;
    if (be != NULL) {
        active = be == &_PyPerf_JitDumpBackend ? 2 : 1;
        lines = _PyPerf_ActiveLines() ? 1 : 0;
    }
    if (be != NULL && _PyPerf_ActiveHasFile()) {
        /* As Python/perf_file.c names it: the file is opened by this
           process, for its own pid.  (None while the map is another
           process's: the block's `file` is empty.) */
        PyOS_snprintf(file, sizeof(file), be->path_format, (long)getpid());
    }
    /* No file is ever described as another backend's: `active` is 0
       while `file` changes. */
    b->active = 0;
    STORE_FENCE();
    put_field(b->file, sizeof(b->file), file);
    b->lines = lines;
    STORE_FENCE();
    b->active = active;
}

#else
static void
publish_active(void)
{
}
#endif

/* ---- Start-up and fork ------------------------------------------------ */

static void
on_core_event(int event)
{
    if (event == _PyPerf_FORKED) {
        /* A child of fork(): a process of its own, with no request
           pending (the requester asked the parent).  The breaker may
           have been copied set: the first check recomputes it.  (A
           child of a C library's fork(), which does not go through
           PyOS_AfterFork_Child(), keeps the parent's pid here, and
           requesters refuse it as a block that is not its own: CPython
           does not support running Python code in such a child.) */
        _PyPerf_Live.request = 0;
        _PyPerf_Live.pid = (uint32_t)getpid();
        return;
    }
    if (event == _PyPerf_FINALIZED) {
        /* The interpreter may not run Python code again: no more pokes. */
        set_state(_PyPerfLive_FINALIZING);
        STORE_FENCE();
        _PyPerf_Live.eval_breaker = 0;
    }
    publish_active();
}

/* The block names its process from the start, while still "starting":
   a requester that comes during start-up (site, .pth files,
   sitecustomize) then waits for "ready" rather than refusing a block
   that names no process. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((constructor)) static void
name_the_owner(void)
{
    _PyPerf_Live.pid = (uint32_t)getpid();
}
#endif

void
_PyPerfLive_Start(int disabled)
{
    _PyPerfLiveBlock *b = &_PyPerf_Live;
    b->eval_breaker = 0;
    STORE_FENCE();
    set_state(_PyPerfLive_STARTING);
    b->pid = (uint32_t)getpid();
    b->request = 0;
    /* Also when disabled: a child must say "disabled" as its own. */
    _PyPerf_observer = on_core_event;
    publish_active();
    if (disabled) {
        set_state(_PyPerfLive_DISABLED);
        return;
    }
    b->eval_breaker =
        (uint64_t)(uintptr_t)&_PyInterpreterState_Main()->ceval.eval_breaker;
    STORE_FENCE();
    set_state(_PyPerfLive_READY);
}

/* ---- Serving a request ------------------------------------------------ */

/* The text of the exception being raised, for `message`; cleared. */
static void
take_exception(PyThreadState *tstate, char *buf, size_t size)
{
    PyObject *exc, *val, *tb;
    _PyErr_Fetch(tstate, &exc, &val, &tb);
    _PyErr_NormalizeException(tstate, &exc, &val, &tb);
    const char *text = NULL;
    PyObject *str = val != NULL ? PyObject_Str(val) : NULL;
    if (str != NULL) {
        text = PyUnicode_AsUTF8(str);
    }
    if (text == NULL || text[0] == '\0') {
        text = exc != NULL ? ((PyTypeObject *)exc)->tp_name : "error";
    }
    put_field(buf, size, text);
    Py_XDECREF(str);
    Py_XDECREF(exc);
    Py_XDECREF(val);
    Py_XDECREF(tb);
    /* Anything PyObject_Str() raised goes too. */
    _PyErr_Clear(tstate);
}

/* The lines that activation `request` asks for, as _PyPerf_Activate()
   takes them: 1 on, 0 off, -1 as they are; -2 for a code that is not one
   we know (a lines bit on another request, both bits, other bits). */
static int
lines_asked(uint32_t request)
{
    uint32_t code = request & _PyPerfLive_CODE_MASK;
    uint32_t bits = request & ~(uint32_t)_PyPerfLive_CODE_MASK;
    if (bits == 0) {
        return -1;
    }
    if (code != _PyPerfLive_ACTIVATE_PERF
        && code != _PyPerfLive_ACTIVATE_PERF_JIT)
    {
        return -2;
    }
    return bits == _PyPerfLive_LINES_ON ? 1
           : bits == _PyPerfLive_LINES_OFF ? 0 : -2;
}

/* Carry out `request`: its result code, with *error (an errno) or
   `message` (room for `size` bytes) saying why it failed. */
static int
carry_out(PyThreadState *tstate, uint32_t request, int *error,
          char *message, size_t size)
{
    int lines = lines_asked(request);
    uint32_t code = request & _PyPerfLive_CODE_MASK;
    if (code < _PyPerfLive_ACTIVATE_PERF || code > _PyPerfLive_SEAL
        || lines == -2)
    {
        PyOS_snprintf(message, size, "unknown request code %lu",
                      (unsigned long)request);
        return _PyPerfLive_UNKNOWN;
    }
    if (own_state != _PyPerfLive_READY) {
        put_field(message, size,
                  own_state == _PyPerfLive_DISABLED
                  ? "live activation is disabled in this process"
                  : own_state == _PyPerfLive_FINALIZING
                  ? "the interpreter is finalizing"
                  : "the interpreter is not ready yet");
        return _PyPerfLive_REFUSED;
    }
    /* An audit hook may refuse: it sees what is asked before anything
       is done. */
    if (PySys_Audit("cpython.perf_trampoline.live_request", "s",
                    code == _PyPerfLive_DEACTIVATE ? "deactivate"
                    : code == _PyPerfLive_SEAL ? "seal"
                    : code == _PyPerfLive_ACTIVATE_PERF_JIT ? "perf_jit"
                    : "perf") < 0)
    {
        /* A Ctrl-C that came while the hook ran is the program's: it is
           raised again at the next check, not turned into a refusal. */
        int interrupted = PyErr_ExceptionMatches(PyExc_KeyboardInterrupt);
        take_exception(tstate, message, size);
        if (interrupted) {
            PyErr_SetInterrupt();
        }
        return _PyPerfLive_REFUSED;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    if (code == _PyPerfLive_DEACTIVATE) {
        _PyPerf_Deactivate();
        _PyPerf_WarnLostRecords();
        return _PyPerfLive_DONE;
    }
    if (code == _PyPerfLive_SEAL) {
        (void)_PyPerf_SealFiles();
        return _PyPerfLive_DONE;
    }
    const char *name = code == _PyPerfLive_ACTIVATE_PERF_JIT
                       ? "perf_jit" : "perf";
    errno = 0;
    /* As sys.activate_stack_trampoline(name, lines=...) would, except
       that a request without a lines bit keeps them as they are (the
       requests of older requesters).  Lines where they cannot be (a
       build without them) are refused with the ValueError's text. */
    int rc = _PyPerf_Activate(name, lines);
    if (rc == 1) {
        *error = errno;
        return _PyPerfLive_NO_FILE;
    }
    if (rc < 0) {
        take_exception(tstate, message, size);
        return _PyPerfLive_REFUSED;
    }
    return _PyPerfLive_DONE;
#else
    (void)tstate;
    (void)error;
    put_field(message, size,
              "perf trampolines are not available on this platform");
    return _PyPerfLive_REFUSED;
#endif
}

void
_PyPerfLive_Serve(PyThreadState *tstate)
{
    /* Set while a request is served: the Python code of a warning may
       run meanwhile, and reach the breaker with a new request pending.
       That one waits (pending, the breaker kept set) until this one's
       acknowledgement is written, which would overwrite its own. */
    static int serving;
    _PyPerfLiveBlock *b = &_PyPerf_Live;
    if (b->request == _PyPerfLive_NONE || serving
        || tstate->interp != _PyInterpreterState_Main())
    {
        return;
    }
    uint32_t request = take_request();
    if (request == _PyPerfLive_NONE) {
        return;
    }
    serving = 1;
    /* The id that goes with it: written before the code, so read after
       it.  Two requesters writing at once can pair one's code with the
       other's id: served_request echoes the code, and a requester counts
       its request served only when both are its own. */
    uint64_t id = b->request_id;

    /* The interrupted bytecode has no exception set; keep whatever the
       caller has anyway. */
    PyObject *exc, *val, *tb;
    _PyErr_Fetch(tstate, &exc, &val, &tb);
    int error = 0;
    char message[sizeof(b->message)] = "";
    int result = carry_out(tstate, request, &error, message,
                           sizeof(message));
    if (_PyErr_Occurred(tstate)) {
        /* Nothing above should leave one; a warning's Python code might. */
        PyErr_WriteUnraisable(NULL);
    }
    _PyErr_Restore(tstate, exc, val, tb);

    publish_active();
    b->result = result;
    b->error = error;
    put_field(b->message, sizeof(b->message), message);
    b->served_request = request;
    STORE_FENCE();
    b->served_id = id;
    serving = 0;
}

#else /* !Py_REMOTE_DEBUG */

void
_PyPerfLive_Start(int Py_UNUSED(disabled))
{
}

#endif /* Py_REMOTE_DEBUG */
