/* A library with TLS_EATER_SIZE bytes of initial-exec thread-local
 * storage: loaded with dlopen(), it takes that much of glibc's static TLS
 * surplus (see dlopen_host.c). */

#ifndef TLS_EATER_SIZE
#  define TLS_EATER_SIZE 1700
#endif

static __thread char eaten[TLS_EATER_SIZE]
    __attribute__((tls_model("initial-exec")));

char *
tls_eater(void)
{
    eaten[0] = 1;
    return eaten;
}
