/*
 * cpython-perf: sealing arena files, so that a build-id stands for one set
 * of names.
 *
 * Why
 * ---
 * perf's build-id cache (~/.debug), `perf archive`, debuginfod and the
 * fleet profilers keep the first copy of a file they see under a
 * build-id, for good.  An arena file (Python/perf_elf.c) takes names for
 * as long as its arena has slots to hand out, so while it does it has no
 * build-id: its note's owner is "PyP", type 1, which no reader takes for
 * a build-id (perf, the kernel and elfutils take owner "GNU", type
 * NT_GNU_BUILD_ID).  When the file is let go (its arena full, no room for
 * more names, a newer arena made, at exit and os._exit(), or on a live
 * request: `python -m perf_trampoline seal`, which `record --pid` sends
 * before its recording ends), those 8 bytes become "GNU" and
 * NT_GNU_BUILD_ID in one pwrite(): every name is in the file by then, and
 * it never changes again.  A reader sees the file without a build-id, or
 * with its final one.  perf reads the file of a mapping without a
 * build-id by its path, with today's names (a slot is named before its
 * first call, so a recording never needs a name given later), and caches
 * a sealed file whole.
 *
 * At a crash
 * ----------
 * A process that crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) seals
 * the file that takes names first, in a handler installed when the first
 * file is made, over the action there then (the default, or
 * faulthandler's with -X faulthandler), which it puts back before the
 * signal comes again; a handler installed later (faulthandler.enable())
 * passes on to it.  The kernel's core then holds the sealed note, so a
 * symbol server can be asked for every file.  Not sealed: a stack
 * overflow without an alternate signal stack (no handler can run), the
 * other signals that dump core (SIGQUIT, SIGTRAP, SIGSYS, SIGXCPU), and a
 * process whose faulthandler.disable() put back the default that
 * faulthandler saw.  A runtime whose handler was there first and handles
 * its own faults gets them all the same; the file sealed at the first one
 * takes no more names.  A process killed (SIGKILL) while a file is open
 * leaves it without a build-id: readable by path, never cached; so does a
 * core taken by gcore of a process that runs (gdb names its frames from
 * the debuggers' objects in the core all the same).
 *
 * Python/perf_elf_image.c calls this file for a new file's note, and
 * Python/perf_elf.c for the rest; it calls nothing of the subsystem.
 */

#include "Python.h"
#include "perf_internal.h"

#if defined(PY_HAVE_PERF_TRAMPOLINE) && SIZEOF_VOID_P == 8

#include <elf.h>
#include <errno.h>
#include <signal.h>               // sigaction()
#include <stddef.h>               // offsetof()
#include <string.h>
#include <sys/random.h>           // getrandom()
#include <sys/stat.h>             // fstat()
#include <time.h>                 // clock_gettime()
#include <unistd.h>

#define BUILD_ID_SIZE 20
_Static_assert(_PyPerfSeal_NOTE_SIZE
               == sizeof(Elf64_Nhdr) + 4 + BUILD_ID_SIZE,
               "the note is a header, a 4-byte owner, the build-id");

/* The note's type and owner until the file is sealed (no reader's
   build-id), and after.  The two are 8 bytes at SEAL_OFF. */
#define UNSEALED_TYPE 1
#define UNSEALED_OWNER "PyP"
#define SEAL_OFF (_PyPerfSeal_NOTE_OFF + offsetof(Elf64_Nhdr, n_type))
#define SEAL_SIZE (sizeof(Elf64_Word) + 4)
_Static_assert(offsetof(Elf64_Nhdr, n_type) + sizeof(Elf64_Word)
               == sizeof(Elf64_Nhdr), "the owner follows the type");

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE,
                                    SIGABRT};
#define NCRASH_SIGNALS (sizeof(crash_signals) / sizeof(crash_signals[0]))

static struct {
    unsigned int notes;           /* notes made (build-ids without entropy) */
    /* The file that takes names, for the handler of a fatal signal: its
       descriptor (-1: none), written last, and its identity (a descriptor
       that a daemon closed and reused is not sealed). */
    volatile sig_atomic_t fd;
    dev_t dev;
    ino_t ino;
    /* The process that made it: a child that did not go through
       PyOS_AfterFork_Child() (a fork() from C, posix_spawn's or vfork's)
       has the same descriptor to the parent's file, which it must not
       seal. */
    pid_t pid;
    /* The file was sealed by the handler while it could still take names
       (a handler installed before ours handled the fault, and the process
       goes on): it takes no more. */
    volatile sig_atomic_t sealed;
    int installed;                /* the handlers (once a process) */
    struct sigaction previous[NCRASH_SIGNALS];
} sealing = {.fd = -1, .sealed = -1};

/* `size` random bytes of the build-id. */
static void
build_id(unsigned char *id, size_t size)
{
    ssize_t n = getrandom(id, size, GRND_NONBLOCK);
    if (n != (ssize_t)size) {
        /* No entropy yet (early boot): unique enough for a cache key. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t v[3] = {(uint64_t)getpid() << 32 | sealing.notes,
                         (uint64_t)ts.tv_nsec, (uint64_t)ts.tv_sec};
        memset(id, 0, size);
        memcpy(id, v, sizeof(v) < size ? sizeof(v) : size);
    }
    sealing.notes++;
}

void
_PyPerfSeal_PutNote(unsigned char *note)
{
    Elf64_Nhdr nh = {.n_namesz = 4, .n_descsz = BUILD_ID_SIZE,
                     .n_type = UNSEALED_TYPE};
    memcpy(note, &nh, sizeof(nh));
    memcpy(note + sizeof(nh), UNSEALED_OWNER, 4);
    build_id(note + sizeof(nh) + 4, BUILD_ID_SIZE);
}

/* (Safe in a signal handler: one pwrite().) */
void
_PyPerfSeal_Seal(int fd)
{
    unsigned char sealed[SEAL_SIZE];
    Elf64_Word type = NT_GNU_BUILD_ID;
    memcpy(sealed, &type, sizeof(type));
    memcpy(sealed + sizeof(type), "GNU", 4);
    (void)pwrite(fd, sealed, sizeof(sealed), SEAL_OFF);
}

/* Whether the kernel's signal comes again when the handler returns (the
   faulting instruction runs again), with its own details. */
static int
fault_comes_again(int sig, const siginfo_t *info)
{
    if (info == NULL || info->si_code <= 0) {
        return 0;                 /* sent by a process */
    }
    switch (sig) {
    case SIGILL:
    case SIGFPE:
        return 1;
    case SIGSEGV:
        return info->si_code == SEGV_MAPERR || info->si_code == SEGV_ACCERR;
    case SIGBUS:
        return (info->si_code == BUS_ADRALN || info->si_code == BUS_ADRERR
                || info->si_code == BUS_OBJERR);
    default:
        return 0;
    }
}

static void seal_at_crash(int sig, siginfo_t *info, void *context);

/* Called by a handler installed after ours, which took its place (a
   runtime's that passes on what it does not handle): ours is not the
   process's action. */
static int
called_by_another(int sig)
{
    struct sigaction now;
    return (sigaction(sig, NULL, &now) == 0
            && (!(now.sa_flags & SA_SIGINFO)
                || now.sa_sigaction != seal_at_crash));
}

static void
seal_at_crash(int sig, siginfo_t *info, void *context)
{
    int saved = errno;
    int fd = __atomic_exchange_n(&sealing.fd, -1, __ATOMIC_ACQUIRE);
    struct stat st;
    if (fd >= 0 && getpid() == sealing.pid && fstat(fd, &st) == 0
        && st.st_dev == sealing.dev && st.st_ino == sealing.ino)
    {
        _PyPerfSeal_Seal(fd);
        sealing.sealed = fd;
    }
    size_t k = 0;
    while (k < NCRASH_SIGNALS && crash_signals[k] != sig) {
        k++;
    }
    if (k == NCRASH_SIGNALS) {
        errno = saved;
        return;
    }
    const struct sigaction *prev = &sealing.previous[k];
    int handler = (prev->sa_flags & SA_SIGINFO)
                  || (prev->sa_handler != SIG_DFL
                      && prev->sa_handler != SIG_IGN);
    if (handler && called_by_another(sig)) {
        /* (the caller's action stays the process's: ours passes on) */
        errno = saved;
        if (prev->sa_flags & SA_SIGINFO) {
            prev->sa_sigaction(sig, info, context);
        }
        else {
            prev->sa_handler(sig);
        }
        return;
    }
    /* The action that was there before ours (the default, faulthandler's,
       a runtime's that handles its own faults), for the signal again: a
       fault comes back when the instruction runs again, with its own
       details; anything else is raised again (blocked until this handler
       returns). */
    (void)sigaction(sig, prev, NULL);
    if (!fault_comes_again(sig, info)) {
        (void)raise(sig);
    }
    errno = saved;
}

/* Install the handler in front of a crash signal's action, unless the
   signal is ignored. */
static void
install_handlers(void)
{
    if (sealing.installed) {
        return;
    }
    sealing.installed = 1;
    for (size_t k = 0; k < NCRASH_SIGNALS; k++) {
        struct sigaction now;
        if (sigaction(crash_signals[k], NULL, &now) < 0
            || (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN))
        {
            continue;
        }
        sealing.previous[k] = now;
        struct sigaction ours;
        memset(&ours, 0, sizeof(ours));
        ours.sa_sigaction = seal_at_crash;
        sigemptyset(&ours.sa_mask);
        ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
        (void)sigaction(crash_signals[k], &ours, NULL);
    }
}

/* `fd` is the file that takes names now (-1: none): its identity first,
   the descriptor last, for the handler. */
static void
set_crash_file(int fd, dev_t dev, ino_t ino)
{
    __atomic_store_n(&sealing.fd, -1, __ATOMIC_RELEASE);
    sealing.dev = dev;
    sealing.ino = ino;
    sealing.pid = getpid();
    __atomic_store_n(&sealing.fd, fd, __ATOMIC_RELEASE);
}

void
_PyPerfSeal_AtCrash(int fd, dev_t dev, ino_t ino)
{
    install_handlers();
    set_crash_file(fd, dev, ino);
}

void
_PyPerfSeal_Forget(int fd)
{
    if (fd < 0) {
        return;
    }
    if (sealing.fd == fd) {
        set_crash_file(-1, 0, 0);
    }
    if (sealing.sealed == fd) {
        sealing.sealed = -1;
    }
}

int
_PyPerfSeal_SealedAtCrash(int fd)
{
    return fd >= 0 && sealing.sealed == fd;
}

void
_PyPerfSeal_AfterFork(void)
{
    /* (the parent's file is the parent's to seal) */
    set_crash_file(-1, 0, 0);
    sealing.sealed = -1;
}

#endif /* PY_HAVE_PERF_TRAMPOLINE && SIZEOF_VOID_P == 8 */
