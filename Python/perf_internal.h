#ifndef Py_PERF_INTERNAL_H
#define Py_PERF_INTERNAL_H

/* cpython-perf: what the files of the perf trampoline subsystem share
   with each other (Python/perf_trampoline.c has the overview and the map
   of the files).  Not installed, unlike Include/internal/: nothing here is
   an interface of the interpreter.  Every name has the _PyPerf prefix and
   hidden visibility, so that the dynamic symbol table does not grow. */

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

#include "pycore_perf_trampoline.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <pthread.h>
#include <string.h>               // memcpy()
#include <sys/types.h>            // dev_t, ino_t
#include <time.h>                 // clock_gettime()

/* Hidden: the files reach each other's functions and variables without
   going through the dynamic symbol table (in a shared libpython, nor its
   global offset table). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__ELF__)
#  pragma GCC visibility push(hidden)
#  define PERF_INTERNAL_POP_VISIBILITY
#endif

/* Test points: _testinternalcapi can stop a thread at one of the places
   marked TEST_POINT("name"), inside a window between two steps, so that a
   test shows what another thread (or the hook itself) may do there.
   Never set outside tests; none is on the call path. */
extern void (*_PyPerf_test_hook)(const char *where);
/* At start-up: _testinternalcapi finds _PyPerf_test_hook through a
   capsule in the interpreter's dict (_PyPerfTrampoline_TEST_HOOK). */
extern void _PyPerf_PublishTestHook(void);
#define TEST_POINT(where) \
    do { \
        if (_PyPerf_test_hook != NULL) { \
            _PyPerf_test_hook(where); \
        } \
    } while (0)

/* ---- Backends (Python/perf_map.c, Python/perf_jit_trampoline.c) -------

   A backend describes one file format.  The shared machinery owns the
   file (safe creation, appending, fork handling); the backend only turns
   events into bytes and hands them to _PyPerfFile_Append() or
   _PyPerfFile_Reserve()/_PyPerfFile_Commit(). */

/* The trampoline template, Python/asm_trampoline.S: every trampoline is a
   copy of the bytes between these two symbols. */
extern char _Py_trampoline_func_start[];
extern char _Py_trampoline_func_end[];

/* The two templates: the plain one, and the line trampoline of
   -X perf_lines, whose copies are each followed by their function's pads
   (Python/perf_lines_eval.h), and call the second evaluator through the
   pointer in their last 8 bytes. */
typedef enum {
    _PyPerf_PLAIN = 0,
    _PyPerf_LINES = 1,
} _PyPerfKind;
#ifdef PY_HAVE_PERF_LINES
extern char _Py_trampoline_lines_start[];
extern char _Py_trampoline_lines_end[];
/* The second evaluator (patch 0015); weak, so that the series without
   that patch still links (there are no lines then: NULL). */
extern PyObject *_PyPerf_EvalFrameLines(PyThreadState *,
                                        struct _PyInterpreterFrame *, int)
    __attribute__((weak));
#endif

static inline const char *
_PyPerf_Template(_PyPerfKind kind)
{
#ifdef PY_HAVE_PERF_LINES
    if (kind == _PyPerf_LINES) {
        return _Py_trampoline_lines_start;
    }
#endif
    (void)kind;
    return _Py_trampoline_func_start;
}

/* Bytes of a template (a line trampoline's pads are not counted). */
static inline size_t
_PyPerf_CodeSize(_PyPerfKind kind)
{
#ifdef PY_HAVE_PERF_LINES
    if (kind == _PyPerf_LINES) {
        return (size_t)(_Py_trampoline_lines_end - _Py_trampoline_lines_start);
    }
#endif
    (void)kind;
    return (size_t)(_Py_trampoline_func_end - _Py_trampoline_func_start);
}

typedef struct _PyPerfFile _PyPerfFile;

typedef struct {
    /* The name sys.activate_stack_trampoline() accepts. */
    const char *name;
    /* printf format of the file name, taking the pid as its only
       argument, e.g. "/tmp/perf-%ld.map". */
    const char *path_format;
    /* Called once the file is open: write a header, set up markers.
       Returns 0, or -1 with errno set. */
    int (*init)(_PyPerfFile *file);
    /* Describe one trampoline of `size` bytes at `code` for `co` (a line
       trampoline: its slot, and its code is _PyPerfLines_Used(co) bytes).
       Returns 0, or -1 with errno set. */
    int (*write_entry)(_PyPerfFile *file, const void *code, size_t size,
                       PyCodeObject *co);
    /* Called before the file is closed at exit (not after fork). */
    void (*fini)(_PyPerfFile *file);
    /* Address space each trampoline whose code is code_size bytes needs
       for itself, from its first byte, while this backend describes it
       (at least code_size; SIZE_MAX: it cannot be described).
       lines_code: NULL for the plain template, the code object of a
       line trampoline.  Called after init. */
    size_t (*bytes_per_code)(size_t code_size, PyCodeObject *lines_code);
    /* Its records carry no time: an address they name must never get
       another owner (the map's readers take each line as true for the
       whole run). */
    int names_for_good;
} _PyPerfBackend;

extern const _PyPerfBackend _PyPerf_MapBackend;
extern const _PyPerfBackend _PyPerf_JitDumpBackend;

/* ---- Bytes of DWARF and ELF tables (Python/perf_unwind.c and others) --

   Bytes go to p[n], n counting each one; one that would end past `cap`
   is counted but not stored, so that a writer with cap 0 measures what
   the same calls would write.  Values are in the host's byte order: the
   tables describe code of this process, for readers of this machine. */

/* A monotonic clock in nanoseconds, read without a system call (the
   vDSO's coarse clock: a tick's precision, enough to wait a second before
   asking again for room); 0 if it cannot be read. */
static inline int64_t
_PyPerf_CoarseNowNs(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) < 0) {
        return 0;
    }
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct {
    unsigned char *p;
    size_t n;
    size_t cap;
} _PyPerfBytes;

/* Do `size` more bytes fit? */
static inline int
_PyPerfBytes_Fit(const _PyPerfBytes *w, size_t size)
{
    return w->n <= w->cap && size <= w->cap - w->n;
}

static inline void
_PyPerfBytes_Put(_PyPerfBytes *w, const void *src, size_t size)
{
    if (_PyPerfBytes_Fit(w, size)) {
        memcpy(w->p + w->n, src, size);
    }
    w->n += size;
}

static inline void
_PyPerfBytes_Zeros(_PyPerfBytes *w, size_t size)
{
    if (_PyPerfBytes_Fit(w, size)) {
        memset(w->p + w->n, 0, size);
    }
    w->n += size;
}

static inline void
_PyPerfBytes_U8(_PyPerfBytes *w, unsigned int v)
{
    if (w->n < w->cap) {
        w->p[w->n] = (unsigned char)v;
    }
    w->n++;
}

static inline void
_PyPerfBytes_U16(_PyPerfBytes *w, uint16_t v)
{
    _PyPerfBytes_Put(w, &v, sizeof(v));
}

static inline void
_PyPerfBytes_U32(_PyPerfBytes *w, uint32_t v)
{
    _PyPerfBytes_Put(w, &v, sizeof(v));
}

static inline void
_PyPerfBytes_U64(_PyPerfBytes *w, uint64_t v)
{
    _PyPerfBytes_Put(w, &v, sizeof(v));
}

/* An unsigned LEB128. */
static inline void
_PyPerfBytes_Uleb(_PyPerfBytes *w, uint64_t v)
{
    do {
        unsigned int b = v & 0x7f;
        v >>= 7;
        _PyPerfBytes_U8(w, b | (v ? 0x80 : 0));
    } while (v);
}

/* A signed LEB128. */
static inline void
_PyPerfBytes_Sleb(_PyPerfBytes *w, int64_t v)
{
    for (;;) {
        unsigned int b = (unsigned int)v & 0x7f;
        v >>= 7;      /* (arithmetic: GCC and clang, as CPython assumes) */
        if ((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40))) {
            _PyPerfBytes_U8(w, b);
            return;
        }
        _PyPerfBytes_U8(w, b | 0x80);
    }
}

/* Store `v` at p[at], over bytes written or copied there (nothing if
   they would end past `cap`). */
static inline void
_PyPerfBytes_Patch32(_PyPerfBytes *w, size_t at, uint32_t v)
{
    if (at <= w->cap && sizeof(v) <= w->cap - at) {
        memcpy(w->p + at, &v, sizeof(v));
    }
}

/* A DWARF unit (a compile unit, a line program, a CIE or FDE) opens with
   its length, which counts the bytes after that 4-byte field: write the
   field as 0 and return where it is, then store the length once the unit
   is written. */
static inline size_t
_PyPerfBytes_BeginUnit(_PyPerfBytes *w)
{
    size_t start = w->n;
    _PyPerfBytes_U32(w, 0);
    return start;
}

static inline void
_PyPerfBytes_EndUnit(_PyPerfBytes *w, size_t start)
{
    _PyPerfBytes_Patch32(w, start, (uint32_t)(w->n - start - 4));
}

/* ---- The template's unwind table (Python/perf_unwind.c) --------------- */

/* The ELF machine (e_machine) of the template's architecture. */
extern const uint16_t _PyPerf_elf_machine;

/* Write the .eh_frame (a CIE, one FDE per copy, the terminator) and,
   right after it, the .eh_frame_hdr of `count` copies of the template,
   `stride` bytes apart, the first starting `code_before` bytes before the
   .eh_frame, into buf[0:cap), each FDE covering `covered` bytes (the
   template's size, or more for a line trampoline's pads).  Stores the
   two sizes; with `buf` NULL, only
   computes them.  Returns 0, or -1 with errno ENOEXEC (a template whose
   rules this build does not know), ENOBUFS (cap too small) or EOVERFLOW
   (distances beyond 32 bits). */
extern int _PyPerfUnwind_Table(_PyPerfKind kind, size_t count,
                               size_t stride, size_t covered,
                               size_t code_before, unsigned char *buf,
                               size_t cap, size_t *eh_frame_size,
                               size_t *hdr_size);

/* ---- Arena files (Python/perf_elf.c) ---------------------------------

   An arena as an ELF file, /tmp/py-perf-PID-N.so, that perf reads by
   itself: the slots' code mapped read+execute from the file, one FDE per
   slot, a symbol per slot handed out. */
typedef struct _PyPerfElf _PyPerfElf;

/* A closed arena file, by name and identity (removed only while the name
   is still this file's), and the bytes it takes on disk. */
#define _PyPerf_ELF_PATH_ROOM 64
typedef struct {
    char path[_PyPerf_ELF_PATH_ROOM];   /* "" for none */
    dev_t dev;
    ino_t ino;
    uint64_t bytes;
} _PyPerfElfName;

/* Make the file of `nslots` copies of the template `slot_size` bytes apart
   and map it, at `at` if not NULL (the start of the range of a file of
   the same layout that was closed keeping it, `at_size` bytes: the file
   replaces it there; ERANGE if the layouts differ; after a failure other
   than a lack of room the range is not to be used again); *code is the
   first slot.  NULL and errno, with *what the step that failed ("map
   executable", ...: for a warning). */
extern _PyPerfElf *_PyPerfElf_New(size_t nslots, size_t slot_size,
                                  _PyPerfKind kind, char *at, size_t at_size, char **code,
                                  const char **what);
/* Room on disk for one more name, of any length: 0, or -1 and errno
   (a full file system, or the names' table full); then the arena hands
   out no more slots. */
extern int _PyPerfElf_Reserve(_PyPerfElf *elf);
/* Give slot `i` the symbol `name` of `code` (`len` bytes, its file name
   from `file_at`: _PyPerf_SymbolName()), through memory, without a
   system call.  0, or -1 and errno (no room reserved: the slot stays
   without a name). */
extern int _PyPerfElf_Name(_PyPerfElf *elf, size_t i, PyCodeObject *code,
                           const char *name, size_t len, size_t file_at);
/* Slot `i`'s line rows, once _PyPerfElf_Name() named it (NULL but for a
   line trampoline's file): the debuggers' objects copy them. */
extern const unsigned char *_PyPerfElf_Rows(const _PyPerfElf *elf, size_t i);
/* Let go of the file, sealed (it gets its build-id: no name is added
   again), when its arena names no more slots; the code's mapping stays,
   and with
   `keep_range` the tables' addresses too (no access, no memory), for a
   later file in the same range: whether they are held.  With `name`, what
   _PyPerfKept_Replaced() needs later. */
extern int _PyPerfElf_Close(_PyPerfElf *elf, int keep_range,
                            _PyPerfElfName *name);
/* Let go of a file inherited through fork(), the parent's to seal,
   without freeing anything. */
extern void _PyPerfElf_Drop(_PyPerfElf *elf);
/* Bytes of the file's private, read+execute mapping (headers, code,
   unwind tables), which starts on the page of the code. */
extern size_t _PyPerfElf_CodeMapSize(const _PyPerfElf *elf);
/* Bytes of the file's whole range (code, then tables), from the page of
   the code. */
extern size_t _PyPerfElf_RangeSize(const _PyPerfElf *elf);
/* In the child of fork(): its files are numbered from 0 (under its own
   pid). */
extern void _PyPerfElf_AfterFork(void);

/* ---- Source lines of arena files (Python/perf_lines.c) ----------------

   The DWARF 5 sections that give each slot its function's file and first
   line: .debug_abbrev, .debug_info, .debug_aranges and .debug_line, one
   after another.  The line table names files by offsets into
   .debug_line_str, which the arena file makes the same bytes as its
   .strtab. */

/* The compile unit's name: the line table's file 0, and every slot's
   until it is named.  The arena file puts it at offset CU_NAME_STR of
   .debug_line_str, after the empty string. */
#define _PyPerfLines_CU_NAME "py-perf-trampolines"
#define _PyPerfLines_CU_NAME_STR 1
/* Arenas have fewer slots than this (their last file entry's index fits
   in three bytes of ULEB128). */
#define _PyPerfLines_MAX_SLOTS ((size_t)1 << 21)

/* Where the sections start, and the fields that naming a slot rewrites:
   offsets from the start of .debug_abbrev. */
typedef struct {
    size_t info, aranges, line;
    size_t files;                 /* .debug_line's file entry 0 */
    size_t rows;                  /* slot 0's rows */
    size_t block;                 /* the bytes of a slot's rows that
                                     naming it rewrites */
    size_t info_pc, aranges_pc;   /* the compile unit's address, then its
                                     size (.debug_info, .debug_aranges) */
    size_t line_pc;               /* the sequence's address (.debug_line) */
    size_t slot_size;
    size_t filled;                /* slots whose rows are in the sequence */
    size_t line_end;              /* where .debug_line ends now */
    size_t end;                   /* ... and once every slot has rows */
} _PyPerfLinesLayout;

/* The sections for `nslots` slots `slot_size` (at most 65535) bytes apart
   of template `kind` from address `text_addr`, none named yet; a writer
   with cap 0 lays them out. */
extern void _PyPerfLines_Put(_PyPerfBytes *w, size_t nslots,
                             size_t slot_size, _PyPerfKind kind,
                             uint64_t text_addr, _PyPerfLinesLayout *at);
/* The same sections with no slot's rows yet (.debug_line ends at
   at->line_end): they take no more than at->end bytes once
   _PyPerfLines_Fill() has given every slot its rows. */
extern void _PyPerfLines_PutEmpty(_PyPerfBytes *w, size_t nslots,
                                  size_t slot_size, _PyPerfKind kind,
                                  uint64_t text_addr,
                                  _PyPerfLinesLayout *at);
/* Rows for slots at->filled .. `upto` - 1 of the sections at `debug`
   (line 0 until they are named), after the others; .debug_line grows. */
extern void _PyPerfLines_Fill(unsigned char *debug, _PyPerfLinesLayout *at,
                              size_t upto);
/* Can the rows of `code`'s pads go in a line trampoline's slot of
   `slot_size` bytes (its pads and its share of .debug_line)? */
extern int _PyPerfLines_PadsFit(PyCodeObject *code, size_t slot_size);
/* The bytes of `code`'s line trampoline that it runs or stands for: the
   template, then a pad per code unit and one more. */
extern size_t _PyPerfLines_Used(PyCodeObject *code);
/* The rows of `code`'s line trampoline, in address order, to `row` (a
   return of -1 stops them, and is returned): (0, its def line), then
   (T + 2k + 1, code unit k's line) where the line changes, T being the
   template's size, for addresses below `limit`.  Pad k + 1 and the byte
   before it are then on code unit k's line. */
typedef int (*_PyPerfRowFunc)(void *arg, size_t at, int64_t line);
extern int _PyPerfLines_Rows(PyCodeObject *code, size_t limit,
                             _PyPerfRowFunc row, void *arg);
/* Name line trampoline slot `i` (`slot_size` bytes apart) after `code`:
   a row for its `def` line, then one where the line of its pads changes
   (one pad of 2 bytes per code unit after the template; pad k + 1 and the
   byte before it have code unit k's line), in the file at `file_str`.
   -1 (nothing written) if they do not fit. */
extern int _PyPerfLines_NamePads(unsigned char *debug,
                                 const _PyPerfLinesLayout *at, size_t i,
                                 size_t slot_size, PyCodeObject *code,
                                 uint32_t file_str);
/* Name slot `i` in the sections at `debug`, laid out as `at`: its `line`
   (0 or less: none) in the file named by the string at `file_str` of
   .debug_line_str.  Stores only, the line first. */
extern void _PyPerfLines_Name(unsigned char *debug,
                              const _PyPerfLinesLayout *at, size_t i,
                              int64_t line, uint32_t file_str);
/* Move the compile unit of the sections at `debug` and its one sequence to
   `text_addr`, over `text_size` bytes (its slot 0 is then at
   `text_addr`). */
extern void _PyPerfLines_Place(unsigned char *debug,
                               const _PyPerfLinesLayout *at,
                               uint64_t text_addr, uint64_t text_size);
/* Slot `i`'s rows in the sections at `debug` (at->block bytes), which
   _PyPerfLines_PutRows() copies into sections laid out for the same slot
   size and template. */
extern const unsigned char *_PyPerfLines_SlotRows(
    const unsigned char *debug, const _PyPerfLinesLayout *at, size_t i);
/* Name slot `i` in the sections at `debug` with `rows` (another table's
   block, from _PyPerfLines_SlotRows()) in the file at `file_str` of
   .debug_line_str. */
extern void _PyPerfLines_PutRows(unsigned char *debug,
                                 const _PyPerfLinesLayout *at, size_t i,
                                 const unsigned char *rows,
                                 uint32_t file_str);

/* ---- Sealing arena files (Python/perf_seal.c) ---------------------------

   An arena file's note is no reader's build-id until the file is sealed,
   when its names are final: then it is a GNU build-id, for good. */

/* Where the note is in an arena file (after the ELF header and three
   program headers), and its size (a 20-byte build-id). */
#define _PyPerfSeal_NOTE_OFF 232
#define _PyPerfSeal_NOTE_SIZE 36

/* The note of a new file, not sealed, with a new random build-id. */
extern void _PyPerfSeal_PutNote(unsigned char *note);
/* Seal the file open as `fd`: one pwrite(). */
extern void _PyPerfSeal_Seal(int fd);
/* `fd`, the file `dev`, `ino`, takes names now: a fatal signal seals it
   first (the handlers are installed at the first call). */
extern void _PyPerfSeal_AtCrash(int fd, dev_t dev, ino_t ino);
/* `fd` takes no more names (closed, or let go by a fork() child). */
extern void _PyPerfSeal_Forget(int fd);
/* Was `fd` sealed at a fault that the process survived?  It then takes
   no more names. */
extern int _PyPerfSeal_SealedAtCrash(int fd);
/* In the child of fork(): the parent's file is the parent's to seal. */
extern void _PyPerfSeal_AfterFork(void);

/* ---- The bytes of an arena file (Python/perf_elf_image.c) --------------

   Where each part of an arena file goes, as file offsets, which are
   addresses too (vaddr == offset), and what it holds when made. */
typedef struct {
    size_t nslots;
    size_t slot_size;
    _PyPerfKind kind;
    uint64_t page;
    uint64_t text_off, text_size;     /* .text: the slots */
    uint64_t eh_off, eh_size;         /* .eh_frame */
    uint64_t hdr_off, hdr_size;       /* .eh_frame_hdr */
    uint64_t mapped_end;              /* of the code's part (PT_LOAD) */
    uint64_t map_len;                 /* of its mapping, whole pages */
    uint64_t tables_off;              /* .symtab, first of the tables */
    uint64_t symtab_off, symtab_size;
    uint64_t abbrev_off;              /* the debug sections, from here */
    _PyPerfLinesLayout at;            /* ... at these offsets from it */
    uint64_t shstrtab_off;
    uint64_t shdr_off;                /* the section headers */
    uint64_t strtab_off, strtab_size;
    uint64_t strtab_init;             /* .strtab's bytes written when made */
    uint64_t tail_size;               /* the bytes from abbrev_off to the
                                         end of those */
    uint64_t file_size;
} _PyPerfElfLayout;

/* The layout of a file of `nslots` slots `slot_size` apart.  0, or -1,
   errno and *what (for a warning). */
extern int _PyPerfElfImage_Plan(size_t nslots, size_t slot_size,
                                _PyPerfKind kind, _PyPerfElfLayout *L,
                                const char **what);
/* The code's part, [0, mapped_end), into `img`: the ELF header, the
   program headers, the note (not sealed), .text, .eh_frame,
   .eh_frame_hdr.  0, or -1 and errno. */
extern int _PyPerfElfImage_PutCode(unsigned char *img,
                                   const _PyPerfElfLayout *L);
/* What is written of the tables (tail_size bytes from abbrev_off) into
   `tail`: the debug sections, .shstrtab, the section headers, .strtab's
   first strings.  .symtab and the rest of .strtab are zeros, a hole. */
extern void _PyPerfElfImage_PutTail(unsigned char *tail,
                                    const _PyPerfElfLayout *L);
/* Store slot `i`'s symbol into .symtab at `symtab` (slots `slot_size`
   apart, the symbol `size` bytes), its name at `name_off` of .strtab: its
   value and size, then its first word in one store. */
extern void _PyPerfElfImage_Name(unsigned char *symtab, size_t i,
                                 size_t slot_size, size_t size,
                                 uint32_t name_off);
/* The ELF header of a 64-bit object of this machine: `type` (ET_DYN,
   ET_REL), `shnum` section headers, names in section `shstrndx`; the
   caller sets where the headers are. */
extern void _PyPerfElf_Header(void *ehdr, int type, unsigned int shnum,
                              unsigned int shstrndx);

/* ---- Arena files kept after their arenas (Python/perf_kept.c) ----------

   A file whose arena's addresses took a new file is mapped no more; it is
   kept for reports made afterwards, within /tmp's limit. */

/* The closed file `name` is mapped no more (a new file took its arena's
   addresses): it joins the replaced files, the oldest of which are
   removed while they take more than the limit. */
extern void _PyPerfKept_Replaced(const _PyPerfElfName *name);
/* The bytes replaced files may keep in /tmp (-1: no limit). */
extern void _PyPerfKept_SetLimit(int64_t limit);
/* May a record without a time name the slots of one more arena file?
   Such files are never replaced and count toward the limit first. */
extern int _PyPerfKept_MayNameForGood(void);
/* A closed file of `bytes` whose slots such records name. */
extern void _PyPerfKept_NamedForGood(uint64_t bytes);
/* In the child of fork(): the parent's files are the parent's. */
extern void _PyPerfKept_AfterFork(void);

/* ---- Arenas described to debuggers (Python/perf_debugger.c) ----------

   An arena as two object files in anonymous memory (its unwind table
   and older names; its recent names), registered with GDB's JIT
   interface, which gdb and lldb read, live and from core files.  An
   arena of line trampolines' objects carry their pads' lines too. */
typedef struct _PyPerfImage _PyPerfImage;

/* Describe the arena of `nslots` slots `slot_size` bytes apart at `code`
   and register it.  NULL and errno. */
extern _PyPerfImage *_PyPerfImage_New(const char *code, size_t nslots,
                                      size_t slot_size, _PyPerfKind kind);
/* Name slot `i` (no lower than the last one named) for `code`, after
   `name`, `len` bytes, the one perf shows, whose file name starts at
   `file_at`; debuggers see it at once.  For a line trampoline, `rows`
   are its rows written already (_PyPerfElf_Rows()), or NULL to write
   them.  0, or -1 and errno (the slot stays without a name). */
extern int _PyPerfImage_Name(_PyPerfImage *img, size_t i, PyCodeObject *code,
                             const char *name, size_t len, size_t file_at,
                             const unsigned char *rows);
/* Unregister `img`, whose slots will never run again, and free it. */
extern void _PyPerfImage_Free(_PyPerfImage *img);

/* ---- Trampolines: arenas and slots (Python/perf_arena.c) -------------- */

/* The bytes an FDE or a symbol covers in a slot `slot_size` bytes long
   of template `kind`: the template, and a line trampoline's pads. */
static inline size_t
_PyPerf_Covered(size_t slot_size, _PyPerfKind kind)
{
    return kind == _PyPerf_LINES ? slot_size : _PyPerf_CodeSize(kind);
}

/* Fill `nslots` slots `slot_size` bytes apart at `mem` with copies of
   template `kind`: one copy, then doubling copies of the filled part, so
   that the gap after the first copy is copied too (zeros, the caller's;
   a line trampoline's: its evaluator, then int3 in its pads, which are
   never executed). */
static inline void
_PyPerf_FillSlots(unsigned char *mem, size_t nslots, size_t slot_size,
                  _PyPerfKind kind)
{
    size_t size = _PyPerf_CodeSize(kind);
    memcpy(mem, _PyPerf_Template(kind), size);
#ifdef PY_HAVE_PERF_LINES
    if (kind == _PyPerf_LINES) {
        PyObject *(*eval)(PyThreadState *, struct _PyInterpreterFrame *,
                          int) = _PyPerf_EvalFrameLines;
        memcpy(mem + size - sizeof(eval), &eval, sizeof(eval));
        memset(mem + size, 0xcc, slot_size - size);
    }
#endif
    for (size_t done = 1; done < nslots; done *= 2) {
        size_t n = done < nslots - done ? done : nslots - done;
        memcpy(mem + done * slot_size, mem, n * slot_size);
    }
}

typedef struct {
    PyCodeObject *code;           /* borrowed; NULL once the code dies */
    unsigned char described;      /* bit i: backends[i] has an entry */
    unsigned char running;        /* perf_codes.c: mark_running() */
    unsigned int generation;      /* `described` is of this generation */
} _PyPerfSlot;

typedef struct _PyPerfArena {
    struct _PyPerfArena *prev;
    char *start;                  /* read+execute */
    size_t size;                  /* bytes at start */
    size_t slot_size;             /* distance between two trampolines */
    _PyPerfKind kind;             /* their template */
    size_t nslots;
    size_t nused;                 /* slots handed out */
    int inherited;                /* made by the parent of a fork() */
    int active;                   /* the newest of its kind and slot size:
                                     the one that hands out their slots */
    _PyPerfSlot *info;            /* one per slot */
    _PyPerfElf *elf;              /* its file while slots are left to name */
    int full;                     /* hands out no more slots */
    int in_file;                  /* its code is an arena file's */
    _PyPerfImage *image;          /* what debuggers read, or NULL */
    size_t code_map_size;         /* of a file arena's mapping, from the
                                     page of `start` */
    size_t nlive;                 /* slots whose code object lives */
    int pinned;                   /* a frame may run in a slot whose code
                                     object moved: never retired */
    int retired;                  /* its functions all died: see
                                     perf_arena.c, "Dead arenas" */
    int64_t retired_ns;           /* when it was retired (coarse) */
    int named_for_good;           /* a record without a time (the map's)
                                     names one of its slots */
    int named_by_file_only;       /* the map names none of its slots */
    size_t range_size;            /* of a file arena's addresses held for
                                     a later file (0: none) */
    _PyPerfElfName file_name;     /* its closed file's */
} _PyPerfArena;

/* Every arena, newest first. */
extern _PyPerfArena *_PyPerf_arenas;

/* The next free trampoline, in an arena of this process whose slots are
   at least `slot_size` bytes apart (a new one if need be), not handed out
   yet: _PyPerfSlot_Take() does that.  NULL and errno. */
extern char *_PyPerfSlot_Next(size_t slot_size, _PyPerfKind kind);
/* The bytes trampoline `tramp` covers: its template, and a line
   trampoline's pads. */
extern size_t _PyPerfSlot_Covered(const char *tramp);
/* Seal the newest arena's file (see Python/perf_seal.c), which
   then hands out no more slots: the process is ending, or a recording
   that ends while it runs wants every file it saw final.  Whether there
   was one to seal. */
extern int _PyPerfArena_Seal(void);
/* The limit of _PyPerf_SetTmpLimit(), for the arena files. */
extern void _PyPerfArena_SetTmpLimit(int64_t limit);
/* Hand out the trampoline _PyPerfSlot_Next() returned, to `code`. */
extern _PyPerfSlot *_PyPerfSlot_Take(PyCodeObject *code);
/* The record of the slot `tramp` is in, or NULL if it is in no arena. */
extern _PyPerfSlot *_PyPerfSlot_Of(const char *tramp);
/* What becomes of a record of a trampoline (_PyPerfSlot_Recorded()). */
enum {
    _PyPerf_RECORD_NOW,           /* in anonymous memory: written at once */
    _PyPerf_RECORD_LATER,         /* in an arena file, which names it
                                     whatever becomes of the process: the
                                     record may wait for others */
    _PyPerf_RECORD_NONE,          /* in an arena file whose slots the map
                                     does not name: no record */
};
/* A record of trampoline `tramp` is about to go to a backend's file.  One
   whose records have no time (`for_good`: the map) names its address for
   as long as the file is read, so the arena's addresses never go to
   another file; the map names the slots of arena files only while their
   files take less than a quarter of /tmp's limit
   (_PyPerfKept_MayNameForGood()), later ones are named by their files
   alone.  One of _PyPerf_RECORD_*. */
extern int _PyPerfSlot_Recorded(const char *tramp, int for_good);
/* The record of trampoline `tramp` if it was handed out, is still
   `code`'s, is of template `kind` and at least `slot_size` bytes from the
   next one (exactly, for line trampolines); else NULL. */
extern _PyPerfSlot *_PyPerfSlot_Find(const char *tramp, PyCodeObject *code,
                                     size_t slot_size, _PyPerfKind kind);
/* The co_extra free function of trampolines: `code` is going away. */
extern void _PyPerfArena_ForgetCode(void *tramp);
/* Slot `i` of `a` lost its code object to a wider slot; a frame may
   still run in it if `running`. */
extern void _PyPerfArena_CodeMoved(_PyPerfArena *a, size_t i, int running);
/* Retire the arenas whose functions have all died or moved (after
   _PyPerfCode_DescribeAll() moved some). */
extern void _PyPerfArena_RetireDead(void);
/* In the child of fork(): every arena so far is the parent's. */
extern void _PyPerfArena_MarkInherited(void);
/* Finalization: the code objects die; the slots stay used, and no arena
   is retired or replaced again. */
extern void _PyPerfArena_ForgetCodes(void);
/* Once, after arena files stopped working (later arenas are anonymous):
   the errno, with *what the step that failed; 0 otherwise. */
extern int _PyPerfArena_TakeFileFailure(const char **what);
/* After arenas were refused for lack of room for mappings or memory (new
   functions then run without a trampoline, and room is looked for again
   later): why, once, and always once the arenas have their share of
   mappings (then for good); NULL otherwise. */
extern const char *_PyPerfArena_TakeRoomFailure(void);
/* Have the arenas their share of mappings (no arena is ever made
   again)? */
extern int _PyPerfArena_ShareTaken(void);
/* Do new arenas go in files (not yet failed, and built with them)? */
extern int _PyPerfArena_FilesInUse(void);
/* While `required`, an arena file that cannot be made fails the arena
   (ENOMEM for a lack of room, waited out; else the file's errno) rather
   than giving an anonymous one. */
extern void _PyPerfArena_RequireFiles(int required);

/* ---- Code objects' trampolines (Python/perf_codes.c) ------------------ */

/* A backend, as the core keeps it. */
typedef struct {
    const _PyPerfBackend *backend;
    _PyPerfFile *file;            /* NULL until first activated */
    size_t slot_size;             /* trampoline spacing it needs */
    int bit;                      /* its bit in _PyPerfSlot.described */
    int lines;                    /* activated with lines: code objects
                                     get line trampolines */
    int elsewhere;                /* on without a file: the map's name is
                                     taken (_PyPerfFile_Taken(): our pid
                                     in another pid namespace that shares
                                     /tmp, another user's file), and the
                                     arena files alone name trampolines */
} _PyPerfBackendState;

/* The first activation: take a co_extra index and check the layout.  0,
   or -1 with an exception set. */
extern int _PyPerfCode_Init(void);
/* Finalization: forget the index and the code objects of the slots. */
extern void _PyPerfCode_Fini(void);

/* In the child of fork(): a co_extra index of its own (0), or none left
   (-1: the child then describes everything it inherited at once). */
extern int _PyPerfCode_TakeChildIndex(void);
/* The child moves to files of its own: forget what the parent's files
   described. */
extern void _PyPerfCode_NewGeneration(void);
/* Make `code` a trampoline spaced as `st` needs: the one it inherited, or
   a new one.  NULL and errno. */
extern char *_PyPerfCode_Trampoline(_PyPerfBackendState *st,
                                    PyCodeObject *code, _PyPerfSlot **info);
/* Describe one trampoline to `st` unless it already has.  0, or -1 and
   errno. */
extern int _PyPerfCode_Describe(_PyPerfBackendState *st, const char *tramp,
                                _PyPerfSlot *info);
/* Describe every live trampoline `st` has not seen yet, or only those of
   the frames on this thread's stack (a child of fork()). */
extern int _PyPerfCode_DescribeAll(_PyPerfBackendState *st);
extern int _PyPerfCode_DescribeRunning(_PyPerfBackendState *st);

/* ---- The native stack budget (Python/perf_stack.c) -------------------- */

/* Forget the budget copied for the calls of a thread state (the next
   interpreter numbers its thread states anew). */
extern void _PyPerfStack_Fini(void);

/* ---- The core (Python/perf_trampoline.c), for Python/perf_api.c ------- */

/* If a block of records could not be written where no warning could be
   given (deactivation, fork), the warning now. */
extern void _PyPerf_WarnLostRecords(void);

/* Turn the backend `name` on, with line trampolines if `lines` (1) or
   without (0), or as it is if it is on (-1; else without).  Returns 0 when active, 1 when the file could not be used
   (a warning was issued), -1 with an exception set (ValueError: an unknown
   backend, lines where they are not available). */
extern int _PyPerf_Activate(const char *name, int lines);
/* Turn the active backend off, if any (the main interpreter's). */
extern void _PyPerf_Deactivate(void);
/* The active backend, or NULL. */
extern const _PyPerfBackend *_PyPerf_Active(void);
/* Does the active backend give new calls line trampolines (0 when none
   is active)? */
extern int _PyPerf_ActiveLines(void);
/* Does the active backend write its file (not on without one: see
   _PyPerfBackendState.elsewhere)? */
extern int _PyPerf_ActiveHasFile(void);
/* Seal the trampoline file that still takes names (a live request):
   whether there was one. */
extern int _PyPerf_SealFiles(void);
/* The bytes of trampoline files of dead functions kept in /tmp (-1: no
   limit): -X perf_tmp_limit, PYTHON_PERF_TMP_LIMIT. */
extern void _PyPerf_SetTmpLimit(int64_t limit);
/* A new interpreter: activation is allowed again after finalization. */
extern void _PyPerf_AllowActivation(void);
/* PyUnstable_PerfTrampoline_SetPersistAfterFork(). */
extern void _PyPerf_SetPersistAfterFork(int enable);
/* Give `code` its trampoline now, with a backend active (it has none).
   NULL if it cannot (the backend is then off, and a warning issued). */
extern _PyPerfTrampolineFunc _PyPerf_NewTrampoline(PyCodeObject *code);
/* The perf map, opened if it is not open yet (NULL and errno), and closed
   unless the trampolines write to it.  Callers hold _PyPerf_files_lock. */
extern _PyPerfFile *_PyPerf_OpenMap(void);
extern void _PyPerf_CloseMap(void);

/* ---- The writer (Python/perf_file.c) -------------------------------------

   One file of this process, /tmp/<name>-<pid>.<ext>, opened safely and
   only ever appended to.  Callers of _PyPerfFile_Open() and
   _PyPerfFile_Close() hold _PyPerf_files_lock. */

/* Serializes opening and closing files with the C API's callers, which
   may hold no GIL, and with fork(). */
extern pthread_mutex_t _PyPerf_files_lock;

/* A record is assembled in a private buffer of this many bytes at most,
   then appended to the file with one write(). */
#define PERF_RECORD_MAX (16 * 1024)

/* A closed file (NULL and errno when out of memory). */
extern _PyPerfFile *_PyPerfFile_New(void);
/* Open (or create) the file named by `path_format` (one %ld: the pid)
   for appending, refusing anything but a regular file of ours with one
   link that no other process holds, and emptying a stale one.  0, or -1
   with errno set. */
extern int _PyPerfFile_Open(_PyPerfFile *file, const char *path_format);
/* After a failed _PyPerfFile_Open(): was the name taken by a file that is
   not this process's to write (another live process holds it, or it is
   another user's, or not a regular file with one link)?  Not for a
   symbolic link, nor for a failure to create a file that is not there. */
extern int _PyPerfFile_Taken(const _PyPerfFile *file);
/* The RuntimeWarning of a perf map that _PyPerfFile_Taken() found taken,
   when the backend goes on without it. */
extern void _PyPerfFile_WarnTakenMap(const _PyPerfFile *file,
                                     const char *backend);
/* Let go of the descriptor without touching the file (the child of
   fork(): it is the parent's). */
extern void _PyPerfFile_Drop(_PyPerfFile *file);
/* Unlock and close. */
extern void _PyPerfFile_Close(_PyPerfFile *file);
extern int _PyPerfFile_IsOpen(const _PyPerfFile *file);
/* A RuntimeWarning: "cannot WHAT PATH: <errno>; the BACKEND backend is
   off" (or what _PyPerfFile_SetFailure() said).  Never raises, and keeps
   an exception that is being propagated.  With `file` NULL (no file is
   to blame: executable memory refused, or no file could be allocated)
   the warning is "cannot WHAT: <errno>; ...". */
extern void _PyPerfFile_Warn(const _PyPerfFile *file, const char *what,
                             const char *backend);

/* Append one whole record of at most 16 KiB, with one write(): the file
   holds it once this returns, whatever happens to the process next.  0 or
   -1 (errno; the file still ends with a whole record). */
extern int _PyPerfFile_Append(_PyPerfFile *file, const void *data,
                              size_t size);
/* Or assemble a record in place: Reserve returns room for up to `size`
   bytes (NULL and errno on failure), Commit appends the `size` bytes
   written there (0 or -1 and errno, as Append). */
extern void *_PyPerfFile_Reserve(_PyPerfFile *file, size_t size);
extern int _PyPerfFile_Commit(_PyPerfFile *file, size_t size);
/* While `later` is non-zero, records committed wait in a block of up to
   16 KiB that goes out whole, with one write(), when the next record does
   not fit, when a record is committed with `later` zero, or when the file
   is flushed or closed: for trampolines whose names are also in an arena
   file, which a killed process leaves whole. */
extern void _PyPerfFile_Later(_PyPerfFile *file, int later);
/* The next record asks the file system for room, even within a second
   of a refusal (an activation asks again at once). */
extern void _PyPerfFile_AskForRoom(_PyPerfFile *file);
/* Append `size` bytes of whole records (any number) at `data` with one
   write(), keeping /tmp's reserve, before the records that wait (which
   name trampolines the arena files name too); `data` may be overwritten
   (a record the file had room for only in part is blanked).  0, or -1
   and errno. */
extern int _PyPerfFile_Write(_PyPerfFile *file, char *data, size_t size);
/* Write the records waiting: 0, or -1 and errno (as Append). */
extern int _PyPerfFile_Flush(_PyPerfFile *file);
/* Non-zero if the file already held records of this process when it was
   opened (after Py_Finalize() and Py_Initialize(), say): a header has
   been written. */
extern int _PyPerfFile_Kept(const _PyPerfFile *file);
extern int _PyPerfFile_Fd(const _PyPerfFile *file);
/* /tmp/NAME-PID.EXT (empty before the first _PyPerfFile_Open()). */
extern const char *_PyPerfFile_Path(const _PyPerfFile *file);
/* Is `*fd` still the file (`dev`, `ino`) it was opened as?  It may have
   been closed behind our back (a daemon's closerange() after fork) and its
   number given to another file: nothing of ours goes into that one, and it
   is not ours to close.  If not, *fd becomes -1.  Returns *fd >= 0. */
extern int _PyPerf_KeepIfSameFile(int *fd, dev_t dev, ino_t ino);
/* Read at most `size` - 1 bytes of the file at `path` (a small one of
   /proc) into `buf`, NUL-terminated: the count, or -1 and errno. */
extern ssize_t _PyPerf_ReadSmallFile(const char *path, char *buf,
                                     size_t size);
/* Room for `need` more bytes on the file system of `fd` (-1: /tmp's),
   beside the
   reserve the files leave free for other programs: 0 and in *spare what
   would be left beside the reserve, or -1 and ENOSPC. */
extern int _PyPerf_TmpRoom(int fd, uint64_t need, uint64_t *spare);
/* Is errno `err` a lack of room (a full disk, a quota, a size limit)? */
extern int _PyPerf_IsNoRoom(int err);
/* For init() failing at something other than making the file: the warning
   then says "cannot WHAT PATH DETAIL: <errno>" (static strings). */
extern void _PyPerfFile_SetFailure(_PyPerfFile *file, const char *what,
                                   const char *detail);

/* ---- Symbol names (Python/perf_names.c) ------------------------------- */

/* Write the symbol of a code object, "py::QUALNAME:FILENAME", into buf:
   valid UTF-8 on one line (control characters and line separators
   replaced, lone surrogates spelt \udcXX, cut at a character boundary),
   NUL-terminated, at most _PyPerf_NAME_MAX bytes before the NUL.  Return
   its length and set *file_at to where FILENAME starts.  Never raises
   and runs no Python code. */
#define _PyPerf_NAME_MAX 3072
extern size_t _PyPerf_SymbolName(PyCodeObject *co, char *buf,
                                 size_t *file_at);
/* `co` is going away (NULL: every code object is): a name made for it
   must not be given to another code object at its address. */
extern void _PyPerf_ForgetName(PyCodeObject *co);
/* Write `value` in lowercase hex without leading zeros at `p`, return
   the end (at most 16 bytes; no NUL).  Safe in any thread, without the
   GIL. */
extern char *_PyPerf_PutHex(char *p, uint64_t value);

#ifdef PERF_INTERNAL_POP_VISIBILITY
#  pragma GCC visibility pop
#endif
#endif /* PY_HAVE_PERF_TRAMPOLINE */

/* ---- Observing the core (for Python/perf_live.c) ---------------------

   Called, when set, after the active backend changed (_PyPerf_CHANGED,
   with _PyPerf_files_lock held), at the end of finalization
   (_PyPerf_FINALIZED), and in a child of fork() from
   PyOS_AfterFork_Child(), before the at-fork hooks run (_PyPerf_FORKED;
   also where there are no trampolines).  Python/perf_live.c keeps its
   control block current through it, whoever changed the backend (the sys
   functions, a forked child moving to its own files, a backend turned off
   by a failed write), while the core keeps knowing nothing of it.  The
   observer must not block, take locks or run Python code. */
#define _PyPerf_CHANGED 0
#define _PyPerf_FINALIZED 1
#define _PyPerf_FORKED 2
extern PERF_TRAMPOLINE_HIDDEN void (*_PyPerf_observer)(int event);

/* Python/perf_file.c: a RuntimeWarning of the subsystem, its text
   formatted as by printf() (at most 1 KiB).  Keeps whatever exception is
   being raised; a warning turned into an error is reported as
   unraisable, so this never raises. */
extern PERF_TRAMPOLINE_HIDDEN void _PyPerf_Warn(const char *format, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Python/perf_live.c, from _PyPerfTrampoline_InitFromConfig() (the main
   interpreter's start-up, before -X perf is honoured): the control block
   says "ready", or "disabled" when `disabled` (the user opted out:
   -X disable_remote_debug or PYTHON_DISABLE_REMOTE_DEBUG).  Does nothing
   without Py_REMOTE_DEBUG. */
extern PERF_TRAMPOLINE_HIDDEN void _PyPerfLive_Start(int disabled);

#endif /* !Py_PERF_INTERNAL_H */
