/*
 * cpython-perf: the jitdump backend (-X perf_jit, PYTHON_PERF_JIT_SUPPORT,
 * sys.activate_stack_trampoline("perf_jit")).
 *
 * Why
 * ---
 * An interpreter built without frame pointers (distributions build
 * theirs so; this project's default build keeps them, build-nofp does
 * not) is unwound by perf with DWARF (--call-graph dwarf): it copies the
 * top of each sampled stack and replays .eh_frame rules over it.  The
 * arena files (Python/perf_elf.c) carry those rules for every trampoline;
 * a trampoline in anonymous memory (the fallback where /tmp is noexec)
 * has none, so the unwinder stops there and a perf map cannot help.  The
 * jitdump format carries what is missing, for any trampoline: its code,
 * its unwind table and its source location, for tools that read only the
 * jitdump.  `perf inject --jit` turns every code load into a small ELF
 * file (jitted-PID-N.so) and points the samples at it.
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
 * produces bytes, and calls only the writer, the symbol names and the
 * unwind table (Python/perf_unwind.c).
 *
 * The unwind table
 * ----------------
 * Every trampoline is a copy of the same template, and perf lays out each
 * generated ELF file the same way, so the unwind data is one constant blob,
 * built once by Python/perf_unwind.c (which derives the rules from the
 * template's bytes and refuses a template it does not know).  This file
 * only says where the blob goes: perf's ELF writer (tools/perf/util/genelf.c)
 * puts the .text at an address that is a multiple of 16, the .eh_frame at
 * the end of the code rounded up to a multiple of 8, and the .eh_frame_hdr
 * directly after the .eh_frame (the record carries them in that order).
 * So the .eh_frame starts round_up(code size, 8) bytes after the code's
 * first byte, not right after its last one: 4 bytes later for the 12-byte
 * x86_64 template with endbr64, the 20-byte aarch64 ones and the 36-byte
 * riscv64 one.
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
 * Line trampolines (-X perf_lines with this backend)
 * --------------------------------------------------
 * A line trampoline's code load is its template and the pads its function
 * can use (Python/perf_lines_eval.h says what they are), with a debug entry
 * per row of its pads (the rows the arena files carry, from
 * _PyPerfLines_Rows()) and an unwind table of its own, whose FDE covers
 * the pads too.  The slot holds the load and, after it, the room for that
 * table in perf's view: perf_codes.c chooses the slot's size with
 * bytes_per_code(), which knows the two templates' tables.
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
} dump;

/* The kernel's id of the calling thread, asked for once per thread and
   process: the thread that forks keeps its cache in the child, where its
   id is a new one (dump.pid is reset by jit_init() in the child). */
static uint32_t
thread_id(void)
{
    static _Thread_local uint32_t tid, tid_pid;
    if (tid_pid != dump.pid) {
        tid = (uint32_t)syscall(SYS_gettid);
        tid_pid = dump.pid;
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


/* ---- The backend -------------------------------------------------------- */

/* perf inject --jit finds the dump through the mmap event of this mapping
   in perf.data.  It must be executable: perf record only records mmap
   events of executable mappings by default. */
static int
map_marker(_PyPerfFile *file, int fd)
{
    if (dump.marker != NULL) {
        /* Inherited from the parent across fork(): it names the parent's
           dump, not ours. */
        munmap(dump.marker, dump.marker_size);
        dump.marker = NULL;
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
    dump.marker = marker;
    dump.marker_size = size;
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

/* A line trampoline's table, for its `code_size` bytes, into `buf`:
   the FDE covers its pads, which its frames' line records point into. */
#ifdef PY_HAVE_PERF_LINES
static int
lines_unwind_info(size_t code_size, unsigned char *buf, size_t cap,
                  size_t *size_out, size_t *hdr_size_out)
{
    size_t eh_frame_size;
    if (_PyPerfUnwind_Table(_PyPerf_LINES, 1, 0, code_size,
                            _Py_SIZE_ROUND_UP(code_size, 8), buf, cap,
                            &eh_frame_size, hdr_size_out) < 0)
    {
        return -1;
    }
    *size_out = eh_frame_size + *hdr_size_out;
    return 0;
}
#endif

/* The template's .eh_frame and .eh_frame_hdr where perf's ELF file puts
   them: round_up(code size, 8) bytes after the code's first byte. */
static int
build_unwind_info(void)
{
    size_t size =
        (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
    size_t eh_frame_size, hdr_size;
    if (_PyPerfUnwind_Table(_PyPerf_PLAIN, 1, 0, size,
                            _Py_SIZE_ROUND_UP(size, 8), dump.unwind,
                            sizeof(dump.unwind), &eh_frame_size,
                            &hdr_size) < 0)
    {
        return -1;
    }
    dump.unwind_size = eh_frame_size + hdr_size;
    dump.eh_frame_hdr_size = hdr_size;
    return 0;
}

static int
jit_init(_PyPerfFile *file)
{
    if (dump.unwind_size == 0 && build_unwind_info() < 0) {
        return -1;
    }
    dump.pid = (uint32_t)getpid();
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
        .elf_mach = _PyPerf_elf_machine,
        .pid = dump.pid,
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

/* The debug entries of a line trampoline: its rows (Python/perf_lines.c),
   each an entry, counted first, then written at `p`. */
typedef struct {
    unsigned char *p;             /* NULL: count only */
    size_t count;
    uint64_t addr;
    const char *fname;
    size_t fname_len;
} debug_entries;

static int
put_debug_entry(void *arg, size_t at, int64_t line)
{
    debug_entries *d = (debug_entries *)arg;
    d->count++;
    if (d->p != NULL) {
        jit_debug_entry de = {
            .code_addr = d->addr + at,
            .line = (uint32_t)(line > 0 ? line : 0),
            .discrim = 0,
        };
        put(&d->p, &de, sizeof(de));
        put(&d->p, d->fname, d->fname_len);
    }
    return 0;
}

/* The three records of one trampoline, laid out before they are
   written. */
typedef struct {
    char name[_PyPerf_NAME_MAX + 1];
    size_t name_len;              /* with its NUL */
    size_t file_at;               /* where the file name starts in it */
    int lines;                    /* a line trampoline? */
    size_t code_size;             /* of the code load */
    const unsigned char *unwind;
    size_t unwind_size;
    size_t hdr_size;              /* (the .eh_frame_hdr's part of it) */
    unsigned char lines_unwind[256];
    size_t nr_entry;
    size_t total;
} entry_layout;

/* Lay out the records of `co`'s trampoline: a plain one, or with `lines`
   its line trampoline.  0, or -1 with errno set. */
static int
lay_out_entry(entry_layout *e, PyCodeObject *co, int lines)
{
    e->name_len = _PyPerf_SymbolName(co, e->name, &e->file_at) + 1;
#ifdef PY_HAVE_PERF_LINES
    e->lines = lines;
#else
    (void)lines;
    e->lines = 0;
#endif
    e->code_size = _PyPerf_CodeSize(_PyPerf_PLAIN);
    e->unwind = dump.unwind;
    e->unwind_size = dump.unwind_size;
    e->hdr_size = dump.eh_frame_hdr_size;
    e->nr_entry = 2;
#ifdef PY_HAVE_PERF_LINES
    if (lines) {
        e->code_size = _PyPerfLines_Used(co);
        if (lines_unwind_info(e->code_size, e->lines_unwind,
                              sizeof(e->lines_unwind), &e->unwind_size,
                              &e->hdr_size) < 0)
        {
            return -1;
        }
        e->unwind = e->lines_unwind;
        debug_entries count = {NULL, 0, 0, NULL, 0};
        (void)_PyPerfLines_Rows(co, e->code_size, put_debug_entry, &count);
        e->nr_entry = count.count + 1;
    }
#endif
    size_t fname_len = e->name_len - e->file_at;
    e->total = sizeof(jit_debug_info)
               + e->nr_entry * (sizeof(jit_debug_entry) + fname_len)
               + sizeof(jit_unwinding_info) + e->unwind_size
               + sizeof(jit_code_load) + e->name_len + e->code_size;
    return 0;
}

static int
jit_write_entry(_PyPerfFile *file, const void *code, size_t size,
                PyCodeObject *co)
{
    /* The source location.  perf 6.1 turns each entry into a line-table
       row at the entry's offset from code_addr (checked with readelf
       --debug-dump=decodedline on its jitted-*.so: no ELF header offset,
       unlike what some producers add for other perf versions) and ends
       the sequence at the last entry.  A trampoline: its function's first
       line from its first byte to its end, hence two entries.  A line
       trampoline (described by its slot's size, where a plain one is by
       its template's): the rows of its pads, then the end; its code load
       is the template and the pads it can use, and the rest of its slot
       is room for its unwind table in perf's view (perf_codes.c gives it
       a slot with that room, if its records fit in one append). */
    entry_layout e;
    if (lay_out_entry(&e, co, size != _PyPerf_CodeSize(_PyPerf_PLAIN)) < 0) {
        return -1;
    }
    uint64_t now = timestamp();
    uint64_t addr = (uint64_t)(uintptr_t)code;
    size_t fname_len = e.name_len - e.file_at;
    jit_debug_info di = {
        .rec = {JIT_CODE_DEBUG_INFO,
                (uint32_t)(sizeof(di)
                           + e.nr_entry * (sizeof(jit_debug_entry)
                                           + fname_len)),
                now},
        .code_addr = addr,
        .nr_entry = e.nr_entry,
    };
    jit_unwinding_info ui = {
        .rec = {JIT_CODE_UNWINDING_INFO,
                (uint32_t)(sizeof(ui) + e.unwind_size), now},
        .unwind_data_size = e.unwind_size,
        .eh_frame_hdr_size = e.hdr_size,
        .mapped_size = e.unwind_size,
    };
    jit_code_load cl = {
        .rec = {JIT_CODE_LOAD,
                (uint32_t)(sizeof(cl) + e.name_len + e.code_size), now},
        .pid = dump.pid,
        .tid = thread_id(),
        .vma = addr,
        .code_addr = addr,
        .code_size = e.code_size,
        .code_index = dump.code_index,
    };
    assert(e.total == di.rec.total_size + ui.rec.total_size
                      + cl.rec.total_size);

    /* The three records, in the order perf needs them, assembled as one
       append. */
    unsigned char *start = _PyPerfFile_Reserve(file, e.total);
    if (start == NULL) {
        return -1;
    }
    unsigned char *p = start;
    put(&p, &di, sizeof(di));
    debug_entries d = {p, 0, addr, e.name + e.file_at, fname_len};
#ifdef PY_HAVE_PERF_LINES
    if (e.lines) {
        (void)_PyPerfLines_Rows(co, e.code_size, put_debug_entry, &d);
    }
#endif
    if (!e.lines) {
        put_debug_entry(&d, 0, co->co_firstlineno);
    }
    /* the end */
    put_debug_entry(&d, e.code_size, co->co_firstlineno);
    assert(d.count == e.nr_entry);
    p = d.p;
    put(&p, &ui, sizeof(ui));
    put(&p, e.unwind, e.unwind_size);
    put(&p, &cl, sizeof(cl));
    put(&p, e.name, e.name_len);
    put(&p, code, e.code_size);
    assert((size_t)(p - start) == e.total);
    if (_PyPerfFile_Commit(file, e.total) < 0) {
        return -1;
    }
    dump.code_index++;
    return 0;
}

static void
jit_fini(_PyPerfFile *file)
{
    jit_record close_rec = {JIT_CODE_CLOSE, sizeof(jit_record), timestamp()};
    (void)_PyPerfFile_Append(file, &close_rec, sizeof(close_rec));
    if (dump.marker != NULL) {
        munmap(dump.marker, dump.marker_size);
        dump.marker = NULL;
    }
}

/* perf inject maps each code load as [code, code + 8-aligned code size +
   mapped_size) and reads the unwind table from there, so no other
   trampoline may start inside that range: a later load overlapping it
   would cut the earlier one's unwind table off in perf's view. */
static size_t
jit_bytes_per_code(size_t code_size, PyCodeObject *lines_code)
{
    if (lines_code == NULL) {
        return _Py_SIZE_ROUND_UP(code_size, 8) + dump.unwind_size;
    }
    /* A line trampoline whose records do not fit in one append (a long
       function, many rows) could not be described: it gets no slot of
       that kind. */
    entry_layout e;
    if (lay_out_entry(&e, lines_code, 1) < 0 || e.total > PERF_RECORD_MAX) {
        return SIZE_MAX;
    }
    return _Py_SIZE_ROUND_UP(code_size, 8) + e.unwind_size;
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
