/*
 * cpython-perf: the writer of the perf trampoline files.
 *
 * Each backend (Python/perf_map.c, Python/perf_jit_trampoline.c) turns
 * trampolines into records of one file format; this file owns everything
 * else about the files.  /tmp/<name>-<pid>.<ext> is created 0600 without
 * following symlinks, and refused unless it is a regular file of ours
 * with one link.  The map is the process's, not ours alone: a JIT or an
 * agent in the same process may write to it too (through the PyUnstable_
 * C API, Python/perf_api.c, or on its own).  So a file is only ever
 * appended to, whole records with one write() at a time (O_APPEND keeps
 * them whole among other writers), and never cut (but for records of
 * ours that the disk had room for only in part), grown ahead or mapped
 * for writing: another writer that truncates the file costs lines, never
 * the process.
 *
 * Records of trampolines that an arena file names already (the core says
 * so with _PyPerfFile_Later()) wait in a block of up to 16 KiB, which goes
 * out with one write(): one system call for a hundred or more new
 * functions, where each took one (and an fstat()).  The block goes out
 * before any record that cannot wait, and when the core flushes: at the
 * end of an activation, at deactivation, before fork(), when the C API
 * compiles a trampoline ahead or copies a parent's map, at os._exit()
 * and at finalization.  A process killed by a signal leaves whole records
 * and loses the block: the arena files name those trampolines.  Content
 * written before this process started (exec() keeps the process: lines of
 * a host that wrote before it ran or loaded us stay) is a stale file of
 * an earlier process with our pid, and is emptied (perf would give our
 * addresses its names).
 *
 * The files never take the last blocks of /tmp ("Room in /tmp" below):
 * a write that would is refused with ENOSPC, as a full disk refuses it.
 * Failure to create or write a file is a RuntimeWarning
 * (_PyPerfFile_Warn(), which the core also gives when no executable memory
 * can be had for trampolines: one wording for every reason a backend
 * turns itself off); the caller turns the backend off and the program
 * runs on, but for a lack of room (_PyPerf_IsNoRoom()), which the core
 * waits out with the backend on.  _PyPerf_files_lock serializes opening
 * and closing files with the C API's callers, which may hold no GIL, and
 * with fork(), which waits for it (Python/perf_trampoline.c: a child
 * never sees a file half opened).
 *
 * This file calls nothing else of the subsystem.
 */

#include "Python.h"
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <errno.h>
#include <fcntl.h>                // open()
#include <stdlib.h>               // malloc()
#include <string.h>
#include <sys/file.h>             // flock()
#include <sys/stat.h>             // fstat()
#include <sys/statvfs.h>          // fstatvfs()
#include <time.h>                 // clock_gettime()
#include <unistd.h>

struct _PyPerfFile {
    int fd;                       /* -1 when closed */
    dev_t dev;                    /* the file fd must still be (fstat) */
    ino_t ino;
    long pid;                     /* the pid in the file name */
    int kept;                     /* the file had records when opened */
    char path[64];
    int taken;                    /* _PyPerfFile_Taken(): its errno */
    const char *fail_what;        /* _PyPerfFile_SetFailure(), or NULL */
    const char *fail_detail;
    int later;                    /* _PyPerfFile_Later() */
    size_t pending;               /* bytes of whole records in `block` */
    uint64_t room;                /* bytes that may be appended before
                                     the file system is asked again */
    int64_t room_retry_ns;        /* no room: asked again after this */
    unsigned int room_at;         /* room_asked when `room` was had */
    char stage[PERF_RECORD_MAX];  /* the record being assembled */
    char block[PERF_RECORD_MAX];  /* records that go out together */
};

/* Serializes opening, writing and closing files with threads that call
   the PyUnstable_ perf map functions without the GIL (the trampolines'
   records are written with the GIL and this lock held), and with fork().
   Whole records go out together in one write(), which O_APPEND keeps
   whole among other writers.  A thread that holds the lock never waits
   for the GIL, which another thread may hold while it waits for the
   lock: what is allocated under it comes from malloc(), since
   PyMem_Raw*() take the GIL when tracemalloc traces them. */
pthread_mutex_t _PyPerf_files_lock = PTHREAD_MUTEX_INITIALIZER;

void (*_PyPerf_test_hook)(const char *where);

void
_PyPerf_PublishTestHook(void)
{
    PyObject *dict = PyInterpreterState_GetDict(PyInterpreterState_Get());
    PyObject *capsule = PyCapsule_New(&_PyPerf_test_hook,
                                      _PyPerfTrampoline_TEST_HOOK, NULL);
    if (dict == NULL || capsule == NULL
        || PyDict_SetItemString(dict, _PyPerfTrampoline_TEST_HOOK,
                                capsule) < 0)
    {
        /* (no memory: the tests that need it fail, nothing else does) */
        PyErr_Clear();
    }
    Py_XDECREF(capsule);
}

_PyPerfFile *
_PyPerfFile_New(void)
{
    _PyPerfFile *file = malloc(sizeof(_PyPerfFile));
    if (file == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    file->fd = -1;
    file->fail_what = NULL;
    file->path[0] = '\0';
    file->later = 0;
    file->pending = 0;
    file->room = 0;
    file->room_retry_ns = 0;
    return file;
}

ssize_t
_PyPerf_ReadSmallFile(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    ssize_t n;
    do {
        n = read(fd, buf, size - 1);
    } while (n < 0 && errno == EINTR);
    close(fd);
    if (n >= 0) {
        buf[n] = '\0';
    }
    return n;
}

/* When this process started, in nanoseconds of the real-time clock as it
   reads now; -1 if that cannot be had.  The kernel keeps the start in
   clock ticks since boot (/proc/self/stat, field 22): the start of the
   process, which exec() keeps, so that lines a host wrote before it ran
   or loaded us count as the process's; a child of fork() starts anew.
   The real-time clock minus the boot-time clock, both read now, makes
   that comparable with file timestamps, and a step of the real-time
   clock moves both sides alike. */
static int64_t
process_start_ns(void)
{
    char buf[1024];
    if (_PyPerf_ReadSmallFile("/proc/self/stat", buf, sizeof(buf)) <= 0) {
        return -1;
    }
    /* Field 2, the command name in parentheses, may hold anything: count
       the fields from its last ')'. */
    char *p = strrchr(buf, ')');
    for (int field = 2; p != NULL && field < 22; field++) {
        p = strchr(p, ' ');
        p = p != NULL ? p + 1 : NULL;
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (p == NULL || hz <= 0) {
        return -1;
    }
    char *end;
    unsigned long long ticks = strtoull(p, &end, 10);
    struct timespec real, boot;
    if (end == p || clock_gettime(CLOCK_REALTIME, &real) < 0
        || clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
    {
        return -1;
    }
    int64_t since_boot = (int64_t)(ticks / (unsigned long)hz) * 1000000000
                         + (int64_t)(ticks % (unsigned long)hz)
                           * 1000000000 / hz;
    return ((int64_t)real.tv_sec - boot.tv_sec) * 1000000000
           + (real.tv_nsec - boot.tv_nsec) + since_boot;
}

/* Is the file's content from an earlier process that had our pid?  The
   map belongs to the process, and something else in it (a JIT, an agent,
   the host that loaded us) may have written lines before our first one:
   those stay.  Content last written before this process started cannot
   be its own.  The start is rounded down to a clock tick, and file times
   come from a coarse clock: two ticks of slack (an earlier process with
   our pid within 20 ms of our start would need pids to wrap that fast).
   When the start cannot be had, content is stale. */
static int
content_is_stale(const struct stat *st)
{
    if (st->st_size == 0) {
        return 0;
    }
    int64_t start = process_start_ns();
    if (start < 0) {
        return 1;
    }
    long hz = sysconf(_SC_CLK_TCK);
    int64_t slack = 2 * (int64_t)1000000000 / (hz > 0 ? hz : 100);
    int64_t written = (int64_t)st->st_mtim.tv_sec * 1000000000
                      + st->st_mtim.tv_nsec;
    return written < start - slack;
}

/* Open the file of this process, for appending.  The name is predictable
   and /tmp is shared, so nothing found there is trusted: a symlink fails
   the open (O_NOFOLLOW), a FIFO cannot block it (O_NONBLOCK), and
   anything but a regular file of ours with a single link is left alone.
   So is a file that another live process holds (flock): one with our pid
   in another pid namespace that shares /tmp.  A stale file, left by an
   earlier process with our pid, is emptied: perf would take its names
   for ours. */
int
_PyPerfFile_Open(_PyPerfFile *file, const char *path_format)
{
    file->pid = (long)getpid();
    file->kept = 0;
    file->taken = 0;
    file->fail_what = NULL;
    PyOS_snprintf(file->path, sizeof(file->path), path_format, file->pid);
    /* Readable too: the jitdump backend maps its file. */
    int fd = open(file->path,
                  O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK
                  | O_CLOEXEC, 0600);
    if (fd < 0) {
        struct stat there;
        int saved = errno;
        if (saved == EACCES && lstat(file->path, &there) == 0
            && S_ISREG(there.st_mode) && there.st_uid != geteuid())
        {
            file->taken = saved;
            _PyPerfFile_SetFailure(file, "use", " (another user's file)");
        }
        errno = saved;
        return -1;
    }
    TEST_POINT("opened");
    struct stat st;
    if (fstat(fd, &st) < 0) {
        goto fail;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
        file->taken = EPERM;
        _PyPerfFile_SetFailure(file, "use",
                               st.st_uid != geteuid()
                               ? " (another user's file)"
                               : " (not a regular file with one link)");
        errno = EPERM;
        goto fail;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK) {
            file->taken = EBUSY;
            _PyPerfFile_SetFailure(file, "use",
                                   " (another live process with this pid "
                                   "holds it: one in another pid "
                                   "namespace that shares /tmp)");
            errno = EBUSY;
        }
        goto fail;
    }
    if (fcntl(fd, F_SETFL, O_APPEND) < 0) {
        goto fail;
    }
    if (content_is_stale(&st)) {
        if (ftruncate(fd, 0) < 0) {
            goto fail;
        }
    }
    else {
        file->kept = st.st_size > 0;
    }
    file->dev = st.st_dev;
    file->ino = st.st_ino;
    file->fd = fd;
    file->room = 0;
    file->room_retry_ns = 0;
    return 0;
fail:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

int
_PyPerf_KeepIfSameFile(int *fd, dev_t dev, ino_t ino)
{
    struct stat st;
    if (*fd >= 0
        && (fstat(*fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino))
    {
        *fd = -1;
    }
    return *fd >= 0;
}

static int
still_ours(_PyPerfFile *file)
{
    return _PyPerf_KeepIfSameFile(&file->fd, file->dev, file->ino);
}

/* Let go of the file without touching it: in the child of fork(), the
   descriptor (and its lock) is the parent's, and so are the records
   waiting (the parent writes them). */
void
_PyPerfFile_Drop(_PyPerfFile *file)
{
    file->pending = 0;
    if (still_ours(file)) {
        close(file->fd);
        file->fd = -1;
    }
}

/* Unlock and close.  (The lock goes with the open file, which a mapping
   of the file, like the jitdump's marker, would keep alive.) */
void
_PyPerfFile_Close(_PyPerfFile *file)
{
    (void)_PyPerfFile_Flush(file);
    if (still_ours(file)) {
        (void)flock(file->fd, LOCK_UN);
    }
    _PyPerfFile_Drop(file);
}


void *
_PyPerfFile_Reserve(_PyPerfFile *file, size_t size)
{
    if (size > PERF_RECORD_MAX) {
        errno = EMSGSIZE;
        return NULL;
    }
    return file->stage;
}

/* Take back the `n` bytes of a record that the file had room for only in
   part (a full disk, a file size limit).  O_APPEND left the descriptor's
   offset just after them.  If the file still ends there, they are cut
   off; if another writer has appended since, cutting would take its
   record instead: they are blanked out in place (spaces and a newline,
   which perf reads as a nameless symbol of size 0 at address 0: nothing
   of ours or theirs is misnamed), through a descriptor of the same file
   without O_APPEND.  Only the map has other writers: the jitdump is
   locked (flock) and written by this process alone, so its end is always
   ours to cut.  Every writer of this process appends under the files
   lock, so the offset O_APPEND left is the record's end. */
static void
take_back(_PyPerfFile *file, char *buf, size_t n)
{
    TEST_POINT("partial");
    off_t end = lseek(file->fd, 0, SEEK_CUR);
    struct stat st;
    if (end < (off_t)n || fstat(file->fd, &st) < 0 || st.st_size < end) {
        /* (Cut by someone else already.) */
        return;
    }
    if (st.st_size == end) {
        (void)ftruncate(file->fd, end - (off_t)n);
        return;
    }
    char path[64];
    PyOS_snprintf(path, sizeof(path), "/proc/self/fd/%d", file->fd);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        memset(buf, ' ', n - 1);
        buf[n - 1] = '\n';
        (void)!pwrite(fd, buf, n, end - (off_t)n);
        close(fd);
    }
}

/* ---- Room in /tmp ------------------------------------------------------ */

/* The files never take the last blocks of their file system: a reserve
   of 1 MiB or 2% of it, whichever is larger, stays free for the other
   programs of the machine (on a tmpfs /tmp, those blocks are memory).
   The map and the dump ask the file system after each 64 KiB they
   append, and count what they write in between, unless another file
   (an arena's) asked in the meantime, about to take room of its own;
   after a refusal, not again for a second (the records are refused at no
   cost meanwhile).  The arena files ask before each allocation. */
#define ROOM_RESERVE_MIN ((uint64_t)1 << 20)
#define ROOM_RESERVE_PERCENT 2
#define ROOM_ASK_EVERY ((uint64_t)64 * 1024)
#define ROOM_RETRY_NS ((int64_t)1000000000)

/* Counts the askers' answers (atomically: the map's writers may hold no
   GIL): an estimate made at another count is out of date. */
static unsigned int room_asked;

int
_PyPerf_TmpRoom(int fd, uint64_t need, uint64_t *spare)
{
    struct statvfs sv;
    uint64_t unit;
    if ((fd >= 0 ? fstatvfs(fd, &sv) : statvfs("/tmp", &sv)) < 0
        || sv.f_blocks == 0
        || (unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize) == 0)
    {
        /* Cannot tell (or no size, a tmpfs mounted with size=0): the
           writes themselves will say. */
        *spare = ROOM_ASK_EVERY;
        return 0;
    }
    uint64_t total = (uint64_t)sv.f_blocks * unit;
    /* (f_bavail: blocks that root alone may use are not ours either) */
    uint64_t avail = (uint64_t)sv.f_bavail * unit;
    uint64_t reserve = total / 100 * ROOM_RESERVE_PERCENT;
    reserve = reserve > ROOM_RESERVE_MIN ? reserve : ROOM_RESERVE_MIN;
    if (avail < reserve || avail - reserve < need) {
        errno = ENOSPC;
        return -1;
    }
    *spare = avail - reserve - need;
    __atomic_fetch_add(&room_asked, 1, __ATOMIC_RELAXED);
    return 0;
}

int
_PyPerf_IsNoRoom(int err)
{
    return err == ENOSPC || err == EDQUOT || err == EFBIG;
}

/* May `size` more bytes be appended?  0, or -1 and ENOSPC. */
static int
has_room(_PyPerfFile *file, size_t size)
{
    if (size <= file->room
        && __atomic_load_n(&room_asked, __ATOMIC_RELAXED) == file->room_at)
    {
        file->room -= size;
        return 0;
    }
    int64_t now = _PyPerf_CoarseNowNs();
    if (now < file->room_retry_ns) {
        errno = ENOSPC;
        return -1;
    }
    uint64_t spare;
    if (_PyPerf_TmpRoom(file->fd, size, &spare) < 0) {
        file->room = 0;
        file->room_retry_ns = now + ROOM_RETRY_NS;
        return -1;
    }
    file->room = spare < ROOM_ASK_EVERY ? spare : ROOM_ASK_EVERY;
    file->room_at = __atomic_load_n(&room_asked, __ATOMIC_RELAXED);
    return 0;
}

/* Append `size` bytes of whole records at `buf` with one write(): others
   may append to the same file (the map is the process's), and they reach
   the file whole or, when the disk is full, not at all (take_back()). */
static int
append(_PyPerfFile *file, char *buf, size_t size)
{
    if (!still_ours(file)) {
        errno = EBADF;
        return -1;
    }
    if (has_room(file, size) < 0) {
        return -1;
    }
    ssize_t n;
    do {
        n = write(file->fd, buf, size);
    } while (n < 0 && errno == EINTR);
    if (n == (ssize_t)size) {
        return 0;
    }
    if (n >= 0) {
        int saved = n > 0 ? ENOSPC : EIO;
        if (n > 0) {
            take_back(file, buf, (size_t)n);
        }
        errno = saved;
    }
    if (_PyPerf_IsNoRoom(errno)) {
        /* (a quota, a file size limit: what statvfs does not show) */
        int saved = errno;
        file->room = 0;
        file->room_retry_ns = _PyPerf_CoarseNowNs() + ROOM_RETRY_NS;
        errno = saved;
    }
    return -1;
}

int
_PyPerfFile_Flush(_PyPerfFile *file)
{
    size_t n = file->pending;
    if (n == 0) {
        return 0;
    }
    file->pending = 0;
    return append(file, file->block, n);
}

void
_PyPerfFile_Later(_PyPerfFile *file, int later)
{
    file->later = later;
}

int
_PyPerfFile_Commit(_PyPerfFile *file, size_t size)
{
    assert(size <= PERF_RECORD_MAX);
    if (file->later) {
        if (file->pending + size > sizeof(file->block)
            && _PyPerfFile_Flush(file) < 0)
        {
            return -1;
        }
        memcpy(file->block + file->pending, file->stage, size);
        file->pending += size;
        return 0;
    }
    /* In the order they were made: those waiting first. */
    if (_PyPerfFile_Flush(file) < 0) {
        return -1;
    }
    return append(file, file->stage, size);
}

void
_PyPerfFile_AskForRoom(_PyPerfFile *file)
{
    file->room = 0;
    file->room_retry_ns = 0;
}

int
_PyPerfFile_Write(_PyPerfFile *file, char *data, size_t size)
{
    return append(file, data, size);
}

int
_PyPerfFile_Append(_PyPerfFile *file, const void *data, size_t size)
{
    void *room = _PyPerfFile_Reserve(file, size);
    if (room == NULL) {
        return -1;
    }
    memcpy(room, data, size);
    return _PyPerfFile_Commit(file, size);
}

int
_PyPerfFile_Kept(const _PyPerfFile *file)
{
    return file->kept;
}

const char *
_PyPerfFile_Path(const _PyPerfFile *file)
{
    return file->path;
}

int
_PyPerfFile_Fd(const _PyPerfFile *file)
{
    return file->fd;
}

void
_PyPerfFile_SetFailure(_PyPerfFile *file, const char *what,
                       const char *detail)
{
    file->fail_what = what;
    file->fail_detail = detail;
}

int
_PyPerfFile_Taken(const _PyPerfFile *file)
{
    return file->taken != 0;
}

void
_PyPerfFile_WarnTakenMap(const _PyPerfFile *file, const char *backend)
{
    _PyPerf_Warn("perf trampoline: cannot use %s%s: %s; this process writes "
                 "no map, and perf names its functions by its trampoline "
                 "files alone (/tmp/py-perf-*.so); the %s backend stays on",
                 file->path, file->fail_detail ? file->fail_detail : "",
                 strerror(file->taken), backend);
}

int
_PyPerfFile_IsOpen(const _PyPerfFile *file)
{
    return file->fd >= 0;
}

/* (errno says why.)  This runs on call paths. */
void
_PyPerfFile_Warn(const _PyPerfFile *file, const char *what,
                 const char *backend)
{
    int saved = errno;
    const char *space = "", *path = "", *detail = "";
    if (file != NULL) {
        space = " ";
        path = file->path;
        if (file->fail_what != NULL) {
            what = file->fail_what;
            detail = file->fail_detail;
        }
    }
    _PyPerf_Warn("perf trampoline: cannot %s%s%s%s: %s; the %s backend is "
                 "off and perf will not name Python functions",
                 what, space, path, detail, strerror(saved), backend);
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */

void
_PyPerf_Warn(const char *format, ...)
{
    char text[1024];
    va_list vargs;
    va_start(vargs, format);
    PyOS_vsnprintf(text, sizeof(text), format, vargs);
    va_end(vargs);
    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    /* (through "%s": bytes that are not UTF-8, from the environment or a
       localized strerror(), are decoded with "replace") */
    if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%s", text) < 0) {
        PyErr_WriteUnraisable(NULL);
    }
    PyErr_Restore(exc, val, tb);
}
