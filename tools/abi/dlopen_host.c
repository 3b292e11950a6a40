/* A host that loads libpython at run time, as mod_wsgi or an editor's
 * plugin loader does, after a library that already took part of glibc's
 * static TLS surplus (tls_eater.c): if libpython's own thread-locals need
 * static TLS too (the initial-exec model marks it STATIC_TLS), dlopen()
 * fails once the surplus is used up, with "cannot allocate memory in
 * static TLS block".
 *
 *   dlopen_host EATER.so LIBPYTHON.so
 *
 * Prints "loaded" and exits with 0 when both load and Py_GetVersion() can
 * be called; prints dlerror() and exits with 1 otherwise.
 */

#include <dlfcn.h>
#include <stdio.h>

int
main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s EATER.so LIBPYTHON.so\n", argv[0]);
        return 2;
    }
    void *eater = dlopen(argv[1], RTLD_NOW);
    if (eater == NULL) {
        printf("eater not loaded: %s\n", dlerror());
        return 2;
    }
    char *(*eat)(void) = (char *(*)(void))dlsym(eater, "tls_eater");
    if (eat == NULL || eat() == NULL) {
        printf("eater broken: %s\n", dlerror());
        return 2;
    }
    void *py = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
    if (py == NULL) {
        printf("%s\n", dlerror());
        return 1;
    }
    const char *(*version)(void) =
        (const char *(*)(void))dlsym(py, "Py_GetVersion");
    if (version == NULL) {
        printf("%s\n", dlerror());
        return 1;
    }
    printf("loaded %.6s\n", version());
    return 0;
}
