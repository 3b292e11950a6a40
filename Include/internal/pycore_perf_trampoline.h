#ifndef Py_INTERNAL_PERF_TRAMPOLINE_H
#define Py_INTERNAL_PERF_TRAMPOLINE_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* cpython-perf: the interface between the interpreter and the perf
   trampoline subsystem (Python/perf_trampoline.c explains the design). */

struct _PyInterpreterFrame;

/* The PEP 523 evaluator installed while a backend is active.  It runs
   `frame` through the code object's own trampoline.  ceval.c calls it
   directly for the frames its call instructions push themselves, and
   compares interp->eval_frame against it to keep those calls specialized. */
PyAPI_FUNC(PyObject *) _PyPerfTrampoline_EvalFrame(
    PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag);

/* For the call instructions of ceval.c.  PERF_TRAMPOLINE_OTHER_HOOK: a
   PEP 523 hook other than ours is installed, so calls must not be run by
   the evaluator itself (stock 3.11 behaviour).  PERF_TRAMPOLINE_HOOK: ours
   is, so a frame the instruction pushed goes through its trampoline.  The
   hook is re-read rather than kept in a variable across the instruction:
   a live variable would cost registers on the fast path, where the hook
   is almost never set. */
#define PERF_TRAMPOLINE_OTHER_HOOK(tstate) \
    ((tstate)->interp->eval_frame != NULL \
     && (tstate)->interp->eval_frame != _PyPerfTrampoline_EvalFrame)
#if defined(__GNUC__) || defined(__clang__)
#  define PERF_TRAMPOLINE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#  define PERF_TRAMPOLINE_UNLIKELY(x) (x)
#endif
#define PERF_TRAMPOLINE_HOOK(tstate) PERF_TRAMPOLINE_UNLIKELY( \
    (tstate)->interp->eval_frame == _PyPerfTrampoline_EvalFrame)
/* Any hook: the CALL_PY_* instructions leave their fast path for an
   out-of-line copy (stock 3.11 deoptimizes). */
#define PERF_TRAMPOLINE_ANY_HOOK(tstate) \
    PERF_TRAMPOLINE_UNLIKELY((tstate)->interp->eval_frame != NULL)

/* For the out-of-line copies of CALL_PY_EXACT_ARGS and
   CALL_PY_WITH_DEFAULTS, which the instructions enter when a hook is set:
   is it ours?  Read anew (volatile), or the compiler keeps the value the
   instruction tested in a register for this test, and the instruction
   pays one more instruction on every call without any hook. */
#define PERF_TRAMPOLINE_HOOK_REREAD(tstate) \
    (*(_PyFrameEvalFunction volatile *)&(tstate)->interp->eval_frame \
     == _PyPerfTrampoline_EvalFrame)

/* Start-up: honour -X perf, -X perf_jit, PYTHONPERFSUPPORT and
   PYTHON_PERF_JIT_SUPPORT.  Never fails: problems become warnings. */
extern void _PyPerfTrampoline_InitFromConfig(const PyConfig *config);

/* Finalization: deactivate, write the backends' trailers, close files. */
extern void _PyPerfTrampoline_Fini(void);

/* After fork() in the child: move to files named for the new pid. */
extern void _PyPerfTrampoline_AfterForkChild(void);

/* sys.activate_stack_trampoline() and friends, added to the sys module. */
extern PyMethodDef _PyPerfTrampoline_SysMethods[];


/* ---- Backends ------------------------------------------------------------

   A backend describes one file format.  The shared machinery owns the
   file (safe creation, appending, fork handling); the backend only turns
   events into bytes and hands them to _PyPerfFile_Append() or
   _PyPerfFile_Reserve()/_PyPerfFile_Commit(). */

/* The trampoline template, Python/asm_trampoline.S: every trampoline is a
   copy of the bytes between these two symbols. */
extern char _Py_trampoline_func_start[];
extern char _Py_trampoline_func_end[];

typedef struct _PyPerfFile _PyPerfFile;

typedef struct {
    /* The name sys.activate_stack_trampoline() accepts. */
    const char *name;
    /* printf format of the file name, taking the pid as its only
       argument, e.g. "/tmp/perf-%ld.map". */
    const char *path_format;
    /* Called once the file is open: write a header, set up markers.
       Returns 0, or -1 with errno set. */
    int (*init)(_PyPerfFile *file);
    /* Describe one trampoline of `size` bytes at `code` for `co`.
       Returns 0, or -1 with errno set. */
    int (*write_entry)(_PyPerfFile *file, const void *code, size_t size,
                       PyCodeObject *co);
    /* Called before the file is closed at exit (not after fork). */
    void (*fini)(_PyPerfFile *file);
    /* Address space each trampoline needs for itself, from its first
       byte, while this backend describes it (at least code_size).
       Called after init. */
    size_t (*bytes_per_code)(size_t code_size);
} _PyPerfBackend;

extern const _PyPerfBackend _PyPerf_MapBackend;
extern const _PyPerfBackend _PyPerf_JitDumpBackend;

/* Append one whole record of at most 16 KiB, with one write(): the file
   holds it once this returns, whatever happens to the process next.  0 or
   -1 (errno; the file still ends with a whole record). */
extern int _PyPerfFile_Append(_PyPerfFile *file, const void *data,
                              size_t size);
/* Or assemble a record in place: Reserve returns room for up to `size`
   bytes (NULL and errno on failure), Commit appends the `size` bytes
   written there (0 or -1 and errno, as Append). */
extern void *_PyPerfFile_Reserve(_PyPerfFile *file, size_t size);
extern int _PyPerfFile_Commit(_PyPerfFile *file, size_t size);
/* Non-zero if the file already held records of this process when it was
   opened (after Py_Finalize() and Py_Initialize(), say): a header has
   been written. */
extern int _PyPerfFile_Kept(const _PyPerfFile *file);
extern int _PyPerfFile_Fd(const _PyPerfFile *file);

/* Write the symbol of a code object, "py::QUALNAME:FILENAME", into buf:
   valid UTF-8 on one line (control characters and line separators
   replaced, lone surrogates spelt \udcXX, cut at a character boundary),
   NUL-terminated, at most _PyPerf_NAME_MAX bytes before the NUL.  Return
   its length and set *file_at to where FILENAME starts.  Never raises
   and runs no Python code. */
#define _PyPerf_NAME_MAX 3072
extern size_t _PyPerf_SymbolName(PyCodeObject *co, char *buf,
                                 size_t *file_at);

#ifdef __cplusplus
}
#endif
#endif /* !Py_INTERNAL_PERF_TRAMPOLINE_H */
