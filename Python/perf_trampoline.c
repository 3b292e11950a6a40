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
 * Trampolines
 * -----------
 * Copies live in arenas of executable memory.  An arena is mapped
 * writable, filled with as many copies of the template as fit, then made
 * read+execute; it is never writable and executable at once, and handing out
 * a trampoline is just taking the next slot.  Slots are 16 bytes apart, or
 * more when the active backend needs room after each trampoline (the
 * jitdump's: 96, see Python/perf_jit_trampoline.c).  A code object finds its
 * trampoline through its co_extra slot (one index requested from the
 * interpreter).  Trampolines are never reused: a later owner of the same
 * addresses would be misnamed in samples taken before.  Each slot remembers
 * its code object (forgotten when the code object dies) and which backends
 * have been told about it in this process, so that switching backends
 * re-describes exactly the live trampolines (and those that running frames
 * are in, when they were replaced for a backend that needs more room), and
 * a forked child those it runs (see "Forked children" below).
 *
 * Backends and files
 * ------------------
 * A backend (_PyPerfBackend: init / write entry / fini) turns trampolines
 * into one file format: the perf map here, the jitdump in
 * Python/perf_jit_trampoline.c.  This file owns everything else about the
 * files: /tmp/<name>-<pid>.<ext> is created 0600 without following
 * symlinks, and refused unless it is a regular file of ours with one link.
 * The map is the process's, not ours alone: a JIT or an agent in the
 * same process may write to it too (through the PyUnstable_ C API at the
 * end of this file, or on its own).  So a file is only ever appended to,
 * each record with one write() of its own (O_APPEND keeps it whole among
 * other writers), and never cut (but for a record of ours that the disk
 * had room for only in part), grown ahead or mapped for writing: a
 * killed process, or a child leaving through os._exit(), leaves whole
 * records naming every trampoline it ran, and another writer that
 * truncates the file costs lines, never the process.  Content written
 * before this process started (exec() keeps the process: lines of a host
 * that wrote before it ran or loaded us stay) is a stale file of an
 * earlier process with our pid, and is emptied (perf would give our
 * addresses its names).  After fork() the child drops the parent's
 * descriptors, puts new trampolines in arenas of its own (perf names an
 * inherited mapping after the parent) and, once the interpreter's at-fork
 * hooks have run, starts files named for its own pid.
 *
 * Failure to create or write a file is a RuntimeWarning; the backend
 * turns off and the program runs on.  Trampolines are made and described
 * with the GIL held; _PyPerf_files_lock serializes opening and closing
 * them with the C API's callers, which may hold no GIL, and with fork(),
 * which waits for it (a child never sees a file half opened).
 *
 * Python/perf_file.c holds the writer (opening, appending).  This file,
 * in order: trampolines (arenas, slots, describing them to a backend),
 * forked children, activation, the call path, the native stack budget, symbol names, the
 * map backend, the C API, start-up and the sys functions.  Each part
 * calls only the parts above it (and the backends, through their
 * interface); the backends call only the writer and the symbol names.
 */

#include "Python.h"
#include "pycore_ceval.h"         // _PyEval_EvalFrameDefault()
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "pycore_interp.h"        // PyInterpreterState.eval_frame
#include "perf_internal.h"
#include "pycore_pyerrors.h"      // _PyErr_Fetch()
#include "pycore_pystate.h"       // _PyInterpreterState_GET()

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <fcntl.h>                // open()
#include <pthread.h>              // pthread_atfork()
#include <stdio.h>
#include <string.h>
#include <sys/file.h>             // flock()
#include <sys/stat.h>             // fstat()
#include <time.h>                 // clock_gettime()
#include <unistd.h>

typedef _PyPerfTrampolineFunc py_trampoline;

/* The co_extra index of trampolines (see pycore_perf_trampoline.h), -1
   before the first activation. */
Py_ssize_t _PyPerf_code_index = -1;

#define NBACKENDS 2
#define SLOT_ALIGN 16


/* ---- Trampolines -------------------------------------------------------- */

typedef struct {
    const _PyPerfBackend *backend;
    _PyPerfFile *file;            /* NULL until first activated */
    size_t slot_size;             /* trampoline spacing it needs */
} backend_state;

static struct {
    backend_state backends[NBACKENDS];
    backend_state *active;        /* NULL when off */
    int atfork_registered;
    int persist_after_fork;       /* see the C API */
    volatile int forked;          /* set in a child, until files move */
    int finalized;                /* _PyPerfTrampoline_Fini() has run */
} perf = {
    .backends = {
        {&_PyPerf_MapBackend, NULL, 0},
        {&_PyPerf_JitDumpBackend, NULL, 0},
    },
};

/* Once: does _PyPerfTrampoline_Of() read co_extra as _PyCode_GetExtra()
   does?  (It would not on a tree whose codeobject.c changed the layout.) */
static int
check_extra_layout(void)
{
    static char probe;
    PyCodeObject *co = PyCode_NewEmpty("<perf>", "<perf>", 1);
    if (co == NULL) {
        return -1;
    }
    int ok = (_PyCode_SetExtra((PyObject *)co, _PyPerf_code_index,
                               &probe) == 0
              && (void *)_PyPerfTrampoline_Of(co) == (void *)&probe);
    /* Not a trampoline: keep _PyPerfArena_ForgetCode() from looking for it. */
    (void)_PyCode_SetExtra((PyObject *)co, _PyPerf_code_index, NULL);
    Py_DECREF(co);
    if (!ok) {
        PyErr_SetString(PyExc_RuntimeError,
                        "stack trampolines do not know this interpreter's "
                        "co_extra layout");
        return -1;
    }
    return 0;
}

/* A RuntimeWarning about executable memory for trampolines (errno says
   why: an address space limit, a policy that forbids executable
   mappings).  Never raises, and keeps an exception that is being
   propagated: this runs on call paths. */
static void
warn_memory_error(backend_state *st)
{
    int saved = errno;
    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                         "perf trampoline: cannot map executable memory for "
                         "trampolines: %s; the %s backend is off and perf "
                         "will not name Python functions",
                         strerror(saved), st->backend->name) < 0) {
        PyErr_WriteUnraisable(NULL);
    }
    PyErr_Restore(exc, val, tb);
}

/* ---- Forked children ----------------------------------------------------
 *
 * A child of fork() inherits every trampoline, and perf names them in two
 * ways.  When it follows the fork, it names the arenas the child
 * inherited from the parent's file (it copies the parent's mappings at
 * the fork), and the child's own arenas from the child's file.  When it
 * is attached to the child alone later (perf record -p), it learns the
 * mappings from /proc and names them all from the child's file.  A
 * sample can only land in a trampoline that was running at the fork or
 * was entered since, so that is all the child's file must describe: the
 * frames on the forking thread's stack at once, every other inherited
 * trampoline when the child first calls it.  A child that exits at once
 * pays for a few records, not for every function alive.
 *
 * To see that first call, the child takes a new co_extra index: every
 * code object then looks new to _PyPerfTrampoline_EvalFrame(), and
 * _PyPerf_NewTrampoline() finds its inherited trampoline under `base_index`
 * (the index of the first generation, which holds every trampoline
 * handed out in any generation), describes it and stores it under the
 * child's index.  Indexes are a limited resource (255 per interpreter,
 * one per generation: a child of a child takes another); when none is
 * left, or when asked to (PyUnstable_PerfTrampoline_SetPersistAfterFork),
 * the child describes everything at once, as a backend switch does. */

/* co_extra index of the first generation; -1 until a child of fork()
   takes an index of its own (until then it is _PyPerf_code_index). */
static Py_ssize_t base_index = -1;
/* Set while a child of fork() re-activates its parent's backend. */
static int activating_after_fork;
/* One more in each child of fork(): slot records of an earlier one tell
   what was described in the parent's files, and are not rewritten (that
   would copy every page of them into the child). */
static unsigned int generation;

/* Has backend `bit` described the slot in this process's file? */
static inline int
is_described(const _PyPerfSlot *info, int bit)
{
    return info->generation == generation && (info->described & (1 << bit));
}

/* The co_extra entry `index` of `code` (NULL when there is none). */
static char *
extra_at(PyCodeObject *code, Py_ssize_t index)
{
    _PyPerfCodeExtra *extra = (_PyPerfCodeExtra *)code->co_extra;
    if (index >= 0 && extra != NULL && index < extra->size) {
        return extra->entries[index];
    }
    return NULL;
}

/* Make `tramp` the trampoline of `code`, in this process and (through
   base_index) in its future children.  -1 with an exception set. */
static int
set_trampoline(PyCodeObject *code, char *tramp)
{
    if (_PyCode_SetExtra((PyObject *)code, _PyPerf_code_index, tramp) < 0) {
        return -1;
    }
    if (base_index >= 0 && base_index != _PyPerf_code_index
        && _PyCode_SetExtra((PyObject *)code, base_index, tramp) < 0)
    {
        /* Only a later child's shortcut is lost: it will give `code` a
           trampoline of its own. */
        PyErr_Clear();
    }
    return 0;
}

/* The trampoline stored for `code` under co_extra `index`, with its slot
   record, if it is still `code`'s (the entry may be another co_extra
   user's after the interpreter was initialized again) and is spaced as
   backend `st` needs.  NULL otherwise. */
static char *
trampoline_at(backend_state *st, PyCodeObject *code, Py_ssize_t index,
              _PyPerfSlot **info_p)
{
    char *tramp = extra_at(code, index);
    if (tramp == NULL) {
        return NULL;
    }
    _PyPerfSlot *info = _PyPerfSlot_Find(tramp, code, st->slot_size);
    if (info == NULL) {
        return NULL;
    }
    *info_p = info;
    return tramp;
}

/* In a child of fork() that took a co_extra index of its own: the
   trampoline `code` got in an earlier generation, now stored under the
   child's index too.  NULL if there is none to reuse. */
static char *
inherited_trampoline(backend_state *st, PyCodeObject *code,
                     _PyPerfSlot **info_p)
{
    if (base_index < 0 || base_index == _PyPerf_code_index) {
        return NULL;
    }
    char *tramp = trampoline_at(st, code, base_index, info_p);
    if (tramp == NULL) {
        return NULL;
    }
    if (_PyCode_SetExtra((PyObject *)code, _PyPerf_code_index, tramp) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return tramp;
}

/* Give the child its own co_extra index (see above).  0 on success, -1
   when there is no index left (or nothing was ever handed out). */
static int
take_child_index(void)
{
    if (_PyPerf_code_index < 0 || _PyPerf_arenas == NULL) {
        return -1;
    }
    Py_ssize_t index = _PyEval_RequestCodeExtraIndex(_PyPerfArena_ForgetCode);
    if (index < 0) {
        return -1;
    }
    if (base_index < 0) {
        base_index = _PyPerf_code_index;
    }
    _PyPerf_code_index = index;
    return 0;
}

static int describe(backend_state *st, const char *tramp, _PyPerfSlot *info,
                    int bit);

/* Describe the trampolines of the frames on this thread's stack (after
   fork(), the only thread).  Inherited trampolines entered later are
   described by _PyPerf_NewTrampoline(). */
static int
describe_running(backend_state *st)
{
    int bit = (int)(st - perf.backends);
    PyThreadState *tstate = _PyThreadState_GET();
    for (_PyInterpreterFrame *f = tstate->cframe->current_frame; f != NULL;
         f = f->previous)
    {
        _PyPerfSlot *info;
        char *tramp = trampoline_at(st, f->f_code, base_index, &info);
        if (tramp != NULL && !is_described(info, bit)
            && describe(st, tramp, info, bit) < 0)
        {
            return -1;
        }
    }
    return 0;
}

/* Describe one slot to the active backend. */
static int
describe(backend_state *st, const char *tramp, _PyPerfSlot *info, int bit)
{
    if (st->backend->write_entry(st->file, tramp, _PyPerf_CodeSize(),
                                 info->code) < 0) {
        return -1;
    }
    if (info->generation != generation) {
        info->generation = generation;
        info->described = 0;
    }
    info->described |= (unsigned char)(1 << bit);
    return 0;
}

/* Give `code` the next free trampoline, spaced as backend `st` needs
   (an arena made for a backend that needed less room is left as it is),
   and make it the code object's.  NULL with errno set if that cannot be
   done. */
static char *
assign_slot(backend_state *st, PyCodeObject *code, _PyPerfSlot **info_p)
{
    char *tramp = _PyPerfSlot_Next(st->slot_size);
    if (tramp == NULL) {
        return NULL;
    }
    if (set_trampoline(code, tramp) < 0) {
        PyErr_Clear();
        errno = ENOMEM;
        return NULL;
    }
    *info_p = _PyPerfSlot_Take(code);
    return tramp;
}

/* Mark the trampolines of the code objects that have frames running, on
   any thread of the main interpreter (whose frames are the only ones run
   through trampolines).  A frame that runs inline has none, and its mark
   is only one description too many. */
static void
mark_running(void)
{
    PyInterpreterState *interp = _PyInterpreterState_Main();
    for (PyThreadState *t = interp->threads.head; t != NULL; t = t->next) {
        _PyInterpreterFrame *f = t->cframe != NULL
                                 ? t->cframe->current_frame : NULL;
        for (; f != NULL; f = f->previous) {
            char *tramp = extra_at(f->f_code, _PyPerf_code_index);
            _PyPerfSlot *info = tramp != NULL ? _PyPerfSlot_Of(tramp) : NULL;
            if (info != NULL && info->code == f->f_code) {
                info->running = 1;
            }
        }
    }
}

/* Describe every live trampoline the backend has not seen yet.  One that
   sits closer to its neighbours than this backend needs (made for another
   one) is replaced: its code object gets a new trampoline for its next
   calls.  Frames running in the old one finish there, so it is described
   too, as it is: its neighbours never run again, unless they are running
   too, and then their description cuts off the end of this one (where
   the jitdump's unwind table is: DWARF unwinding stops there, as it would
   in an undescribed trampoline). */
static int
describe_all(backend_state *st)
{
    int bit = (int)(st - perf.backends);
    int rc = 0;
    mark_running();
    /* Arenas that assign_slot() adds go in front of this one. */
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        for (size_t i = 0; i < a->nused; i++) {
            _PyPerfSlot *info = &a->info[i];
            char *tramp = a->start + i * a->slot_size;
            int running = info->running;
            info->running = 0;
            if (rc < 0 || info->code == NULL || is_described(info, bit)) {
                continue;
            }
            if (a->slot_size < st->slot_size) {
                if (running && describe(st, tramp, info, bit) < 0) {
                    rc = -1;
                    continue;
                }
                _PyPerfSlot *moved;
                char *new_tramp = assign_slot(st, info->code, &moved);
                if (new_tramp != NULL) {
                    info->code = NULL;
                    info = moved;
                    tramp = new_tramp;
                }
                else if (running) {
                    continue;
                }
            }
            if (describe(st, tramp, info, bit) < 0) {
                /* On through the arenas, to clear the marks. */
                rc = -1;
            }
        }
    }
    return rc;
}

/* What _PyPerf_Activate() describes: every live trampoline, or only the
   running ones when a child of fork() re-activates its parent's backend. */
static int
describe_activated(backend_state *st)
{
    return activating_after_fork ? describe_running(st) : describe_all(st);
}

/* ---- Activation --------------------------------------------------------- */

/* In the child of fork(): the descriptors and mappings belong to the
   parent's files.  Drop them (munmap() and close() only) so that nothing
   of the child's can reach the parent's files; the rest waits for
   _PyPerfTrampoline_AfterForkChild() or the next trampoline. */
static void
atfork_child(void)
{
    for (int i = 0; i < NBACKENDS; i++) {
        if (perf.backends[i].file != NULL) {
            _PyPerfFile_Drop(perf.backends[i].file);
        }
    }
    _PyPerfArena_MarkInherited();
    /* Taken by atfork_prepare() in the thread that forked, which is the
       child's only thread. */
    pthread_mutex_unlock(&_PyPerf_files_lock);
    perf.forked = 1;
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
    perf.forked = 0;
    generation++;
}

static backend_state *
find_backend(const char *name)
{
    for (int i = 0; i < NBACKENDS; i++) {
        if (strcmp(perf.backends[i].backend->name, name) == 0) {
            return &perf.backends[i];
        }
    }
    return NULL;
}

/* Open the backend's file if it is not open yet.  -1 with errno set.
   Callers hold _PyPerf_files_lock. */
static int
open_backend(backend_state *st)
{
    /* Before any file is open: a forked child must not write to it. */
    if (!perf.atfork_registered) {
        int rc = pthread_atfork(atfork_prepare, atfork_parent,
                                atfork_child);
        if (rc != 0) {
            errno = rc;
            return -1;
        }
        perf.atfork_registered = 1;
    }
    if (st->file == NULL) {
        st->file = _PyPerfFile_New();
        if (st->file == NULL) {
            return -1;
        }
    }
    if (!_PyPerfFile_IsOpen(st->file)) {
        if (_PyPerfFile_Open(st->file, st->backend->path_format) < 0) {
            return -1;
        }
        if (st->backend->init(st->file) < 0) {
            int saved = errno;
            _PyPerfFile_Close(st->file);
            errno = saved;
            return -1;
        }
    }
    size_t size = st->backend->bytes_per_code(_PyPerf_CodeSize());
    st->slot_size = (size + SLOT_ALIGN - 1) & ~(size_t)(SLOT_ALIGN - 1);
    return 0;
}

/* Callers hold _PyPerf_files_lock: _PyPerf_CloseMap() reads perf.active
   under it. */
static void
deactivate_locked(void)
{
    PyInterpreterState *interp = _PyInterpreterState_Main();
    if (perf.active == NULL) {
        return;
    }
    if (interp->eval_frame == _PyPerfTrampoline_EvalFrame) {
        _PyInterpreterState_SetEvalFrameFunc(interp, NULL);
    }
    perf.active = NULL;
}

void
_PyPerf_Deactivate(void)
{
    pthread_mutex_lock(&_PyPerf_files_lock);
    deactivate_locked();
    pthread_mutex_unlock(&_PyPerf_files_lock);
}

int
_PyPerf_Activate(const char *name)
{
    backend_state *st = find_backend(name);
    if (st == NULL) {
        /* (cut: the name is the caller's, of any length) */
        PyErr_Format(PyExc_ValueError, "invalid backend: %.200s", name);
        return -1;
    }
    PyThreadState *tstate = _PyThreadState_GET();
    PyInterpreterState *interp = tstate->interp;
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
    if (perf.finalized) {
        /* The files are complete (the dump ends with its CLOSE record),
           and nothing would complete them again. */
        PyErr_SetString(PyExc_RuntimeError,
                        "cannot activate a stack trampoline during "
                        "interpreter finalization");
        return -1;
    }
    if (st == perf.active && !perf.forked
        && interp->eval_frame == _PyPerfTrampoline_EvalFrame)
    {
        return 0;
    }
    if (_PyPerf_code_index < 0) {
        _PyPerf_code_index = _PyEval_RequestCodeExtraIndex(_PyPerfArena_ForgetCode);
        if (_PyPerf_code_index < 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "no co_extra index left for stack trampolines");
            return -1;
        }
        if (check_extra_layout() < 0) {
            _PyPerf_code_index = -1;
            return -1;
        }
    }
    if (perf.forked) {
        leave_parent_files();
    }
    /* The new backend's file first: if it cannot be had, the active
       backend, if any, stays as it is.  It becomes the active one before
       _PyPerf_files_lock is let go: from then on,
       PyUnstable_PerfMapState_Fini() leaves its file open. */
    pthread_mutex_lock(&_PyPerf_files_lock);
    int failed = open_backend(st) < 0 ? 1 : describe_activated(st) < 0 ? 2 : 0;
    int saved = errno;
    if (failed == 2) {
        _PyPerfFile_Close(st->file);
    }
    if (!failed) {
        deactivate_locked();
        perf.active = st;
        _PyInterpreterState_SetEvalFrameFunc(interp,
                                             _PyPerfTrampoline_EvalFrame);
    }
    pthread_mutex_unlock(&_PyPerf_files_lock);
    TEST_POINT("activated");
    if (failed) {
        errno = saved;
        _PyPerfFile_Warn(st->file, failed == 1 ? "create" : "write",
                         st->backend->name);
        return 1;
    }
    return 0;
}

const _PyPerfBackend *
_PyPerf_Active(void)
{
    return perf.active != NULL ? perf.active->backend : NULL;
}

void
_PyPerf_AllowActivation(void)
{
    perf.finalized = 0;
}

void
_PyPerf_SetPersistAfterFork(int enable)
{
    perf.persist_after_fork = enable;
}

_PyPerfFile *
_PyPerf_OpenMap(void)
{
    backend_state *st = &perf.backends[0];
    return open_backend(st) < 0 ? NULL : st->file;
}

void
_PyPerf_CloseMap(void)
{
    backend_state *st = &perf.backends[0];
    if (perf.active != st && st->file != NULL
        && _PyPerfFile_IsOpen(st->file))
    {
        _PyPerfFile_Close(st->file);
    }
}

/* Set in a child of fork() while PyOS_AfterFork_Child() runs the at-fork
   hooks: new code objects that they call run without a trampoline until
   the files have moved, after the hooks. */
static int in_child_hooks;

void
_PyPerfTrampoline_BeforeForkChildHooks(void)
{
    in_child_hooks = perf.forked;
}

void
_PyPerfTrampoline_AfterForkChild(void)
{
    in_child_hooks = 0;
    if (!perf.forked) {
        return;
    }
    backend_state *st = perf.active;
    leave_parent_files();
    if (st != NULL) {
        _PyPerf_Deactivate();
        /* Asked to persist what it inherited (the C API), or without an
           index of its own, the child describes all of it at once. */
        activating_after_fork = !perf.persist_after_fork
                                && take_child_index() == 0;
        if (_PyPerf_Activate(st->backend->name) < 0) {
            PyErr_WriteUnraisable(NULL);
        }
        activating_after_fork = 0;
    }
}

void
_PyPerfTrampoline_Fini(void)
{
    if (perf.forked) {
        /* A child that never moved to its own files: nothing to close. */
        leave_parent_files();
        perf.active = NULL;
    }
    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    _PyPerf_Deactivate();
    pthread_mutex_lock(&_PyPerf_files_lock);
    for (int i = 0; i < NBACKENDS; i++) {
        backend_state *st = &perf.backends[i];
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
    _PyPerf_code_index = -1;
    base_index = -1;
    _PyPerfArena_ForgetCodes();
    /* Until the next initialization (embedding applications may have
       one): finalizers still run Python code, and may call
       sys.activate_stack_trampoline(). */
    perf.finalized = 1;
}


/* ---- The call path ------------------------------------------------------ */

py_trampoline
_PyPerf_NewTrampoline(PyCodeObject *code)
{
    if (perf.forked) {
        if (in_child_hooks) {
            return NULL;
        }
        /* fork() without PyOS_AfterFork_Child(): move files now. */
        _PyPerfTrampoline_AfterForkChild();
        if (perf.active == NULL) {
            return NULL;
        }
    }
    backend_state *st = perf.active;
    int bit = (int)(st - perf.backends);
    _PyPerfSlot *info;
    char *tramp = inherited_trampoline(st, code, &info);
    if (tramp == NULL) {
        tramp = assign_slot(st, code, &info);
    }
    /* Off before the warning, whose Python code (a showwarning(), a
       logging handler) would otherwise make trampolines and write to a
       file that just failed. */
    if (tramp == NULL) {
        /* Once: calls of new code objects would all try again. */
        int saved = errno;
        _PyPerf_Deactivate();
        errno = saved;
        warn_memory_error(st);
        return NULL;
    }
    if (!is_described(info, bit) && describe(st, tramp, info, bit) < 0) {
        int saved = errno;
        _PyPerf_Deactivate();
        errno = saved;
        _PyPerfFile_Warn(st->file, "write", st->backend->name);
    }
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
    if (perf.active != NULL) {
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

void _PyPerfTrampoline_Fini(void) {}
void _PyPerfTrampoline_BeforeForkChildHooks(void) {}
void _PyPerfTrampoline_AfterForkChild(void) {}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
