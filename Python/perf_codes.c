/*
 * cpython-perf: the trampolines of code objects, and what each backend
 * has been told about them.
 *
 * A code object finds its trampoline through its co_extra slot (one
 * index requested from the interpreter; _PyPerfTrampoline_Of() in
 * pycore_perf_trampoline.h reads it on the call path).  Each slot record
 * (Python/perf_arena.c) remembers which backends have been told about its
 * trampoline in this process, so that switching backends re-describes
 * exactly the live trampolines (and those that running frames are in,
 * when they were replaced for a backend that needs more room), and a
 * forked child those it runs (below).
 *
 * This file calls the arenas and, through their interface, the backends;
 * Python/perf_trampoline.c (activation, the call path) calls it.
 */

#include "Python.h"
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "pycore_interp.h"        // PyInterpreterState.threads
#include "pycore_pystate.h"       // _PyThreadState_GET()
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <string.h>

/* The co_extra index of trampolines (see pycore_perf_trampoline.h), -1
   before the first activation. */
Py_ssize_t _PyPerf_code_index = -1;

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
    /* Not a trampoline: keep _PyPerfArena_ForgetCode() from
       looking for it. */
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
 * _PyPerf_NewTrampoline() finds its inherited trampoline under
 * forks.base_index (the index of the first generation, which holds every
 * trampoline handed out in any generation), describes it and stores it
 * under the child's index.  Indexes are a limited resource that other
 * tools draw from too (254 per interpreter in 3.11, one per generation: a
 * child of a child takes another); when only a few are left (they are
 * left to the others), or when asked to
 * (PyUnstable_PerfTrampoline_SetPersistAfterFork), the child describes
 * everything at once, as a backend switch does. */

static struct {
    /* co_extra index of the first generation; -1 until a child of fork()
       takes an index of its own (until then it is _PyPerf_code_index). */
    Py_ssize_t base_index;
    /* One more in each child of fork(): slot records of an earlier one
       tell what was described in the parent's files, and are not
       rewritten (that would copy every page of them into the child). */
    unsigned int generation;
} forks = {.base_index = -1};

/* Has backend `bit` described the slot in this process's file? */
static inline int
is_described(const _PyPerfSlot *info, int bit)
{
    return info->generation == forks.generation
           && (info->described & (1 << bit));
}

/* Make `tramp` the trampoline of `code`, in this process and (through
   forks.base_index) in its future children.  -1 with an exception set. */
static int
set_trampoline(PyCodeObject *code, char *tramp)
{
    if (_PyCode_SetExtra((PyObject *)code, _PyPerf_code_index, tramp) < 0) {
        return -1;
    }
    if (forks.base_index >= 0 && forks.base_index != _PyPerf_code_index
        && _PyCode_SetExtra((PyObject *)code, forks.base_index, tramp) < 0)
    {
        /* Only a later child's shortcut is lost: it will give `code` a
           trampoline of its own. */
        PyErr_Clear();
    }
    return 0;
}

/* The smallest slot of a line trampoline that holds pads for `code` and
   their rows: a power of two, from 64 bytes. */
#define LINES_SLOT_MIN 64
#define LINES_SLOT_MAX 32768

/* The template `code` runs in for backend `st`, and the size of its slot:
   a line trampoline while `st` was activated with lines, in the smallest
   slot that holds its pads (a function too large for any runs in the
   plain one); else the plain one, spaced as the backend needs. */
static _PyPerfKind
slot_shape(_PyPerfBackendState *st, PyCodeObject *code, size_t *slot_size)
{
#ifdef PY_HAVE_PERF_LINES
    if (st->lines) {
        /* (the jitdump's code loads are followed by their unwind tables,
           in the slot; a function it cannot describe with lines gets a
           plain trampoline) */
        size_t room = st->backend->bytes_per_code(_PyPerfLines_Used(code),
                                                  code);
        for (size_t size = LINES_SLOT_MIN; size <= LINES_SLOT_MAX;
             size *= 2)
        {
            if (size >= st->slot_size && size >= room
                && _PyPerfLines_PadsFit(code, size))
            {
                *slot_size = size;
                return _PyPerf_LINES;
            }
        }
    }
#endif
    *slot_size = st->slot_size;
    return _PyPerf_PLAIN;
}

/* The trampoline stored for `code` under co_extra `index`, with its slot
   record, if it is still `code`'s (the entry may be another co_extra
   user's after the interpreter was initialized again) and is spaced as
   backend `st` needs.  NULL otherwise. */
static char *
trampoline_at(_PyPerfBackendState *st, PyCodeObject *code, Py_ssize_t index,
              _PyPerfSlot **info_p)
{
    char *tramp = _PyPerfCode_ExtraAt(code, index);
    if (tramp == NULL) {
        return NULL;
    }
    size_t slot_size;
    _PyPerfKind kind = slot_shape(st, code, &slot_size);
    _PyPerfSlot *info = _PyPerfSlot_Find(tramp, code, slot_size, kind);
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
inherited_trampoline(_PyPerfBackendState *st, PyCodeObject *code,
                     _PyPerfSlot **info_p)
{
    if (forks.base_index < 0 || forks.base_index == _PyPerf_code_index) {
        return NULL;
    }
    char *tramp = trampoline_at(st, code, forks.base_index, info_p);
    if (tramp == NULL) {
        return NULL;
    }
    if (_PyCode_SetExtra((PyObject *)code, _PyPerf_code_index, tramp) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return tramp;
}

/* The co_extra indexes a child leaves to the process's other users
   (profilers, debuggers, JITs started in a worker): with no more than
   these free, it describes everything at once instead. */
#define INDEXES_LEFT_TO_OTHERS 16

/* Give the child its own co_extra index (see above).  0 on success, -1
   when too few are left (or nothing was ever handed out). */
int
_PyPerfCode_TakeChildIndex(void)
{
    if (_PyPerf_code_index < 0 || _PyPerf_arenas == NULL) {
        return -1;
    }
    PyInterpreterState *interp = _PyInterpreterState_GET();
    /* (3.11 hands out MAX_CO_EXTRA_USERS - 1 of them) */
    if (MAX_CO_EXTRA_USERS - 1 - interp->co_extra_user_count
        <= INDEXES_LEFT_TO_OTHERS)
    {
        return -1;
    }
    Py_ssize_t index = _PyEval_RequestCodeExtraIndex(_PyPerfArena_ForgetCode);
    if (index < 0) {
        return -1;
    }
    if (forks.base_index < 0) {
        forks.base_index = _PyPerf_code_index;
    }
    _PyPerf_code_index = index;
    return 0;
}

static int write_slot_record(_PyPerfBackendState *st, const char *tramp,
                             _PyPerfSlot *info, int bit);

/* Describe the trampolines of the frames on this thread's stack (after
   fork(), the only thread).  Inherited trampolines entered later are
   described by _PyPerfCode_Describe(). */
int
_PyPerfCode_DescribeRunning(_PyPerfBackendState *st)
{
    int bit = st->bit;
    PyThreadState *tstate = _PyThreadState_GET();
    for (_PyInterpreterFrame *f = tstate->cframe->current_frame; f != NULL;
         f = f->previous)
    {
        _PyPerfSlot *info;
        char *tramp = trampoline_at(st, f->f_code, forks.base_index, &info);
        if (tramp != NULL && !is_described(info, bit)
            && write_slot_record(st, tramp, info, bit) < 0)
        {
            return -1;
        }
    }
    return 0;
}

/* Write the record of one slot to the backend of `st`, and mark the slot
   described by it. */
static int
write_slot_record(_PyPerfBackendState *st, const char *tramp,
                  _PyPerfSlot *info, int bit)
{
    if (st->elsewhere) {
        /* No file of ours to write to: left undescribed, for an
           activation that has the file. */
        return 0;
    }
    /* A trampoline in an arena file is named there: its record may wait
       for others (one write() for many), or, in a file the map leaves
       to name itself, is not written at all; one in anonymous memory
       has only this record, which goes out now. */
    int record = _PyPerfSlot_Recorded(tramp, st->backend->names_for_good);
    size_t covered = _PyPerfSlot_Covered(tramp);
#ifdef PY_HAVE_PERF_LINES
    if (covered != _PyPerf_CodeSize(_PyPerf_PLAIN)
        && st->backend->bytes_per_code(_PyPerfLines_Used(info->code),
                                       info->code) > covered)
    {
        /* A line trampoline still running, made while the perf backend
           had lines, in a slot without room for the jitdump's unwind
           table after its code (or whose records are too long for it):
           it goes undescribed; its code object moves to a trampoline the
           jitdump can describe for its next calls. */
        record = _PyPerf_RECORD_NONE;
    }
#endif
    int r = 0;
    if (record != _PyPerf_RECORD_NONE) {
        _PyPerfFile_Later(st->file, record == _PyPerf_RECORD_LATER);
        r = st->backend->write_entry(st->file, tramp, covered, info->code);
        _PyPerfFile_Later(st->file, 0);
    }
    if (r < 0) {
        /* A block of records may have gone with it: all again next
           time. */
        _PyPerfCode_NewGeneration();
        return -1;
    }
    if (info->generation != forks.generation) {
        info->generation = forks.generation;
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
assign_slot(_PyPerfBackendState *st, PyCodeObject *code, _PyPerfSlot **info_p)
{
    size_t slot_size;
    _PyPerfKind kind = slot_shape(st, code, &slot_size);
    char *tramp = _PyPerfSlot_Next(slot_size, kind);
    if (tramp == NULL) {
        return NULL;
    }
    if (set_trampoline(code, tramp) < 0) {
        /* (only a lack of memory is waited out: the core; 3.11's
           _PyCode_SetExtra() sets no exception when its realloc fails) */
        errno = (!PyErr_Occurred()
                 || PyErr_ExceptionMatches(PyExc_MemoryError)) ? ENOMEM
                                                               : EINVAL;
        PyErr_Clear();
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
            /* (in a child of fork(), a frame that was running at the fork
               runs in the trampoline of the first generation's index) */
            Py_ssize_t indexes[2] = {_PyPerf_code_index, forks.base_index};
            for (int k = 0; k < 2; k++) {
                if (indexes[k] < 0 || (k == 1 && indexes[1] == indexes[0])) {
                    continue;
                }
                char *tramp = _PyPerfCode_ExtraAt(f->f_code, indexes[k]);
                _PyPerfSlot *info = tramp != NULL ? _PyPerfSlot_Of(tramp)
                                                  : NULL;
                if (info != NULL && info->code == f->f_code) {
                    info->running = 1;
                }
            }
        }
    }
}

/* Describe every live trampoline the backend has not seen yet.  One that
   sits closer to its neighbours than this backend needs (made for another
   one), or is not of the kind the backend now makes (lines turned on or
   off since it was made; seen or not), is replaced: its code object gets
   a new trampoline for its next calls.  Frames running in the old one finish there, so it is described
   too, as it is: its neighbours never run again, unless they are running
   too, and then their description cuts off the end of this one (where
   the jitdump's unwind table is: DWARF unwinding stops there, as it would
   in an undescribed trampoline). */
int
_PyPerfCode_DescribeAll(_PyPerfBackendState *st)
{
    int bit = st->bit;
    int rc = 0;
    mark_running();
    /* Arenas that assign_slot() adds go in front of this one.  (A
       retired arena has no live code object, nor a frame marked.) */
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        for (size_t i = 0; i < a->nused && !a->retired; i++) {
            _PyPerfSlot *info = &a->info[i];
            char *tramp = a->start + i * a->slot_size;
            int running = info->running;
            info->running = 0;
            if (rc < 0 || info->code == NULL) {
                continue;
            }
            int described = is_described(info, bit);
            size_t slot_size;
            _PyPerfKind kind = slot_shape(st, info->code, &slot_size);
            int fits = a->kind == kind && a->slot_size >= slot_size
                       && (kind != _PyPerf_LINES || a->slot_size == slot_size);
            if (fits && described) {
                continue;
            }
            if (!fits) {
                if (running && !described
                    && write_slot_record(st, tramp, info, bit) < 0)
                {
                    rc = -1;
                    continue;
                }
                _PyPerfSlot *moved;
                char *new_tramp = assign_slot(st, info->code, &moved);
                if (new_tramp != NULL) {
                    _PyPerfArena_CodeMoved(a, i, running);
                    info = moved;
                    tramp = new_tramp;
                }
                else if (running || described) {
                    /* (it keeps the one it has: described already, or
                       left for the next activation) */
                    continue;
                }
            }
            if (write_slot_record(st, tramp, info, bit) < 0) {
                /* On through the arenas, to clear the marks. */
                rc = -1;
            }
        }
    }
    /* (arenas whose code objects all moved) */
    _PyPerfArena_RetireDead();
    return rc;
}

int
_PyPerfCode_Init(void)
{
    _PyPerf_code_index = _PyEval_RequestCodeExtraIndex(
        _PyPerfArena_ForgetCode);
    if (_PyPerf_code_index < 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "no co_extra index left for stack trampolines");
        return -1;
    }
    if (check_extra_layout() < 0) {
        _PyPerf_code_index = -1;
        return -1;
    }
    return 0;
}

void
_PyPerfCode_NewGeneration(void)
{
    forks.generation++;
}

char *
_PyPerfCode_Trampoline(_PyPerfBackendState *st, PyCodeObject *code,
                       _PyPerfSlot **info_p)
{
    char *tramp = inherited_trampoline(st, code, info_p);
    if (tramp == NULL) {
        tramp = assign_slot(st, code, info_p);
    }
    return tramp;
}

int
_PyPerfCode_Describe(_PyPerfBackendState *st, const char *tramp,
                     _PyPerfSlot *info)
{
    if (is_described(info, st->bit)) {
        return 0;
    }
    return write_slot_record(st, tramp, info, st->bit);
}

/* The next interpreter (Py_Initialize() again) hands out co_extra indexes
   anew, and the code objects the slots point to die with this one: forget
   both.  The arenas stay mapped, and their used slots used: a daemon
   thread may still be inside one, and perf may name samples taken
   there. */
void
_PyPerfCode_Fini(void)
{
    _PyPerf_code_index = -1;
    forks.base_index = -1;
    _PyPerfArena_ForgetCodes();
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
