/*
 * cpython-perf: arenas of trampolines as ELF files that perf reads by
 * itself.
 *
 * Why
 * ---
 * perf names an address in anonymous memory from /tmp/perf-PID.map, but
 * it cannot unwind through it: there is no unwind table, so
 * `perf record --call-graph dwarf` stops at the first trampoline on an
 * interpreter built without frame pointers.  The jitdump's answer,
 * `perf inject --jit`, writes one ELF file per function afterwards.  perf
 * reads symbols and unwind tables from the *file* behind an executable
 * mapping, though.  So an arena can be such a file from the start: the
 * slots' code, one FDE per slot (every slot is a copy of the same
 * template, so the whole table is known when the arena is made), and a
 * symbol per slot, written when the slot is handed to a code object.
 * perf, hotspot, eu-stack and any other reader of the files behind
 * mappings then name and unwind the trampolines with no inject and no
 * extra recording option.  (Debuggers learn of arenas otherwise:
 * Python/perf_debugger.c.)
 *
 * The file
 * --------
 * /tmp/py-perf-PID-N.so, N counting this process's arena files (not
 * /tmp/perf-*: perf takes any file of that prefix for a perf map).  Its
 * layout is drawn in Python/perf_elf_image.c, which writes its bytes: the
 * headers, .text (the slots) and the unwind tables, mapped read+execute
 * from offset 0 at addresses equal to their offsets; then, from a page of
 * their own, the tables that naming writes (.symtab, the DWARF sections,
 * .strtab), mapped shared and writable right after the code.
 *
 * Naming through memory
 * ---------------------
 * Naming slot i is stores into the tables' mapping, no system call, in
 * the order readers need: its name into .strtab, its line and file (see
 * "Sealing and lines"), symbol i's value and size, then symbol i's first
 * word (name, type, section) in one 8-byte store, so that a reader that
 * loads it whole (libelf copies a section with memcpy, which may not) sees a
 * zero symbol or a whole one that points to a whole name.  The stores
 * reach the file's pages at once: perf, or any reader, reads them, and a
 * process killed at any point leaves them.
 *
 * Every section's size is fixed when the file is made, .strtab's too (the
 * bytes not written yet are a hole, which costs no disk): a reader that
 * read the section headers early (libelf, for perf top or a second
 * report) never finds a name beyond the sizes it read.  Before a slot is
 * handed out, _PyPerfElf_Reserve() makes sure that .strtab's disk is
 * allocated for one more name of any length, 16 KiB at a time and to the
 * end of a page: a store into a hole of a full file system would be
 * SIGBUS (btrfs and NFS do not keep that promise of fallocate()).  When
 * it cannot (a full disk, or the names took more than 256 bytes a slot),
 * the arena hands out no more slots, and the next ones go to a new file
 * or, if that fails too, to anonymous memory and the map, with a
 * warning.
 *
 * Sealing and lines
 * -----------------
 * While names are added, the file has no build-id: its note says so until
 * the file is sealed, when its names are final (Python/perf_seal.c, which
 * also seals it at a crash).  Each slot's source line is in DWARF's line
 * table (Python/perf_lines.c), whose file names are the ends of the
 * symbol names: .debug_line_str is .strtab's bytes.
 *
 * Safety
 * ------
 * The name is predictable and /tmp is shared: the file is created 0600
 * with O_EXCL and O_NOFOLLOW, and a name already taken (a stale file of an
 * earlier process with our pid, a planted symlink, anything) is left
 * alone: the next N is tried.  Existing files are never reused or cut:
 * cutting a file that a live process maps (one with our pid in another
 * pid namespace sharing /tmp) would kill it with SIGBUS.  A file's
 * descriptor and its tables' mapping stay only while its arena has slots
 * to name; a forked child lets go of the ones it inherited (it never
 * names the parent's slots), and before the descriptor allocates disk
 * (once per 16 KiB of names) it is checked to be still the file (a daemon
 * that closes every descriptor may have reused its number).  Truncating
 * or rewriting the file in place while the process runs (`truncate`,
 * `strip`) is its owner's doing and is not guarded against: the process
 * may then fault, or its later names be wrong.
 * Where the mapping cannot be made executable (/tmp mounted noexec, a
 * security policy), the file is removed and the caller falls back to
 * anonymous memory.
 *
 * This file calls the file's bytes (Python/perf_elf_image.c), the line
 * table (Python/perf_lines.c), the sealing (Python/perf_seal.c) and the
 * writer's checks of /tmp (Python/perf_file.c); Python/perf_arena.c calls
 * it.
 */

#include "Python.h"
#include "perf_internal.h"

#if defined(PY_HAVE_PERF_TRAMPOLINE) && SIZEOF_VOID_P == 8

#include <errno.h>
#include <fcntl.h>                // open()
#include <string.h>
#include <sys/mman.h>             // mmap()
#include <sys/stat.h>             // fstat()
#include <unistd.h>

/* Names tried before giving up: stale files of earlier processes with our
   pid (a container's pid 1, restarted with the same /tmp) pile up. */
#define MAX_TRIES 1024
/* .strtab's bytes are allocated on disk this much at a time, ahead of the
   names written there (a write through a mapping into a hole of a full
   file system would be SIGBUS). */
#define STRTAB_CHUNK (16 * 1024)
/* The file's path: "/tmp/py-perf-PID-N.so". */
#define PATH_ROOM _PyPerf_ELF_PATH_ROOM

struct _PyPerfElf {
    int fd;
    dev_t dev;                    /* the file the descriptor must still be */
    ino_t ino;
    char path[PATH_ROOM];
    size_t slot_size;
    _PyPerfKind kind;
    unsigned char *tables;        /* the file from tables_off to its end,
                                     shared, read+write */
    size_t tables_len;
    uint64_t tables_off;
    /* Offsets from `tables`: */
    size_t symtab_off;            /* of symbol 0 */
    size_t debug_off;             /* of .debug_abbrev, the first debug
                                     section */
    _PyPerfLinesLayout lines;     /* the others, from there */
    size_t strtab_off;
    size_t strtab_size;           /* what its section header declares */
    size_t strtab_used;           /* bytes of names written */
    size_t strtab_backed;         /* bytes allocated on disk */
    uint64_t page;
};

static unsigned int files_made;   /* N of the next file */


/* Write all of buf at `off`.  A short write goes on where it stopped:
   the file is ours alone and every byte has its place.  (Appending to a
   map or dump, Python/perf_file.c gives up instead and takes the part
   back: another writer may append between two write()s.) */
static int
write_at(int fd, const void *buf, size_t size, uint64_t off)
{
    const char *p = buf;
    while (size > 0) {
        ssize_t n = pwrite(fd, p, size, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if (n == 0) {
            errno = ENOSPC;
            return -1;
        }
        p += n;
        size -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

/* Allocate `size` bytes of the file at `off` on disk (zeros where
   nothing was written), so that writes through a mapping cannot meet a
   full file system.  (glibc writes zeros on file systems without
   fallocate().)  0, or -1 and errno. */
static int
allocate(int fd, uint64_t off, uint64_t size)
{
    int r;
    do {
        r = posix_fallocate(fd, (off_t)off, (off_t)size);
    } while (r == EINTR);
    if (r != 0) {
        errno = r;
        return -1;
    }
    return 0;
}

/* A new file of ours, open, or -1 and errno.  See "Safety". */
static int
create_file(char *path, size_t path_size)
{
    long pid = (long)getpid();
    for (int tries = 0; tries < MAX_TRIES; tries++) {
        PyOS_snprintf(path, path_size, "/tmp/py-perf-%ld-%u.so", pid,
                      files_made++);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW
                            | O_CLOEXEC, 0600);
        if (fd >= 0) {
            return fd;
        }
        if (errno != EEXIST) {
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

/* The bytes of .strtab (at file offset `off`, `size` bytes) to allocate
   on disk when `used` are written: a chunk more, to the end of a page (a
   write fault reserves the whole page's blocks on some file systems). */
static uint64_t
backed_end(uint64_t off, uint64_t used, uint64_t size, uint64_t page)
{
    uint64_t end = _Py_SIZE_ROUND_UP(off + used + STRTAB_CHUNK, page) - off;
    return end < size ? end : size;
}

/* The file at its full size, a hole but for what is written: the code's
   part and the tail; then disk for .symtab and the first 16 KiB of names
   (*backed).  0, or -1, errno and *what. */
static int
write_file(int fd, const unsigned char *img, const unsigned char *tail,
           const _PyPerfElfLayout *L, uint64_t *backed, const char **what)
{
    *what = "write it";
    if (ftruncate(fd, (off_t)L->file_size) < 0
        || write_at(fd, img, (size_t)L->mapped_end, 0) < 0
        || write_at(fd, tail, (size_t)L->tail_size, L->abbrev_off) < 0)
    {
        return -1;
    }
    *what = "allocate room for its names";
    *backed = backed_end(L->strtab_off, 0, L->strtab_size, L->page);
    if (allocate(fd, L->symtab_off, L->symtab_size) < 0
        || allocate(fd, L->strtab_off, *backed) < 0)
    {
        return -1;
    }
    return 0;
}

/* Let go of `len` bytes of address space at `mem`; with `keep`, hold
   on to the range instead (no access, no memory), for a later file of the
   same layout.  Whether it is held.  (A failed MAP_FIXED may have left a
   hole, which another thread's mmap() can take at once: nothing is
   unmapped after one.) */
static int
release_range(void *mem, size_t len, int keep)
{
    if (!keep) {
        munmap(mem, len);
        return 0;
    }
    return mmap(mem, len, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                -1, 0) != MAP_FAILED;
}

/* The code read+execute, then the tables shared and writable right after
   it, at the addresses their file offsets say (readers that take a
   file's mappings for one module, elfutils', need that): address space
   for both first.  The start, or NULL, errno and *what. */
static char *
map_file(int fd, const _PyPerfElfLayout *L, const char **what)
{
    *what = "map it executable";
    size_t tables_len = (size_t)(L->file_size - L->tables_off);
    size_t len = (size_t)L->map_len + tables_len;
    char *mem = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (mem == MAP_FAILED) {
        return NULL;
    }
    /* (No cache flush: nothing is stored through the code's mapping; the
       kernel keeps instruction caches coherent with the file's pages.) */
    if (mmap(mem, (size_t)L->map_len, PROT_READ | PROT_EXEC,
             MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED)
    {
        goto fail;
    }
    *what = "map it for writing the names";
    if (mmap(mem + L->map_len, tables_len, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED, fd, (off_t)L->tables_off) == MAP_FAILED)
    {
        goto fail;
    }
    return mem;
fail:;
    int saved = errno;
    munmap(mem, len);
    errno = saved;
    return NULL;
}

/* The same in the range `at` of a dead arena's file of the same layout,
   whose tables' addresses were held: the tables first, then the code in
   one step (a frame returning through a dead trampoline meets the same
   bytes in the old file and the new).  A failure leaves the code as it
   is, and the range is not to be used again.  0, or -1, errno and
   *what. */
static int
map_file_at(int fd, const _PyPerfElfLayout *L, char *at, const char **what)
{
    size_t tables_len = (size_t)(L->file_size - L->tables_off);
    *what = "map it for writing the names";
    if (mmap(at + L->map_len, tables_len, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED, fd, (off_t)L->tables_off) == MAP_FAILED)
    {
        return -1;
    }
    *what = "map it executable";
    if (mmap(at, (size_t)L->map_len, PROT_READ | PROT_EXEC,
             MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED)
    {
        int saved = errno;
        (void)release_range(at + L->map_len, tables_len, 1);
        errno = saved;
        return -1;
    }
    return 0;
}

_PyPerfElf *
_PyPerfElf_New(size_t nslots, size_t slot_size, _PyPerfKind kind, char *at,
               size_t at_size, char **code, const char **what)
{
    _PyPerfElfLayout L;
    if (_PyPerfElfImage_Plan(nslots, slot_size, kind, &L, what) < 0) {
        return NULL;
    }
    if (at != NULL && L.map_len + (L.file_size - L.tables_off) != at_size) {
        *what = "lay it out in a dead arena's addresses";
        errno = ERANGE;
        return NULL;
    }
    _PyPerfElf *elf = PyMem_RawCalloc(1, sizeof(_PyPerfElf));
    unsigned char *img = PyMem_RawMalloc((size_t)(L.mapped_end
                                                  + L.tail_size));
    if (elf == NULL || img == NULL) {
        PyMem_RawFree(elf);
        PyMem_RawFree(img);
        *what = "allocate memory for it";
        errno = ENOMEM;
        return NULL;
    }
    unsigned char *tail = img + L.mapped_end;
    int saved;
    *what = "describe the trampoline template's frames in it";
    if (_PyPerfElfImage_PutCode(img, &L) < 0) {
        goto fail_early;
    }

    /* Room for its whole size: what it takes once every slot is
       named. */
    uint64_t spare;
    *what = "find room for it beside /tmp's reserve";
    if (_PyPerf_TmpRoom(-1, L.file_size, &spare) < 0) {
        goto fail_early;
    }
    *what = "create";
    elf->fd = create_file(elf->path, sizeof(elf->path));
    if (elf->fd < 0) {
        goto fail_early;
    }
    _PyPerfElfImage_PutTail(tail, &L);
    uint64_t backed;
    char *mem;
    struct stat st;
    if (write_file(elf->fd, img, tail, &L, &backed, what) < 0) {
        goto fail;
    }
    if (at != NULL) {
        if (map_file_at(elf->fd, &L, at, what) < 0) {
            goto fail;
        }
        mem = at;
    }
    else if ((mem = map_file(elf->fd, &L, what)) == NULL) {
        goto fail;
    }
    if (fstat(elf->fd, &st) < 0) {
        saved = errno;
        size_t tables_len = (size_t)(L.file_size - L.tables_off);
        if (at != NULL) {
            /* (the code stays: the same bytes as the old file's) */
            (void)release_range(mem + L.map_len, tables_len, 1);
        }
        else {
            munmap(mem, (size_t)L.map_len + tables_len);
        }
        errno = saved;
        goto fail;
    }
    PyMem_RawFree(img);
    _PyPerfSeal_AtCrash(elf->fd, st.st_dev, st.st_ino);
    elf->dev = st.st_dev;
    elf->ino = st.st_ino;
    elf->slot_size = slot_size;
    elf->kind = kind;
    elf->tables = (unsigned char *)mem + L.map_len;
    elf->tables_len = (size_t)(L.file_size - L.tables_off);
    elf->tables_off = L.tables_off;
    elf->symtab_off = (size_t)(L.symtab_off - L.tables_off);
    elf->debug_off = (size_t)(L.abbrev_off - L.tables_off);
    elf->lines = L.at;
    elf->strtab_off = (size_t)(L.strtab_off - L.tables_off);
    elf->strtab_size = (size_t)L.strtab_size;
    elf->strtab_used = (size_t)L.strtab_init;
    elf->strtab_backed = (size_t)backed;
    elf->page = L.page;
    *code = mem + L.text_off;
    return elf;

fail:
    saved = errno;
    /* Ours, just made, and held open: gone with its descriptor. */
    (void)unlink(elf->path);
    close(elf->fd);
    errno = saved;
fail_early:
    saved = errno;
    PyMem_RawFree(img);
    PyMem_RawFree(elf);
    errno = saved;
    return NULL;
}

/* (Python/perf_file.c: a descriptor closed behind our back is not ours
   to write to or close.) */
static int
still_ours(_PyPerfElf *elf)
{
    return _PyPerf_KeepIfSameFile(&elf->fd, elf->dev, elf->ino);
}

int
_PyPerfElf_Reserve(_PyPerfElf *elf)
{
    if (_PyPerfSeal_SealedAtCrash(elf->fd)) {
        /* (sealed at a fault that the process survived) */
        errno = EPERM;
        return -1;
    }
    size_t need = elf->strtab_used + _PyPerf_NAME_MAX + 1;
    if (need <= elf->strtab_backed) {
        return 0;
    }
    if (need > elf->strtab_size) {
        /* The slots' names took more than their room (256 bytes each). */
        errno = ENOSPC;
        return -1;
    }
    if (!still_ours(elf)) {
        errno = EBADF;
        return -1;
    }
    size_t end = (size_t)backed_end(elf->tables_off + elf->strtab_off,
                                    need, elf->strtab_size, elf->page);
    uint64_t spare;
    if (_PyPerf_TmpRoom(elf->fd, end - elf->strtab_backed, &spare) < 0
        || allocate(elf->fd, elf->tables_off + elf->strtab_off
                             + elf->strtab_backed,
                    end - elf->strtab_backed) < 0)
    {
        return -1;
    }
    elf->strtab_backed = end;
    return 0;
}

int
_PyPerfElf_Name(_PyPerfElf *elf, size_t i, PyCodeObject *code,
                const char *name, size_t name_len, size_t file_at)
{
    size_t len = name_len + 1;
    size_t name_off = elf->strtab_used;
    if (name_off + len > elf->strtab_backed) {
        /* (_PyPerfElf_Reserve() made room for any name.) */
        errno = ENOSPC;
        return -1;
    }
    /* Through the shared mapping, in the order readers need: the name;
       the slot's line and file (the end of the name); the symbol's value
       and size; then, in one store after the others, its first word,
       which points to the name and makes it a function (a reader that
       loads the word whole sees a zero symbol until then).  See "Naming
       through memory". */
    unsigned char *t = elf->tables;
    memcpy(t + elf->strtab_off + name_off, name, len);
    elf->strtab_used = name_off + len;
    uint32_t file_str = (uint32_t)(name_off + file_at);
    if (elf->kind != _PyPerf_LINES
        || _PyPerfLines_NamePads(t + elf->debug_off, &elf->lines, i,
                                 elf->slot_size, code, file_str) < 0)
    {
        _PyPerfLines_Name(t + elf->debug_off, &elf->lines, i,
                          code->co_firstlineno, file_str);
    }
    _PyPerfElfImage_Name(t + elf->symtab_off, i, elf->slot_size,
                         _PyPerf_Covered(elf->slot_size, elf->kind),
                         (uint32_t)name_off);
    return 0;
}

const unsigned char *
_PyPerfElf_Rows(const _PyPerfElf *elf, size_t i)
{
    if (elf->kind != _PyPerf_LINES) {
        return NULL;
    }
    return _PyPerfLines_SlotRows(elf->tables + elf->debug_off, &elf->lines,
                                 i);
}

int
_PyPerfElf_Close(_PyPerfElf *elf, int keep_range, _PyPerfElfName *name)
{
    int kept = release_range(elf->tables, elf->tables_len, keep_range);
    if (name != NULL) {
        memset(name, 0, sizeof(*name));
    }
    int fd = elf->fd;
    if (still_ours(elf)) {
        _PyPerfSeal_Seal(elf->fd);
    }
    /* (after the seal: a crash in between seals it too) */
    _PyPerfSeal_Forget(fd);
    if (elf->fd >= 0) {
        struct stat st;
        if (name != NULL && fstat(elf->fd, &st) == 0) {
            memcpy(name->path, elf->path, sizeof(name->path));
            name->dev = st.st_dev;
            name->ino = st.st_ino;
            name->bytes = (uint64_t)st.st_blocks * 512;
        }
        close(elf->fd);
    }
    PyMem_RawFree(elf);
    return kept;
}

size_t
_PyPerfElf_CodeMapSize(const _PyPerfElf *elf)
{
    /* (the code's mapping ends where the tables' starts: vaddr ==
       offset) */
    return (size_t)elf->tables_off;
}

size_t
_PyPerfElf_RangeSize(const _PyPerfElf *elf)
{
    return (size_t)elf->tables_off + elf->tables_len;
}

void
_PyPerfElf_Drop(_PyPerfElf *elf)
{
    /* A fork() child handler: no allocator call (tracemalloc's lock may
       be held by a thread that does not exist in the child); the few bytes
       of the record stay.  The parent's file is the parent's to write. */
    _PyPerfSeal_Forget(elf->fd);
    if (elf->tables != NULL) {
        munmap(elf->tables, elf->tables_len);
        elf->tables = NULL;
    }
    if (still_ours(elf)) {
        close(elf->fd);
        elf->fd = -1;
    }
}

void
_PyPerfElf_AfterFork(void)
{
    files_made = 0;
    _PyPerfSeal_AfterFork();
}

#elif defined(PY_HAVE_PERF_TRAMPOLINE)

/* 32-bit targets: no arena files (no template is written for one yet);
   arenas are anonymous. */
_PyPerfElf *
_PyPerfElf_New(size_t Py_UNUSED(nslots), size_t Py_UNUSED(slot_size),
               _PyPerfKind Py_UNUSED(kind), char *Py_UNUSED(at),
               size_t Py_UNUSED(at_size),
               char **Py_UNUSED(code), const char **what)
{
    *what = "make one on this platform";
    errno = ENOSYS;
    return NULL;
}

int
_PyPerfElf_Reserve(_PyPerfElf *Py_UNUSED(elf))
{
    errno = ENOSYS;
    return -1;
}

int
_PyPerfElf_Name(_PyPerfElf *Py_UNUSED(elf), size_t Py_UNUSED(i),
                PyCodeObject *Py_UNUSED(code), const char *Py_UNUSED(name),
                size_t Py_UNUSED(len), size_t Py_UNUSED(file_at))
{
    errno = ENOSYS;
    return -1;
}

const unsigned char *
_PyPerfElf_Rows(const _PyPerfElf *Py_UNUSED(elf), size_t Py_UNUSED(i))
{
    return NULL;
}

int
_PyPerfElf_Close(_PyPerfElf *Py_UNUSED(elf), int Py_UNUSED(keep_range),
                 _PyPerfElfName *name)
{
    if (name != NULL) {
        name->path[0] = '\0';
    }
    return 0;
}

size_t
_PyPerfElf_CodeMapSize(const _PyPerfElf *Py_UNUSED(elf))
{
    return 0;
}

size_t
_PyPerfElf_RangeSize(const _PyPerfElf *Py_UNUSED(elf))
{
    return 0;
}

void
_PyPerfElf_Drop(_PyPerfElf *Py_UNUSED(elf))
{
}

void
_PyPerfElf_AfterFork(void)
{
}

#endif
