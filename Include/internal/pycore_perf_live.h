#ifndef Py_INTERNAL_PERF_LIVE_H
#define Py_INTERNAL_PERF_LIVE_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* cpython-perf: the control block of live activation, an interface with
   other processes.  Its layout is an ABI: a requester built from another
   version of this file (Lib/perf_trampoline.py, or any tool) reads and
   writes it in a running process, so fields may only be added at the end
   (Doc/howto/perf_profiling.rst, "The live activation block").  The
   interpreter's own hooks into it are in pycore_perf_trampoline.h. */

/* Live activation (Python/perf_live.c): another process asks this one to
   turn a backend on or off, through this block, which it finds by its
   symbol and writes with /proc/PID/mem.  The block is left out entirely
   when configure ran with --without-remote-debug. */
#ifdef Py_REMOTE_DEBUG
#define _PyPerfLive_MAGIC "PyPerfL"     /* 8 bytes with its NUL */
#define _PyPerfLive_VERSION 1

/* state */
#define _PyPerfLive_STARTING 0
#define _PyPerfLive_READY 1
#define _PyPerfLive_DISABLED 2
#define _PyPerfLive_FINALIZING 3
/* request */
#define _PyPerfLive_NONE 0
#define _PyPerfLive_ACTIVATE_PERF 1
#define _PyPerfLive_ACTIVATE_PERF_JIT 2
#define _PyPerfLive_DEACTIVATE 3
#define _PyPerfLive_SEAL 4
/* An activation's code ORed with one of these (blocks of 480 bytes and
   more) also turns line trampolines on or off; without either, lines stay
   as they are.  An older interpreter answers such a code with result 3. */
#define _PyPerfLive_LINES_ON 0x100
#define _PyPerfLive_LINES_OFF 0x200
#define _PyPerfLive_CODE_MASK 0xff
/* result */
#define _PyPerfLive_DONE 0
#define _PyPerfLive_NO_FILE 1
#define _PyPerfLive_REFUSED 2
#define _PyPerfLive_UNKNOWN 3
/* flags: how the interpreter was built, for requesters that must not run
   it to ask (a process in a container, another user's) */
#define _PyPerfLive_FRAME_POINTERS 1
#define _PyPerfLive_TRAMPOLINE 2

/* Fixed offsets, native byte order, every field naturally aligned (the
   static assertions of Python/perf_live.c hold them); fields may be added
   at the end only, with `size` growing and `version` kept.  Python/
   perf_live.c's design comment describes each field. */
typedef struct {
    char magic[8];                      /*   0 */
    uint32_t version;                   /*   8 */
    uint32_t size;                      /*  12 */
    uint64_t eval_breaker;              /*  16 */
    volatile uint32_t state;            /*  24 */
    volatile uint32_t pid;              /*  28 */
    volatile uint32_t request;          /*  32 */
    uint32_t reserved1;                 /*  36 */
    volatile uint64_t request_id;       /*  40 */
    volatile uint64_t served_id;        /*  48 */
    volatile int32_t result;            /*  56 */
    volatile int32_t error;             /*  60 */
    volatile uint32_t active;           /*  64 */
    uint32_t reserved2;                 /*  68 */
    char file[256];                     /*  72 */
    char message[128];                  /* 328 */
    volatile uint32_t served_request;   /* 456 */
    uint32_t reserved3;                 /* 460 */
    uint32_t flags;                     /* 464 */
    uint32_t reserved4;                 /* 468 */
    volatile uint32_t lines;            /* 472 */
    uint32_t reserved5;                 /* 476 */
} _PyPerfLiveBlock;                     /* 480 bytes */

/* Exported (the dynamic symbol table of python and of libpython), so that
   a requester finds it by name in the mapped file. */
PyAPI_DATA(_PyPerfLiveBlock) _PyPerf_Live;

#endif /* Py_REMOTE_DEBUG */

#ifdef __cplusplus
}
#endif
#endif /* !Py_INTERNAL_PERF_LIVE_H */
