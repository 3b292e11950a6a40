/*
 * A stand-in for upstream's mechanism, for `make bench` only (not part of
 * the interpreter).
 *
 * CPython 3.12+ names Python functions for perf with a PEP 523 frame
 * evaluator: every frame, Python-to-Python calls included, goes through
 * it, looks up its code object's trampoline in co_extra and is evaluated
 * through it.  In 3.11, as there, a PEP 523 hook also turns off inlined
 * calls and the CALL_PY_* specializations.  This module installs such a
 * hook in a stock 3.11 interpreter, so that bench/run.py can measure what
 * that mechanism costs per call on our workloads.  It is a lower bound:
 * every code object shares one C function as its "trampoline", and no
 * perf map is written.
 */

#ifndef Py_BUILD_CORE_MODULE
#  define Py_BUILD_CORE_MODULE 1
#endif
#include "Python.h"
#include "pycore_ceval.h"         // _PyEval_EvalFrameDefault()
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "pycore_interp.h"        // _PyInterpreterState_SetEvalFrameFunc()

typedef PyObject *(*evaluator)(PyThreadState *, _PyInterpreterFrame *, int);
typedef PyObject *(*trampoline)(PyThreadState *, _PyInterpreterFrame *, int,
                                evaluator);

static Py_ssize_t code_index = -1;

/* What every code object gets as its trampoline: a real call of the
   evaluator, as a copy of an assembly trampoline would make. */
static Py_NO_INLINE PyObject *
shared_trampoline(PyThreadState *tstate, _PyInterpreterFrame *frame,
                  int throwflag, evaluator eval)
{
    PyObject *res = eval(tstate, frame, throwflag);
    __asm__ volatile ("" : "+r" (res));   /* not a tail call */
    return res;
}

static PyObject *
hook(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag)
{
    void *tramp = NULL;
    PyObject *code = (PyObject *)frame->f_code;
    if (_PyCode_GetExtra(code, code_index, &tramp) < 0) {
        PyErr_Clear();
    }
    if (tramp == NULL) {
        tramp = (void *)shared_trampoline;
        if (_PyCode_SetExtra(code, code_index, tramp) < 0) {
            PyErr_Clear();
        }
    }
    return ((trampoline)tramp)(tstate, frame, throwflag,
                               _PyEval_EvalFrameDefault);
}

static PyObject *
install(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(arg))
{
    if (code_index < 0) {
        code_index = _PyEval_RequestCodeExtraIndex(NULL);
        if (code_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no co_extra index left");
            return NULL;
        }
    }
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), hook);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS,
     PyDoc_STR("Install the stand-in PEP 523 evaluator.")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pep523_hook",
    .m_doc = "A stand-in for upstream's perf mechanism (bench only).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit_pep523_hook(void)
{
    return PyModule_Create(&module);
}
