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
 * A slot is never handed out twice in one arena file: a later owner of
 * the same addresses would be misnamed in samples taken before (a dead
 * arena's addresses go to a new file, below).  Each slot has a record,
 * beside the arena: its code object (forgotten when the code object
 * dies), and bits that Python/perf_codes.c keeps there about which
 * backends have been told about it, in which generation of forked
 * children.
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
 * or mapped executable (/tmp mounted noexec, a security policy), every
 * later arena of the process is anonymous, and the failure waits in
 * _PyPerfArena_TakeFileFailure() for the core to warn about once; a lack
 * of room in /tmp makes only the arena at hand anonymous.
 * File arenas double up to 256 KiB of code, so that one file serves
 * thousands of functions.  Handing out a slot of a file arena writes its
 * symbol.
 *
 * No arena is made while the process is short of memory mappings ("Room
 * for mappings" below): new code objects then run without a trampoline.
 *
 * Arenas are never unmapped (nor moved): besides the list (newest first,
 * which the walks over every slot follow), an array sorted by address
 * finds the arena of a trampoline in O(log n) steps, for every code
 * object's death among them, however many arenas a long-running process
 * has made.
 *
 * Dead arenas
 * -----------
 * An arena that hands out no more slots (a newer one exists) and whose
 * code objects have all died is retired: what only live functions need
 * goes.  Its objects for debuggers are unregistered and freed (no frame
 * runs in it any more), and the pages of its slot records (which read
 * back as zeros: no code object) and, for a file arena, of its code are
 * given back with MADV_DONTNEED.  A file's code pages come back from the
 * file, byte for byte, if they are ever read again: a frame whose code
 * object died in its own frame clear returns through its trampoline's
 * last instructions after the death.  An anonymous arena's code would
 * come back as zeros, so it keeps its pages.  The mapping and the file
 * stay until a new file takes the addresses (below).  An arena one of
 * whose frames may still run in a slot whose code object moved to a wider
 * slot (_PyPerfCode_DescribeAll(), at a switch of backends) is never
 * retired.
 *
 * A new file in a dead arena's addresses
 * --------------------------------------
 * A new arena of the size of a dead file arena goes, when it can, into
 * the oldest one's addresses: a new file of the same layout is mapped
 * over the old one's (MAP_FIXED; the old file's tables' addresses were
 * held, without memory, when it was closed).  So the arenas' mappings
 * stay at what the live functions and the dead ones not yet replaced
 * need, however many functions a long-running process makes.  Readers
 * tell the two owners apart: perf by the time of each file's mapping
 * (and of each jitdump record), debuggers by the objects registered now.
 * The map has no times: an arena one of whose slots it names
 * (_PyPerfSlot_Recorded()) is never replaced, and the map names the slots
 * of an arena file only while such files take less than a quarter of
 * /tmp's limit for dead functions' files (Python/perf_kept.c): later arena
 * files are named by themselves alone, which is all perf reads for a
 * file's addresses, and are replaced like any other.  Arenas inherited
 * through fork() count toward the parent's limit, not the child's.
 * Every slot of the new file holds the same bytes at the same address as the
 * old one's, so a frame returning through a dead trampoline while the file is
 * replaced finds the instructions it left; the arena is replaced only some
 * time after it died (a sample taken in that return would take the new owner's
 * name).  Arenas of a fork()'s parent are not the child's to replace.  The old
 * file, mapped no more, joins the replaced files that Python/perf_kept.c
 * keeps in /tmp up to a limit.
 *
 * This file calls only the arena files (Python/perf_elf.c) and the ones
 * kept after them (Python/perf_kept.c), the arenas'
 * objects for debuggers (Python/perf_debugger.c), the symbol names
 * (Python/perf_names.c, to forget a dead code object's) and the writer's
 * reader of small /proc files (Python/perf_file.c).
 */

#include "Python.h"
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <fcntl.h>                // open()
#include <stdlib.h>               // strtol()
#include <string.h>
#include <sys/mman.h>             // mmap()
#include <unistd.h>               // sysconf()

#define ARENA_MAX_SIZE (64 * 1024)
#define FILE_ARENA_MAX_SIZE (256 * 1024)

_PyPerfArena *_PyPerf_arenas;
/* The arena _PyPerfSlot_Next() found the slot in, for _PyPerfSlot_Take(). */
static _PyPerfArena *handing;

/* Retired file arenas a new file may take the addresses of. */
static size_t dead_files;

/* How long after its death an arena's addresses may take a new file: a
   frame returning through a trampoline whose code object died in that
   frame's clear (which may run Python code: weakref callbacks) would
   otherwise be sampled under the new owner's name. */
#define REUSE_AFTER_NS (10 * 1000 * 1000)

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
    int required;                 /* no anonymous arena instead
                                     (_PyPerfArena_RequireFiles()) */
    int pending;
    int err;
    const char *what;
} files = {.use = 1};

void
_PyPerfArena_RequireFiles(int required)
{
    files.required = required;
}

int
_PyPerfArena_FilesInUse(void)
{
    /* (Python/perf_elf.c makes files on 64-bit builds only) */
    return files.use && SIZEOF_VOID_P == 8;
}

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

/* ---- Room for mappings -------------------------------------------------

   A process may have at most vm.max_map_count memory mappings (65,530 by
   default); past it, its own mmap(), malloc() and new threads fail.  An
   arena adds a few (code, the names' tables, slot records, the debuggers'
   image: at most ARENA_MAPPINGS; the kernel merges some).  So a new arena
   is made only while the process would keep 1% of the limit free, and
   while the arenas stay within their share, 1/64 of it (1,023 arenas by
   default: 16 million functions with -X perf, 2.8 million with -X
   perf_jit).  Otherwise, and when an arena's mmap() or allocations fail
   for lack of memory, no arena is made: new functions run without a
   trampoline (the core says so once), and room is looked for again after
   a second, then after twice as long each time, up to a minute; but
   never again once the arenas have their share (they are never
   unmapped). */
#define ARENA_MAPPINGS 5
#define MAPPINGS_SHARE 64
#define ROOM_RETRY_MIN_NS ((int64_t)1000000000)
#define ROOM_RETRY_MAX_NS ((int64_t)64 * 1000000000)

static struct {
    int64_t retry_ns;             /* no arena is made before this */
    int64_t backoff_ns;           /* the next wait, after a refusal */
    int share_taken;              /* the arenas have their share */
    int pending;                  /* a refusal the core has not taken */
    char why[160];
} maps_room;

/* The number of lines of the file at `path`, or -1. */
static long
count_lines(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    char buf[8192];
    long lines = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            close(fd);
            return n < 0 ? -1 : lines;
        }
        for (char *p = buf; (p = memchr(p, '\n', buf + n - p)) != NULL;
             p++)
        {
            lines++;
        }
    }
}

/* The number in the file at `path`, or -1. */
static long
read_number(const char *path)
{
    char buf[32];
    if (_PyPerf_ReadSmallFile(path, buf, sizeof(buf)) <= 0) {
        return -1;
    }
    char *end;
    long v = strtol(buf, &end, 10);
    return end != buf && v > 0 ? v : -1;
}

/* Refuse arenas for a while, for the reason in maps_room.why. */
static void
refuse_arenas(void)
{
    int64_t now = _PyPerf_CoarseNowNs();
    int64_t wait = maps_room.backoff_ns ? maps_room.backoff_ns
                                        : ROOM_RETRY_MIN_NS;
    maps_room.retry_ns = now + wait;
    maps_room.backoff_ns = wait * 2 < ROOM_RETRY_MAX_NS ? wait * 2
                                                        : ROOM_RETRY_MAX_NS;
    maps_room.pending = 1;
}

/* May another arena be mapped?  0, or -1 and ENOMEM.  Arenas are never
   unmapped: once they have their share, no arena is made again. */
static int
room_for_arena(void)
{
    if (maps_room.share_taken) {
        errno = ENOMEM;
        return -1;
    }
    if (maps_room.retry_ns != 0
        && _PyPerf_CoarseNowNs() < maps_room.retry_ns)
    {
        errno = ENOMEM;
        return -1;
    }
    long max = read_number("/proc/sys/vm/max_map_count");
    if (max > 0 && (long)by_addr.n + 1 > max / MAPPINGS_SHARE) {
        PyOS_snprintf(maps_room.why, sizeof(maps_room.why),
                      "the trampolines' arenas have their share of the "
                      "process's memory mappings (%zu arenas, "
                      "vm.max_map_count / %d)", by_addr.n,
                      MAPPINGS_SHARE);
        maps_room.share_taken = 1;
        maps_room.pending = 1;
        errno = ENOMEM;
        return -1;
    }
    long used = max > 0 ? count_lines("/proc/self/maps") : -1;
    if (used >= 0 && used + ARENA_MAPPINGS > max - max / 100) {
        PyOS_snprintf(maps_room.why, sizeof(maps_room.why),
                      "the process has %ld memory mappings of the %ld "
                      "vm.max_map_count allows, and 1%% of them stays "
                      "free for the program", used, max);
        refuse_arenas();
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

int
_PyPerfArena_ShareTaken(void)
{
    return maps_room.share_taken;
}

const char *
_PyPerfArena_TakeRoomFailure(void)
{
    if (!maps_room.pending && !maps_room.share_taken) {
        return NULL;
    }
    maps_room.pending = 0;
    return maps_room.why;
}

/* Anonymous memory for `size` bytes of trampolines `slot_size` apart:
   filled while writable, then read+execute. */
static char *
anonymous_code(size_t size, size_t slot_size, size_t nslots,
               _PyPerfKind kind)
{
    char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        return NULL;
    }
    /* Fresh anonymous pages are zeroed, and so are the gaps. */
    _PyPerf_FillSlots((unsigned char *)mem, nslots, slot_size, kind);
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

static size_t
arena_page_size(void)
{
    static size_t page;
    if (page == 0) {
        long n = sysconf(_SC_PAGESIZE);
        page = n > 0 ? (size_t)n : 4096;
    }
    return page;
}

/* Retire `a` if it is dead (see "Dead arenas" above).  Called from a
   code object's deallocation: keeps errno. */
static void
arena_retire_if_dead(_PyPerfArena *a)
{
    if (a->nlive != 0 || a->retired || a->pinned || a->active) {
        return;
    }
    int saved = errno;
    a->retired = 1;
    a->retired_ns = _PyPerf_CoarseNowNs();
    if (a->range_size != 0 && !a->named_for_good && !a->inherited) {
        dead_files++;
    }
    if (a->image != NULL) {
        _PyPerfImage_Free(a->image);
        a->image = NULL;
    }
    (void)madvise(a->info, a->nslots * sizeof(_PyPerfSlot), MADV_DONTNEED);
    if (a->in_file) {
        /* (the whole private mapping of the file: the kernel maps the
           pages around a faulting one too) */
        uintptr_t page = (uintptr_t)arena_page_size();
        uintptr_t lo = (uintptr_t)a->start & ~(page - 1);
        (void)madvise((void *)lo, a->code_map_size, MADV_DONTNEED);
    }
    errno = saved;
}

/* The arena's file is done with: its addresses are held for a later
   file unless the map names one of them. */
static void
close_file(_PyPerfArena *a)
{
    if (!_PyPerfElf_Close(a->elf, !a->named_for_good, &a->file_name)) {
        a->range_size = 0;
    }
    a->elf = NULL;
    if (a->named_for_good) {
        _PyPerfKept_NamedForGood(a->file_name.bytes);
    }
}

/* The arena that hands out slots `slot_size` apart of template `kind`:
   for the plain template, its newest arena, whatever its slot size; for
   line trampolines, the newest of that size. */
static _PyPerfArena *
active_arena(size_t slot_size, _PyPerfKind kind)
{
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        if (a->active && a->kind == kind
            && (kind == _PyPerf_PLAIN || a->slot_size == slot_size))
        {
            return a;
        }
    }
    return NULL;
}

/* Make `a` the newest arena, and the active one of its kind and size. */
static void
arena_push(_PyPerfArena *a)
{
    _PyPerfArena *old = active_arena(a->slot_size, a->kind);
    a->prev = _PyPerf_arenas;
    a->active = 1;
    _PyPerf_arenas = a;
    maps_room.retry_ns = 0;
    maps_room.backoff_ns = 0;
    if (old != NULL) {
        /* No slot of an arena but the active one is handed out again (its
           slots were too close for the backend, or it is full). */
        old->active = 0;
        if (old->elf != NULL) {
            close_file(old);
        }
        /* (its functions may all have died while it was active) */
        arena_retire_if_dead(old);
    }
}

/* A new file in the addresses of the oldest dead file arena of `size`
   bytes of slots `slot_size` apart that may have one (see "A new file in
   a dead arena's addresses" above), made the newest arena; NULL if there
   is none or the file cannot be made there. */
static _PyPerfArena *
arena_recycle(size_t size, size_t slot_size, _PyPerfKind kind)
{
    if (dead_files == 0) {
        return NULL;
    }
    int64_t now = _PyPerf_CoarseNowNs();
    _PyPerfArena **link = NULL;
    for (_PyPerfArena **l = &_PyPerf_arenas; *l != NULL; l = &(*l)->prev) {
        _PyPerfArena *a = *l;
        if (a->retired && a->range_size != 0 && !a->inherited
            && !a->pinned && !a->named_for_good && a->size == size
            && a->slot_size == slot_size && a->kind == kind
            && now - a->retired_ns >= REUSE_AFTER_NS)
        {
            /* (newest first: the last one found is the oldest) */
            link = l;
        }
    }
    if (link == NULL) {
        return NULL;
    }
    _PyPerfArena *a = *link;
    uintptr_t page = (uintptr_t)arena_page_size();
    char *at = (char *)((uintptr_t)a->start & ~(page - 1));
    char *mem;
    const char *what;
    int saved = errno;
    _PyPerfElf *elf = _PyPerfElf_New(a->nslots, slot_size, kind, at,
                                     a->range_size, &mem, &what);
    if (elf == NULL) {
        if (!_PyPerf_IsNoRoom(errno)) {
            /* (the range may have been lost: not tried again) */
            a->range_size = 0;
            dead_files--;
        }
        errno = saved;
        return NULL;
    }
    dead_files--;
    /* (the same layout: the code at the same offset of its page) */
    assert(mem == a->start);
    _PyPerfKept_Replaced(&a->file_name);
    a->file_name.path[0] = '\0';
    *link = a->prev;
    /* The records of the old slots: zeros, or whatever a failed madvise()
       left. */
    memset(a->info, 0, a->nslots * sizeof(_PyPerfSlot));
    a->elf = elf;
    a->image = _PyPerfImage_New(mem, a->nslots, slot_size, kind);
    a->nused = 0;
    a->nlive = 0;
    a->retired = 0;
    a->full = 0;
    a->named_by_file_only = 0;
    a->code_map_size = _PyPerfElf_CodeMapSize(elf);
    a->range_size = _PyPerfElf_RangeSize(elf);
    arena_push(a);
    return a;
}

/* A new arena of trampolines `slot_size` bytes apart, of template
   `kind`: twice as large as the last one of its kind and size, up to a
   limit. */
static _PyPerfArena *
arena_new(size_t slot_size, _PyPerfKind kind)
{
    size_t page = arena_page_size();
    size_t max = files.use ? FILE_ARENA_MAX_SIZE : ARENA_MAX_SIZE;
    max = page > max ? page : max;
    _PyPerfArena *last = active_arena(slot_size, kind);
    size_t size = last == NULL ? page : last->size * 2;
    size = size < max ? size : max;
    while (size < slot_size) {
        size *= 2;
    }
    size_t nslots = size / slot_size;
    size_t info_size = nslots * sizeof(_PyPerfSlot);
    if (files.use) {
        _PyPerfArena *reused = arena_recycle(size, slot_size, kind);
        if (reused != NULL) {
            return reused;
        }
    }
    if (room_for_arena() < 0) {
        return NULL;
    }
    _PyPerfArena *a = NULL;
    /* (first: an arena that could not be found would keep the code
       objects of its slots after their death) */
    if (by_addr_reserve() < 0) {
        goto fail;
    }
    a = PyMem_RawCalloc(1, sizeof(_PyPerfArena));
    if (a == NULL) {
        errno = ENOMEM;
        goto fail;
    }
    /* Fresh anonymous pages are zeroed: the slot records need no
       memset. */
    _PyPerfSlot *info = mmap(NULL, info_size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (info == MAP_FAILED) {
        goto fail;
    }
    char *mem = NULL;
    int file_err = files.err;
    if (files.use) {
        const char *what;
        a->elf = _PyPerfElf_New(nslots, slot_size, kind, NULL, 0, &mem,
                                &what);
        int err = errno;
        file_err = err;
        if (a->elf == NULL && err != ENOMEM) {
            /* A lack of room is waited out: this arena is anonymous, the
               next one a file again if there is room.  Any other failure
               is for good.  (A lack of memory fails the anonymous arena
               too, most likely.) */
            files.use = _PyPerf_IsNoRoom(err);
            files.pending = 1;
            files.err = err;
            files.what = what;
        }
    }
    if (a->elf == NULL && files.required) {
        /* No anonymous arena: the map that would name it is not this
           process's.  A lack of room is waited out like a lack of
           mappings; a failure for good is the file's errno. */
        int err = file_err;
        munmap(info, info_size);
        PyMem_RawFree(a);
        if (files.use) {
            PyOS_snprintf(maps_room.why, sizeof(maps_room.why),
                          "no room for a trampoline file in /tmp (%s), and "
                          "the map that would name trampolines outside "
                          "such files is not this process's",
                          strerror(err));
            refuse_arenas();
            err = ENOMEM;
        }
        errno = err != 0 ? err : EPERM;
        return NULL;
    }
    if (a->elf == NULL) {
        mem = anonymous_code(size, slot_size, nslots, kind);
        if (mem == NULL) {
            int saved = errno;
            munmap(info, info_size);
            errno = saved;
            goto fail;
        }
    }
    /* Without it, debuggers see the arena's frames unnamed (and gdb
       stops there); nothing else changes. */
    a->image = _PyPerfImage_New(mem, nslots, slot_size, kind);
    a->in_file = a->elf != NULL;
    a->code_map_size = a->in_file ? _PyPerfElf_CodeMapSize(a->elf) : 0;
    a->range_size = a->in_file ? _PyPerfElf_RangeSize(a->elf) : 0;
    a->start = mem;
    a->size = size;
    a->slot_size = slot_size;
    a->kind = kind;
    a->nslots = nslots;
    a->info = info;
    by_addr_insert(a);
    arena_push(a);
    return a;
fail:;
    int saved = errno;
    PyMem_RawFree(a);
    if (saved == ENOMEM) {
        /* (EAGAIN from mmap() is a locked-memory limit: not ours) */
        PyOS_snprintf(maps_room.why, sizeof(maps_room.why),
                      "no memory for another arena: %s",
                      strerror(saved));
        refuse_arenas();
    }
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
_PyPerfSlot_Recorded(const char *tramp, int for_good)
{
    _PyPerfArena *a = arena_of(tramp);
    if (a == NULL) {
        return _PyPerf_RECORD_NOW;
    }
    if (!for_good || a->named_for_good) {
        return a->in_file ? _PyPerf_RECORD_LATER : _PyPerf_RECORD_NOW;
    }
    if (a->in_file
        && (a->named_by_file_only || !_PyPerfKept_MayNameForGood()))
    {
        a->named_by_file_only = 1;
        return _PyPerf_RECORD_NONE;
    }
    a->named_for_good = 1;
    if (a->in_file && a->elf == NULL && !a->inherited) {
        /* (closed: its file's bytes are known; else they count once it
           is closed) */
        _PyPerfKept_NamedForGood(a->file_name.bytes);
    }
    return a->in_file ? _PyPerf_RECORD_LATER : _PyPerf_RECORD_NOW;
}

/* co_extra free function: the code object is going away. */
void
_PyPerfArena_ForgetCode(void *tramp)
{
    if (tramp == NULL) {
        return;
    }
    _PyPerfArena *a = arena_of(tramp);
    if (a == NULL) {
        return;
    }
    size_t i = (size_t)((const char *)tramp - a->start) / a->slot_size;
    if (i < a->nslots && a->info[i].code != NULL) {
        _PyPerf_ForgetName(a->info[i].code);
        a->info[i].code = NULL;
        a->nlive--;
        arena_retire_if_dead(a);
    }
}

void
_PyPerfArena_CodeMoved(_PyPerfArena *a, size_t i, int running)
{
    if (a->info[i].code != NULL) {
        a->info[i].code = NULL;
        a->nlive--;
    }
    if (running) {
        a->pinned = 1;
    }
}

void
_PyPerfArena_RetireDead(void)
{
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        arena_retire_if_dead(a);
    }
}

_PyPerfSlot *
_PyPerfSlot_Find(const char *tramp, PyCodeObject *code, size_t slot_size,
                 _PyPerfKind kind)
{
    _PyPerfArena *a = arena_of(tramp);
    if (a == NULL) {
        return NULL;
    }
    size_t offset = (size_t)(tramp - a->start);
    size_t i = offset / a->slot_size;
    if (offset % a->slot_size != 0 || i >= a->nused
        || a->info[i].code != code || a->slot_size < slot_size
        || a->kind != kind
        || (kind == _PyPerf_LINES && a->slot_size != slot_size))
    {
        return NULL;
    }
    return &a->info[i];
}

char *
_PyPerfSlot_Next(size_t slot_size, _PyPerfKind kind)
{
    _PyPerfArena *a = active_arena(slot_size, kind);
    if (a != NULL && a->elf != NULL && _PyPerfElf_Reserve(a->elf) < 0) {
        /* No room to name another slot in its file (a full disk, or its
           names' table full): the next arena's file, or anonymous memory
           and the map, with a warning, if that file cannot be made. */
        close_file(a);
        a->full = 1;
    }
    /* Not in an arena inherited through fork(): perf names an anonymous
       mapping after the process that created it, and would look up the
       child's new trampolines in the parent's file. */
    if (a == NULL || a->nused == a->nslots || a->slot_size < slot_size
        || a->inherited || a->full)
    {
        a = arena_new(slot_size, kind);
        if (a == NULL) {
            return NULL;
        }
    }
    handing = a;
    return a->start + a->nused * a->slot_size;
}

size_t
_PyPerfSlot_Covered(const char *tramp)
{
    _PyPerfArena *a = arena_of(tramp);
    return a != NULL ? _PyPerf_Covered(a->slot_size, a->kind)
                     : _PyPerf_CodeSize(_PyPerf_PLAIN);
}

_PyPerfSlot *
_PyPerfSlot_Take(PyCodeObject *code)
{
    _PyPerfArena *a = handing;
    if (a->elf != NULL || a->image != NULL) {
        char name[_PyPerf_NAME_MAX + 1];
        size_t file_at;
        size_t len = _PyPerf_SymbolName(code, name, &file_at);
        /* A failure leaves the slot without a name there; the backends'
           own files, on the same /tmp, will say why. */
        const unsigned char *rows = NULL;
        if (a->elf != NULL
            && _PyPerfElf_Name(a->elf, a->nused, code, name, len,
                               file_at) == 0)
        {
            /* (a line trampoline's rows, which the debuggers' objects
               copy) */
            rows = _PyPerfElf_Rows(a->elf, a->nused);
        }
        if (a->image != NULL) {
            (void)_PyPerfImage_Name(a->image, a->nused, code, name, len,
                                    file_at, rows);
        }
    }
    if (a->elf != NULL) {
        if (a->nused + 1 == a->nslots) {
            close_file(a);
        }
    }
    _PyPerfSlot *info = &a->info[a->nused++];
    info->code = code;
    a->nlive++;
    return info;
}

void
_PyPerfArena_SetTmpLimit(int64_t limit)
{
    _PyPerfKept_SetLimit(limit);
}

int
_PyPerfArena_Seal(void)
{
    int sealed = 0;
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        if (!a->active || a->elf == NULL || a->nused == 0) {
            /* (a file that names nothing yet stays open for names) */
            continue;
        }
        close_file(a);
        a->full = 1;
        sealed = 1;
    }
    return sealed;
}

void
_PyPerfArena_MarkInherited(void)
{
    dead_files = 0;
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        a->inherited = 1;
        if (a->elf != NULL) {
            _PyPerfElf_Drop(a->elf);
            a->elf = NULL;
        }
    }
    _PyPerfElf_AfterFork();
    _PyPerfKept_AfterFork();
}

void
_PyPerfArena_ForgetCodes(void)
{
    _PyPerf_ForgetName(NULL);
    dead_files = 0;
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        if (!a->retired) {
            for (size_t i = 0; i < a->nused; i++) {
                a->info[i].code = NULL;
            }
        }
        a->nlive = 0;
        /* Code objects may outlive finalization and keep their
           trampolines (an interpreter initialized again then reads
           them): no arena is retired or replaced from now on. */
        a->pinned = 1;
    }
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
