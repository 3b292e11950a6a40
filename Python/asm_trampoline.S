/*
 * cpython-perf: the template of the perf trampoline.
 *
 * Every trampoline is a copy of the bytes between
 * _Py_trampoline_func_start and _Py_trampoline_func_end.
 * _PyPerf_FillSlots() (Python/perf_internal.h) fills each new arena with
 * copies, one per slot (Python/perf_arena.c for arenas in anonymous
 * memory, Python/perf_elf.c for arena files), and each code object is
 * given a slot of its own, so that each Python function has a native
 * address range of its own that perf can name.  A copy is called as
 *
 *     PyObject *tramp(PyThreadState *tstate, _PyInterpreterFrame *frame,
 *                     int throwflag, evaluator eval);
 *
 * and tail-calls nothing: it calls eval(tstate, frame, throwflag) with the
 * arguments it received, still in their registers, and returns its result.
 * (The C type is _PyPerfTrampolineFunc, in
 * Include/internal/pycore_perf_trampoline.h.)
 *
 * It must stay position independent (it runs from many addresses) and it
 * builds a full frame record: frame-pointer unwinding goes from the
 * evaluator to the trampoline and from the trampoline to the function that
 * called it.  A trampoline that leaves the frame pointer alone hides its
 * caller from `perf record -g`, one native frame lost per Python call.
 *
 * Python/perf_unwind.c describes these instructions in DWARF (.eh_frame)
 * for the jitdump, the arena files and the debuggers' objects.  It
 * checks the template's bytes against the instructions it knows, per
 * architecture, and refuses (ENOEXEC) a template that differs: a change
 * here needs the same change to its tables, and to configure's probe
 * (configure.ac.fragment), which checks that the assembler accepts these
 * instructions.
 */

/* A GNU property note (NT_GNU_PROPERTY_TYPE_0) with one 4-byte property,
   `type` with value `bits`: how an object tells the linker which control
   flow protections its code is ready for. */
    .macro py_gnu_property type, bits
    .pushsection .note.gnu.property, "a"
    .p2align 3
    .long   4                   /* name size */
    .long   16                  /* descriptor size */
    .long   5                   /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
    .long   \type
    .long   4                   /* data size */
    .long   \bits
    .p2align 3
    .popsection
    .endm

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

/*
 * The line trampoline (-X perf_lines; Python/perf_lines_eval.h says what
 * the evaluator does with it).  Same calling convention, but it calls the
 * second evaluator, through the pointer at `eval` in its own copy (each
 * copy's is written when its arena is filled, Python/perf_internal.h):
 * never the evaluator it is given, so that the second evaluator runs only
 * below a line record.  Below its own frame record R it builds a second
 * one, L, whose return-address field is the line slot, holding the address
 * of one of the pads that follow the template in each copy (2 bytes per
 * code unit of the function, never executed).  It computes the pads'
 * offset from the code object (pads - frame->f_code, from which the
 * evaluator's stores find the pad of a position), pushes the pad of where
 * the frame starts (prev_instr + 1: pad 0 for a new frame, a resumed
 * generator's own), and the offset below record L (twice, to keep the
 * stack aligned), so that the evaluator's entry has nothing to compute:
 *
 *     R+8   return address into the caller
 *     R     caller's %rbp                      <- record R
 *     R-8   line slot: a pad                   (L's return address)
 *     R-16  R                                  <- record L, %rbp at the call
 *     R-24  (the offset again)
 *     R-32  the pads' offset                   <- the evaluator's CFA
 *
 *  offset (e = 4 with CET, else 0)
 *          instruction                        CFA        saved %rbp
 *  0       endbr64 (with CET)                 %rsp+8     (in %rbp)
 *  e       push %rbp                          %rsp+8     (in %rbp)
 *  e+1     mov %rsp, %rbp                     %rsp+16    CFA-16
 *  e+4     lea pads(%rip), %rax               %rbp+16    CFA-16
 *  e+11    sub F_CODE(%rsi), %rax             %rbp+16    CFA-16
 *  e+15    mov PREV_INSTR(%rsi), %rcx         %rbp+16    CFA-16
 *  e+19    lea (2 - CODE)(%rax,%rcx), %rcx    %rbp+16    CFA-16
 *  e+27    push %rcx                          %rbp+16    CFA-16
 *  e+28    push %rbp                          %rbp+16    CFA-16
 *  e+29    mov %rsp, %rbp                     %rbp+16    CFA-16
 *  e+32    push %rax                          %rbp+16    CFA-16  (record L)
 *  e+33    push %rax                          %rbp+16    CFA-16  (record L)
 *  e+34    call *eval(%rip)                   %rbp+16    CFA-16  (record L)
 *  e+40    leave                              %rbp+16    CFA-16  (record L)
 *  e+41    leave                              %rbp+16    CFA-16  (R again)
 *  e+42    ret                                %rsp+8     (in %rbp)
 *  e+43    (to 8 bytes) eval: 8 bytes, then the pads: %rbp+16, CFA-16
 *
 * The template is 56 bytes with or without CET: pad 0 is at offset 56.
 * %rcx, the evaluator the trampoline is given, is free: a line trampoline
 * never calls it.  F_CODE and PREV_INSTR are the offsets of f_code and
 * prev_instr in _PyInterpreterFrame (the frame, the second argument, is
 * in %rsi), CODE that of co_code_adaptive in PyCodeObject: constants
 * here, which Python/perf_unwind.c checks against the structures (it
 * refuses a template whose bytes hold other offsets).
 *
 * From the first `mov %rsp, %rbp` on, "CFA = %rbp + 16" holds as written:
 * until the second `mov` it is R's frame, from there to the first `leave`
 * L's, a frame whose return address is the slot (a pad: py::F at the
 * line of its code unit), and the pads' rule, the same words, is then R's
 * frame again.  So DWARF unwinders walk evaluator, L, pad, caller, as
 * frame-pointer walks do.
 */
/* (PyObject_VAR_HEAD is two pointers longer with Py_TRACE_REFS,
   --with-trace-refs) */
#include "pyconfig.h"
#define PY_F_CODE 32
#define PY_PREV_INSTR 56
#ifdef Py_TRACE_REFS
#  define PY_CODE 200
#else
#  define PY_CODE 184
#endif
    .text
    .p2align 4
    .globl  _Py_trampoline_lines_start
    .hidden _Py_trampoline_lines_start
    .type   _Py_trampoline_lines_start, @function
_Py_trampoline_lines_start:
    .cfi_startproc
#ifdef __CET__
    endbr64
#endif
    push    %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov     %rsp, %rbp
    .cfi_def_cfa_register %rbp
    lea     .Llines_pads(%rip), %rax
    sub     PY_F_CODE(%rsi), %rax
    mov     PY_PREV_INSTR(%rsi), %rcx
    lea     (2 - PY_CODE)(%rax, %rcx), %rcx
    push    %rcx
    push    %rbp
    mov     %rsp, %rbp
    push    %rax
    push    %rax
    call    *.Llines_eval(%rip)
    leave
    leave
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .p2align 3, 0xcc
.Llines_eval:
    .quad   0
.Llines_pads:
    .globl  _Py_trampoline_lines_end
    .hidden _Py_trampoline_lines_end
_Py_trampoline_lines_end:
    .size   _Py_trampoline_lines_start, . - _Py_trampoline_lines_start

#if defined(__CET__) && defined(__ELF__)
/* Tell the linker this object is CET-ready (IBT and/or SHSTK, as the
   compiler was asked for), or it would drop the property for the whole
   interpreter. */
/* GNU_PROPERTY_X86_FEATURE_1_AND: IBT = 1, SHSTK = 2 */
    py_gnu_property 0xc0000002, (__CET__ & 3)
#endif /* __CET__ && __ELF__ */

#endif /* __x86_64__ */

#if defined(__aarch64__)

/*
 * AAPCS64: tstate, frame, throwflag and eval arrive in x0..x3, the return
 * address in x30 (lr).  The frame record is the pair {x29, x30} stored at
 * the new x29, which is what frame-pointer unwinders (perf, gdb) follow.
 *
 *  offset (b = 4 with BTI, p = 4 with PAC, else 0)
 *          instruction                  CFA      x29       x30 (RA)
 *  0       bti c (with BTI)             sp       same      same
 *  b       paciasp/pacibsp (with PAC)   sp       same      same, then signed
 *  b+p     stp x29, x30, [sp, #-16]!    sp       same      signed if PAC
 *  b+p+4   mov x29, sp                  sp+16    CFA-16    CFA-8
 *  b+p+8   blr x3                       x29+16   CFA-16    CFA-8
 *  b+p+12  ldp x29, x30, [sp], #16      x29+16   CFA-16    CFA-8
 *  b+p+16  autiasp/autibsp (with PAC)   sp       same      signed, then not
 *  b+2p+16 ret                          sp       same      same
 *
 * "Signed" is DWARF's DW_CFA_AARCH64_negate_ra_state: between the two PAC
 * instructions the return address, in x30 and in the frame record, carries
 * a pointer authentication code.  The instructions are spelt as the HINT
 * encodings they are, so that any assembler accepts them; on a processor
 * without BTI or PAC they are no-ops.
 *
 * __ARM_FEATURE_BTI_DEFAULT and __ARM_FEATURE_PAC_DEFAULT are what the
 * compiler defines under -mbranch-protection=...: bit 0 of the latter asks
 * for the A key, bit 1 for the B key.
 */
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT == 1
#  define PY_TRAMP_BTI 1
#else
#  define PY_TRAMP_BTI 0
#endif
#if defined(__ARM_FEATURE_PAC_DEFAULT) && (__ARM_FEATURE_PAC_DEFAULT & 3)
#  define PY_TRAMP_PAC 1
#else
#  define PY_TRAMP_PAC 0
#endif

    .text
    .p2align 4
    .globl  _Py_trampoline_func_start
    .hidden _Py_trampoline_func_start
    .type   _Py_trampoline_func_start, %function
_Py_trampoline_func_start:
    .cfi_startproc
#if PY_TRAMP_PAC && (__ARM_FEATURE_PAC_DEFAULT & 2)
    .cfi_b_key_frame
#endif
#if PY_TRAMP_BTI
    hint    #34                 /* bti c: a target of blr */
#endif
#if PY_TRAMP_PAC
#  if __ARM_FEATURE_PAC_DEFAULT & 1
    hint    #25                 /* paciasp: sign x30 with key A and sp */
#  else
    hint    #27                 /* pacibsp: sign x30 with key B and sp */
#  endif
    .cfi_negate_ra_state
#endif
    stp     x29, x30, [sp, #-16]!
    .cfi_def_cfa_offset 16
    .cfi_offset x29, -16
    .cfi_offset x30, -8
    mov     x29, sp
    .cfi_def_cfa_register x29
    blr     x3
    ldp     x29, x30, [sp], #16
    .cfi_def_cfa sp, 0
    .cfi_restore x29
    .cfi_restore x30
#if PY_TRAMP_PAC
#  if __ARM_FEATURE_PAC_DEFAULT & 1
    hint    #29                 /* autiasp */
#  else
    hint    #31                 /* autibsp */
#  endif
    .cfi_negate_ra_state
#endif
    ret
    .cfi_endproc
    .globl  _Py_trampoline_func_end
    .hidden _Py_trampoline_func_end
_Py_trampoline_func_end:
    .size   _Py_trampoline_func_start, . - _Py_trampoline_func_start

#if (PY_TRAMP_BTI || PY_TRAMP_PAC) && defined(__ELF__)
/* Tell the linker that this object is BTI and/or PAC ready, as the
   compiler's objects are under the same -mbranch-protection, or it would
   drop the property for the whole interpreter. */
/* GNU_PROPERTY_AARCH64_FEATURE_1_AND: BTI = 1, PAC = 2 */
    py_gnu_property 0xc0000000, ((PY_TRAMP_BTI * 1) | (PY_TRAMP_PAC * 2))
#endif

#endif /* __aarch64__ */

#if defined(__riscv) && __riscv_xlen == 64

/*
 * LP64 psABI: tstate, frame, throwflag and eval arrive in a0..a3, the
 * return address in ra.  With frame pointers, s0 (fp) points just above
 * the saved pair: ra at fp-8, the caller's fp at fp-16; that is what
 * frame-pointer unwinders follow.  Compressed encodings are turned off
 * here, so that the template's bytes do not depend on the assembler's
 * -march (Python/perf_unwind.c checks them word by word).
 *
 *  offset  instruction          CFA      ra       s0
 *  0       addi sp, sp, -16     sp       same     same
 *  4       sd ra, 8(sp)         sp+16    same     same
 *  8       sd s0, 0(sp)         sp+16    CFA-8    same
 *  12      addi s0, sp, 16      sp+16    CFA-8    CFA-16
 *  16      jalr a3              s0       CFA-8    CFA-16
 *  20      ld ra, 8(sp)         sp+16    CFA-8    CFA-16
 *  24      ld s0, 0(sp)         sp+16    same     CFA-16
 *  28      addi sp, sp, 16      sp+16    same     same
 *  32      ret                  sp       same     same
 *
 * The stack stays 16-byte aligned, as the psABI wants it at the call.
 */
    .text
    .p2align 4
    .globl  _Py_trampoline_func_start
    .hidden _Py_trampoline_func_start
    .type   _Py_trampoline_func_start, @function
_Py_trampoline_func_start:
    .cfi_startproc
    .option push
    .option norvc
    addi    sp, sp, -16
    .cfi_def_cfa_offset 16
    sd      ra, 8(sp)
    .cfi_offset ra, -8
    sd      s0, 0(sp)
    .cfi_offset s0, -16
    addi    s0, sp, 16
    .cfi_def_cfa s0, 0
    jalr    a3
    .cfi_def_cfa sp, 16
    ld      ra, 8(sp)
    .cfi_restore ra
    ld      s0, 0(sp)
    .cfi_restore s0
    addi    sp, sp, 16
    .cfi_def_cfa_offset 0
    ret
    .option pop
    .cfi_endproc
    .globl  _Py_trampoline_func_end
    .hidden _Py_trampoline_func_end
_Py_trampoline_func_end:
    .size   _Py_trampoline_func_start, . - _Py_trampoline_func_start

#endif /* __riscv && __riscv_xlen == 64 */

#if defined(__linux__) && defined(__ELF__)
/* The trampoline needs no executable stack. */
    .section .note.GNU-stack, "", @progbits
#endif
