/*
 * _stackwalk: the helper of `make check-cross` (tools/check-cross.sh),
 * built for the target with its cross compiler.
 *
 * _stackwalk.capture(path) records the native stack of the thread that
 * calls it, in two ways, into the text file `path` (and `path`.stack):
 *
 *   fp ADDR RAW      each return address found by walking the chain of
 *                    frame records from capture()'s own frame, innermost
 *                    first: without its pointer authentication code, and
 *                    as the record holds it
 *   reg NUM VALUE    the callee-saved registers, the stack pointer and the
 *                    return address at a call inside capture(), by DWARF
 *                    register number, for a DWARF unwinder
 *   stack ADDR SIZE  the stack from that stack pointer up, copied to
 *                    `path`.stack
 *   map LINE         /proc/self/maps (where the interpreter, this helper
 *                    and the stack are)
 *
 * tools/cross/unwind.py reads it on the build machine.
 */

#define PY_SSIZE_T_CLEAN
#include "Python.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__aarch64__)
/* x19..x30 then sp: the registers a callee keeps for its caller, the
   frame pointer x29 and the return address x30 among them. */
#  define NREGS 13
static const int dwarf_number[NREGS] = {
    19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
__asm__(
    "    .text\n"
    "    .p2align 2\n"
    "    .type stackwalk_snapshot, %function\n"
    "stackwalk_snapshot:\n"
    "    hint #34\n"                          /* bti c */
    "    stp x19, x20, [x0, #0]\n"
    "    stp x21, x22, [x0, #16]\n"
    "    stp x23, x24, [x0, #32]\n"
    "    stp x25, x26, [x0, #48]\n"
    "    stp x27, x28, [x0, #64]\n"
    "    stp x29, x30, [x0, #80]\n"
    "    mov x1, sp\n"
    "    str x1, [x0, #96]\n"
    "    ret\n"
    "    .size stackwalk_snapshot, . - stackwalk_snapshot\n");
#elif defined(__riscv) && __riscv_xlen == 64
/* s0..s11, ra, sp: s0 is the frame pointer. */
#  define NREGS 14
static const int dwarf_number[NREGS] = {
    8, 9, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 1, 2};
__asm__(
    "    .text\n"
    "    .p2align 2\n"
    "    .type stackwalk_snapshot, @function\n"
    "stackwalk_snapshot:\n"
    "    sd s0, 0(a0)\n"
    "    sd s1, 8(a0)\n"
    "    sd s2, 16(a0)\n"
    "    sd s3, 24(a0)\n"
    "    sd s4, 32(a0)\n"
    "    sd s5, 40(a0)\n"
    "    sd s6, 48(a0)\n"
    "    sd s7, 56(a0)\n"
    "    sd s8, 64(a0)\n"
    "    sd s9, 72(a0)\n"
    "    sd s10, 80(a0)\n"
    "    sd s11, 88(a0)\n"
    "    sd ra, 96(a0)\n"
    "    sd sp, 104(a0)\n"
    "    ret\n"
    "    .size stackwalk_snapshot, . - stackwalk_snapshot\n");
#else
#  error "_stackwalk knows aarch64 and riscv64"
#endif

/* Store the registers above, as they are at its call (the stack pointer
   that of the caller, the return address the one into the caller). */
void stackwalk_snapshot(uint64_t *regs);

/* A return address without its pointer authentication code: user
   addresses have at most 48 significant bits here. */
static uintptr_t
strip_pac(uintptr_t addr)
{
#if defined(__aarch64__)
    return addr & (((uintptr_t)1 << 48) - 1);
#else
    return addr;
#endif
}

/* The stack mapping that contains `sp`, from /proc/self/maps; copies the
   maps lines to `out` too. */
static int
find_stack(FILE *out, uintptr_t sp, uintptr_t *low, uintptr_t *high)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    if (maps == NULL) {
        return -1;
    }
    char line[4096];
    int found = -1;
    while (fgets(line, sizeof(line), maps) != NULL) {
        unsigned long start, end;
        fprintf(out, "map %s", line);
        if (sscanf(line, "%lx-%lx", &start, &end) == 2
            && start <= sp && sp < end)
        {
            *low = start;
            *high = end;
            found = 0;
        }
    }
    fclose(maps);
    return found;
}

static PyObject *
capture(PyObject *Py_UNUSED(module), PyObject *arg)
{
    const char *path = PyUnicode_AsUTF8(arg);
    if (path == NULL) {
        return NULL;
    }
    uint64_t regs[NREGS];
    /* The registers first, at a call of this very function. */
    stackwalk_snapshot(regs);

    FILE *out = fopen(path, "w");
    if (out == NULL) {
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    }
    fprintf(out, "pid %ld\n", (long)getpid());
    uintptr_t sp = (uintptr_t)regs[NREGS - 1];
    uintptr_t low = 0, high = 0;
    if (find_stack(out, sp, &low, &high) < 0) {
        fclose(out);
        PyErr_SetString(PyExc_RuntimeError, "no mapping holds the stack");
        return NULL;
    }

    /* The frame records, from this function's own. */
    uintptr_t *fp = (uintptr_t *)__builtin_frame_address(0);
    for (int depth = 0; depth < 256; depth++) {
        uintptr_t ret, next;
        /* aarch64: {caller's x29, x30} at fp; riscv64: ra at fp - 8,
           the caller's s0 at fp - 16. */
#if defined(__aarch64__)
        if ((uintptr_t)fp < low || (uintptr_t)fp + 16 > high) {
            break;
        }
        next = fp[0];
        ret = fp[1];
#else
        if ((uintptr_t)fp - 16 < low || (uintptr_t)fp > high) {
            break;
        }
        next = fp[-2];
        ret = fp[-1];
#endif
        if (ret == 0) {
            break;
        }
        fprintf(out, "fp %lx %lx\n", (unsigned long)strip_pac(ret),
                (unsigned long)ret);
        if (next <= (uintptr_t)fp) {
            break;                /* the chain goes up the stack */
        }
        fp = (uintptr_t *)next;
    }

    for (int i = 0; i < NREGS; i++) {
        fprintf(out, "reg %d %lx\n", dwarf_number[i], (unsigned long)regs[i]);
    }
    fprintf(out, "stack %lx %lx\n", (unsigned long)sp,
            (unsigned long)(high - sp));
    fclose(out);

    /* The stack itself, from the snapshot's stack pointer up: this
       function's frame (whose saved registers have not changed since its
       prologue) and its callers', which wait for it. */
    char stack_path[4096];
    PyOS_snprintf(stack_path, sizeof(stack_path), "%s.stack", path);
    FILE *st = fopen(stack_path, "wb");
    if (st == NULL) {
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, stack_path);
    }
    size_t n = fwrite((const void *)sp, 1, high - sp, st);
    fclose(st);
    if (n != high - sp) {
        PyErr_SetString(PyExc_OSError, "short write of the stack");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef stackwalk_methods[] = {
    {"capture", capture, METH_O,
     "capture(path): record this thread's native stack in path."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef stackwalk_module = {
    PyModuleDef_HEAD_INIT, "_stackwalk", NULL, -1, stackwalk_methods,
};

PyMODINIT_FUNC
PyInit__stackwalk(void)
{
    return PyModule_Create(&stackwalk_module);
}
