/* abiext: a test extension for `make check-abi`.
 *
 * It is compiled against the headers of the unpatched CPython 3.11.2
 * tarball (and the pyconfig.h of a stock configure), never against ours,
 * then imported by the patched interpreter.  Everything here either goes
 * through a public struct laid out by the stock headers (a static type
 * object, the fields the stock macros read, a PyConfig on our stack) or
 * calls back into Python, so that a layout that moved, or a call path
 * that the perf trampoline breaks, shows up as a wrong value or a crash.
 * tools/abi/ext_smoke.py drives it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <wchar.h>

#if PY_VERSION_HEX != 0x030B02F0
#  error "abiext must be compiled against the CPython 3.11.2 headers"
#endif
#ifdef PY_HAVE_PERF_TRAMPOLINE
#  error "abiext must be compiled against the unpatched headers"
#endif

/* Raise AssertionError naming the check that failed, and return NULL. */
#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            PyErr_Format(PyExc_AssertionError, "abiext.c:%d: %s",           \
                         __LINE__, #cond);                                  \
            goto error;                                                     \
        }                                                                   \
    } while (0)


/* --- calls back into Python -------------------------------------------- */

/* call(f, *args, **kwargs): f called through the generic call API. */
static PyObject *
abiext_call(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "call() needs a callable");
        return NULL;
    }
    PyObject *rest = PyTuple_GetSlice(args, 1, n);
    if (rest == NULL) {
        return NULL;
    }
    PyObject *res = PyObject_Call(PyTuple_GET_ITEM(args, 0), rest, kwargs);
    Py_DECREF(rest);
    return res;
}

/* vectorcall(f, x, y): f(x, key=y) through PyObject_Vectorcall. */
static PyObject *
abiext_vectorcall(PyObject *Py_UNUSED(module), PyObject *const *args,
                  Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "vectorcall(f, x, y)");
        return NULL;
    }
    PyObject *kwnames = Py_BuildValue("(s)", "key");
    if (kwnames == NULL) {
        return NULL;
    }
    /* One free slot in front, as PY_VECTORCALL_ARGUMENTS_OFFSET allows. */
    PyObject *stack[3] = {NULL, args[1], args[2]};
    PyObject *res = PyObject_Vectorcall(
        args[0], stack + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    Py_DECREF(kwnames);
    return res;
}

/* call_method(obj, name, arg) */
static PyObject *
abiext_call_method(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *obj, *arg;
    const char *name;
    if (!PyArg_ParseTuple(args, "OsO", &obj, &name, &arg)) {
        return NULL;
    }
    return PyObject_CallMethod(obj, name, "O", arg);
}


/* --- code objects and functions made here ---------------------------- */

/* make_function(source, filename, name): compile SOURCE, run it in fresh
 * globals, check the function NAME it defines through the stock layouts
 * of PyFunctionObject and PyCodeObject, and return a second function
 * made here from the same code object. */
static PyObject *
abiext_make_function(PyObject *Py_UNUSED(module), PyObject *args)
{
    const char *source, *filename, *name;
    PyObject *code = NULL, *globals = NULL, *res = NULL, *func = NULL;
    PyObject *made = NULL;

    if (!PyArg_ParseTuple(args, "sss", &source, &filename, &name)) {
        return NULL;
    }
    code = Py_CompileString(source, filename, Py_file_input);
    if (code == NULL) {
        goto error;
    }
    CHECK(PyCode_Check(code));
    globals = PyDict_New();
    if (globals == NULL) {
        goto error;
    }
    if (PyDict_SetItemString(globals, "__builtins__",
                             PyEval_GetBuiltins()) < 0) {
        goto error;
    }
    res = PyEval_EvalCode(code, globals, globals);
    if (res == NULL) {
        goto error;
    }
    func = PyDict_GetItemString(globals, name);    /* borrowed */
    CHECK(func != NULL && PyFunction_Check(func));

    /* Fields read straight from the structs, as the stock macros do. */
    PyFunctionObject *fo = (PyFunctionObject *)func;
    CHECK(fo->func_globals == globals);
    CHECK(PyFunction_GET_GLOBALS(func) == globals);
    CHECK(PyUnicode_Check(fo->func_name));
    CHECK(PyUnicode_CompareWithASCIIString(fo->func_name, name) == 0);
    CHECK(PyUnicode_CompareWithASCIIString(fo->func_qualname, name) == 0);
    CHECK(fo->func_defaults == NULL || PyTuple_Check(fo->func_defaults));
    PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(func);
    CHECK(PyCode_Check((PyObject *)co));
    CHECK(PyUnicode_CompareWithASCIIString(co->co_name, name) == 0);
    CHECK(PyUnicode_CompareWithASCIIString(co->co_qualname, name) == 0);
    CHECK(PyUnicode_CompareWithASCIIString(co->co_filename, filename) == 0);
    CHECK(co->co_argcount == 1);
    CHECK(co->co_firstlineno == 1);
    CHECK(co->co_flags & CO_OPTIMIZED);
    CHECK(co->co_nlocalsplus >= 1);
    CHECK(PyTuple_Check(co->co_consts));

    made = PyFunction_New((PyObject *)co, globals);
    if (made == NULL) {
        goto error;
    }
    CHECK(PyFunction_GET_CODE(made) == (PyObject *)co);

    Py_DECREF(code);
    Py_DECREF(globals);
    Py_DECREF(res);
    return made;

error:
    Py_XDECREF(code);
    Py_XDECREF(globals);
    Py_XDECREF(res);
    Py_XDECREF(made);
    return NULL;
}

/* empty_code(filename, name, line): PyCode_NewEmpty, checked field by
 * field. */
static PyObject *
abiext_empty_code(PyObject *Py_UNUSED(module), PyObject *args)
{
    const char *filename, *name;
    int line;
    PyCodeObject *co = NULL;

    if (!PyArg_ParseTuple(args, "ssi", &filename, &name, &line)) {
        return NULL;
    }
    co = PyCode_NewEmpty(filename, name, line);
    if (co == NULL) {
        return NULL;
    }
    CHECK(Py_TYPE(co) == &PyCode_Type);
    CHECK(co->co_firstlineno == line);
    CHECK(co->co_argcount == 0);
    CHECK(PyUnicode_CompareWithASCIIString(co->co_name, name) == 0);
    CHECK(PyUnicode_CompareWithASCIIString(co->co_filename, filename) == 0);
    CHECK(co->co_extra == NULL);
    return (PyObject *)co;

error:
    Py_XDECREF(co);
    return NULL;
}


/* --- co_extra, shared with the trampoline ----------------------------- */

static Py_ssize_t extra_index = -1;
static int extra_freed;

static void
free_extra(void *p)
{
    if (p != NULL) {
        extra_freed++;
        PyMem_RawFree(p);
    }
}

/* tag_code(func, value): store VALUE in an extra slot of our own in the
 * function's code object and read it back. */
static PyObject *
abiext_tag_code(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *func;
    long value;
    if (!PyArg_ParseTuple(args, "O!l", &PyFunction_Type, &func, &value)) {
        return NULL;
    }
    if (extra_index < 0) {
        extra_index = _PyEval_RequestCodeExtraIndex(free_extra);
        if (extra_index < 0) {
            return NULL;
        }
    }
    PyObject *code = PyFunction_GET_CODE(func);
    long *slot = PyMem_RawMalloc(sizeof(long));
    if (slot == NULL) {
        return PyErr_NoMemory();
    }
    *slot = value;
    /* This frees the value stored before, if any, with free_extra(). */
    if (_PyCode_SetExtra(code, extra_index, slot) < 0) {
        PyMem_RawFree(slot);
        return NULL;
    }
    void *back = NULL;
    if (_PyCode_GetExtra(code, extra_index, &back) < 0) {
        return NULL;
    }
    return PyLong_FromLong(back == NULL ? -1 : *(long *)back);
}

static PyObject *
abiext_extra_freed(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(arg))
{
    return PyLong_FromLong(extra_freed);
}


/* --- generators ------------------------------------------------------- */

/* iterate(gen): the list of what GEN yields, read with PyIter_Next after
 * checking the generator's fields through the stock PyGenObject. */
static PyObject *
abiext_iterate(PyObject *Py_UNUSED(module), PyObject *gen)
{
    PyObject *list = NULL, *item, *name = NULL, *qualname = NULL;

    CHECK(PyGen_Check(gen));
    PyGenObject *g = (PyGenObject *)gen;
    name = PyObject_GetAttrString(gen, "__name__");
    qualname = PyObject_GetAttrString(gen, "__qualname__");
    if (name == NULL || qualname == NULL) {
        goto error;
    }
    CHECK(g->gi_name == name);
    CHECK(g->gi_qualname == qualname);
    CHECK(PyCode_Check((PyObject *)g->gi_code));
    CHECK(g->gi_code->co_flags & CO_GENERATOR);
    CHECK(g->gi_closed == 0);
    CHECK(g->gi_running_async == 0);
    CHECK(g->gi_weakreflist == NULL);
    list = PyList_New(0);
    if (list == NULL) {
        goto error;
    }
    while ((item = PyIter_Next(gen)) != NULL) {
        int r = PyList_Append(list, item);
        Py_DECREF(item);
        if (r < 0) {
            goto error;
        }
    }
    if (PyErr_Occurred()) {
        goto error;
    }
    Py_DECREF(name);
    Py_DECREF(qualname);
    return list;

error:
    Py_XDECREF(list);
    Py_XDECREF(name);
    Py_XDECREF(qualname);
    return NULL;
}

/* send_all(gen, values): gen.send(v) for each v through PyIter_Send. */
static PyObject *
abiext_send_all(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *gen, *values, *result = NULL, *out;
    if (!PyArg_ParseTuple(args, "OO!", &gen, &PyTuple_Type, &values)) {
        return NULL;
    }
    out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(values); i++) {
        PyObject *v = i == 0 ? Py_None : PyTuple_GET_ITEM(values, i);
        PySendResult r = PyIter_Send(gen, v, &result);
        if (r == PYGEN_ERROR) {
            Py_DECREF(out);
            return NULL;
        }
        int err = PyList_Append(out, result);
        Py_CLEAR(result);
        if (err < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (r == PYGEN_RETURN) {
            break;
        }
    }
    return out;
}


/* --- thread state and configuration structs ----------------------------- */

/* thread_state(): fields of the stock PyThreadState that agree with the
 * API's answers. */
static PyObject *
abiext_thread_state(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(arg))
{
    PyThreadState *ts = PyThreadState_Get();
    CHECK(ts->interp == PyInterpreterState_Get());
    CHECK(ts->thread_id == PyThread_get_thread_ident());
    CHECK(ts->id == PyThreadState_GetID(ts));
    CHECK(ts->recursion_limit == Py_GetRecursionLimit());
    CHECK(ts->recursion_remaining > 0
          && ts->recursion_remaining <= ts->recursion_limit);
    CHECK(ts->c_tracefunc == NULL && ts->c_profilefunc == NULL);
    CHECK(ts->exc_info != NULL);
    PyObject *dict = PyThreadState_GetDict();
    CHECK(dict != NULL && ts->dict == dict);
    Py_RETURN_TRUE;

error:
    return NULL;
}

#define CANARY 0x5aU

/* A struct between two runs of canary bytes: a library whose idea of the
 * struct is bigger than ours would write over the second run. */
#define GUARDED(type)                                                       \
    struct {                                                                \
        unsigned char before[64];                                           \
        type value;                                                         \
        unsigned char after[256];                                           \
    }

static int
intact(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != CANARY) {
            return 0;
        }
    }
    return 1;
}

/* config(): PyConfig and PyPreConfig filled in by the library into the
 * stock layout. */
static PyObject *
abiext_config(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(arg))
{
    GUARDED(PyConfig) c;
    GUARDED(PyPreConfig) pre;
    int have_config = 0;

    memset(&pre, CANARY, sizeof(pre));
    PyPreConfig_InitIsolatedConfig(&pre.value);
    CHECK(intact(pre.before, sizeof(pre.before)));
    CHECK(intact(pre.after, sizeof(pre.after)));
    CHECK(pre.value._config_init == 3);     /* _PyConfig_INIT_ISOLATED */
    CHECK(pre.value.isolated == 1);
    CHECK(pre.value.use_environment == 0);
    CHECK(pre.value.configure_locale == 0);
    CHECK(pre.value.dev_mode == 0);
    CHECK(pre.value.allocator == PYMEM_ALLOCATOR_NOT_SET);

    memset(&c, CANARY, sizeof(c));
    PyConfig_InitIsolatedConfig(&c.value);
    have_config = 1;
    CHECK(intact(c.before, sizeof(c.before)));
    CHECK(intact(c.after, sizeof(c.after)));
    CHECK(c.value._config_init == 3);
    CHECK(c.value.isolated == 1);
    CHECK(c.value.use_environment == 0);
    CHECK(c.value.user_site_directory == 0);
    CHECK(c.value.install_signal_handlers == 0);
    CHECK(c.value.safe_path == 1);
    CHECK(c.value.pathconfig_warnings == 0);
    CHECK(c.value.argv.length == 0 && c.value.argv.items == NULL);
    CHECK(c.value.program_name == NULL);
    CHECK(c.value._is_python_build == 0);
    CHECK(c.value._init_main == 1);
    CHECK(c.value._isolated_interpreter == 0);

    PyStatus st = PyConfig_SetString(&c.value, &c.value.program_name,
                                     L"abiext");
    CHECK(!PyStatus_Exception(st));
    CHECK(c.value.program_name != NULL
          && wcscmp(c.value.program_name, L"abiext") == 0);
    st = PyWideStringList_Append(&c.value.argv, L"one");
    CHECK(!PyStatus_Exception(st));
    st = PyWideStringList_Insert(&c.value.argv, 0, L"zero");
    CHECK(!PyStatus_Exception(st));
    CHECK(c.value.argv.length == 2);
    CHECK(wcscmp(c.value.argv.items[0], L"zero") == 0);
    CHECK(wcscmp(c.value.argv.items[1], L"one") == 0);
    CHECK(intact(c.after, sizeof(c.after)));

    st = PyStatus_Error("abiext");
    CHECK(PyStatus_IsError(st) && !PyStatus_IsExit(st));
    CHECK(strcmp(st.err_msg, "abiext") == 0);
    st = PyStatus_Exit(7);
    CHECK(PyStatus_IsExit(st) && st.exitcode == 7);

    PyConfig_Clear(&c.value);
    CHECK(c.value.program_name == NULL && c.value.argv.length == 0);
    CHECK(intact(c.after, sizeof(c.after)));
    Py_RETURN_TRUE;

error:
    if (have_config) {
        PyConfig_Clear(&c.value);
    }
    return NULL;
}


/* --- a static type ------------------------------------------------------ */

/* Box: a static PyTypeObject, so each slot sits where the stock header
 * puts it.  Subclassable; its call and iteration call back into Python. */
typedef struct {
    PyObject_HEAD
    PyObject *value;
    PyObject *func;     /* called by box(x) as func(value, x) */
    int count;          /* calls made */
    Py_ssize_t left;    /* items left to iterate */
} BoxObject;

static int
box_init(BoxObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"value", "func", NULL};
    PyObject *value, *func = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O", kwlist,
                                     &value, &func)) {
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(self->value, value);
    Py_INCREF(func);
    Py_XSETREF(self->func, func);
    return 0;
}

static int
box_traverse(BoxObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->value);
    Py_VISIT(self->func);
    return 0;
}

static int
box_clear(BoxObject *self)
{
    Py_CLEAR(self->value);
    Py_CLEAR(self->func);
    return 0;
}

static void
box_dealloc(BoxObject *self)
{
    PyObject_GC_UnTrack(self);
    box_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
box_repr(BoxObject *self)
{
    return PyUnicode_FromFormat("Box(%R)", self->value);
}

static PyObject *
box_call(BoxObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *x;
    if (!PyArg_ParseTuple(args, "O", &x)) {
        return NULL;
    }
    self->count++;
    return PyObject_CallFunctionObjArgs(self->func, self->value, x, NULL);
}

static PyObject *
box_iter(BoxObject *self)
{
    self->left = PyObject_Length(self->value);
    if (self->left < 0) {
        return NULL;
    }
    Py_INCREF(self);
    return (PyObject *)self;
}

/* Items of value, each passed through the overridable method "convert". */
static PyObject *
box_iternext(BoxObject *self)
{
    if (self->left <= 0) {
        return NULL;
    }
    Py_ssize_t n = PyObject_Length(self->value);
    if (n < 0) {
        return NULL;
    }
    PyObject *item = PySequence_GetItem(self->value, n - self->left);
    if (item == NULL) {
        return NULL;
    }
    self->left--;
    PyObject *res = PyObject_CallMethod((PyObject *)self, "convert", "O",
                                        item);
    Py_DECREF(item);
    return res;
}

static PyObject *
box_convert(BoxObject *Py_UNUSED(self), PyObject *item)
{
    Py_INCREF(item);
    return item;
}

static PyObject *
box_get_doubled(BoxObject *self, void *Py_UNUSED(closure))
{
    return PyNumber_Add(self->value, self->value);
}

static int
box_set_doubled(BoxObject *self, PyObject *v, void *Py_UNUSED(closure))
{
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete doubled");
        return -1;
    }
    PyObject *two = PyLong_FromLong(2);
    if (two == NULL) {
        return -1;
    }
    PyObject *half = PyNumber_FloorDivide(v, two);
    Py_DECREF(two);
    if (half == NULL) {
        return -1;
    }
    Py_XSETREF(self->value, half);
    return 0;
}

static PyMethodDef box_methods[] = {
    {"convert", (PyCFunction)box_convert, METH_O,
     PyDoc_STR("convert(item): what iteration yields for ITEM")},
    {NULL, NULL, 0, NULL}
};

static PyMemberDef box_members[] = {
    {"value", T_OBJECT_EX, offsetof(BoxObject, value), 0, NULL},
    {"func", T_OBJECT_EX, offsetof(BoxObject, func), 0, NULL},
    {"count", T_INT, offsetof(BoxObject, count), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}
};

static PyGetSetDef box_getset[] = {
    {"doubled", (getter)box_get_doubled, (setter)box_set_doubled,
     PyDoc_STR("value + value"), NULL},
    {NULL, NULL, NULL, NULL, NULL}
};

static PyTypeObject BoxType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "abiext.Box",
    .tp_basicsize = sizeof(BoxObject),
    .tp_dealloc = (destructor)box_dealloc,
    .tp_repr = (reprfunc)box_repr,
    .tp_call = (ternaryfunc)box_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = PyDoc_STR("Box(value, func=None)"),
    .tp_traverse = (traverseproc)box_traverse,
    .tp_clear = (inquiry)box_clear,
    .tp_iter = (getiterfunc)box_iter,
    .tp_iternext = (iternextfunc)box_iternext,
    .tp_methods = box_methods,
    .tp_members = box_members,
    .tp_getset = box_getset,
    .tp_init = (initproc)box_init,
    .tp_new = PyType_GenericNew,
};


/* --- the module ------------------------------------------------------ */

static PyMethodDef abiext_methods[] = {
    {"call", (PyCFunction)(void (*)(void))abiext_call,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"vectorcall", (PyCFunction)(void (*)(void))abiext_vectorcall,
     METH_FASTCALL, NULL},
    {"call_method", abiext_call_method, METH_VARARGS, NULL},
    {"make_function", abiext_make_function, METH_VARARGS, NULL},
    {"empty_code", abiext_empty_code, METH_VARARGS, NULL},
    {"tag_code", abiext_tag_code, METH_VARARGS, NULL},
    {"extra_freed", abiext_extra_freed, METH_NOARGS, NULL},
    {"iterate", abiext_iterate, METH_O, NULL},
    {"send_all", abiext_send_all, METH_VARARGS, NULL},
    {"thread_state", abiext_thread_state, METH_NOARGS, NULL},
    {"config", abiext_config, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}
};

static int
abiext_exec(PyObject *module)
{
    if (PyType_Ready(&BoxType) < 0) {
        return -1;
    }
    Py_INCREF(&BoxType);
    if (PyModule_AddObject(module, "Box", (PyObject *)&BoxType) < 0) {
        Py_DECREF(&BoxType);
        return -1;
    }
    /* What the stock headers say, for the driver to print. */
    if (PyModule_AddIntConstant(module, "sizeof_PyTypeObject",
                                (long)sizeof(PyTypeObject)) < 0
        || PyModule_AddIntConstant(module, "sizeof_PyConfig",
                                   (long)sizeof(PyConfig)) < 0
        || PyModule_AddIntConstant(module, "sizeof_PyThreadState",
                                   (long)sizeof(PyThreadState)) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot abiext_slots[] = {
    {Py_mod_exec, abiext_exec},
    {0, NULL}
};

static struct PyModuleDef abiext_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "abiext",
    .m_doc = PyDoc_STR("Built against stock 3.11.2 headers for check-abi."),
    .m_size = 0,
    .m_methods = abiext_methods,
    .m_slots = abiext_slots,
};

PyMODINIT_FUNC
PyInit_abiext(void)
{
    return PyModuleDef_Init(&abiext_module);
}
