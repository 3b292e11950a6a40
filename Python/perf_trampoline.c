/*
 * cpython-perf: perf trampolines, so that Linux perf names Python functions.
 *
 * The problem
 * -----------
 * perf knows only native symbols.  Every Python function runs inside
 * _PyEval_EvalFrameDefault, so a profile shows that one symbol, stacked as
 * deep as the program's Python calls go, and never the Python functions.
 *
 * The idea
 * --------
 * Give every code object a native address range of its own: a small copy
 * of an assembly trampoline (Python/asm_trampoline.S) that calls the
 * evaluator.  Running a frame through its code object's trampoline puts
 * that address on the native stack, and a file tells perf which Python
 * function each range belongs to:
 *
 *     native stack (grows down)           what perf reports
 *     ---------------------------------   -------------------------------
 *     _PyEval_EvalFrameDefault            _PyEval_EvalFrameDefault
 *     trampoline copy #17  [0x7f..a0]     py::bar:app.py   (from the file)
 *     _PyEval_EvalFrameDefault            _PyEval_EvalFrameDefault
 *     trampoline copy #18  [0x7f..b0]     py::foo:app.py
 *     _PyPerfTrampoline_EvalFrame         _PyPerfTrampoline_EvalFrame
 *     PyEval_EvalCode                     ...
 *
 * The trampoline builds a frame record, so frame-pointer unwinding loses
 * no native frame on the way through it.
 *
 * How frames get there
 * --------------------
 * Frames that C code starts (function calls from C, generators, the main
 * module) go through the PEP 523 hook, interp->eval_frame, which is
 * _PyPerfTrampoline_EvalFrame while a backend is active.  In 3.11 the
 * evaluator runs Python-to-Python calls inline, without any C call, and a
 * PEP 523 hook normally turns that off together with the CALL_PY_*
 * specializations.  Our ceval.c patch keeps both: a call instruction still
 * pushes the new frame itself, specialized, and only then, out of line,
 * calls the code object's trampoline (found in co_extra,
 * _PyPerfTrampoline_Of()) instead of jumping to the frame's first
 * instruction; a code object without one yet goes through the hook, which
 * gives it one (eval_frame_new_code).  Each Python call thus costs one
 * trampoline and one evaluator entry, and nothing but a test while no
 * backend is active.
 *
 * Trampolines and backends
 * ------------------------
 * Copies of the template live in arenas of executable memory, one slot
 * per code object, never reused (Python/perf_arena.c).  A code object
 * finds its trampoline through its co_extra slot, and each slot remembers
 * which backends have described it, in which generation of forked
 * children (Python/perf_codes.c).  A backend (_PyPerfBackend: init / write
 * entry / fini) turns trampolines into one file format: the perf map
 * (Python/perf_map.c) or the jitdump (Python/perf_jit_trampoline.c); the
 * writer (Python/perf_file.c) owns everything else about the files: safe
 * creation in /tmp, appending whole records among other writers, stale
 * files.  Failure to create or write a file, or to map executable memory,
 * is a RuntimeWarning; the backend turns off and the program runs on.
 * One exception: a perf map whose name is taken (another live process
 * with our pid, from another pid namespace that shares /tmp; another
 * user's file) leaves the backend on without it, with a warning, its
 * trampolines named by their arena files alone and none put in anonymous
 * memory, which perf would look up in that map.  A
 * lack of room is waited out instead, with one warning and the backend
 * on: a full /tmp (or its reserve reached, a quota, a size limit) leaves
 * new trampolines unnamed by the files until there is room; no memory or
 * no mappings for an arena leave new code objects without a trampoline
 * until the arenas find room again.
 *
 * After fork() the child drops the parent's descriptors, puts new
 * trampolines in arenas of its own (perf names an inherited mapping after
 * the parent) and, once the interpreter's at-fork hooks have run, starts
 * files named for its own pid, describing only what it runs.  Trampolines
 * are made and described with the GIL held; _PyPerf_files_lock serializes
 * opening, writing and closing files with the C API's callers, which may
 * hold no GIL, and with fork(), which waits for it (a child never sees a
 * file half opened).
 *
 * The files
 * ---------
 * Each file opens with its own design comment, and calls only the files
 * below it in this list (Python/perf_internal.h declares what they share;
 * Include/internal/pycore_perf_trampoline.h what the interpreter uses):
 *
 *     perf_api.c           the PyUnstable_ C API, -X / environment at
 *                          start-up, the sys functions
 *     perf_live.c          live activation by another process (python -m
 *                          perf_trampoline); sees changes through
 *                          _PyPerf_observer
 *     perf_trampoline.c    this file: activation, forks, finalization,
 *                          the hook and the slow side of the call path
 *     perf_codes.c         co_extra, fork generations, describing
 *                          trampolines to a backend
 *     perf_map.c           the backends: records of the perf map and
 *     perf_jit_trampoline.c  of the jitdump
 *     perf_arena.c         executable memory, slots
 *     perf_elf.c           arenas as ELF files that perf reads by itself
 *     perf_elf_image.c     their bytes: layout, headers, symbols
 *     perf_lines.c         their DWARF line tables
 *     perf_seal.c          their build-ids, sealed when the names are
 *                          final (at a crash too)
 *     perf_kept.c          the files of dead arenas kept in /tmp, within
 *                          a limit
 *     perf_debugger.c      arenas described to gdb and lldb (GDB's JIT
 *                          interface), live and in core files
 *     perf_unwind.c        the template's unwind table (.eh_frame), for
 *                          the jitdump and the arena files
 *     perf_file.c          the writer
 *     perf_names.c         the symbol names and hex of the records
 *     perf_stack.c         the native stack budget (for ceval.c)
 *
 * (The core calls the backends only through their interface, and the
 * backends call only the writer, the symbol names and the unwind table.)
 * perf_api.c is named for its callers, the users of the interpreter;
 * perf_codes.c for what it keeps, a record per code object that has a
 * trampoline.
 *
 * The backends are a closed set, on purpose: the two that CPython 3.12+
 * has, under the same names (-X perf, -X perf_jit, sys's "perf" and
 * "perf_jit"), each with a fixed code in the live activation block (1
 * and 2, Include/internal/pycore_perf_live.h).  So the core tests which
 * one is active by its address (perf_live.c's publish_active()), and a
 * third would be added in three places: the table of backends below, the
 * block's codes, and Lib/perf_trampoline.py.
 *
 * State
 * -----
 * Each file keeps its state in one static struct of its own, named for
 * what it holds (this file's `core`, perf_arena.c's `files`,
 * perf_codes.c's `forks`, perf_jit_trampoline.c's `dump`, ...), and
 * resets it in a function of its own, called down the layers from this
 * file at the two points where state changes hands.  In the child of
 * fork(): atfork_child() here (in the fork() call itself: descriptors
 * and mappings of the parent's files, down through
 * _PyPerfArena_MarkInherited() and the AfterFork() functions it calls),
 * then _PyPerfTrampoline_AfterForkChild() (the new generation of records,
 * the files of the child's own).  At finalization: _PyPerfTrampoline_Fini().
 * perf_live.c hears of a fork through the observer (_PyPerf_FORKED,
 * also where trampolines are not built).  The at-fork handlers are
 * registered when a backend first opens a file: a process that never
 * turns one on runs nothing of ours at a fork, and one that did pays,
 * at each fork() of any library, a lock taken and released, a write()
 * of the records still waiting in blocks (if any) in the parent, and in
 * the child a walk of its arenas that lets go of the parent's files.
 * The few variables outside such structs are read on the call path
 * (_PyPerf_hook, _PyPerf_code_index, the stack budget: ceval.c reads them
 * through Include/internal/pycore_perf_trampoline.h, where a struct
 * member would cost an address computation) or by other processes and
 * debuggers (_PyPerf_Live, __jit_debug_descriptor, which their readers
 * find by name).
 */

#include "Python.h"
#include "pycore_ceval.h"         // _PyEval_EvalFrameDefault()
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "pycore_interp.h"        // PyInterpreterState.eval_frame
#include "pycore_pyerrors.h"      // _PyErr_Fetch()
#include "pycore_pystate.h"       // _PyInterpreterState_GET()
#include "perf_internal.h"

/* _PyPerfTrampoline_EvalFrame once a backend has been activated, NULL
   before (there is no other value): what ceval.c's copies of the call
   instructions compare interp->eval_frame with (pycore_perf_trampoline.h
   says why a variable). */
_PyFrameEvalFunction _PyPerf_hook;

/* make_pending_calls()'s `busy`, one for both compilations of ceval.c
   (Python/perf_lines_eval.h). */
int _PyPerf_pending_calls_busy;

void (*_PyPerf_observer)(int event);

/* Tell the observer, if any (Python/perf_live.c), of `event`. */
static void
notify(int event)
{
    if (_PyPerf_observer != NULL) {
        _PyPerf_observer(event);
    }
}

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <pthread.h>              // pthread_atfork()
#include <string.h>

typedef _PyPerfTrampolineFunc py_trampoline;

#define NBACKENDS 2
#define SLOT_ALIGN 16


/* ---- State -------------------------------------------------------------- */

typedef _PyPerfBackendState backend_state;

static struct {
    backend_state backends[NBACKENDS];
    backend_state *active;        /* NULL when off */
    int atfork_registered;
    int persist_after_fork;       /* PyUnstable_..._SetPersistAfterFork() */
    volatile int forked;          /* set in a child, until files move */
    int finalized;                /* _PyPerfTrampoline_Fini() has run */
    int flush_errno;              /* a block of records lost, where no
                                     warning could be given: the next
                                     trampoline, or deactivation, gives
                                     it */
    backend_state *flush_failed;  /* whose */
    int activating_after_fork;    /* set while a child of fork()
                                     re-activates its parent's backend */
    int warned_no_room;           /* /tmp's reserve reached: said once
                                     per activation */
    int warned_no_arena;          /* arenas refused: the same */
    int undescribed;              /* trampolines left undescribed for lack
                                     of room: the next activation of the
                                     active backend describes them */
    int in_child_hooks;           /* set in a child of fork() while
                                     PyOS_AfterFork_Child() runs the
                                     at-fork hooks: new code objects that
                                     they call run without a trampoline
                                     until the files have moved, after the
                                     hooks */
} core = {
    .backends = {
        {&_PyPerf_MapBackend, NULL, 0, 0},
        {&_PyPerf_JitDumpBackend, NULL, 0, 1},
    },
};

static void warn_no_room(const backend_state *st);

/* What _PyPerf_Activate() describes: every live trampoline, or only the
   running ones when a child of fork() re-activates its parent's backend. */
static int
describe_activated(backend_state *st)
{
    int r = core.activating_after_fork ? _PyPerfCode_DescribeRunning(st)
                                  : _PyPerfCode_DescribeAll(st);
    if (r == 0 && _PyPerfFile_Flush(st->file) < 0) {
        /* Records marked written were not: all of them again, next
           time. */
        _PyPerfCode_NewGeneration();
        r = -1;
    }
    return r;
}

/* Write the records that wait in a block (Python/perf_file.c), with
   _PyPerf_files_lock held.  A block that fails is lost: the next
   activation writes every record again, and the next trampoline warns
   (these callers cannot: at fork, at os._exit()). */
static void
flush_files(void)
{
    for (int i = 0; i < NBACKENDS; i++) {
        if (core.backends[i].file != NULL
            && _PyPerfFile_Flush(core.backends[i].file) < 0)
        {
            core.flush_errno = errno ? errno : EIO;
            core.flush_failed = &core.backends[i];
            _PyPerfCode_NewGeneration();
        }
    }
}

int
_PyPerfTrampoline_Flush(void)
{
    pthread_mutex_lock(&_PyPerf_files_lock);
    flush_files();
    int failed = core.flush_errno != 0;
    pthread_mutex_unlock(&_PyPerf_files_lock);
    return failed ? -1 : 0;
}

int
_PyPerfTrampoline_AtExit(void)
{
    int r = _PyPerfTrampoline_Flush();
    (void)_PyPerfArena_Seal();
    return r;
}

int
_PyPerf_SealFiles(void)
{
    return _PyPerfArena_Seal();
}

void
_PyPerf_SetTmpLimit(int64_t limit)
{
    _PyPerfArena_SetTmpLimit(limit);
}

/* ---- Activation --------------------------------------------------------- */

/* In the child of fork(): the descriptors and mappings belong to the
   parent's files.  Drop them (close() only: the jitdump's marker mapping
   is let go later, by the backend) so that nothing of the child's can
   reach the parent's files; the rest waits for
   _PyPerfTrampoline_AfterForkChild() or the next trampoline. */
static void
atfork_child(void)
{
    for (int i = 0; i < NBACKENDS; i++) {
        if (core.backends[i].file != NULL) {
            _PyPerfFile_Drop(core.backends[i].file);
        }
    }
    _PyPerfArena_MarkInherited();
    /* (a block the parent could not write is the parent's to report) */
    core.flush_errno = 0;
    /* Taken by atfork_prepare() in the thread that forked, which is the
       child's only thread. */
    pthread_mutex_unlock(&_PyPerf_files_lock);
    core.forked = 1;
}

/* fork() waits for the other threads to leave _PyPerf_files_lock: the
   child then never sees a file half opened or half closed (a descriptor
   open but not stored, or closed but still stored, which
   _PyPerfFile_Drop() would close later, when it may be someone else's),
   nor a held lock. */
static void
atfork_prepare(void)
{
    pthread_mutex_lock(&_PyPerf_files_lock);
    /* The parent's records on disk before the child exists: a pre-fork
       server's worker may copy its parent's map. */
    flush_files();
}

static void
atfork_parent(void)
{
    pthread_mutex_unlock(&_PyPerf_files_lock);
}

/* Forget what was described in the parent's files. */
static void
leave_parent_files(void)
{
    core.forked = 0;
    _PyPerfCode_NewGeneration();
}

static backend_state *
find_backend(const char *name)
{
    for (int i = 0; i < NBACKENDS; i++) {
        if (strcmp(core.backends[i].backend->name, name) == 0) {
            return &core.backends[i];
        }
    }
    return NULL;
}

/* Open the backend's file if it is not open yet.  -1 with errno set.
   Callers hold _PyPerf_files_lock. */
static int
open_backend(backend_state *st, int may_be_elsewhere)
{
    /* Before any file is open: a forked child must not write to it. */
    if (!core.atfork_registered) {
        int rc = pthread_atfork(atfork_prepare, atfork_parent,
                                atfork_child);
        if (rc != 0) {
            errno = rc;
            return -1;
        }
        core.atfork_registered = 1;
    }
    if (st->file == NULL) {
        st->file = _PyPerfFile_New();
        if (st->file == NULL) {
            return -1;
        }
    }
    if (!_PyPerfFile_IsOpen(st->file)) {
        if (_PyPerfFile_Open(st->file, st->backend->path_format) < 0) {
            /* Our pid's map is not ours to write: another live process
               holds it (one of another pid namespace that shares /tmp;
               perf reads the same map for both), or another user's file
               is there.  The arena files name trampolines by themselves,
               so the backend goes on with those alone, and no arena is
               made in anonymous memory, which perf would look up in that
               map.  (The jitdump has no such way: perf inject takes a
               dump by its name.) */
            if (!may_be_elsewhere) {
                return -1;
            }
            st->elsewhere = _PyPerfFile_Taken(st->file)
                            && st->backend == &_PyPerf_MapBackend
                            && _PyPerfArena_FilesInUse();
            if (!st->elsewhere) {
                return -1;
            }
            goto sized;
        }
        st->elsewhere = 0;
        if (st->backend->init(st->file) < 0) {
            int saved = errno;
            _PyPerfFile_Close(st->file);
            errno = saved;
            return -1;
        }
    }
sized:;
    size_t size = st->backend->bytes_per_code(
        _PyPerf_CodeSize(_PyPerf_PLAIN), NULL);
    st->slot_size = _Py_SIZE_ROUND_UP(size, SLOT_ALIGN);
    return 0;
}

/* Callers hold _PyPerf_files_lock: _PyPerf_CloseMap() reads core.active
   under it. */
static void
deactivate_locked(void)
{
    PyInterpreterState *interp = _PyInterpreterState_Main();
    if (core.active == NULL) {
        return;
    }
    if (interp->eval_frame == _PyPerfTrampoline_EvalFrame) {
        _PyInterpreterState_SetEvalFrameFunc(interp, NULL);
    }
    core.active = NULL;
    _PyPerfArena_RequireFiles(0);
    /* The records that wait: readers of an inactive process's files
       expect them all. */
    flush_files();
    notify(_PyPerf_CHANGED);
}

void
_PyPerf_WarnLostRecords(void)
{
    pthread_mutex_lock(&_PyPerf_files_lock);
    int err = core.flush_errno;
    backend_state *st = core.flush_failed;
    core.flush_errno = 0;
    pthread_mutex_unlock(&_PyPerf_files_lock);
    if (err != 0 && _PyPerf_IsNoRoom(err)) {
        /* Waited out: the next activation writes those records again
           (their generation is a new one: describe_activated()). */
        core.undescribed = 1;
        errno = err;
        warn_no_room(st);
    }
    else if (err != 0) {
        errno = err;
        _PyPerfFile_Warn(st->file, "write", st->backend->name);
    }
}

void
_PyPerf_Deactivate(void)
{
    pthread_mutex_lock(&_PyPerf_files_lock);
    deactivate_locked();
    pthread_mutex_unlock(&_PyPerf_files_lock);
}

/* Why no backend can be activated now: -1 with an exception set, else
   0. */
static int
refuse_activation(PyInterpreterState *interp)
{
    if (interp != _PyInterpreterState_Main()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "stack trampolines can only be activated in the "
                        "main interpreter");
        return -1;
    }
    if (interp->eval_frame != NULL
        && interp->eval_frame != _PyPerfTrampoline_EvalFrame)
    {
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot activate a stack trampoline: a custom "
                        "frame evaluator (PEP 523) is already installed");
        return -1;
    }
    if (core.finalized) {
        /* The files are complete (the dump ends with its CLOSE record),
           and nothing would complete them again. */
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot activate a stack trampoline during "
                        "interpreter finalization");
        return -1;
    }
    return 0;
}

/* How switch_to() ended. */
typedef enum {
    SWITCHED,
    NO_FILE,                      /* the backend's file could not be made */
    NOT_DESCRIBED,                /* ... or written to */
    SWITCHED_NO_ROOM,             /* switched, but the file had no room
                                     for every record */
} switch_result;

/* Make `st` the active backend: its file first, so that if it cannot be
   had the active backend, if any, stays as it is.  It becomes the active
   one before _PyPerf_files_lock is let go: from then on,
   PyUnstable_PerfMapState_Fini() leaves its file open.  errno says why
   it failed. */
static switch_result
switch_to(backend_state *st, PyInterpreterState *interp)
{
    pthread_mutex_lock(&_PyPerf_files_lock);
    switch_result result = open_backend(st, 1) < 0 ? NO_FILE
                           : describe_activated(st) < 0 ? NOT_DESCRIBED
                           : SWITCHED;
    int saved = errno;
    if (result == NOT_DESCRIBED && _PyPerf_IsNoRoom(saved)) {
        /* Waited out like any lack of room (the caller warns): what is
           left undescribed is described by the next activation. */
        result = SWITCHED_NO_ROOM;
    }
    if (result == SWITCHED || result == SWITCHED_NO_ROOM) {
        core.undescribed = result == SWITCHED_NO_ROOM;
    }
    if (result == NOT_DESCRIBED) {
        _PyPerfFile_Close(st->file);
        /* Describing may have moved live code objects to slots of the new
           backend's spacing (Python/perf_codes.c), which the backend that
           stays active has not described: it does now, or they would run
           unnamed from then on. */
        if (core.active != NULL && core.active != st && !core.forked) {
            (void)_PyPerfCode_DescribeAll(core.active);
        }
    }
    if (result == SWITCHED || result == SWITCHED_NO_ROOM) {
        deactivate_locked();
        core.active = st;
        _PyPerfArena_RequireFiles(st->elsewhere);
        _PyPerf_hook = _PyPerfTrampoline_EvalFrame;
        _PyInterpreterState_SetEvalFrameFunc(interp,
                                             _PyPerfTrampoline_EvalFrame);
        notify(_PyPerf_CHANGED);
    }
    pthread_mutex_unlock(&_PyPerf_files_lock);
    errno = saved;
    return result;
}

/* Are there line trampolines here?  If not, a ValueError. */
static int
lines_available(void)
{
#ifdef PY_HAVE_PERF_LINES
    if (_PyPerf_EvalFrameLines != NULL) {
        return 1;
    }
    PyErr_SetString(PyExc_ValueError,
                    "perf lines not available in this build");
#else
    PyErr_SetString(PyExc_ValueError,
                    "perf lines not available on this platform");
#endif
    return 0;
}

int
_PyPerf_Activate(const char *name, int lines)
{
    backend_state *st = find_backend(name);
    if (st == NULL) {
        /* (cut: the name is the caller's, of any length) */
        PyErr_Format(PyExc_ValueError, "invalid backend: %.200s", name);
        return -1;
    }
    if (lines < 0) {
        lines = st == core.active ? st->lines : 0;
    }
    if (lines && !lines_available()) {
        return -1;
    }
    PyInterpreterState *interp = _PyThreadState_GET()->interp;
    if (refuse_activation(interp) < 0) {
        return -1;
    }
    /* (a new activation says again what it runs short of) */
    core.warned_no_room = 0;
    core.warned_no_arena = 0;
    if (st == core.active && !core.forked && st->lines != lines
        && interp->eval_frame == _PyPerfTrampoline_EvalFrame)
    {
        /* On, with or without lines: off first, then on again as asked
           (the code objects move to trampolines of the other kind as
           they are described). */
        _PyPerf_Deactivate();
    }
    if (st == core.active && !core.forked
        && interp->eval_frame == _PyPerfTrampoline_EvalFrame)
    {
        /* Already on: the records that wait in a block go out, so that a
           reader of the map (or dump) finds every one so far; and those
           that had no room, if there is room now. */
        pthread_mutex_lock(&_PyPerf_files_lock);
        /* (at once, even within a second of a refusal) */
        _PyPerfFile_AskForRoom(st->file);
        int failed = core.undescribed && describe_activated(st) < 0;
        int saved = errno;
        pthread_mutex_unlock(&_PyPerf_files_lock);
        if (failed && _PyPerf_IsNoRoom(saved)) {
            errno = saved;
            warn_no_room(st);
            return 0;
        }
        if (failed) {
            _PyPerf_Deactivate();
            errno = saved;
            _PyPerfFile_Warn(st->file, "write", st->backend->name);
            errno = saved;
            return 1;
        }
        core.undescribed = 0;
        (void)_PyPerfTrampoline_Flush();
        _PyPerf_WarnLostRecords();
        return 0;
    }
    if (_PyPerf_code_index < 0 && _PyPerfCode_Init() < 0) {
        return -1;
    }
    if (core.forked) {
        leave_parent_files();
    }
    st->lines = lines;
    switch_result result = switch_to(st, interp);
    int saved = errno;
    TEST_POINT("activated");
    if (result == SWITCHED_NO_ROOM) {
        errno = saved;
        warn_no_room(st);
        /* (the backend that was active may have lost its last block) */
        _PyPerf_WarnLostRecords();
        return 0;
    }
    if (result != SWITCHED) {
        errno = saved;
        /* (No file at all: it could not be allocated.) */
        _PyPerfFile_Warn(st->file,
                         st->file == NULL ? "create its file"
                         : result == NO_FILE ? "create" : "write",
                         st->backend->name);
        /* For the caller, as the warning said (its Python code may have
           changed errno). */
        errno = saved;
        return 1;
    }
    if (st->elsewhere) {
        _PyPerfFile_WarnTakenMap(st->file, st->backend->name);
    }
    /* (the backend that was active may have lost its last block) */
    _PyPerf_WarnLostRecords();
    return 0;
}

int
_PyPerf_ActiveHasFile(void)
{
    return core.active != NULL && !core.active->elsewhere;
}

const _PyPerfBackend *
_PyPerf_Active(void)
{
    return core.active != NULL ? core.active->backend : NULL;
}

int
_PyPerf_ActiveLines(void)
{
    return core.active != NULL && core.active->lines;
}

void
_PyPerf_AllowActivation(void)
{
    core.finalized = 0;
}

void
_PyPerf_SetPersistAfterFork(int enable)
{
    core.persist_after_fork = enable;
}

_PyPerfFile *
_PyPerf_OpenMap(void)
{
    backend_state *st = &core.backends[0];
    if (core.active == st && st->elsewhere) {
        /* (the trampolines' records stay out of it while they are on:
           the map of another process, or a file opened later that would
           lack the records of the trampolines made meanwhile) */
        errno = EBUSY;
        return NULL;
    }
    return open_backend(st, 0) < 0 ? NULL : st->file;
}

void
_PyPerf_CloseMap(void)
{
    backend_state *st = &core.backends[0];
    if (core.active != st && st->file != NULL
        && _PyPerfFile_IsOpen(st->file))
    {
        _PyPerfFile_Close(st->file);
    }
}

void
_PyPerfTrampoline_BeforeForkChildHooks(void)
{
    core.in_child_hooks = core.forked;
    notify(_PyPerf_FORKED);
}

void
_PyPerfTrampoline_AfterForkChild(void)
{
    core.in_child_hooks = 0;
    if (!core.forked) {
        return;
    }
    backend_state *st = core.active;
    leave_parent_files();
    if (st != NULL) {
        _PyPerf_Deactivate();
        /* Asked to persist what it inherited (the C API), or without an
           index of its own, the child describes all of it at once. */
        core.activating_after_fork = !core.persist_after_fork
                                && _PyPerfCode_TakeChildIndex() == 0;
        if (_PyPerf_Activate(st->backend->name, st->lines) < 0) {
            PyErr_WriteUnraisable(NULL);
        }
        core.activating_after_fork = 0;
    }
}

void
_PyPerfTrampoline_Fini(void)
{
    if (core.forked) {
        /* A child that never moved to its own files: nothing to close. */
        leave_parent_files();
        core.active = NULL;
        notify(_PyPerf_CHANGED);
    }
    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    _PyPerf_Deactivate();
    pthread_mutex_lock(&_PyPerf_files_lock);
    for (int i = 0; i < NBACKENDS; i++) {
        backend_state *st = &core.backends[i];
        if (st->file != NULL && _PyPerfFile_IsOpen(st->file)) {
            st->backend->fini(st->file);
            _PyPerfFile_Close(st->file);
        }
    }
    pthread_mutex_unlock(&_PyPerf_files_lock);
    PyErr_Restore(exc, val, tb);
    /* The next interpreter (Py_Initialize() again) hands out co_extra
       indexes anew, and the code objects the slots point to die with this
       one: forget both.  The arenas stay mapped, and their used slots
       used: a daemon thread may still be inside one, and perf may name
       samples taken there. */
    /* Its names are final: the newest file gets its build-id. */
    (void)_PyPerfArena_Seal();
    _PyPerfCode_Fini();
    _PyPerfStack_Fini();
    /* Until the next initialization (embedding applications may have
       one): finalizers still run Python code, and may call
       sys.activate_stack_trampoline(). */
    core.finalized = 1;
    notify(_PyPerf_FINALIZED);
}


/* ---- The call path ------------------------------------------------------ */

/* Arena files stopped working (Python/perf_arena.c): said once, as a
   RuntimeWarning; the backend stays on, its trampolines now anonymous. */
static void
warn_arena_files(int err, const char *what)
{
    _PyPerf_Warn("perf trampoline: an ELF file of trampolines in /tmp: "
                 "cannot %s: %s; new trampolines are in anonymous memory, where "
                 "perf record --call-graph dwarf stops unwinding (frame "
                 "pointers and -g are not affected; -X perf_jit with perf "
                 "inject --jit unwinds them)", what, strerror(err));
}

/* The files reached /tmp's reserve (Python/perf_file.c), a quota or a
   size limit: said once, whichever file it was; the backend stays on.
   New trampolines go on: in arena files while they have room, else in
   anonymous memory, which the map or the dump names once it has room
   again (asked every second). */
static void
warn_no_room(const backend_state *st)
{
    if (core.warned_no_room) {
        return;
    }
    core.warned_no_room = 1;
    _PyPerf_Warn("perf trampoline: no room left in /tmp (%s; it leaves 1 "
                 "MiB or 2%% of it free for other programs): functions "
                 "named so far stay named, those first called until there "
                 "is room again are named in %s only when the backend is "
                 "activated again; the %s backend stays on",
                 strerror(errno), _PyPerfFile_Path(st->file),
                 st->backend->name);
}

/* No arena could be made (Python/perf_arena.c): said once.  New code
   objects run without a trampoline until there is room. */
static void
warn_no_arena(const char *why)
{
    if (core.warned_no_arena) {
        return;
    }
    core.warned_no_arena = 1;
    _PyPerf_Warn("perf trampoline: no room for more trampolines: %s; "
                 "functions called for the first time from now on run "
                 "without one (perf shows the interpreter's frame for "
                 "them) %s", why != NULL ? why : strerror(ENOMEM),
                 _PyPerfArena_ShareTaken()
                 ? "until all the functions of an arena have died and a "
                   "new file can take its addresses (never for an arena "
                   "the map names)"
                 : "until there is room again");
}

/* An arena file that failed, if one did since the last call. */
static void
warn_arena_file_failure(const backend_state *st)
{
    const char *what;
    int err = _PyPerfArena_TakeFileFailure(&what);
    if (err != 0 && _PyPerf_IsNoRoom(err)) {
        /* (without a map, the arenas' refusal says it: warn_no_arena) */
        if (!st->elsewhere) {
            errno = err;
            warn_no_room(st);
        }
    }
    else if (err != 0) {
        warn_arena_files(err, what);
    }
}

py_trampoline
_PyPerf_NewTrampoline(PyCodeObject *code)
{
    if (core.forked) {
        if (core.in_child_hooks) {
            return NULL;
        }
        /* fork() without PyOS_AfterFork_Child(): move files now. */
        _PyPerfTrampoline_AfterForkChild();
        if (core.active == NULL) {
            return NULL;
        }
    }
    backend_state *st = core.active;
    _PyPerfSlot *info;
    char *tramp = _PyPerfCode_Trampoline(st, code, &info);
    if (tramp == NULL && errno == ENOMEM) {
        /* Out of room for mappings or memory: the backend stays on, and
           the arenas say when to look again (the code object is asked
           for again on its next call).  The warning's Python code (a
           showwarning(), a logging handler) finds the arenas refused,
           and the warning given. */
        warn_no_arena(_PyPerfArena_TakeRoomFailure());
        warn_arena_file_failure(st);
        return NULL;
    }
    /* Off before the warning, whose Python code would otherwise make
       trampolines and write to a file that just failed. */
    if (tramp == NULL) {
        /* Once: calls of new code objects would all try again. */
        int saved = errno;
        _PyPerf_Deactivate();
        /* An arena file that failed first is part of the same story. */
        const char *what;
        int file_err = _PyPerfArena_TakeFileFailure(&what);
        if (st->elsewhere && file_err != 0) {
            /* No file, and no map to name anonymous memory. */
            _PyPerf_Warn("perf trampoline: an ELF file of trampolines in "
                         "/tmp: cannot %s: %s; without one, and without a "
                         "map of its own, this process cannot name its "
                         "functions: the %s backend is off", what,
                         strerror(file_err), st->backend->name);
            return NULL;
        }
        /* errno says why: an address space limit, a policy that forbids
           executable mappings. */
        errno = saved;
        _PyPerfFile_Warn(NULL, "map executable memory for trampolines",
                         st->backend->name);
        return NULL;
    }
    /* Under the files lock, as every other writer of the process's files
       (the C API's callers hold no GIL): a record written in part is then
       taken back before any of them can append behind it. */
    pthread_mutex_lock(&_PyPerf_files_lock);
    int failed = _PyPerfCode_Describe(st, tramp, info) < 0;
    int saved = errno;
    backend_state *blame = st;
    if (!failed && core.flush_errno != 0) {
        failed = 1;
        saved = core.flush_errno;
        blame = core.flush_failed;
    }
    core.flush_errno = 0;
    pthread_mutex_unlock(&_PyPerf_files_lock);
    if (failed && _PyPerf_IsNoRoom(saved)) {
        core.undescribed = 1;
        errno = saved;
        warn_no_room(blame);
    }
    else if (failed) {
        _PyPerf_Deactivate();
        errno = saved;
        _PyPerfFile_Warn(blame->file, "write", blame->backend->name);
    }
    warn_arena_file_failure(st);
    return (py_trampoline)tramp;
}

/* Call `frame` through `tramp`. */
static inline PyObject *
call_trampoline(py_trampoline tramp, PyThreadState *tstate,
                _PyInterpreterFrame *frame, int throwflag)
{
    PyObject *res = tramp(tstate, frame, throwflag, _PyEval_EvalFrameDefault);
    /* Keep the trampoline call a real call: as a tail call, the caller
       would vanish from the native stack under the trampoline. */
    __asm__ volatile ("" : "+r" (res));
    return res;
}

/* Out of line: the first call of a code object while a backend is on. */
static Py_NO_INLINE PyObject *
eval_frame_new_code(PyThreadState *tstate, _PyInterpreterFrame *frame,
                    int throwflag)
{
    py_trampoline tramp = NULL;
    if (core.active != NULL) {
        if (_PyErr_Occurred(tstate)) {
            /* generator.throw() enters its frame with the exception set;
               nothing here may lose it. */
            PyObject *exc, *val, *tb;
            _PyErr_Fetch(tstate, &exc, &val, &tb);
            tramp = _PyPerf_NewTrampoline(frame->f_code);
            _PyErr_Restore(tstate, exc, val, tb);
        }
        else {
            tramp = _PyPerf_NewTrampoline(frame->f_code);
        }
    }
    if (tramp == NULL) {
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    return call_trampoline(tramp, tstate, frame, throwflag);
}

PyObject *
_PyPerfTrampoline_EvalFrame(PyThreadState *tstate,
                            _PyInterpreterFrame *frame, int throwflag)
{
    py_trampoline tramp = _PyPerfTrampoline_Of(frame->f_code);
    if (tramp == NULL) {
        return eval_frame_new_code(tstate, frame, throwflag);
    }
    return call_trampoline(tramp, tstate, frame, throwflag);
}

#else /* !PY_HAVE_PERF_TRAMPOLINE */

/* Never installed where there is no trampoline; defined so that ceval.c
   and specialize.c need no conditionals. */
PyObject *
_PyPerfTrampoline_EvalFrame(PyThreadState *tstate,
                            _PyInterpreterFrame *frame, int throwflag)
{
    return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

void
_PyPerfTrampoline_Fini(void)
{
    notify(_PyPerf_FINALIZED);
}

void
_PyPerfTrampoline_BeforeForkChildHooks(void)
{
    notify(_PyPerf_FORKED);
}

void
_PyPerfTrampoline_AfterForkChild(void)
{
}

int
_PyPerfTrampoline_Flush(void)
{
    return 0;
}

int
_PyPerfTrampoline_AtExit(void)
{
    return 0;
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
