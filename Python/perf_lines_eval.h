/*
 * cpython-perf: the line stores of the second evaluator (-X perf_lines).
 *
 * Why a second evaluator
 * ----------------------
 * Python/ceval.c is compiled twice (Makefile.pre.in): once as itself, and
 * once with Py_PERF_LINES defined, where its evaluator is called
 * _PyPerf_EvalFrameLines and objcopy makes every other symbol of that
 * object local.  ceval.c includes this file in both compilations, after
 * its INSTRUCTION_START.  In the first, this file adds nothing to the
 * evaluator: with lines off, and with -X perf without lines, the
 * interpreter runs the instructions it ran before lines existed.  Only
 * the line trampolines (Python/asm_trampoline.S) call the second one.
 *
 * What it stores
 * --------------
 * A line trampoline gives the evaluator's native frame a second frame
 * record, whose return-address field -- the line slot -- is data that is
 * never returned through: the address of one of the trampoline's pads,
 * 2 bytes of never-executed code per code unit of the function, each with
 * the line of its code unit in the arena file's line table.  perf, gdb and
 * elfutils read the slot as a return address: they name it py::F and give
 * the pad's line.  So the evaluator keeps the slot at the pad of the
 * instruction it runs:
 *
 *     slot = (char *)next_instr + delta,  delta = pads - first_instr
 *
 * next_instr advances 2 bytes per code unit, so that is the pad of the
 * code unit after the instruction's own (the line table is laid out for
 * it: Python/perf_lines.c).  The slot is 24 bytes above the evaluator's
 * CFA (__builtin_dwarf_cfa()), and in the word at the CFA the trampoline
 * has put pads - (char *)frame->f_code, from which delta differs by a
 * constant that folds into each store's address arithmetic.  As a local,
 * delta would live in a register or spill slot for the whole evaluator,
 * and GCC lays its hot paths out differently (7 more instructions per
 * call on fib, measured; Doc/cpython-perf/design-lines.md, 4.7).
 *
 * The evaluator's entry has nothing to compute: the trampoline has put
 * the pad of where the frame starts in the slot (pad 0 for a new frame,
 * whose prev_instr is the code unit before the first; a resumed generator's
 * or coroutine's resumption point).  Computing delta and that pad at the
 * entry, as a first version did, cost about 4 instructions per call more
 * than the trampoline's instructions for them (design-lines.md, section
 * 6, item 8).
 *
 * Not every instruction stores (3 instructions each): those that call
 * (the caller's line, for the callee's samples; FOR_ITER, which calls the
 * iterator, gives a loop's head its line too), and those that end a
 * statement with an assignment, which store the line of the instruction
 * after them, where the next statement starts (the innermost frame's
 * line).  JUMP_BACKWARD does not: a `for` loop's goes to its FOR_ITER,
 * which stores, and a `while True` loop's own line, the `while`, is no
 * closer to the body it goes back to than what was stored last.  So a
 * signal handler or pending call that its eval-breaker check runs shows
 * its caller at the line stored last, not at the jump's (design-lines.md,
 * section 6, item 7).
 * The table is indexed by INSTRUCTION_START's constant opcode, so the
 * compiler folds it: the other instructions are as they were.
 *
 * Never inline
 * ------------
 * Every frame this evaluator runs must be its entry frame: the stores of a
 * frame run inline would be positions in another code object.  So here
 * the call instructions always push frames for perf_trampoline_frame,
 * even when the perf hook has been removed meanwhile (the callee then
 * runs in the first evaluator, through the hook's function), and past
 * the stack budget a pushed frame runs in the first evaluator, which runs
 * what it calls inline (ceval.c's perf_trampoline_slow).
 *
 * The pending calls
 * -----------------
 * make_pending_calls()'s static `busy` keeps pending calls from nesting;
 * with two compilations there would be two.  ceval.c's one hunk there
 * makes both use _PyPerf_pending_calls_busy (Python/perf_trampoline.c).
 */

#ifdef Py_PERF_LINES

PyObject *_PyPerf_EvalFrameLines(PyThreadState *, _PyInterpreterFrame *, int);

/* The line slot, and the word where the trampoline put
   pads - (char *)frame->f_code, in the trampoline's frame. */
#define PERF_LINES_SLOT (*(char **)((char *)__builtin_dwarf_cfa() + 24))
#define PERF_LINES_DELTA \
    (*(intptr_t *)__builtin_dwarf_cfa() \
     - (intptr_t)offsetof(PyCodeObject, co_code_adaptive))

/* How far past the instruction's own code unit the stored one is, plus
   one: 1, its own line (calls); 2 + its inline caches, the line
   of the instruction after it (statement ends); 0, no store. */
static const unsigned char perf_lines_store[256] = {
    /* calls: the caller's line while the callee runs */
    [PRECALL] = 1, [PRECALL_ADAPTIVE] = 1, [PRECALL_BOUND_METHOD] = 1,
    [PRECALL_BUILTIN_CLASS] = 1,
    [PRECALL_BUILTIN_FAST_WITH_KEYWORDS] = 1,
    [PRECALL_METHOD_DESCRIPTOR_FAST_WITH_KEYWORDS] = 1,
    [PRECALL_NO_KW_BUILTIN_FAST] = 1, [PRECALL_NO_KW_BUILTIN_O] = 1,
    [PRECALL_NO_KW_ISINSTANCE] = 1, [PRECALL_NO_KW_LEN] = 1,
    [PRECALL_NO_KW_LIST_APPEND] = 1,
    [PRECALL_NO_KW_METHOD_DESCRIPTOR_FAST] = 1,
    [PRECALL_NO_KW_METHOD_DESCRIPTOR_NOARGS] = 1,
    [PRECALL_NO_KW_METHOD_DESCRIPTOR_O] = 1, [PRECALL_NO_KW_STR_1] = 1,
    [PRECALL_NO_KW_TUPLE_1] = 1, [PRECALL_NO_KW_TYPE_1] = 1,
    [PRECALL_PYFUNC] = 1, [CALL_FUNCTION_EX] = 1,
    [BINARY_SUBSCR] = 1, [BINARY_SUBSCR_ADAPTIVE] = 1,
    [BINARY_SUBSCR_DICT] = 1, [BINARY_SUBSCR_GETITEM] = 1,
    [BINARY_SUBSCR_LIST_INT] = 1, [BINARY_SUBSCR_TUPLE_INT] = 1,
    [FOR_ITER] = 1, [SEND] = 1,
    /* implicit calls that are rarely hot: the caller's line anyway */
    [IMPORT_NAME] = 1, [IMPORT_STAR] = 1, [BEFORE_WITH] = 1,
    [BEFORE_ASYNC_WITH] = 1, [WITH_EXCEPT_START] = 1,
    /* a while loop's test, at its bottom: it may call __bool__ or
       __len__ (not JUMP_BACKWARD: see above) */
    [POP_JUMP_BACKWARD_IF_FALSE] = 1, [POP_JUMP_BACKWARD_IF_TRUE] = 1,
    /* statement ends: the next statement's line (not POP_TOP, which
       ends expression statements: it cost 1 to 2 instructions per call
       on bench/'s objects and coroutines, for lines the next call or
       assignment stores anyway) */
    [STORE_FAST] = 2, [STORE_FAST__LOAD_FAST] = 2,
    [STORE_FAST__STORE_FAST] = 3,
    [STORE_NAME] = 2, [STORE_GLOBAL] = 2, [STORE_DEREF] = 2,
    [STORE_ATTR] = 2 + INLINE_CACHE_ENTRIES_STORE_ATTR,
    [STORE_ATTR_ADAPTIVE] = 2 + INLINE_CACHE_ENTRIES_STORE_ATTR,
    [STORE_ATTR_INSTANCE_VALUE] = 2 + INLINE_CACHE_ENTRIES_STORE_ATTR,
    [STORE_ATTR_SLOT] = 2 + INLINE_CACHE_ENTRIES_STORE_ATTR,
    [STORE_ATTR_WITH_HINT] = 2 + INLINE_CACHE_ENTRIES_STORE_ATTR,
    [STORE_SUBSCR] = 2 + INLINE_CACHE_ENTRIES_STORE_SUBSCR,
    [STORE_SUBSCR_ADAPTIVE] = 2 + INLINE_CACHE_ENTRIES_STORE_SUBSCR,
    [STORE_SUBSCR_DICT] = 2 + INLINE_CACHE_ENTRIES_STORE_SUBSCR,
    [STORE_SUBSCR_LIST_INT] = 2 + INLINE_CACHE_ENTRIES_STORE_SUBSCR,
};

#undef INSTRUCTION_START
#define INSTRUCTION_START(op) \
    do { \
        frame->prev_instr = next_instr++; \
        if (perf_lines_store[op]) { \
            PERF_LINES_SLOT = (char *)((uintptr_t)(next_instr \
                                                   + perf_lines_store[op] - 1) \
                                       + PERF_LINES_DELTA); \
        } \
    } while (0)

/* Never inline (see above): a frame pushed where the first evaluator
   would run it inline (our hook, or no hook at all) goes to
   perf_trampoline_frame.  Another PEP 523 hook is still honoured: the
   generic CALL then takes the vectorcall path, and CALL_PY_* deoptimize
   to it.  "Hooked" is a constant for GCC, which then drops the inline
   path.  For clang it is a 1 the compiler cannot see through (an empty
   asm), so that this evaluator keeps the first one's shape: without the
   inline path, clang 14 spilled and reloaded registers around every
   instruction (33 instructions more per loop iteration than its first
   evaluator; 11 fewer with the opaque 1).  GCC given the opaque 1 costs
   8 more per call on fib.  Callgrind, bench/lines.py; bench/RESULTS.md,
   "Lines on clang". */
#if defined(__clang__)
#  define PERF_LINES_HOOKED \
    __extension__ ({ int one_ = 1; __asm__("" : "+r"(one_)); one_; })
#else
#  define PERF_LINES_HOOKED 1
#endif
#undef PERF_TRAMPOLINE_HOOK
#define PERF_TRAMPOLINE_HOOK(tstate) PERF_LINES_HOOKED
#undef PERF_TRAMPOLINE_GOTO_IF_HOOKED
#define PERF_TRAMPOLINE_GOTO_IF_HOOKED(tstate, label) \
    do { \
        if (PERF_LINES_HOOKED) { \
            goto label; \
        } \
    } while (0)
#undef PERF_TRAMPOLINE_HOOK_REREAD
#define PERF_TRAMPOLINE_HOOK_REREAD(tstate) \
    (!PERF_TRAMPOLINE_OTHER_HOOK(tstate))

#endif /* Py_PERF_LINES */
