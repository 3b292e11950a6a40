/*
 * cpython-perf: the text of perf trampoline records.
 *
 * Both backends name a trampoline "py::QUALNAME:FILENAME" (Doc/howto/
 * perf_profiling.rst, "File formats"), and that text comes from the code
 * object: a qualified name and a file name may hold anything a str can,
 * and a record must stay one line of valid UTF-8.  Names are made for
 * every new code object, so the common case (ASCII) is copied and checked
 * eight bytes at a time, straight from the string object; nothing here
 * raises or runs Python code (a record may be half assembled).  The map's
 * addresses and sizes are hex numbers, written here too, for the map
 * backend (Python/perf_map.c) and the C API's records.
 *
 * This file calls nothing else of the subsystem.
 */

#include "Python.h"
#include "perf_internal.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <string.h>

/* Non-zero if a byte of `w` is below 0x20 or equal to 0x7f.  For bytes
   below 0x80, b - 0x20 borrows into bit 7 exactly when b < 0x20, and
   (b ^ 0x7f) - 1 does exactly when b == 0x7f; bytes of 0x80 and above
   (UTF-8 sequences) have bit 7 set in b and are masked out.  A borrow
   only reaches the next byte from a byte that counts itself. */
static inline uint64_t
control_bytes(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL;
    uint64_t x = w ^ (ones * 0x7f);
    return ((w - ones * 0x20) | (x - ones)) & ~w & (ones * 0x80);
}

/* Write code point `c` to `out` (room for 6 bytes) as a name may show
   it; return the byte count.  A name must stay one line of valid UTF-8:
   control characters (C0, DEL, C1) and the Unicode line and paragraph
   separators become '?', and a lone surrogate (a file name that is not
   UTF-8 decodes to those, with surrogateescape) is spelt \udcXX. */
static size_t
put_code_point(char *out, Py_UCS4 c)
{
    static const char hex[] = "0123456789abcdef";
    if (c < 0x20 || (c >= 0x7f && c < 0xa0) || c == 0x2028 || c == 0x2029) {
        out[0] = '?';
        return 1;
    }
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
        out[0] = '\\';
        out[1] = 'u';
        for (int i = 0; i < 4; i++) {
            out[2 + i] = hex[(c >> (12 - 4 * i)) & 15];
        }
        return 6;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* Append at most `room` bytes of a string that is not ASCII, encoded
   here, character by character, and cut at a character boundary.
   PyUnicode_AsUTF8AndSize() would raise for a lone surrogate, and the
   exception it creates may start the garbage collector, which may run
   Python code (finalizers, and with them new trampolines) while a record
   is half assembled. */
static size_t
put_unicode_text(char *dst, size_t room, PyObject *str)
{
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    Py_ssize_t len = PyUnicode_GET_LENGTH(str);
    size_t n = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        char out[6];
        size_t k = put_code_point(out, PyUnicode_READ(kind, data, i));
        if (k > room - n) {
            break;
        }
        memcpy(dst + n, out, k);
        n += k;
    }
    return n;
}

/* Append at most `room` bytes of the UTF-8 text of `str`, as
   put_code_point() shows each character.  Never raises.  This runs for
   every new code object: ASCII strings (almost all names) are read
   straight from the object, eight bytes at a time. */
static size_t
put_text(char *dst, size_t room, PyObject *str)
{
    Py_ssize_t size = 0;
    const char *text = NULL;
    if (str != NULL && PyUnicode_Check(str)) {
        if (PyUnicode_IS_COMPACT_ASCII(str)) {
            text = (const char *)PyUnicode_DATA(str);
            size = PyUnicode_GET_LENGTH(str);
        }
        else if (PyUnicode_READY(str) == 0) {
            return put_unicode_text(dst, room, str);
        }
    }
    if (text == NULL) {
        PyErr_Clear();
        text = "<unknown>";
        size = 9;
    }
    size_t n = (size_t)size < room ? (size_t)size : room;
    /* Copy and check eight bytes at a time; the last word overlaps its
       predecessor, and a text shorter than a word goes byte by byte. */
    uint64_t bad = 0;
    if (n >= 8) {
        uint64_t w;
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&w, text + i, 8);
            memcpy(dst + i, &w, 8);
            bad |= control_bytes(w);
        }
        memcpy(&w, text + n - 8, 8);
        memcpy(dst + n - 8, &w, 8);
        bad |= control_bytes(w);
    }
    else {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)text[i];
            dst[i] = (char)c;
            bad |= (c < 0x20) | (c == 0x7f);
        }
    }
    if (bad) {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)dst[i];
            if (c < 0x20 || c == 0x7f) {
                dst[i] = '?';
            }
        }
    }
    return n;
}

/* The last name made, for the code object it was made for: a new
   trampoline is named twice in a row (its arena file's symbol, then the
   backend's record), and a name depends only on co_qualname and
   co_filename, which a code object never changes.  Forgotten when that
   code object dies (_PyPerf_ForgetName()), so that another one at the
   same address is not given it.  The GIL guards it. */
static struct {
    PyCodeObject *code;
    size_t len;
    size_t file_at;
    char name[_PyPerf_NAME_MAX + 1];
} last_name;

size_t
_PyPerf_SymbolName(PyCodeObject *co, char *buf, size_t *file_at)
{
    if (co == last_name.code && co != NULL) {
        memcpy(buf, last_name.name, last_name.len + 1);
        *file_at = last_name.file_at;
        return last_name.len;
    }
    /* "py::" QUALNAME ":" FILENAME, at most _PyPerf_NAME_MAX bytes */
    char *p = buf;
    memcpy(p, "py::", 4);
    p += 4;
    p += put_text(p, 1024, co->co_qualname);
    *p++ = ':';
    *file_at = (size_t)(p - buf);
    p += put_text(p, _PyPerf_NAME_MAX - (size_t)(p - buf), co->co_filename);
    *p = '\0';
    size_t len = (size_t)(p - buf);
    memcpy(last_name.name, buf, len + 1);
    last_name.len = len;
    last_name.file_at = *file_at;
    last_name.code = co;
    return len;
}

void
_PyPerf_ForgetName(PyCodeObject *co)
{
    if (co == last_name.code || co == NULL) {
        last_name.code = NULL;
    }
}


/* `value` in lowercase hex without leading zeros.  The digits are written
   backwards from the last one, two at a time from a table of the 256
   byte values; the digit count comes from the highest set bit. */
#define HEX_PAIRS(hi) \
    hi "0" hi "1" hi "2" hi "3" hi "4" hi "5" hi "6" hi "7" \
    hi "8" hi "9" hi "a" hi "b" hi "c" hi "d" hi "e" hi "f"

char *
_PyPerf_PutHex(char *p, uint64_t value)
{
    static const char digits[] = "0123456789abcdef";
    /* Constant: C API callers may run this at the same time, without the
       GIL. */
    static const char pairs[] =
        HEX_PAIRS("0") HEX_PAIRS("1") HEX_PAIRS("2") HEX_PAIRS("3")
        HEX_PAIRS("4") HEX_PAIRS("5") HEX_PAIRS("6") HEX_PAIRS("7")
        HEX_PAIRS("8") HEX_PAIRS("9") HEX_PAIRS("a") HEX_PAIRS("b")
        HEX_PAIRS("c") HEX_PAIRS("d") HEX_PAIRS("e") HEX_PAIRS("f");
    _Static_assert(sizeof(pairs) == 2 * 256 + 1, "two digits per byte");
#if defined(__GNUC__) || defined(__clang__)
    int ndigits = value == 0 ? 1 : (64 - __builtin_clzll(value) + 3) / 4;
#else
    int ndigits = 1;
    while (ndigits < 16 && (value >> (4 * ndigits)) != 0) {
        ndigits++;
    }
#endif
    char *q = p + ndigits;
    while (q - p >= 2) {
        q -= 2;
        memcpy(q, &pairs[2 * (value & 0xff)], 2);
        value >>= 8;
    }
    if (q > p) {
        *p = digits[value & 15];
    }
    return p + ndigits;
}

#endif /* PY_HAVE_PERF_TRAMPOLINE */
