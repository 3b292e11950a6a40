/*
 * cpython-perf: the template of the perf trampoline.
 *
 * Python/perf_trampoline.c copies the bytes between
 * _Py_trampoline_func_start and _Py_trampoline_func_end once per code
 * object, so that each Python function has a native address range of its
 * own that perf can name.  A copy is called as
 *
 *     PyObject *tramp(PyThreadState *tstate, _PyInterpreterFrame *frame,
 *                     int throwflag, evaluator eval);
 *
 * and tail-calls nothing: it calls eval(tstate, frame, throwflag) with the
 * arguments it received, still in their registers, and returns its result.
 *
 * It must stay position independent (it runs from many addresses) and it
 * builds a full frame record: frame-pointer unwinding goes from the
 * evaluator to the trampoline and from the trampoline to the function that
 * called it.  A trampoline that leaves the frame pointer alone hides its
 * caller from `perf record -g`, one native frame lost per Python call.
 *
 * Python/perf_jit_trampoline.c describes these instructions to perf in
 * DWARF (.eh_frame); keep its unwind table in step with any change here.
 */

#if defined(__x86_64__)

/*
 *  offset (e = 4 with CET, else 0)
 *          instruction          CFA        return address   saved %rbp
 *  0       endbr64 (with CET)   %rsp+8     CFA-8            (in %rbp)
 *  e       push %rbp            %rsp+8     CFA-8            (in %rbp)
 *  e+1     mov %rsp, %rbp       %rsp+16    CFA-8            CFA-16
 *  e+4     call *%rcx           %rbp+16    CFA-8            CFA-16
 *  e+6     pop %rbp             %rbp+16    CFA-8            CFA-16
 *  e+7     ret                  %rsp+8     CFA-8            (in %rbp)
 *
 * On entry %rsp is 8 mod 16; the push makes it 0 mod 16 again, as the
 * System V ABI wants it at the call.
 */
    .text
    .p2align 4
    .globl  _Py_trampoline_func_start
    .hidden _Py_trampoline_func_start
    .type   _Py_trampoline_func_start, @function
_Py_trampoline_func_start:
    .cfi_startproc
#ifdef __CET__
    endbr64
#endif
    push    %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov     %rsp, %rbp
    .cfi_def_cfa_register %rbp
    call    *%rcx
    pop     %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .globl  _Py_trampoline_func_end
    .hidden _Py_trampoline_func_end
_Py_trampoline_func_end:
    .size   _Py_trampoline_func_start, . - _Py_trampoline_func_start

#if defined(__CET__) && defined(__ELF__)
/* Tell the linker this object is CET-ready (IBT and/or SHSTK, as the
   compiler was asked for), or it would drop the property for the whole
   interpreter. */
    .section .note.gnu.property, "a"
    .p2align 3
    .long   4                   /* name size */
    .long   16                  /* descriptor size */
    .long   5                   /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
    .long   0xc0000002          /* GNU_PROPERTY_X86_FEATURE_1_AND */
    .long   4                   /* data size */
    .long   __CET__ & 3         /* IBT = 1, SHSTK = 2 */
    .p2align 3
#endif /* __CET__ && __ELF__ */

#endif /* __x86_64__ */

/* The aarch64 (BTI "bti c", x29/x30 frame record) and riscv64 (s0/ra
   frame record) templates go here, each in its own #if block, together
   with a probe line in configure.ac.fragment. */

#if defined(__linux__) && defined(__ELF__)
/* The trampoline needs no executable stack. */
    .section .note.GNU-stack, "", @progbits
#endif
