/*[clinic input]
preserve
[clinic start generated code]*/

PyDoc_STRVAR(sys_activate_stack_trampoline__doc__,
"activate_stack_trampoline($module, backend, /, *, lines=False)\n"
"--\n"
"\n"
"Start naming Python functions for perf, with the given backend.\n"
"\n"
"\"perf\" writes /tmp/perf-PID.map for frame-pointer profiles\n"
"(perf record -g); \"perf_jit\" writes /tmp/jit-PID.dump with unwind\n"
"tables for perf record --call-graph dwarf and perf inject --jit.\n"
"With lines=True, each Python frame in perf\'s samples also carries the\n"
"line it is on.");

#define SYS_ACTIVATE_STACK_TRAMPOLINE_METHODDEF    \
    {"activate_stack_trampoline", _PyCFunction_CAST(sys_activate_stack_trampoline), METH_FASTCALL|METH_KEYWORDS, sys_activate_stack_trampoline__doc__},

static PyObject *
sys_activate_stack_trampoline_impl(PyObject *module, PyObject *backend,
                                   int lines);

static PyObject *
sys_activate_stack_trampoline(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *return_value = NULL;
    static const char * const _keywords[] = {"", "lines", NULL};
    static _PyArg_Parser _parser = {NULL, _keywords, "activate_stack_trampoline", 0};
    PyObject *argsbuf[2];
    Py_ssize_t noptargs = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0) - 1;
    PyObject *backend;
    int lines = 0;

    args = _PyArg_UnpackKeywords(args, nargs, NULL, kwnames, &_parser, 1, 1, 0, argsbuf);
    if (!args) {
        goto exit;
    }
    backend = args[0];
    if (!noptargs) {
        goto skip_optional_kwonly;
    }
    lines = _PyLong_AsInt(args[1]);
    if (lines == -1 && PyErr_Occurred()) {
        goto exit;
    }
skip_optional_kwonly:
    return_value = sys_activate_stack_trampoline_impl(module, backend, lines);

exit:
    return return_value;
}

PyDoc_STRVAR(sys_deactivate_stack_trampoline__doc__,
"deactivate_stack_trampoline($module, /)\n"
"--\n"
"\n"
"Stop naming Python functions for perf.\n"
"\n"
"Calls already running keep their trampolines; new calls get none.\n"
"Does nothing when no backend is active, and in a sub-interpreter.");

#define SYS_DEACTIVATE_STACK_TRAMPOLINE_METHODDEF    \
    {"deactivate_stack_trampoline", (PyCFunction)sys_deactivate_stack_trampoline, METH_NOARGS, sys_deactivate_stack_trampoline__doc__},

static PyObject *
sys_deactivate_stack_trampoline_impl(PyObject *module);

static PyObject *
sys_deactivate_stack_trampoline(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return sys_deactivate_stack_trampoline_impl(module);
}

PyDoc_STRVAR(sys_is_stack_trampoline_active__doc__,
"is_stack_trampoline_active($module, /)\n"
"--\n"
"\n"
"Return True if a perf trampoline backend is active.");

#define SYS_IS_STACK_TRAMPOLINE_ACTIVE_METHODDEF    \
    {"is_stack_trampoline_active", (PyCFunction)sys_is_stack_trampoline_active, METH_NOARGS, sys_is_stack_trampoline_active__doc__},

static PyObject *
sys_is_stack_trampoline_active_impl(PyObject *module);

static PyObject *
sys_is_stack_trampoline_active(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return sys_is_stack_trampoline_active_impl(module);
}
/*[clinic end generated code: output=98c7b86c243cc7b5 input=a9049054013a1b77]*/
