/* A host that embeds libpython the way a plugin loader does: it is not
 * linked to libpython but dlopen()s it with RTLD_GLOBAL (so that the
 * extension modules it imports later resolve their Py* symbols against
 * it), after a library that took part of glibc's static TLS surplus
 * (tls_eater.c), then initialises it through PyConfig and runs a script.
 *
 *   dlopen_embed EATER.so LIBPYTHON.so PROGRAM XOPTION SCRIPT
 *
 * PROGRAM becomes config.program_name: with the `python` of an object
 * directory, the path calculation finds that build's stdlib and extension
 * modules as it does for that `python` itself.  XOPTION goes into
 * config.xoptions as -X XOPTION would ("perf", "perf_jit"; "-" for none):
 * 3.11's PyConfig has no perf field, the xoption is how a host asks.
 *
 * The headers (Python.h of the same version, for PyConfig's layout) are
 * only used for types: every function is looked up with dlsym().
 * Prints "pid N" first (perf writes /tmp/perf-N.map for it); exits with
 * Py_RunMain()'s status, 3 when loading or initialising fails (with the
 * reason on stderr), 2 on a usage error.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

static void *libpython;

/* The address of libpython's NAME, or NULL with the reason printed. */
static void *
lookup(const char *name)
{
    void *p = dlsym(libpython, name);
    if (p == NULL) {
        fprintf(stderr, "dlopen_embed: %s: %s\n", name, dlerror());
    }
    return p;
}

#define LOOKUP(var, name)                                   \
    __typeof__(name) *var = (__typeof__(name) *)lookup(#name); \
    if (var == NULL) {                                      \
        return 3;                                           \
    }

int
main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr,
                "usage: %s EATER.so LIBPYTHON.so PROGRAM XOPTION SCRIPT\n",
                argv[0]);
        return 2;
    }
    printf("pid %ld\n", (long)getpid());
    fflush(stdout);

    void *eater = dlopen(argv[1], RTLD_NOW);
    if (eater == NULL) {
        fprintf(stderr, "dlopen_embed: eater not loaded: %s\n", dlerror());
        return 3;
    }
    char *(*eat)(void) = (char *(*)(void))dlsym(eater, "tls_eater");
    if (eat == NULL || eat() == NULL) {
        fprintf(stderr, "dlopen_embed: eater broken\n");
        return 3;
    }
    libpython = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
    if (libpython == NULL) {
        fprintf(stderr, "dlopen_embed: %s\n", dlerror());
        return 3;
    }

    LOOKUP(init_config, PyConfig_InitPythonConfig);
    LOOKUP(set_string, PyConfig_SetBytesString);
    LOOKUP(append, PyWideStringList_Append);
    LOOKUP(is_exception, PyStatus_Exception);
    LOOKUP(initialize, Py_InitializeFromConfig);
    LOOKUP(clear_config, PyConfig_Clear);
    LOOKUP(run_main, Py_RunMain);

    PyConfig config;
    PyStatus status;
    init_config(&config);
    /* the host's own argv is not Python's command line */
    config.parse_argv = 0;
    status = set_string(&config, &config.program_name, argv[3]);
    if (is_exception(status)) {
        goto fail;
    }
    status = set_string(&config, &config.run_filename, argv[5]);
    if (is_exception(status)) {
        goto fail;
    }
    if (strcmp(argv[4], "-") != 0) {
        size_t n = mbstowcs(NULL, argv[4], 0);
        if (n == (size_t)-1) {
            fprintf(stderr, "dlopen_embed: cannot decode %s\n", argv[4]);
            clear_config(&config);
            return 3;
        }
        wchar_t *option = calloc(n + 1, sizeof(wchar_t));
        if (option == NULL) {
            fprintf(stderr, "dlopen_embed: out of memory\n");
            clear_config(&config);
            return 3;
        }
        mbstowcs(option, argv[4], n + 1);
        status = append(&config.xoptions, option);
        free(option);
        if (is_exception(status)) {
            goto fail;
        }
    }
    status = initialize(&config);
    clear_config(&config);
    if (is_exception(status)) {
        fprintf(stderr, "dlopen_embed: Py_InitializeFromConfig: %s: %s\n",
                status.func ? status.func : "?",
                status.err_msg ? status.err_msg : "?");
        return 3;
    }
    /* runs config.run_filename, then finalizes */
    return run_main();

fail:
    fprintf(stderr, "dlopen_embed: %s: %s\n",
            status.func ? status.func : "?",
            status.err_msg ? status.err_msg : "?");
    clear_config(&config);
    return 3;
}
