/*
 * cpython-perf: the jitdump backend (-X perf_jit, PYTHON_PERF_JIT_SUPPORT,
 * sys.activate_stack_trampoline("perf_jit")).
 *
 * Why
 * ---
 * Distributions build Python without frame pointers, so perf unwinds it
 * with DWARF (--call-graph dwarf): it copies the top of each sampled stack
 * and replays .eh_frame rules over it.  A trampoline copy lives in
 * anonymous memory that has no .eh_frame, so the unwinder stops at the
 * first trampoline and a perf map cannot help.  The jitdump format carries
 * what is missing: for each trampoline, its code, its unwind table and
 * its source location.  `perf inject --jit` turns every code load into a
 * small ELF file (jitted-PID-N.so) and points the samples at it.
 *
 * The file, /tmp/jit-PID.dump (Doc/howto/perf_profiling.rst, File formats)
 * -------------------------------------------------------------------------
 *     header (40 bytes)
 *     for each trampoline, in this order, as one append:
 *         JIT_CODE_DEBUG_INFO      code address -> co_filename:co_firstlineno
 *         JIT_CODE_UNWINDING_INFO  .eh_frame (CIE, FDE, terminator) and
 *                                  .eh_frame_hdr
 *         JIT_CODE_LOAD            name "py::qualname:filename", code bytes
 *     JIT_CODE_CLOSE at normal exit
 *
 * Creating, writing and forking the file are the shared machinery's
 * (Python/perf_file.c, Python/perf_trampoline.c); this backend only
 * produces bytes, and calls only the writer and the symbol names.
 *
 * The unwind table
 * ----------------
 * Every trampoline is a copy of the same template, and perf lays out each
 * generated ELF file the same way, so the unwind data is one constant blob,
 * built once.  perf's ELF writer (tools/perf/util/genelf.c) puts the .text
 * at an address that is a multiple of 16, the .eh_frame at the end of the
 * code rounded up to a multiple of 8, and the .eh_frame_hdr directly after
 * the .eh_frame (the record carries them in that order).  So the .eh_frame
 * starts round_up(code size, 8) bytes after the code's first byte, not
 * right after its last one: 4 bytes later for the 12-byte x86_64 template
 * with endbr64, the 20-byte aarch64 ones and the 36-byte riscv64 one.
 * Every pointer in the blob is relative to its own position
 * (pcrel/datarel), so only the code's size matters.  The FDE's rules
 * are exact at every instruction boundary of the template; they are derived
 * from its bytes, which are checked first: a template this file does not know
 * is refused rather than described wrongly.
 *
 * Memory: perf inject maps each trampoline together with its unwind data
 * (code rounded up to 8 bytes, then mapped_size bytes), and a neighbour
 * inside that range would cut the table off in perf's view.  So in this
 * mode trampolines are spaced 96 bytes apart instead of 16 on x86_64 (12
 * bytes of code padded to 16, 80 bytes of unwind data: CIE 24, FDE 32,
 * terminator 4, header 20), plus the 16-byte slot record every trampoline
 * has; 112 (128 with PAC) on aarch64 and 144 on riscv64, whose templates
 * and FDEs are longer.  The unwind bytes themselves are only in the file.
 *
 * Per architecture, below: the ELF machine of the header, and how the
 * template's bytes become the CIE's constants and the FDE's rule changes
 * (x86_64 with or without endbr64; aarch64 with or without bti c and
 * paciasp/pacibsp ... autiasp/autibsp; riscv64).
 */

#include "Python.h"
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <string.h>
#include <sys/mman.h>             // mmap()
#include <sys/stat.h>             // fstat()
#include <sys/syscall.h>          // SYS_gettid
#include <time.h>                 // clock_gettime()
#include <unistd.h>

#define JITDUMP_MAGIC 0x4A695444      /* "JiTD" as a little-endian u32 */
#define JITDUMP_VERSION 1

enum {
    JIT_CODE_LOAD = 0,
    JIT_CODE_DEBUG_INFO = 2,
    JIT_CODE_CLOSE = 3,
    JIT_CODE_UNWINDING_INFO = 4,
};

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t total_size;
    uint32_t elf_mach;
    uint32_t pad1;
    uint32_t pid;
    uint64_t timestamp;
    uint64_t flags;
} jit_header;

typedef struct {
    uint32_t id;
    uint32_t total_size;
    uint64_t timestamp;
} jit_record;

typedef struct {
    jit_record rec;
    uint32_t pid;
    uint32_t tid;
    uint64_t vma;
    uint64_t code_addr;
    uint64_t code_size;
    uint64_t code_index;
    /* then the NUL-terminated name and the code bytes */
} jit_code_load;

typedef struct {
    jit_record rec;
    uint64_t code_addr;
    uint64_t nr_entry;
    /* then nr_entry jit_debug_entry, each followed by a file name */
} jit_debug_info;

typedef struct {
    uint64_t code_addr;
    uint32_t line;
    uint32_t discrim;
    /* then the NUL-terminated file name */
} jit_debug_entry;

typedef struct {
    jit_record rec;
    uint64_t unwind_data_size;
    uint64_t eh_frame_hdr_size;
    uint64_t mapped_size;
    /* then unwind_data_size bytes */
} jit_unwinding_info;

_Static_assert(sizeof(jit_header) == 40, "jitdump header is 40 bytes");
_Static_assert(sizeof(jit_code_load) == 56, "JIT_CODE_LOAD header");
_Static_assert(sizeof(jit_debug_entry) == 16, "debug entry header");
_Static_assert(sizeof(jit_unwinding_info) == 40, "unwinding header");

static struct {
    uint32_t pid;                 /* getpid() is a system call: once */
    void *marker;                 /* the mapping perf inject looks for */
    size_t marker_size;
    uint64_t code_index;
    unsigned char unwind[128];    /* .eh_frame then .eh_frame_hdr */
    size_t unwind_size;
    size_t eh_frame_hdr_size;
} jit;

/* The kernel's id of the calling thread, asked for once per thread and
   process: the thread that forks keeps its cache in the child, where its
   id is a new one (jit.pid is reset by jit_init() in the child). */
static uint32_t
thread_id(void)
{
    static _Thread_local uint32_t tid, tid_pid;
    if (tid_pid != jit.pid) {
        tid = (uint32_t)syscall(SYS_gettid);
        tid_pid = jit.pid;
    }
    return tid;
}

static uint64_t
timestamp(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}


/* ---- DWARF bytes -------------------------------------------------------- */

typedef struct {
    unsigned char *p;
    size_t n;
    size_t cap;
} bytes_writer;

static void
put_u8(bytes_writer *w, unsigned int v)
{
    if (w->n < w->cap) {
        w->p[w->n] = (unsigned char)v;
    }
    w->n++;
}

static void
put_u32(bytes_writer *w, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        put_u8(w, (v >> (8 * i)) & 0xff);
    }
}

static void
patch_u32(bytes_writer *w, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        if (at + i < w->cap) {
            w->p[at + i] = (unsigned char)((v >> (8 * i)) & 0xff);
        }
    }
}

/* Pad a CIE or FDE that started at `start` with DW_CFA_nop to pointer
   alignment, then store its length (which excludes the length field). */
static void
close_entry(bytes_writer *w, size_t start)
{
    while ((w->n - start) % 8 != 0) {
        put_u8(w, 0x00);          /* DW_CFA_nop */
    }
    patch_u32(w, start, (uint32_t)(w->n - start - 4));
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

/* The rules of the template's `size` bytes at `code`, or -1 when the
   template is not the one described here. */
static int
template_rules(const unsigned char *code, size_t size, frame_rules *r)
{
    size_t e = 0;
    if (size >= sizeof(endbr64)
        && memcmp(code, endbr64, sizeof(endbr64)) == 0)
    {
        e = sizeof(endbr64);
    }
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
    /* CIE: CFA = rsp + 8, return address at CFA - 8. */
    *r = (frame_rules){
        .augmentation = "zR",
        .code_align = 1,
        .ra_reg = DWARF_RA,
        .cie = {DW_CFA_def_cfa, DWARF_RSP, 8, DW_CFA_offset(DWARF_RA), 1},
        .cie_size = 5,
    };
    memcpy(r->fde, fde, sizeof(fde));
    r->fde[0] = DW_CFA_advance_loc(e + 1);
    r->fde_size = sizeof(fde);
    return 0;
}

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
#  error "PY_HAVE_PERF_TRAMPOLINE is defined but this file has no unwind rules for this architecture's template"
#endif

/* Build the unwind blob for the template, or fail with errno = ENOEXEC
   when the template is not the one this table describes. */
static int
build_unwind_info(void)
{
    const unsigned char *code =
        (const unsigned char *)_Py_trampoline_func_start;
    size_t size =
        (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
    frame_rules r;
    if (template_rules(code, size, &r) < 0) {
        errno = ENOEXEC;
        return -1;
    }

    /* Where perf's ELF file has the .eh_frame, from the code's start. */
    size_t eh_frame_at = (size + 7) & ~(size_t)7;
    bytes_writer w = {jit.unwind, 0, sizeof(jit.unwind)};

    /* CIE */
    size_t cie = w.n;
    put_u32(&w, 0);               /* length, patched */
    put_u32(&w, 0);               /* CIE id */
    put_u8(&w, 1);                /* version */
    for (const char *a = r.augmentation; *a; a++) {
        put_u8(&w, (unsigned char)*a);
    }
    put_u8(&w, 0);
    put_u8(&w, r.code_align);     /* code alignment factor */
    put_u8(&w, DATA_ALIGN_MINUS_8);   /* data alignment factor: -8 */
    put_u8(&w, r.ra_reg);         /* return address register */
    put_u8(&w, 1);                /* augmentation data length */
    put_u8(&w, DW_EH_PE_pcrel | DW_EH_PE_sdata4);   /* FDE pointers */
    for (size_t i = 0; i < r.cie_size; i++) {
        put_u8(&w, r.cie[i]);
    }
    close_entry(&w, cie);

    /* FDE: one rule change per instruction that changes the frame. */
    size_t fde = w.n;
    put_u32(&w, 0);               /* length, patched */
    put_u32(&w, (uint32_t)(fde + 4 - cie));         /* CIE pointer */
    /* pc_begin, pcrel: the code starts eh_frame_at bytes before this
       .eh_frame */
    put_u32(&w, (uint32_t)(-(int32_t)(eh_frame_at + w.n)));
    put_u32(&w, (uint32_t)size);  /* pc_range */
    put_u8(&w, 0);                /* augmentation data length */
    for (size_t i = 0; i < r.fde_size; i++) {
        put_u8(&w, r.fde[i]);
    }
    close_entry(&w, fde);
    put_u32(&w, 0);               /* terminator */
    size_t eh_frame_size = w.n;

    /* .eh_frame_hdr, right after the .eh_frame */
    size_t hdr = w.n;
    put_u8(&w, 1);                /* version */
    put_u8(&w, DW_EH_PE_pcrel | DW_EH_PE_sdata4);   /* eh_frame_ptr */
    put_u8(&w, DW_EH_PE_udata4);                    /* fde_count */
    put_u8(&w, DW_EH_PE_datarel | DW_EH_PE_sdata4); /* table */
    put_u32(&w, (uint32_t)(-(int32_t)(eh_frame_size + 4)));
    put_u32(&w, 1);
    /* table entries are relative to the start of .eh_frame_hdr */
    put_u32(&w, (uint32_t)(-(int32_t)(eh_frame_at + eh_frame_size)));
    put_u32(&w, (uint32_t)((int32_t)fde - (int32_t)eh_frame_size));

    if (w.n > w.cap) {
        errno = ENOBUFS;
        return -1;
    }
    jit.unwind_size = w.n;
    jit.eh_frame_hdr_size = w.n - hdr;
    return 0;
}


/* ---- The backend -------------------------------------------------------- */

/* perf inject --jit finds the dump through the mmap event of this mapping
   in perf.data.  It must be executable: perf record only records mmap
   events of executable mappings by default. */
static int
map_marker(_PyPerfFile *file, int fd)
{
    if (jit.marker != NULL) {
        /* Inherited from the parent across fork(): it names the parent's
           dump, not ours. */
        munmap(jit.marker, jit.marker_size);
        jit.marker = NULL;
    }
    size_t size = (size_t)sysconf(_SC_PAGESIZE);
    void *marker = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_PRIVATE,
                        fd, 0);
    if (marker == MAP_FAILED) {
        /* The file is there, with its header, but perf inject would never
           find it.  EPERM (or EACCES) is a file system mounted noexec. */
        _PyPerfFile_SetFailure(
            file, "map",
            errno == EPERM || errno == EACCES
                ? " executable (the marker perf inject looks for; is its "
                  "file system mounted noexec?)"
                : " executable (the marker perf inject looks for)");
        return -1;
    }
    jit.marker = marker;
    jit.marker_size = size;
    return 0;
}

/* perf inject reads no further than a JIT_CODE_CLOSE record: the one a
   finalized interpreter wrote goes when the next one reopens the dump. */
static int
drop_close_record(int fd)
{
    struct stat st;
    jit_record last;
    if (fstat(fd, &st) < 0) {
        return -1;
    }
    if (st.st_size < (off_t)(sizeof(jit_header) + sizeof(last))) {
        return 0;
    }
    off_t at = st.st_size - (off_t)sizeof(last);
    if (pread(fd, &last, sizeof(last), at) != (ssize_t)sizeof(last)) {
        return -1;
    }
    if (last.id == JIT_CODE_CLOSE && last.total_size == sizeof(last)) {
        return ftruncate(fd, at);
    }
    return 0;
}

static int
jit_init(_PyPerfFile *file)
{
    if (jit.unwind_size == 0 && build_unwind_info() < 0) {
        return -1;
    }
    jit.pid = (uint32_t)getpid();
    if (_PyPerfFile_Kept(file)) {
        /* Reopened in the same process (the interpreter was finalized
           and initialized again): the header is there, and so are the
           earlier code loads, which name trampolines that still exist. */
        if (drop_close_record(_PyPerfFile_Fd(file)) < 0) {
            return -1;
        }
        return map_marker(file, _PyPerfFile_Fd(file));
    }
    jit_header h = {
        .magic = JITDUMP_MAGIC,
        .version = JITDUMP_VERSION,
        .total_size = sizeof(jit_header),
        .elf_mach = ELF_MACHINE,
        .pid = jit.pid,
        .timestamp = timestamp(),
        .flags = 0,
    };
    if (_PyPerfFile_Append(file, &h, sizeof(h)) < 0) {
        return -1;
    }
    return map_marker(file, _PyPerfFile_Fd(file));
}

/* Copy `size` bytes to *p and advance it. */
static inline void
put(unsigned char **p, const void *data, size_t size)
{
    memcpy(*p, data, size);
    *p += size;
}

static int
jit_write_entry(_PyPerfFile *file, const void *code, size_t size,
                PyCodeObject *co)
{
    char name[_PyPerf_NAME_MAX + 1];
    size_t file_at;
    size_t name_len = _PyPerf_SymbolName(co, name, &file_at) + 1;
    const char *fname = name + file_at;
    size_t fname_len = name_len - file_at;
    uint64_t now = timestamp();
    uint64_t addr = (uint64_t)(uintptr_t)code;

    /* The source location: the function's first line, from the first
       byte of the trampoline to its end.  perf 6.1 turns each entry into
       a line-table row at the entry's offset from code_addr (checked with
       readelf --debug-dump=decodedline on its jitted-*.so: no ELF header
       offset, unlike what some producers add for other perf versions) and
       ends the sequence at the last entry, hence two entries. */
    jit_debug_info di = {
        .rec = {JIT_CODE_DEBUG_INFO,
                (uint32_t)(sizeof(di)
                           + 2 * (sizeof(jit_debug_entry) + fname_len)),
                now},
        .code_addr = addr,
        .nr_entry = 2,
    };
    jit_unwinding_info ui = {
        .rec = {JIT_CODE_UNWINDING_INFO,
                (uint32_t)(sizeof(ui) + jit.unwind_size), now},
        .unwind_data_size = jit.unwind_size,
        .eh_frame_hdr_size = jit.eh_frame_hdr_size,
        .mapped_size = jit.unwind_size,
    };
    jit_code_load cl = {
        .rec = {JIT_CODE_LOAD,
                (uint32_t)(sizeof(cl) + name_len + size), now},
        .pid = jit.pid,
        .tid = thread_id(),
        .vma = addr,
        .code_addr = addr,
        .code_size = size,
        .code_index = jit.code_index,
    };

    /* The three records, in the order perf needs them, assembled as one
       append. */
    size_t total = di.rec.total_size + ui.rec.total_size + cl.rec.total_size;
    unsigned char *start = _PyPerfFile_Reserve(file, total);
    if (start == NULL) {
        return -1;
    }
    unsigned char *p = start;
    put(&p, &di, sizeof(di));
    for (int i = 0; i < 2; i++) {
        jit_debug_entry de = {
            .code_addr = i == 0 ? addr : addr + size,
            .line = (uint32_t)co->co_firstlineno,
            .discrim = 0,
        };
        put(&p, &de, sizeof(de));
        put(&p, fname, fname_len);
    }
    put(&p, &ui, sizeof(ui));
    put(&p, jit.unwind, jit.unwind_size);
    put(&p, &cl, sizeof(cl));
    put(&p, name, name_len);
    put(&p, code, size);
    assert((size_t)(p - start) == total);
    if (_PyPerfFile_Commit(file, total) < 0) {
        return -1;
    }
    jit.code_index++;
    return 0;
}

static void
jit_fini(_PyPerfFile *file)
{
    jit_record close_rec = {JIT_CODE_CLOSE, sizeof(jit_record), timestamp()};
    (void)_PyPerfFile_Append(file, &close_rec, sizeof(close_rec));
    if (jit.marker != NULL) {
        munmap(jit.marker, jit.marker_size);
        jit.marker = NULL;
    }
}

/* perf inject maps each code load as [code, code + 8-aligned code size +
   mapped_size) and reads the unwind table from there, so no other
   trampoline may start inside that range: a later load overlapping it
   would cut the earlier one's unwind table off in perf's view. */
static size_t
jit_bytes_per_code(size_t code_size)
{
    return ((code_size + 7) & ~(size_t)7) + jit.unwind_size;
}

const _PyPerfBackend _PyPerf_JitDumpBackend = {
    .name = "perf_jit",
    .path_format = "/tmp/jit-%ld.dump",
    .init = jit_init,
    .write_entry = jit_write_entry,
    .fini = jit_fini,
    .bytes_per_code = jit_bytes_per_code,
};

#endif /* PY_HAVE_PERF_TRAMPOLINE */
