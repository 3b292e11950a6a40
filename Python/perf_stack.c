/*
 * cpython-perf: the native stack budget of trampolined calls.
 *
 * A frame run through a trampoline spends a native evaluator frame, where
 * stock 3.11 runs a Python-to-Python call inside the caller's evaluator:
 * deep recursion would overflow the thread's stack.  The call
 * instructions of ceval.c therefore hand a frame to its trampoline only
 * while the evaluator's native frame lies within the budget of the
 * thread (PERF_TRAMPOLINE_STACK_WITHIN() in pycore_perf_trampoline.h
 * says how it is tested on the call path); past it the call runs inline,
 * unnamed, as in stock 3.11.  This file computes the budget, once per
 * thread, when the test first fails.
 *
 * This file calls nothing else of the subsystem.
 */

#include "Python.h"
#include "pycore_pystate.h"       // _PyThreadState_GET()
#include "pycore_perf_trampoline.h"
#include "perf_internal.h"        // _PyPerfStack_Fini()

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <pthread.h>              // pthread_getattr_np()

/* See PERF_TRAMPOLINE_STACK_WITHIN() in pycore_perf_trampoline.h.  The
   reserve at the far end of a thread's stack, for the C code called below
   the budget: a quarter of the stack, at least 256 KiB, but never more
   than half of it (so that a thread with a small stack still names its
   outer calls). */
#define STACK_RESERVE_MIN (256 * 1024)

_Thread_local _PyPerfStackBudget _PyPerf_stack_budget
    PERF_TRAMPOLINE_TLS_MODEL;

/* The current thread's stack, from the bounds the thread library knows:
   for the main thread, glibc derives them from RLIMIT_STACK (the stack
   grows on demand up to it) and from the mapping below the stack.  If
   they cannot be had, the budget stays empty and calls run inline. */
static void
stack_budget_init(_PyPerfStackBudget *budget)
{
    budget->known = 1;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) {
        return;
    }
    void *base;
    size_t size;
    int rc = pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        return;
    }
    size_t reserve = size / 4;
    if (reserve < STACK_RESERVE_MIN) {
        reserve = Py_MIN(STACK_RESERVE_MIN, size / 2);
    }
    budget->low = (uintptr_t)base + reserve;
    budget->span = size - reserve;
}

#ifndef Py_ENABLE_SHARED
int
_PyPerfTrampoline_StackLeft(void)
{
    _PyPerfStackBudget *budget = &_PyPerf_stack_budget;
    if (budget->known) {
        return 0;
    }
    stack_budget_init(budget);
    return _PyPerf_StackAbove(&budget->low) < budget->span;
}
#else
_PyPerfStackCopy _PyPerf_stack_copy;

int
_PyPerfTrampoline_StackLeft(void)
{
    _PyPerfStackBudget *budget = &_PyPerf_stack_budget;
    if (!budget->known) {
        stack_budget_init(budget);
    }
    PyThreadState *tstate = _PyThreadState_GET();
    _PyPerf_stack_copy.id = tstate->id;
    _PyPerf_stack_copy.low = budget->low;
    _PyPerf_stack_copy.span = budget->span;
    return _PyPerf_StackAbove(&budget->low) < budget->span;
}
#endif

void
_PyPerfStack_Fini(void)
{
#ifdef Py_ENABLE_SHARED
    _PyPerf_stack_copy.id = 0;
#endif
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
