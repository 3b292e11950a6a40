/*
 * cpython-perf: the arena files kept in /tmp after their arenas moved on,
 * within a limit.
 *
 * Why
 * ---
 * A file whose arena's addresses took a new file (Python/perf_arena.c) is
 * mapped no more: only readers after the fact need it (perf report of a
 * recording made while it was mapped, without a copy in perf's build-id
 * cache).  Such replaced files are kept, oldest first out, up to the
 * limit (-X perf_tmp_limit, PYTHON_PERF_TMP_LIMIT; 64 MiB unless set), so
 * that a process that makes functions for months keeps /tmp bounded.  A
 * fork() child leaves its parent's alone.
 *
 * The files whose slots the perf map names are never replaced (the map
 * has no times) and count toward the limit first: the map names the slots
 * of a new file only while those files take less than a quarter of the
 * limit, so that with the map too the files of dead functions stay
 * bounded, and the rest keeps replaced files for reports made afterwards.
 * (The arena layer asks, and tells the bytes of such a file once it is
 * closed.)
 *
 * A file is removed only while its name is still the file that was
 * closed (its device and inode): another process may have taken the name
 * since.  Python/perf_arena.c calls this file; it calls nothing of the
 * subsystem.
 */

#include "Python.h"
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <sys/stat.h>             // lstat()
#include <unistd.h>               // unlink()

static struct {
    int64_t limit;                /* bytes (-1: none) */
    uint64_t named_for_good;      /* bytes of the files the map names */
    /* The replaced files, a ring: `n` from `head`, oldest first. */
    _PyPerfElfName *items;
    size_t head;
    size_t n;
    size_t cap;
    uint64_t bytes;               /* theirs */
} kept = {.limit = 64 * 1024 * 1024};

void
_PyPerfKept_SetLimit(int64_t limit)
{
    kept.limit = limit;
}

/* Remove `f` if its name is still this process's file. */
static void
remove_file(const _PyPerfElfName *f)
{
    struct stat st;
    if (lstat(f->path, &st) == 0 && st.st_dev == f->dev
        && st.st_ino == f->ino)
    {
        (void)unlink(f->path);
    }
}

/* Remove the oldest replaced files while they and the files the map
   names take more than the limit. */
static void
trim(void)
{
    while (kept.limit >= 0 && kept.n > 0
           && kept.bytes + kept.named_for_good > (uint64_t)kept.limit)
    {
        _PyPerfElfName *oldest = &kept.items[kept.head];
        remove_file(oldest);
        kept.bytes -= oldest->bytes;
        kept.head = (kept.head + 1) % kept.cap;
        kept.n--;
    }
}

void
_PyPerfKept_Replaced(const _PyPerfElfName *name)
{
    if (name->path[0] == '\0' || kept.limit < 0) {
        /* (no limit: nothing is ever removed, nothing to keep) */
        return;
    }
    int saved = errno;
    if (kept.n == kept.cap) {
        size_t cap = kept.cap ? kept.cap * 2 : 16;
        _PyPerfElfName *items = PyMem_RawMalloc(cap * sizeof(*items));
        if (items == NULL) {
            /* (nowhere to keep it: it goes now) */
            remove_file(name);
            errno = saved;
            return;
        }
        for (size_t k = 0; k < kept.n; k++) {
            items[k] = kept.items[(kept.head + k) % kept.cap];
        }
        PyMem_RawFree(kept.items);
        kept.items = items;
        kept.head = 0;
        kept.cap = cap;
    }
    kept.items[(kept.head + kept.n) % kept.cap] = *name;
    kept.n++;
    kept.bytes += name->bytes;
    trim();
    errno = saved;
}

int
_PyPerfKept_MayNameForGood(void)
{
    return kept.limit < 0 || kept.named_for_good < (uint64_t)kept.limit / 4;
}

void
_PyPerfKept_NamedForGood(uint64_t bytes)
{
    int saved = errno;
    kept.named_for_good += bytes;
    trim();
    errno = saved;
}

void
_PyPerfKept_AfterFork(void)
{
    /* (no allocator call in a fork() child's handler: the ring stays) */
    kept.head = 0;
    kept.n = 0;
    kept.bytes = 0;
    kept.named_for_good = 0;
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
