/*
 * cpython-perf: executable memory for perf trampolines.
 *
 * Copies of the trampoline template (Python/asm_trampoline.S) live in
 * arenas of executable memory.  An arena is mapped writable, filled with
 * as many copies of the template as fit, then made read+execute; it is
 * never writable and executable at once, and handing out a trampoline is
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
 * Nothing here knows about files.  This file calls nothing else of the
 * subsystem.
 */

#include "Python.h"
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <string.h>
#include <sys/mman.h>             // mmap()
#include <unistd.h>               // sysconf()

#define ARENA_MAX_SIZE (64 * 1024)

_PyPerfArena *_PyPerf_arenas;

/* A new arena of trampolines `slot_size` bytes apart. */
static _PyPerfArena *
arena_new(size_t slot_size)
{
    static size_t page;
    if (page == 0) {
        long n = sysconf(_SC_PAGESIZE);
        page = n > 0 ? (size_t)n : 4096;
    }
    size_t max = page > ARENA_MAX_SIZE ? page : ARENA_MAX_SIZE;
    size_t size = _PyPerf_arenas == NULL ? page : _PyPerf_arenas->size * 2;
    size = size < max ? size : max;
    while (size < slot_size) {
        size *= 2;
    }
    size_t nslots = size / slot_size;
    size_t info_size = nslots * sizeof(_PyPerfSlot);
    _PyPerfArena *a = PyMem_RawCalloc(1, sizeof(_PyPerfArena));
    if (a == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    /* Fresh anonymous pages are zeroed: the slot records need no memset,
       and the gaps between trampolines are zeros. */
    _PyPerfSlot *info = mmap(NULL, info_size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (info == MAP_FAILED) {
        goto fail;
    }
    char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        int saved = errno;
        munmap(info, info_size);
        errno = saved;
        goto fail;
    }
    /* One copy of the template, then doubling copies of the filled part. */
    memcpy(mem, _Py_trampoline_func_start, _PyPerf_CodeSize());
    for (size_t done = 1; done < nslots; done *= 2) {
        size_t n = done < nslots - done ? done : nslots - done;
        memcpy(mem + done * slot_size, mem, n * slot_size);
    }
    if (mprotect(mem, size, PROT_READ | PROT_EXEC) < 0) {
        int saved = errno;
        munmap(mem, size);
        munmap(info, info_size);
        errno = saved;
        goto fail;
    }
    __builtin___clear_cache(mem, mem + size);
    a->start = mem;
    a->size = size;
    a->slot_size = slot_size;
    a->nslots = nslots;
    a->info = info;
    a->prev = _PyPerf_arenas;
    _PyPerf_arenas = a;
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
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        if (tramp >= a->start && tramp < a->start + a->size) {
            return &a->info[(size_t)(tramp - a->start) / a->slot_size];
        }
    }
    return NULL;
}

/* co_extra free function: the code object is going away. */
void
_PyPerfArena_ForgetCode(void *tramp)
{
    if (tramp != NULL) {
        _PyPerfSlot *info = _PyPerfSlot_Of(tramp);
        if (info != NULL) {
            info->code = NULL;
        }
    }
}

_PyPerfSlot *
_PyPerfSlot_Find(const char *tramp, PyCodeObject *code, size_t slot_size)
{
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        if (tramp < a->start || tramp >= a->start + a->size) {
            continue;
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
    return NULL;
}

char *
_PyPerfSlot_Next(size_t slot_size)
{
    _PyPerfArena *a = _PyPerf_arenas;
    /* Not in an arena inherited through fork(): perf names an anonymous
       mapping after the process that created it, and would look up the
       child's new trampolines in the parent's file. */
    if (a == NULL || a->nused == a->nslots || a->slot_size < slot_size
        || a->inherited)
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
    _PyPerfSlot *info = &a->info[a->nused++];
    info->code = code;
    return info;
}

void
_PyPerfArena_MarkInherited(void)
{
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        a->inherited = 1;
    }
}

void
_PyPerfArena_ForgetCodes(void)
{
    for (_PyPerfArena *a = _PyPerf_arenas; a != NULL; a = a->prev) {
        for (size_t i = 0; i < a->nused; i++) {
            a->info[i].code = NULL;
        }
    }
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
