/*
 * cpython-perf: the perf map backend (-X perf).
 *
 * One text line per trampoline, "START SIZE py::QUALNAME:FILENAME\n" in
 * /tmp/perf-<pid>.map, which perf reads at report time to name samples
 * in anonymous executable memory (Doc/howto/perf_profiling.rst, "File
 * formats").  No header, no trailer: the map is the process's, and a JIT
 * or an agent may append lines of its own (the PyUnstable_ C API in
 * Python/perf_api.c writes through the same file).  A line is assembled
 * in the writer's buffer and appended whole (Python/perf_file.c).
 *
 * This file calls only the writer and the symbol names
 * (Python/perf_names.c).
 */

#include "Python.h"
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

static int
perf_map_init(_PyPerfFile *Py_UNUSED(file))
{
    return 0;
}

/* One line per trampoline: "START SIZE py::QUALNAME:FILENAME\n", hex
   without 0x, assembled in place (no printf: this runs for every new
   code object).  Format: Doc/howto/perf_profiling.rst, "File formats". */
static int
perf_map_write_entry(_PyPerfFile *file, const void *code, size_t size,
                     PyCodeObject *co)
{
    char *line = _PyPerfFile_Reserve(file, 2 * 16 + 3 + _PyPerf_NAME_MAX + 1);
    if (line == NULL) {
        return -1;
    }
    size_t file_at;
    char *p = _PyPerf_PutHex(line, (uintptr_t)code);
    *p++ = ' ';
    p = _PyPerf_PutHex(p, size);
    *p++ = ' ';
    p += _PyPerf_SymbolName(co, p, &file_at);
    *p++ = '\n';
    return _PyPerfFile_Commit(file, (size_t)(p - line));
}

static void
perf_map_fini(_PyPerfFile *Py_UNUSED(file))
{
}

static size_t
perf_map_bytes_per_code(size_t code_size,
                        PyCodeObject *Py_UNUSED(lines_code))
{
    return code_size;
}

const _PyPerfBackend _PyPerf_MapBackend = {
    .name = "perf",
    .path_format = "/tmp/perf-%ld.map",
    .init = perf_map_init,
    .write_entry = perf_map_write_entry,
    .fini = perf_map_fini,
    .bytes_per_code = perf_map_bytes_per_code,
    .names_for_good = 1,
};

#endif /* PY_HAVE_PERF_TRAMPOLINE */
