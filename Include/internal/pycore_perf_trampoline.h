#ifndef Py_INTERNAL_PERF_TRAMPOLINE_H
#define Py_INTERNAL_PERF_TRAMPOLINE_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* cpython-perf: the interface between the interpreter and the perf
   trampoline subsystem (Python/perf_trampoline.c explains the design).
   Only what ceval, specialize, pylifecycle, posixmodule, sysmodule and
   _testinternalcapi need: the files of the subsystem share the rest
   through Python/perf_internal.h, which is not installed. */

#include "pycore_frame.h"          // _PyInterpreterFrame

/* Internal variables read on the call path: hidden, so that libpython.so
   reaches them without going through its global offset table. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__ELF__)
#  define PERF_TRAMPOLINE_HIDDEN __attribute__((visibility("hidden")))
#else
#  define PERF_TRAMPOLINE_HIDDEN
#endif

/* make_pending_calls()'s guard against nesting, which ceval.c's two
   compilations share (Python/perf_lines_eval.h). */
extern PERF_TRAMPOLINE_HIDDEN int _PyPerf_pending_calls_busy;

/* The PEP 523 evaluator installed while a backend is active.  It runs
   `frame` through the code object's own trampoline, giving a new code
   object its trampoline first.  ceval.c compares interp->eval_frame
   against it to keep calls specialized, calls the trampolines of the
   frames its call instructions push itself, and this for the others. */
PyAPI_FUNC(PyObject *) _PyPerfTrampoline_EvalFrame(
    PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag);

/* For the call instructions of ceval.c.  PERF_TRAMPOLINE_OTHER_HOOK: a
   PEP 523 hook other than ours is installed, so calls must not be run by
   the evaluator itself (stock 3.11 behaviour).  PERF_TRAMPOLINE_HOOK: ours
   is, so a frame the instruction pushed goes through its trampoline.  The
   hook is re-read rather than kept in a variable across the instruction,
   and the tests carry no __builtin_expect(): each form was measured, and
   these cost the calls without a hook least (bench/RESULTS.md, "The
   per-call cost: what was tried"). */
#define PERF_TRAMPOLINE_OTHER_HOOK(tstate) \
    ((tstate)->interp->eval_frame != NULL \
     && (tstate)->interp->eval_frame != _PyPerfTrampoline_EvalFrame)
#define PERF_TRAMPOLINE_HOOK(tstate) \
    ((tstate)->interp->eval_frame == _PyPerfTrampoline_EvalFrame)

/* CALL_PY_EXACT_ARGS and CALL_PY_WITH_DEFAULTS: with any hook installed,
   leave for `label`, where the instruction's own frame push (a macro of
   ceval.c) is expanded a second time, to end in the trampoline (or
   deoptimize, for another hook).  The instruction's own hook test that
   follows is then known false, and the compiler drops it. */
#define PERF_TRAMPOLINE_GOTO_IF_HOOKED(tstate, label) \
    do { \
        if ((tstate)->interp->eval_frame != NULL) { \
            goto label; \
        } \
    } while (0)

/* At `label`, which runs only once the instruction has seen a hook
   (eval_frame not NULL): is the hook ours?  Read anew (volatile), so that
   the compiler does not keep the value the instruction tested alive for
   this test.  Compared with a variable that holds our hook once a backend
   has been activated (NULL before, when no hook can be ours) rather than
   with the function's address, which LTO makes a constant that x86-64
   must first load into a register (bench/RESULTS.md, "GCC PGO+LTO").  The
   other tests (PERF_TRAMPOLINE_HOOK, and specialize.c's) compare with the
   address: the two differ only if someone installed
   _PyPerfTrampoline_EvalFrame without activating a backend, when the
   calls deoptimize (slower, never wrong). */
extern PERF_TRAMPOLINE_HIDDEN _PyFrameEvalFunction _PyPerf_hook;
#define PERF_TRAMPOLINE_HOOK_REREAD(tstate) \
    (*(_PyFrameEvalFunction volatile *)&(tstate)->interp->eval_frame \
     == _PyPerf_hook)

/* A trampoline: calls eval(tstate, frame, throwflag) from its own code. */
typedef PyObject *(*_PyPerfTrampolineFunc)(
    PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag,
    PyObject *(*eval)(PyThreadState *, struct _PyInterpreterFrame *, int));

#ifdef PY_HAVE_PERF_TRAMPOLINE

/* The co_extra index under which code objects keep their trampoline (-1
   while there is none), and the layout of co_extra.  3.11 defines that
   layout (_PyCodeObjectExtra) inside Objects/codeobject.c, where no
   other file can see it; moving it to a header would take a patch ahead
   of every other one in the series, for two fields that 3.11.x will not
   change.  So this is a copy, and perf_codes.c checks at activation
   that _PyPerfTrampoline_Of() reads what _PyCode_SetExtra() wrote. */
extern PERF_TRAMPOLINE_HIDDEN Py_ssize_t _PyPerf_code_index;
typedef struct {
    Py_ssize_t size;
    void *entries[1];
} _PyPerfCodeExtra;

/* The co_extra entry `index` of `code`, or NULL if there is none. */
static inline void *
_PyPerfCode_ExtraAt(PyCodeObject *code, Py_ssize_t index)
{
    _PyPerfCodeExtra *extra = (_PyPerfCodeExtra *)code->co_extra;
    /* Unsigned: an index of -1 finds nothing. */
    if (extra != NULL && (size_t)index < (size_t)extra->size) {
        return extra->entries[index];
    }
    return NULL;
}

/* The trampoline of `code`, or NULL if it has none yet. */
static inline _PyPerfTrampolineFunc
_PyPerfTrampoline_Of(PyCodeObject *code)
{
    return (_PyPerfTrampolineFunc)_PyPerfCode_ExtraAt(code,
                                                      _PyPerf_code_index);
}
#else
static inline _PyPerfTrampolineFunc
_PyPerfTrampoline_Of(PyCodeObject *Py_UNUSED(code))
{
    return NULL;
}
#endif

/* The native stack budget of trampolined calls.  A frame run through a
   trampoline spends a native evaluator frame, where stock 3.11 runs a
   Python-to-Python call in the caller's evaluator; deep recursion would
   overflow the thread's stack.  So a call instruction hands its frame to
   the trampoline only while the evaluator's own native frame lies within
   the budget of the current thread, [low, low + span): the thread's
   stack minus a reserve at its far end, kept for the C code that Python
   calls.  Past it (or on a stack that is not the thread's own) the call
   runs inline, as in stock 3.11, and is not named.  `span` is 0 until the
   thread's first trampolined call computes the budget, in
   _PyPerfTrampoline_StackLeft(), which the test falls back to. */
#ifdef PY_HAVE_PERF_TRAMPOLINE
typedef struct {
    uintptr_t low;
    uintptr_t span;
    int known;
} _PyPerfStackBudget;

/* Local-exec where the interpreter is compiled for an executable
   (-fPIE, or no PIC at all: such code cannot go into a shared object
   anyway): the variable is at a constant offset from the thread pointer,
   so the call path's test needs no instruction to load that offset first,
   as initial-exec does.
   Initial-exec for -fPIC code linked into an executable.  A shared
   libpython keeps the compiler's (dynamic) model, as stock 3.11's does:
   initial-exec would mark it STATIC_TLS, and a host that dlopen()s it
   (mod_wsgi, an editor's plugin) would fail to load it once glibc's small
   static TLS surplus is taken ("cannot allocate memory in static TLS
   block"; tools/abi/dlopen_host.sh checks).  There every access is a call
   of __tls_get_addr(): calls test a copy of the budget instead, below. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(Py_ENABLE_SHARED)
#  if defined(__PIE__) || !defined(__PIC__)
#    define PERF_TRAMPOLINE_TLS_MODEL __attribute__((tls_model("local-exec")))
#  else
#    define PERF_TRAMPOLINE_TLS_MODEL \
         __attribute__((tls_model("initial-exec")))
#  endif
#else
#  define PERF_TRAMPOLINE_TLS_MODEL
#endif
extern PERF_TRAMPOLINE_HIDDEN _Thread_local _PyPerfStackBudget
    _PyPerf_stack_budget PERF_TRAMPOLINE_TLS_MODEL;

/* The stack pointer (where the caller's native frame is) less *low,
   modulo 2**64: where the frame is in a budget that starts at *low.  The
   stack pointer, not the address of a local variable: under
   AddressSanitizer's detect_stack_use_after_return, locals live on a
   "fake stack" on the heap; nor __builtin_frame_address(0), which would
   make GCC give _PyEval_EvalFrameDefault a frame pointer.  Read in a
   volatile asm, where it is used, not kept in a register all along.  On
   x86-64 the same asm subtracts *low straight from memory, which C code
   in the evaluator, short of registers, does not. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
static inline uintptr_t
_PyPerf_StackAbove(const uintptr_t *low)
{
    uintptr_t d;
    __asm__ volatile ("movq %%rsp, %0\n\tsubq %1, %0"
                      : "=&r" (d) : "m" (*low) : "cc");
    return d;
}
#else
#  if (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
#    define _PyPerf_READ_SP(sp) __asm__ volatile ("mov %0, sp" : "=r" (sp))
#  elif (defined(__GNUC__) || defined(__clang__)) && defined(__riscv)
#    define _PyPerf_READ_SP(sp) __asm__ volatile ("mv %0, sp" : "=r" (sp))
#  else
#    define _PyPerf_READ_SP(sp) \
         do { volatile char _here; (sp) = (uintptr_t)&_here; } while (0)
#  endif
static inline uintptr_t
_PyPerf_StackAbove(const uintptr_t *low)
{
    uintptr_t sp;
    _PyPerf_READ_SP(sp);
    return sp - *low;
}
#endif

/* Is the caller's native frame, on the thread of `tstate`, within the
   budget?  (No __builtin_expect(), as above.) */
#ifndef Py_ENABLE_SHARED
#define PERF_TRAMPOLINE_STACK_WITHIN(tstate) \
    (_PyPerf_StackAbove(&_PyPerf_stack_budget.low) \
     < _PyPerf_stack_budget.span)
#else
/* A shared libpython: the budget of the thread that last made a
   trampolined call, with the id of its thread state, copied by
   _PyPerfTrampoline_StackLeft().  Trampolined calls run with the GIL held,
   in the main interpreter only, whose thread state ids start at 1 and are
   not reused while it lives (the address of a thread state may be, by a
   thread with another stack); the copy is forgotten when it is finalized,
   since the next one numbers its thread states from 1 again. */
typedef struct {
    uint64_t id;
    uintptr_t low;
    uintptr_t span;
} _PyPerfStackCopy;
extern PERF_TRAMPOLINE_HIDDEN _PyPerfStackCopy _PyPerf_stack_copy;
#define PERF_TRAMPOLINE_STACK_WITHIN(tstate) \
    (_PyPerf_stack_copy.id == (tstate)->id \
     && _PyPerf_StackAbove(&_PyPerf_stack_copy.low) \
        < _PyPerf_stack_copy.span)
#endif

/* When it is not: 1 if the caller is within the thread's budget after
   all (it was not known yet, or, in a shared libpython, the copy was
   another thread's), else 0 (run the call inline). */
extern int _PyPerfTrampoline_StackLeft(void);
#else
#define PERF_TRAMPOLINE_STACK_WITHIN(tstate) 1
#define _PyPerfTrampoline_StackLeft() 1
#endif

/* Start-up: honour -X perf, -X perf_jit, PYTHONPERFSUPPORT and
   PYTHON_PERF_JIT_SUPPORT.  Never fails: problems become warnings. */
extern void _PyPerfTrampoline_InitFromConfig(const PyConfig *config);

/* Finalization: deactivate, write the backends' trailers, close files. */
extern void _PyPerfTrampoline_Fini(void);

/* After fork() in the child, from PyOS_AfterFork_Child(): the first
   before the interpreter's at-fork hooks run, the second after them, to
   move to files named for the new pid.  (Moving may warn, and a warning
   may take a lock that a hook re-initialises: logging's.) */
extern void _PyPerfTrampoline_BeforeForkChildHooks(void);
extern void _PyPerfTrampoline_AfterForkChild(void);
/* Write the records that wait to go out together (Python/perf_file.c):
   before os._exit(), which runs no finalization.  -1 if a block could not
   be written (the next trampoline or activation warns). */
extern int _PyPerfTrampoline_Flush(void);
/* The same, and the newest trampoline file sealed (it gets its build-id):
   os._exit(), which runs no finalization, is ending the process. */
extern int _PyPerfTrampoline_AtExit(void);

/* Live activation (Python/perf_live.c): the control block that other
   processes read and write is in Include/internal/pycore_perf_live.h;
   here, what ceval.c calls. */
#include "pycore_perf_live.h"
#ifdef Py_REMOTE_DEBUG
/* For COMPUTE_EVAL_BREAKER() in ceval.c: a request waits for the main
   interpreter.  Not on any per-bytecode path: the breaker is recomputed
   only when one of its causes changes. */
#define _PyPerfLive_PENDING(interp) \
    (_PyPerf_Live.request != 0 && (interp) == _PyInterpreterState_Main())

/* From eval_frame_handle_pending(), in the main interpreter, with the GIL
   held and a request pending: act on it.  Never raises and leaves no
   exception set; the outcome goes into the block. */
extern PERF_TRAMPOLINE_HIDDEN void _PyPerfLive_Serve(PyThreadState *tstate);
#else
#define _PyPerfLive_PENDING(interp) 0
#endif /* Py_REMOTE_DEBUG */

/* sys.activate_stack_trampoline() and friends, added to the sys module. */
extern PyMethodDef _PyPerfTrampoline_SysMethods[];

/* Tests only (_testinternalcapi): the key, in the main interpreter's dict
   (PyInterpreterState_GetDict()), of a capsule of this name that points to
   the variable holding the subsystem's test hook (a
   `void (**)(const char *where)`): the hook, when set, is called with the
   name of each test point (TEST_POINT() in Python/perf_internal.h) that a
   thread reaches.  A capsule rather than an exported function: no dynamic
   symbol of the interpreter or of libpython is there for tests only.
   Absent where there are no trampolines. */
#define _PyPerfTrampoline_TEST_HOOK "cpython-perf.test_hook"

#ifdef __cplusplus
}
#endif
#endif /* !Py_INTERNAL_PERF_TRAMPOLINE_H */
