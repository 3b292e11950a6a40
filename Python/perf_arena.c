/*
 * cpython-perf: executable memory for perf trampolines.
 *
 * Copies of the trampoline template (Python/asm_trampoline.S) live in
 * arenas of executable memory.  An anonymous arena is mapped writable,
 * filled with as many copies of the template as fit, then made
 * read+execute; it is never writable and executable at once (a file arena
 * is never writable in memory at all), and handing out a trampoline is
 * just taking the next slot.  Slots are 16 bytes apart, or more when the
 * active backend needs room after each trampoline (the jitdump's: 96, see
 * Python/perf_jit_trampoline.c): the caller says how far apart.
 * Trampolines are never reused: a later owner of the same addresses would
 * be misnamed in samples taken before.  Each slot has a record, beside the
 * arena: its code object (forgotten when the code object dies), and bits
 * that Python/perf_codes.c keeps there about which backends have
 * been told about it, in which generation of forked children.
 *
 * Arenas start at one page (enough for start-up) and double up to 64 KiB
 * or one page, whichever is larger (kernels with 64 KiB pages exist), so
 * that a short run does not pay for filling memory it never uses.  A child
 * of fork() puts new trampolines in arenas of its own (perf names an
 * inherited mapping after the parent).
 *
 * An arena is an ELF file of its own when it can be (Python/perf_elf.c:
 * perf then names and unwinds its trampolines from the file, with no
 * inject), and anonymous memory otherwise: when the file cannot be made
 * or mapped executable (/tmp mounted noexec, a security policy, a full
 * disk), every later arena of the process is anonymous, and the failure
 * waits in _PyPerfArena_TakeFileFailure() for the core to warn about once.
 * File arenas double up to 256 KiB of code, so that one file serves
 * thousands of functions.  Handing out a slot of a file arena writes its
 * symbol.
 *
 * Arenas are never unmapped: besides the list (newest first, which the
 * walks over every slot follow), an array sorted by address finds the
 * arena of a trampoline in O(log n) steps, for every code object's death
 * among them, however many arenas a long-running process has made.
 *
 * This file calls only the arena files (Python/perf_elf.c) and the symbol
 * names (Python/perf_names.c, to forget a dead code object's).
 */

#include "Python.h"
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <string.h>
#include <sys/mman.h>             // mmap()
#include <unistd.h>               // sysconf()

#define ARENA_MAX_SIZE (64 * 1024)
#define FILE_ARENA_MAX_SIZE (256 * 1024)

_PyPerfArena *_PyPerf_arenas;

/* Every arena, sorted by start address. */
static struct {
    _PyPerfArena **items;
    size_t n;
    size_t cap;
} by_addr;

/* Room in by_addr for one more arena; 0, or -1 and errno. */
static int
by_addr_reserve(void)
{
    if (by_addr.n < by_addr.cap) {
        return 0;
    }
    size_t cap = by_addr.cap ? by_addr.cap * 2 : 16;
    _PyPerfArena **items = PyMem_RawRealloc(by_addr.items,
                                            cap * sizeof(*items));
    if (items == NULL) {
        errno = ENOMEM;
        return -1;
    }
    by_addr.items = items;
    by_addr.cap = cap;
    return 0;
}

/* The index of the first arena in by_addr that starts above `p`. */
static size_t
by_addr_above(const char *p)
{
    size_t lo = 0, hi = by_addr.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (by_addr.items[mid]->start <= p) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo;
}

/* Add `a` (after by_addr_reserve()). */
static void
by_addr_insert(_PyPerfArena *a)
{
    size_t i = by_addr_above(a->start);
    memmove(&by_addr.items[i + 1], &by_addr.items[i],
            (by_addr.n - i) * sizeof(by_addr.items[0]));
    by_addr.items[i] = a;
    by_addr.n++;
}

/* The arena whose memory holds `p`, or NULL.  The newest first: most code
   objects die young. */
static _PyPerfArena *
arena_of(const char *p)
{
    _PyPerfArena *newest = _PyPerf_arenas;
    if (newest != NULL && p >= newest->start
        && p < newest->start + newest->size)
    {
        return newest;
    }
    size_t i = by_addr_above(p);
    if (i == 0) {
        return NULL;
    }
    _PyPerfArena *a = by_addr.items[i - 1];
    return p < a->start + a->size ? a : NULL;
}

/* Arena files: whether they are used, and the failure that turned them
   off, until the core takes it. */
static struct {
    int use;                      /* 1 while they work, 0 after the first
                                     failure */
    int pending;
    int err;
    const char *what;
} files = {.use = 1};

int
_PyPerfArena_TakeFileFailure(const char **what)
{
    if (!files.pending) {
        return 0;
    }
    files.pending = 0;
    *what = files.what;
    return files.err;
}

/* Anonymous memory for `size` bytes of trampolines `slot_size` apart:
   filled while writable, then read+execute. */
static char *
anonymous_code(size_t size, size_t slot_size, size_t nslots)
{
    char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        return NULL;
    }
    /* Fresh anonymous pages are zeroed, and so are the gaps. */
    _PyPerf_FillSlots((unsigned char *)mem, nslots, slot_size);
    if (mprotect(mem, size, PROT_READ | PROT_EXEC) < 0) {
        int saved = errno;
        munmap(mem, size);
        errno = saved;
        return NULL;
    }
#if defined(__GNUC__) || defined(__clang__)
    __builtin___clear_cache(mem, mem + size);
#else
#  error "a compiler that can flush the instruction cache is needed here"
#endif
    return mem;
}

/* A new arena of trampolines `slot_size` bytes apart. */
static _PyPerfArena *
arena_new(size_t slot_size)
{
    static size_t page;
    if (page == 0) {
        long n = sysconf(_SC_PAGESIZE);
        page = n > 0 ? (size_t)n : 4096;
    }
    size_t max = files.use ? FILE_ARENA_MAX_SIZE : ARENA_MAX_SIZE;
    max = page > max ? page : max;
    size_t size = _PyPerf_arenas == NULL ? page : _PyPerf_arenas->size * 2;
    size = size < max ? size : max;
    while (size < slot_size) {
        size *= 2;
    }
    size_t nslots = size / slot_size;
    size_t info_size = nslots * sizeof(_PyPerfSlot);
    /* (first: an arena that could not be found would keep the code
       objects of its slots after their death) */
    if (by_addr_reserve() < 0) {
        return NULL;
    }
    _PyPerfArena *a = PyMem_RawCalloc(1, sizeof(_PyPerfArena));
    if (a == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    /* Fresh anonymous pages are zeroed: the slot records need no
       memset. */
    _PyPerfSlot *info = mmap(NULL, info_size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (info == MAP_FAILED) {
        goto fail;
    }
    char *mem = NULL;
    if (files.use) {
        const char *what;
        a->elf = _PyPerfElf_New(nslots, slot_size, &mem, &what);
        if (a->elf == NULL) {
            files.use = 0;
            files.pending = 1;
            files.err = errno;
            files.what = what;
        }
    }
    if (a->elf == NULL) {
        mem = anonymous_code(size, slot_size, nslots);
        if (mem == NULL) {
            int saved = errno;
            munmap(info, info_size);
            errno = saved;
            goto fail;
        }
    }
    /* Without it, debuggers see the arena's frames unnamed (and gdb
       stops there); nothing else changes. */
    a->image = _PyPerfImage_New(mem, nslots, slot_size);
    a->in_file = a->elf != NULL;
    a->start = mem;
    a->size = size;
    a->slot_size = slot_size;
    a->nslots = nslots;
    a->info = info;
    a->prev = _PyPerf_arenas;
    if (a->prev != NULL && a->prev->elf != NULL) {
        /* No slot of an arena but the newest is handed out again (its
           slots were too close for the backend, or it is full). */
        _PyPerfElf_Close(a->prev->elf);
        a->prev->elf = NULL;
    }
    _PyPerf_arenas = a;
    by_addr_insert(a);
    return a;
fail:;
    int saved = errno;
    PyMem_RawFree(a);
    errno = saved;
    return NULL;
}

_PyPerfSlot *
_PyPerfSlot_Of(const char *tramp)
{
    _PyPerfArena *a = arena_of(tramp);
    if (a == NULL) {
        return NULL;
    }
    size_t i = (size_t)(tramp - a->start) / a->slot_size;
    return i < a->nslots ? &a->info[i] : NULL;
}

int
_PyPerfSlot_InFile(const char *tramp)
{
    _PyPerfArena *a = arena_of(tramp);
    return a != NULL && a->in_file;
}

/* co_extra free function: the code object is going away. */
void
_PyPerfArena_ForgetCode(void *tramp)
{
    if (tramp != NULL) {
        _PyPerfSlot *info = _PyPerfSlot_Of(tramp);
        if (info != NULL) {
            _PyPerf_ForgetName(info->code);
            info->code = NULL;
        }
    }
}

_PyPerfSlot *
_PyPerfSlot_Find(const char *tramp, PyCodeObject *code, size_t slot_size)
{
    _PyPerfArena *a = arena_of(tramp);
    if (a == NULL) {
        return NULL;
    }
    size_t offset = (size_t)(tramp - a->start);
    size_t i = offset / a->slot_size;
    if (offset % a->slot_size != 0 || i >= a->nused
        || a->info[i].code != code || a->slot_size < slot_size)
    {
        return NULL;
    }
    return &a->info[i];
}

char *
_PyPerfSlot_Next(size_t slot_size)
{
    _PyPerfArena *a = _PyPerf_arenas;
    if (a != NULL && a->elf != NULL && _PyPerfElf_Reserve(a->elf) < 0) {
        /* No room to name another slot in its file (a full disk, or its
           names' table full): the next arena's file, or anonymous memory
           and the map, with a warning, if that file cannot be made. */
        _PyPerfElf_Close(a->elf);
        a->elf = NULL;
        a->full = 1;
    }
    /* Not in an arena inherited through fork(): perf names an anonymous
       mapping after the process that created it, and would look up the
       child's new trampolines in the parent's file. */
    if (a == NULL || a->nused == a->nslots || a->slot_size < slot_size
        || a->inherited || a->full)
    {
        a = arena_new(slot_size);
        if (a == NULL) {
            return NULL;
        }
    }
    return a->start + a->nused * a->slot_size;
}

_PyPerfSlot *
_PyPerfSlot_Take(PyCodeObject *code)
{
    _PyPerfArena *a = _PyPerf_arenas;
    if (a->elf != NULL || a->image != NULL) {
        char name[_PyPerf_NAME_MAX + 1];
        size_t file_at;
        size_t len = _PyPerf_SymbolName(code, name, &file_at);
        /* A failure leaves the slot without a name there; the backends'
           own files, on the same /tmp, will say why. */
        if (a->elf != NULL) {
            (void)_PyPerfElf_Name(a->elf, a->nused, code, name, len,
                                  file_at);
        }
        if (a->image != NULL) {
            (void)_PyPerfImage_Name(a->image, a->nused, name, len, file_at,
                                    code->co_firstlineno);
        }
    }
    if (a->elf != NULL) {
        if (a->nused + 1 == a->nslots) {
            _PyPerfElf_Close(a->elf);
            a->elf = NULL;
        }
    }
    _PyPerfSlot *info = &a->info[a->nused++];
    info->code = code;
    return info;
}

void
_PyPerfArena_MarkInherited(void)
{
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        a->inherited = 1;
        if (a->elf != NULL) {
            _PyPerfElf_Drop(a->elf);
            a->elf = NULL;
        }
    }
    _PyPerfElf_AfterFork();
}

void
_PyPerfArena_ForgetCodes(void)
{
    _PyPerf_ForgetName(NULL);
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        for (size_t i = 0; i < a->nused; i++) {
            a->info[i].code = NULL;
        }
    }
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
