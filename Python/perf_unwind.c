/*
 * cpython-perf: the unwind table of the trampoline template, for the
 * readers that unwind with DWARF (perf --call-graph dwarf, gdb, libunwind).
 *
 * Why a file of its own
 * ---------------------
 * A trampoline copy is code that no ELF file of the build describes, so
 * an unwinder finds no .eh_frame for it unless someone hands it one: the
 * arena files (Python/perf_elf_image.c, one FDE per slot), the objects for
 * debuggers (Python/perf_debugger.c) and the jitdump backend
 * (Python/perf_jit_trampoline.c, its JIT_CODE_UNWINDING_INFO records).
 * Each needs the same two things: the frame rules of the template, and
 * those rules as .eh_frame and .eh_frame_hdr bytes at a given distance
 * from the code.  Both are about the template and the DWARF format only,
 * not about any file perf reads, so they live here, and those three call
 * this file.
 *
 * The rules
 * ---------
 * Every trampoline is a copy of the same template, so one CIE and one FDE
 * describe all of them.  The FDE's rules are exact at every instruction
 * boundary of the template; they are derived from its bytes, which are
 * checked first: a template this file does not know (an assembler that
 * added an instruction, a new architecture) is refused with ENOEXEC rather
 * than described wrongly.  Per architecture, below: the ELF machine, and
 * how the template's bytes become the CIE's constants and the FDE's rule
 * changes (x86_64 with or without endbr64; aarch64 with or without bti c
 * and paciasp/pacibsp ... autiasp/autibsp; riscv64).
 *
 * The bytes
 * ---------
 *     .eh_frame      CIE (augmentation "zR", or "zRB" for aarch64's B key;
 *                    FDE pointers pcrel sdata4), one FDE covering the whole
 *                    template, a 4-byte terminator
 *     .eh_frame_hdr  version 1, eh_frame_ptr pcrel sdata4, fde_count udata4,
 *                    a one-entry table datarel sdata4
 * For several copies of the template, `stride` bytes apart (an arena's
 * slots), there is one FDE per copy and one table entry per copy, in
 * address order.  Every pointer in them is relative to its own position
 * (pcrel, or datarel from the .eh_frame_hdr), so only the distance from
 * the first copy's first byte to the .eh_frame matters: the caller says
 * where it puts the tables (the jitdump: after a single copy; an arena
 * file: after all its slots).
 */

#include "Python.h"
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <string.h>

/* Pad a CIE or FDE that started at `start` with DW_CFA_nop to pointer
   alignment, then store its length (which excludes the length field). */
static void
close_entry(_PyPerfBytes *w, size_t start)
{
    while ((w->n - start) % 8 != 0) {
        _PyPerfBytes_U8(w, 0x00);     /* DW_CFA_nop */
    }
    _PyPerfBytes_EndUnit(w, start);
}

#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30

#define DW_CFA_advance_loc(delta) (0x40 | (delta))
#define DW_CFA_offset(reg) (0x80 | (reg))
#define DW_CFA_restore(reg) (0xc0 | (reg))
#define DW_CFA_def_cfa 0x0c
#define DW_CFA_def_cfa_register 0x0d
#define DW_CFA_def_cfa_offset 0x0e
#define DW_CFA_AARCH64_negate_ra_state 0x2d

/* What the CIE and the FDE say about one template, per architecture:
   the CIE's constants and initial rules, and the FDE's rule changes
   (advance_loc included).  Each register save is at a multiple of 8
   below the CFA, with a data alignment factor of -8 (sleb128 0x78). */
typedef struct {
    const char *augmentation;     /* "zR", or "zRB" (aarch64 PAC, key B) */
    unsigned char code_align;
    unsigned char ra_reg;
    unsigned char cie[8];
    size_t cie_size;
    unsigned char fde[64];
    size_t fde_size;
} frame_rules;

#define DATA_ALIGN_MINUS_8 0x78

#if defined(__x86_64__)

#define ELF_MACHINE 62                /* EM_X86_64 */
#define DWARF_RSP 7
#define DWARF_RBP 6
#define DWARF_RA 16

/* The x86_64 template, after an optional endbr64 (see asm_trampoline.S). */
static const unsigned char endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
static const unsigned char template_body[] = {
    0x55,                         /* push %rbp */
    0x48, 0x89, 0xe5,             /* mov %rsp, %rbp */
    0xff, 0xd1,                   /* call *%rcx */
    0x5d,                         /* pop %rbp */
    0xc3,                         /* ret */
};

/* The bytes of the endbr64 that `code` starts with under CET, or 0. */
static size_t
endbr64_size(const unsigned char *code, size_t size)
{
    return (size >= sizeof(endbr64)
            && memcmp(code, endbr64, sizeof(endbr64)) == 0)
           ? sizeof(endbr64) : 0;
}

/* The CIE of both x86_64 templates: CFA = rsp + 8, return address at
   CFA - 8. */
static void
x86_64_cie(frame_rules *r)
{
    *r = (frame_rules){
        .augmentation = "zR",
        .code_align = 1,
        .ra_reg = DWARF_RA,
        .cie = {DW_CFA_def_cfa, DWARF_RSP, 8, DW_CFA_offset(DWARF_RA), 1},
        .cie_size = 5,
    };
}

/* The rules of the template's `size` bytes at `code`, or -1 when the
   template is not the one described here. */
static int
template_rules(const unsigned char *code, size_t size, frame_rules *r)
{
    size_t e = endbr64_size(code, size);
    if (size != e + sizeof(template_body)
        || memcmp(code + e, template_body, sizeof(template_body)) != 0)
    {
        return -1;
    }
    static const unsigned char fde[] = {
        /* after push %rbp: CFA = rsp + 16, rbp saved at CFA - 16 */
        0 /* advance_loc, set below */,
        DW_CFA_def_cfa_offset, 16,
        DW_CFA_offset(DWARF_RBP), 2,
        /* after mov %rsp, %rbp: CFA = rbp + 16, through the call */
        DW_CFA_advance_loc(3),
        DW_CFA_def_cfa_register, DWARF_RBP,
        /* after call *%rcx (2) and pop %rbp (1): CFA = rsp + 8, rbp
           restored */
        DW_CFA_advance_loc(3),
        DW_CFA_def_cfa, DWARF_RSP, 8,
        DW_CFA_restore(DWARF_RBP),
    };
    x86_64_cie(r);
    memcpy(r->fde, fde, sizeof(fde));
    r->fde[0] = DW_CFA_advance_loc(e + 1);
    r->fde_size = sizeof(fde);
    return 0;
}

#ifdef PY_HAVE_PERF_LINES
/* The line trampoline after an optional endbr64: its instructions, with
   the two displacements that depend on where the template ends (`eval`,
   the evaluator's address, is its last 8 bytes), and the three that are
   offsets in the interpreter's structures (checked against them here:
   the template holds them as constants). */
static const unsigned char lines_body[] = {
    0x55,                         /* push %rbp */
    0x48, 0x89, 0xe5,             /* mov %rsp, %rbp */
    0x48, 0x8d, 0x05, 0, 0, 0, 0, /* lea pads(%rip), %rax */
    0x48, 0x2b, 0x46, 0,          /* sub f_code(%rsi), %rax */
    0x48, 0x8b, 0x4e, 0,          /* mov prev_instr(%rsi), %rcx */
    0x48, 0x8d, 0x8c, 0x08,       /* lea 2-CODE(%rax,%rcx), %rcx: CODE, */
    0, 0, 0, 0,                   /* co_code_adaptive's offset */
    0x51,                         /* push %rcx */
    0x55,                         /* push %rbp */
    0x48, 0x89, 0xe5,             /* mov %rsp, %rbp */
    0x50,                         /* push %rax */
    0x50,                         /* push %rax */
    0xff, 0x15, 0, 0, 0, 0,       /* call *eval(%rip) */
    0xc9,                         /* leave */
    0xc9,                         /* leave */
    0xc3,                         /* ret */
};
#define LINES_LEA_DISP 7
#define LINES_F_CODE_DISP 14
#define LINES_PREV_INSTR_DISP 18
#define LINES_CODE_DISP 23
#define LINES_CALL_DISP 36

static void
put_le32(unsigned char *p, uint32_t v)
{
    for (int k = 0; k < 4; k++) {
        p[k] = (unsigned char)(v >> (8 * k));
    }
}

/* The rules of the line template's `size` bytes at `code` (int3 to 8
   bytes, then `eval`), or -1. */
static int
lines_template_rules(const unsigned char *code, size_t size, frame_rules *r)
{
    size_t e = endbr64_size(code, size);
    size_t end = e + sizeof(lines_body);
    if (size != _Py_SIZE_ROUND_UP(end, 8) + 8) {
        return -1;
    }
    unsigned char want[sizeof(lines_body)];
    memcpy(want, lines_body, sizeof(want));
    /* (each displacement is from the end of its instruction) */
    put_le32(want + LINES_LEA_DISP, (uint32_t)(size - (e + LINES_LEA_DISP + 4)));
    put_le32(want + LINES_CALL_DISP,
             (uint32_t)(size - 8 - (e + LINES_CALL_DISP + 4)));
    want[LINES_F_CODE_DISP] = offsetof(_PyInterpreterFrame, f_code);
    want[LINES_PREV_INSTR_DISP] = offsetof(_PyInterpreterFrame, prev_instr);
    put_le32(want + LINES_CODE_DISP,
             (uint32_t)(2 - (int32_t)offsetof(PyCodeObject,
                                              co_code_adaptive)));
    if (memcmp(code + e, want, sizeof(want)) != 0) {
        return -1;
    }
    for (size_t k = end; k < size - 8; k++) {
        if (code[k] != 0xcc) {
            return -1;
        }
    }
    const unsigned char fde[] = {
        /* after push %rbp: CFA = rsp + 16, rbp saved at CFA - 16 */
        DW_CFA_advance_loc(e + 1),
        DW_CFA_def_cfa_offset, 16,
        DW_CFA_offset(DWARF_RBP), 2,
        /* after mov %rsp, %rbp: CFA = rbp + 16 (R's frame, then L's, then
           R's) to the second leave */
        DW_CFA_advance_loc(3),
        DW_CFA_def_cfa_register, DWARF_RBP,
        /* after the second leave: CFA = rsp + 8, rbp restored */
        DW_CFA_advance_loc(38),
        DW_CFA_def_cfa, DWARF_RSP, 8,
        DW_CFA_restore(DWARF_RBP),
        /* `eval` and the pads: R's frame, whose record the slot's
           address (minus one, for DWARF readers) points into */
        (unsigned char)DW_CFA_advance_loc(size - 8 - (e + 42)),
        DW_CFA_def_cfa, DWARF_RBP, 16,
        DW_CFA_offset(DWARF_RBP), 2,
    };
    x86_64_cie(r);
    memcpy(r->fde, fde, sizeof(fde));
    r->fde_size = sizeof(fde);
    return 0;
}
#endif /* PY_HAVE_PERF_LINES */

#elif defined(__aarch64__) || (defined(__riscv) && __riscv_xlen == 64)

/* Templates of fixed-size instruction words: each word the template may
   contain, with the rule changes that hold after it. */
typedef struct {
    uint32_t insn;
    unsigned char ops[8];
    unsigned char nops;
} insn_rule;

#if defined(__aarch64__)

#define ELF_MACHINE 183               /* EM_AARCH64 */
#define DWARF_X29 29
#define DWARF_X30 30
#define DWARF_SP 31

static const insn_rule bti_c = {0xd503245f, {0}, 0};
/* paciasp, pacibsp; autiasp, autibsp: the return address in x30 (and
   then in the frame record) is signed between them. */
static const insn_rule pac_sign[2] = {
    {0xd503233f, {DW_CFA_AARCH64_negate_ra_state}, 1},
    {0xd503237f, {DW_CFA_AARCH64_negate_ra_state}, 1},
};
static const insn_rule pac_auth[2] = {
    {0xd50323bf, {DW_CFA_AARCH64_negate_ra_state}, 1},
    {0xd50323ff, {DW_CFA_AARCH64_negate_ra_state}, 1},
};
static const insn_rule frame_body[] = {
    /* stp x29, x30, [sp, #-16]!: CFA = sp + 16, x29 at CFA - 16, x30 at
       CFA - 8 */
    {0xa9bf7bfd, {DW_CFA_def_cfa_offset, 16, DW_CFA_offset(DWARF_X29), 2,
                  DW_CFA_offset(DWARF_X30), 1}, 6},
    /* mov x29, sp: CFA = x29 + 16, through the call */
    {0x910003fd, {DW_CFA_def_cfa_register, DWARF_X29}, 2},
    /* blr x3 */
    {0xd63f0060, {0}, 0},
    /* ldp x29, x30, [sp], #16: CFA = sp, both restored */
    {0xa8c17bfd, {DW_CFA_def_cfa, DWARF_SP, 0, DW_CFA_restore(DWARF_X29),
                  DW_CFA_restore(DWARF_X30)}, 5},
};
static const insn_rule frame_ret = {0xd65f03c0, {0}, 0};

/* The words the template must be: [bti c] [pac*sp] body [aut*sp] ret,
   the keys of the two PAC instructions the same.  Returns their count,
   or 0 when the template does not start as any of them. */
static size_t
expected_words(const uint32_t *words, size_t n, const insn_rule **seq,
               frame_rules *r)
{
    size_t k = 0, i = 0;
    int key = -1;
    if (i < n && words[i] == bti_c.insn) {
        seq[k++] = &bti_c;
        i++;
    }
    for (int j = 0; j < 2 && i < n; j++) {
        if (words[i] == pac_sign[j].insn) {
            key = j;
            seq[k++] = &pac_sign[j];
            i++;
            break;
        }
    }
    for (size_t j = 0; j < Py_ARRAY_LENGTH(frame_body); j++) {
        seq[k++] = &frame_body[j];
    }
    if (key >= 0) {
        seq[k++] = &pac_auth[key];
    }
    seq[k++] = &frame_ret;
    /* CIE: CFA = sp, the return address in x30 (not signed). */
    *r = (frame_rules){
        .augmentation = key == 1 ? "zRB" : "zR",
        .code_align = 4,
        .ra_reg = DWARF_X30,
        .cie = {DW_CFA_def_cfa, DWARF_SP, 0},
        .cie_size = 3,
    };
    return k;
}

#else /* riscv64 */

#define ELF_MACHINE 243               /* EM_RISCV */
#define DWARF_RA 1
#define DWARF_SP 2
#define DWARF_S0 8

static const insn_rule frame_words[] = {
    /* addi sp, sp, -16: CFA = sp + 16 */
    {0xff010113, {DW_CFA_def_cfa_offset, 16}, 2},
    /* sd ra, 8(sp) */
    {0x00113423, {DW_CFA_offset(DWARF_RA), 1}, 2},
    /* sd s0, 0(sp) */
    {0x00813023, {DW_CFA_offset(DWARF_S0), 2}, 2},
    /* addi s0, sp, 16: CFA = s0, through the call */
    {0x01010413, {DW_CFA_def_cfa, DWARF_S0, 0}, 3},
    /* jalr a3: back to CFA = sp + 16 before s0 is reloaded */
    {0x000680e7, {DW_CFA_def_cfa, DWARF_SP, 16}, 3},
    /* ld ra, 8(sp) */
    {0x00813083, {DW_CFA_restore(DWARF_RA)}, 1},
    /* ld s0, 0(sp) */
    {0x00013403, {DW_CFA_restore(DWARF_S0)}, 1},
    /* addi sp, sp, 16: CFA = sp */
    {0x01010113, {DW_CFA_def_cfa_offset, 0}, 2},
    /* ret */
    {0x00008067, {0}, 0},
};

static size_t
expected_words(const uint32_t *Py_UNUSED(words), size_t Py_UNUSED(n),
               const insn_rule **seq, frame_rules *r)
{
    size_t k = 0;
    for (size_t j = 0; j < Py_ARRAY_LENGTH(frame_words); j++) {
        seq[k++] = &frame_words[j];
    }
    /* CIE: CFA = sp, the return address in ra. */
    *r = (frame_rules){
        .augmentation = "zR",
        .code_align = 4,
        .ra_reg = DWARF_RA,
        .cie = {DW_CFA_def_cfa, DWARF_SP, 0},
        .cie_size = 3,
    };
    return k;
}

#endif

#define TEMPLATE_MAX_WORDS 16

/* The rules of the template's `size` bytes at `code`, word by word, or
   -1 when the template is not exactly one that expected_words() knows. */
static int
template_rules(const unsigned char *code, size_t size, frame_rules *r)
{
    uint32_t words[TEMPLATE_MAX_WORDS];
    const insn_rule *seq[TEMPLATE_MAX_WORDS];
    size_t n = size / 4;
    if (size % 4 != 0 || n > TEMPLATE_MAX_WORDS) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        /* Instructions are little-endian on both. */
        words[i] = (uint32_t)code[4 * i] | (uint32_t)code[4 * i + 1] << 8
                   | (uint32_t)code[4 * i + 2] << 16
                   | (uint32_t)code[4 * i + 3] << 24;
    }
    if (expected_words(words, n, seq, r) != n) {
        return -1;
    }
    size_t last = 0;              /* where the rules last changed */
    r->fde_size = 0;
    for (size_t i = 0; i < n; i++) {
        if (words[i] != seq[i]->insn) {
            return -1;
        }
        if (seq[i]->nops == 0) {
            continue;
        }
        size_t delta = (4 * (i + 1) - last) / r->code_align;
        if (delta > 0x3f
            || r->fde_size + 1 + seq[i]->nops > sizeof(r->fde))
        {
            return -1;
        }
        r->fde[r->fde_size++] = DW_CFA_advance_loc(delta);
        memcpy(r->fde + r->fde_size, seq[i]->ops, seq[i]->nops);
        r->fde_size += seq[i]->nops;
        last = 4 * (i + 1);
    }
    return 0;
}

#else
#  error "perf trampolines: no unwind rules for this architecture's template"
#endif

const uint16_t _PyPerf_elf_machine = ELF_MACHINE;

/* Where copy k of the template starts, from the .eh_frame's first byte:
   before the table, or inside the range after it. */
static inline int64_t
code_at(size_t k, size_t stride, size_t code_before)
{
    return (int64_t)k * (int64_t)stride - (int64_t)code_before;
}

/* The CIE, at the start of the .eh_frame; its offset. */
static size_t
put_cie(_PyPerfBytes *w, const frame_rules *r)
{
    size_t cie = _PyPerfBytes_BeginUnit(w);
    _PyPerfBytes_U32(w, 0);       /* CIE id */
    _PyPerfBytes_U8(w, 1);        /* version */
    for (const char *a = r->augmentation; *a; a++) {
        _PyPerfBytes_U8(w, (unsigned char)*a);
    }
    _PyPerfBytes_U8(w, 0);
    _PyPerfBytes_U8(w, r->code_align);            /* code alignment factor */
    _PyPerfBytes_U8(w, DATA_ALIGN_MINUS_8);       /* data alignment: -8 */
    _PyPerfBytes_U8(w, r->ra_reg);                /* return address reg */
    _PyPerfBytes_U8(w, 1);                        /* augmentation size */
    _PyPerfBytes_U8(w, DW_EH_PE_pcrel | DW_EH_PE_sdata4);  /* FDE pointers */
    for (size_t i = 0; i < r->cie_size; i++) {
        _PyPerfBytes_U8(w, r->cie[i]);
    }
    close_entry(w, cie);
    return cie;
}

/* The FDE of the copy at `start` (from the .eh_frame's first byte), `size`
   bytes long: one rule change per instruction that changes the frame. */
static void
put_fde(_PyPerfBytes *w, const frame_rules *r, size_t cie, int64_t start,
        size_t size)
{
    size_t fde = _PyPerfBytes_BeginUnit(w);
    _PyPerfBytes_U32(w, (uint32_t)(fde + 4 - cie));           /* CIE pointer */
    /* pc_begin, pcrel: from this field to the copy's first byte */
    _PyPerfBytes_U32(w, (uint32_t)(int32_t)(start - (int64_t)w->n));
    _PyPerfBytes_U32(w, (uint32_t)size);          /* pc_range */
    _PyPerfBytes_U8(w, 0);                        /* augmentation size */
    for (size_t i = 0; i < r->fde_size; i++) {
        _PyPerfBytes_U8(w, r->fde[i]);
    }
    close_entry(w, fde);
}

/* Every other copy's FDE is the same bytes as the first one's (at
   `first`, `fde_size` long), but for its CIE pointer and pc_begin: a copy
   with those two fields patched (an arena has thousands). */
static void
copy_fdes(_PyPerfBytes *w, size_t cie, size_t first, size_t fde_size,
          size_t count, size_t stride, size_t code_before)
{
    for (size_t k = 1; k < count; k++) {
        size_t fde = first + k * fde_size;
        memcpy(w->p + fde, w->p + first, fde_size);
        _PyPerfBytes_Patch32(w, fde + 4, (uint32_t)(fde + 4 - cie));
        _PyPerfBytes_Patch32(w, fde + 8, (uint32_t)(int32_t)(
            code_at(k, stride, code_before) - (int64_t)(fde + 8)));
    }
    w->n = first + count * fde_size;
}

/* .eh_frame_hdr, right after the .eh_frame (`eh_frame_size` bytes): a
   table sorted by address, whose entries are relative to the header's
   first byte. */
static void
put_eh_frame_hdr(_PyPerfBytes *w, size_t eh_frame_size, size_t first,
                 size_t fde_size, size_t count, size_t stride,
                 size_t code_before)
{
    assert(w->n == eh_frame_size);
    _PyPerfBytes_U8(w, 1);        /* version */
    _PyPerfBytes_U8(w, DW_EH_PE_pcrel | DW_EH_PE_sdata4);   /* eh_frame_ptr */
    _PyPerfBytes_U8(w, DW_EH_PE_udata4);                     /* fde_count */
    _PyPerfBytes_U8(w, DW_EH_PE_datarel | DW_EH_PE_sdata4);  /* table */
    _PyPerfBytes_U32(w, (uint32_t)(-(int32_t)(eh_frame_size + 4)));
    _PyPerfBytes_U32(w, (uint32_t)count);
    for (size_t k = 0; k < count; k++) {
        _PyPerfBytes_U32(w, (uint32_t)(int32_t)(
            code_at(k, stride, code_before) - (int64_t)eh_frame_size));
        _PyPerfBytes_U32(w, (uint32_t)((int32_t)(first + k * fde_size)
                                       - (int32_t)eh_frame_size));
    }
}

int
_PyPerfUnwind_Table(_PyPerfKind kind, size_t count, size_t stride,
                    size_t covered, size_t code_before, unsigned char *buf,
                    size_t cap, size_t *eh_frame_size_out,
                    size_t *hdr_size_out)
{
    const unsigned char *code = (const unsigned char *)_PyPerf_Template(kind);
    size_t size = _PyPerf_CodeSize(kind);
    frame_rules r;
    int known;
#ifdef PY_HAVE_PERF_LINES
    if (kind == _PyPerf_LINES) {
        known = lines_template_rules(code, size, &r);
    }
    else
#endif
    {
        known = template_rules(code, size, &r);
    }
    if (known < 0 || covered < size) {
        errno = ENOEXEC;
        return -1;
    }
    /* (a line trampoline's FDE covers its pads too) */
    size = covered;
    /* Every displacement below is a signed 32-bit one. */
    if (count == 0 || code_before > INT32_MAX
        || (count - 1) > (INT32_MAX - code_before) / (stride ? stride : 1)
        || count > (INT32_MAX / 64))
    {
        errno = EOVERFLOW;
        return -1;
    }
    _PyPerfBytes w = {buf, 0, buf != NULL ? cap : 0};
    size_t cie = put_cie(&w, &r);
    size_t first = w.n;
    put_fde(&w, &r, cie, code_at(0, stride, code_before), size);
    size_t fde_size = w.n - first;
    size_t eh_frame_size = first + count * fde_size + 4;
    size_t total = eh_frame_size + 12 + 8 * count;
    *eh_frame_size_out = eh_frame_size;
    *hdr_size_out = total - eh_frame_size;
    if (buf == NULL) {
        return 0;
    }
    if (total > cap) {
        errno = ENOBUFS;
        return -1;
    }
    copy_fdes(&w, cie, first, fde_size, count, stride, code_before);
    _PyPerfBytes_U32(&w, 0);      /* terminator */
    put_eh_frame_hdr(&w, eh_frame_size, first, fde_size, count, stride,
                     code_before);
    assert(w.n == total);
    return 0;
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
