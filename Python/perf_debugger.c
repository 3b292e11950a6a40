/*
 * cpython-perf: trampolines described to debuggers, through GDB's JIT
 * interface.
 *
 * Why
 * ---
 * gdb learns of code from the dynamic linker's list of objects and from
 * its JIT interface, and lldb the same way.  An arena of trampolines is
 * neither a library nor, for them, anything at all: gdb's heuristic
 * unwinder meets a frame record it cannot place and stops ("frame did
 * not save the PC"), lldb unwinds without names, and CPython's own py-bt,
 * which walks gdb's frames, then sees only the innermost Python function.
 * perf and the tools that read file mappings (eu-stack) do not need this:
 * they read the arena files (Python/perf_elf.c) themselves.
 *
 * The interface (GDB's manual, "JIT Interface")
 * ---------------------------------------------
 * A process defines __jit_debug_descriptor, a doubly linked list of
 * entries, each the address and size of an object file in its memory,
 * and __jit_debug_register_code(), an empty function.  To add or remove
 * an entry it links or unlinks it, stores the action and the entry in the
 * descriptor and calls the function: a debugger that is attached has a
 * breakpoint there and reads the entry (and, when it attaches or opens a
 * core file, the whole list).  Without a debugger the call returns at
 * once: nothing to test, nothing on the call path of Python code.
 *
 * The image
 * ---------
 * One per arena, anonymous or file-backed alike, in anonymous memory of
 * its own: a core file holds anonymous memory but, by default, not the
 * pages of file mappings, and a core read on another machine has no
 * /tmp/py-perf-*.so beside it.  It is a relocatable ELF object whose
 * sections carry the addresses they describe (what debuggers expect of a
 * JIT's object):
 *
 *     ELF header, section headers, .shstrtab
 *     .text      no bytes (SHT_NOBITS): the arena's slots, at their address
 *     .eh_frame  one FDE per slot; its address is where an arena file keeps
 *                the same table, right after the slots (for an anonymous
 *                arena, where it would be), so that the pc-relative
 *                pointers are the ones Python/perf_unwind.c writes
 *     .symtab    a null symbol, one entry per slot (zeros until named)
 *     .strtab    the names, the last section: it grows at the end
 *
 * The names are the ones perf shows ("py::QUALNAME:FILENAME").
 *
 * Names given later
 * -----------------
 * A debugger reads an entry when it is registered; a slot named after
 * that reaches a debugger attached from the start only if the arena is
 * registered again.  Naming a slot writes its name and symbol in place,
 * then registers the image anew under the arena's second entry and
 * unregisters the first (both are registered in between, never neither:
 * a core written at any moment describes the arena).  Without a debugger
 * that is two calls of an empty function; with one, two stops.  When the
 * names outgrow the string table, the image moves to a mapping twice as
 * large, registered before the old one is unregistered and unmapped.
 *
 * Every caller holds the GIL (arenas are made and slots named with it),
 * which is what serializes changes of the list.  A child of fork() keeps
 * the list: the parent's arenas are mapped in it too.
 *
 * This file calls only the unwind table (Python/perf_unwind.c);
 * Python/perf_arena.c calls it.
 */

#include "Python.h"
#include "perf_internal.h"

#if defined(PY_HAVE_PERF_TRAMPOLINE) && SIZEOF_VOID_P == 8

#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>             // mmap()

/* The interface's two names, with the layout GDB's manual gives them.
   They have default visibility, outside the subsystem's hidden ones:
   debuggers look them up by name, and a stripped interpreter keeps only
   its dynamic symbols. */
typedef enum {
    JIT_NOACTION = 0,
    JIT_REGISTER_FN,
    JIT_UNREGISTER_FN
} jit_actions_t;

struct jit_code_entry {
    struct jit_code_entry *next_entry;
    struct jit_code_entry *prev_entry;
    const char *symfile_addr;
    uint64_t symfile_size;
};

struct jit_descriptor {
    uint32_t version;
    uint32_t action_flag;
    struct jit_code_entry *relevant_entry;
    struct jit_code_entry *first_entry;
};

PyAPI_DATA(struct jit_descriptor) __jit_debug_descriptor;
PyAPI_FUNC(void) __jit_debug_register_code(void);

struct jit_descriptor __jit_debug_descriptor = {1, JIT_NOACTION, NULL, NULL};

#if defined(__GNUC__) && !defined(__clang__)
#  define PERF_NOIPA __attribute__((noinline, noipa, used))
#else
#  define PERF_NOIPA __attribute__((noinline, used))
#endif

/* A debugger's breakpoint.  The asm keeps the call and the descriptor's
   stores before it, which no C code reads. */
PERF_NOIPA void
__jit_debug_register_code(void)
{
    __asm__ __volatile__("" : : "r"(&__jit_debug_descriptor) : "memory");
}

/* Sections, in the order of the section header table. */
enum {
    SEC_NULL, SEC_TEXT, SEC_EH_FRAME, SEC_SYMTAB, SEC_STRTAB, SEC_SHSTRTAB,
    NSECTIONS
};
static const char shstrtab[] =
    "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab";
static const Elf64_Word shname[NSECTIONS] = {0, 1, 7, 17, 25, 33};

/* .strtab's first room, per slot; it doubles when names need more. */
#define NAME_ROOM 64

struct _PyPerfImage {
    struct jit_code_entry entry[2];
    int registered;               /* index of the registered entry, or -1 */
    unsigned char *mem;           /* the mapping */
    size_t mem_size;
    size_t nslots;
    size_t slot_size;
    size_t symtab_off;
    size_t strtab_off;
    size_t strtab_used;           /* bytes of .strtab written */
};

static inline size_t
round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static void
notify(uint32_t action, struct jit_code_entry *entry)
{
    __jit_debug_descriptor.relevant_entry = entry;
    __jit_debug_descriptor.action_flag = action;
    __jit_debug_register_code();
}

static void
link_entry(struct jit_code_entry *e)
{
    e->prev_entry = NULL;
    e->next_entry = __jit_debug_descriptor.first_entry;
    if (e->next_entry != NULL) {
        e->next_entry->prev_entry = e;
    }
    __jit_debug_descriptor.first_entry = e;
    notify(JIT_REGISTER_FN, e);
}

static void
unlink_entry(struct jit_code_entry *e)
{
    if (e->prev_entry != NULL) {
        e->prev_entry->next_entry = e->next_entry;
    }
    else {
        __jit_debug_descriptor.first_entry = e->next_entry;
    }
    if (e->next_entry != NULL) {
        e->next_entry->prev_entry = e->prev_entry;
    }
    notify(JIT_UNREGISTER_FN, e);
    e->next_entry = e->prev_entry = NULL;
}

/* Register the image as it is now (under the entry that is not
   registered), then unregister what a debugger read before. */
static void
publish(_PyPerfImage *img)
{
    int next = img->registered == 0;
    struct jit_code_entry *e = &img->entry[next];
    e->symfile_addr = (const char *)img->mem;
    e->symfile_size = img->strtab_off + img->strtab_used;
    Elf64_Shdr *sh = (Elf64_Shdr *)(img->mem + sizeof(Elf64_Ehdr));
    sh[SEC_STRTAB].sh_size = img->strtab_used;
    link_entry(e);
    if (img->registered >= 0) {
        unlink_entry(&img->entry[img->registered]);
    }
    img->registered = next;
}

static unsigned char *
map_image(size_t size)
{
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mem == MAP_FAILED ? NULL : mem;
}

_PyPerfImage *
_PyPerfImage_New(const char *code, size_t nslots, size_t slot_size)
{
    size_t text_size = nslots * slot_size;
    size_t eh_before = round_up(text_size, 8);
    size_t eh_size, hdr_size;
    if (_PyPerfUnwind_Table(nslots, slot_size, eh_before, NULL, 0,
                            &eh_size, &hdr_size) < 0)
    {
        return NULL;
    }
    size_t shstrtab_off = sizeof(Elf64_Ehdr) + NSECTIONS * sizeof(Elf64_Shdr);
    size_t eh_off = round_up(shstrtab_off + sizeof(shstrtab), 8);
    /* The table is written with its .eh_frame_hdr, which the symbols
       then cover: debuggers read .eh_frame itself. */
    size_t symtab_off = round_up(eh_off + eh_size, 8);
    size_t symtab_size = (nslots + 1) * sizeof(Elf64_Sym);
    size_t strtab_off = symtab_off + symtab_size;
    size_t table_end = eh_off + eh_size + hdr_size;
    size_t end = strtab_off + nslots * NAME_ROOM;
    end = end > table_end ? end : table_end;
    size_t mem_size = round_up(end, 4096);

    _PyPerfImage *img = PyMem_RawCalloc(1, sizeof(_PyPerfImage));
    if (img == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    unsigned char *mem = map_image(mem_size);
    if (mem == NULL) {
        PyMem_RawFree(img);
        return NULL;
    }
    if (_PyPerfUnwind_Table(nslots, slot_size, eh_before, mem + eh_off,
                            mem_size - eh_off, &eh_size, &hdr_size) < 0)
    {
        int saved = errno;
        munmap(mem, mem_size);
        PyMem_RawFree(img);
        errno = saved;
        return NULL;
    }
    /* Over the .eh_frame_hdr: the null symbol and the unnamed slots. */
    memset(mem + symtab_off, 0, table_end > symtab_off
                                ? table_end - symtab_off : 0);
    /* .strtab: the empty string. */
    mem[strtab_off] = '\0';

    Elf64_Ehdr *eh = (Elf64_Ehdr *)mem;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
#if PY_LITTLE_ENDIAN
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
#else
    eh->e_ident[EI_DATA] = ELFDATA2MSB;
#endif
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_REL;
    eh->e_machine = _PyPerf_elf_machine;
    eh->e_version = EV_CURRENT;
    eh->e_shoff = sizeof(Elf64_Ehdr);
    eh->e_ehsize = sizeof(Elf64_Ehdr);
    eh->e_shentsize = sizeof(Elf64_Shdr);
    eh->e_shnum = NSECTIONS;
    eh->e_shstrndx = SEC_SHSTRTAB;

    uint64_t text = (uint64_t)(uintptr_t)code;
    Elf64_Shdr *sh = (Elf64_Shdr *)(mem + sizeof(Elf64_Ehdr));
    sh[SEC_TEXT] = (Elf64_Shdr){
        .sh_type = SHT_NOBITS, .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
        .sh_addr = text, .sh_offset = eh_off, .sh_size = text_size,
        .sh_addralign = 16};
    sh[SEC_EH_FRAME] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC,
        .sh_addr = text + eh_before, .sh_offset = eh_off,
        .sh_size = eh_size, .sh_addralign = 8};
    sh[SEC_SYMTAB] = (Elf64_Shdr){
        .sh_type = SHT_SYMTAB, .sh_offset = symtab_off,
        .sh_size = symtab_size, .sh_link = SEC_STRTAB,
        .sh_info = (Elf64_Word)(nslots + 1),
        .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym)};
    sh[SEC_STRTAB] = (Elf64_Shdr){
        .sh_type = SHT_STRTAB, .sh_offset = strtab_off, .sh_size = 1,
        .sh_addralign = 1};
    sh[SEC_SHSTRTAB] = (Elf64_Shdr){
        .sh_type = SHT_STRTAB, .sh_offset = shstrtab_off,
        .sh_size = sizeof(shstrtab), .sh_addralign = 1};
    for (int i = 0; i < NSECTIONS; i++) {
        sh[i].sh_name = shname[i];
    }
    memcpy(mem + shstrtab_off, shstrtab, sizeof(shstrtab));

    img->registered = -1;
    img->mem = mem;
    img->mem_size = mem_size;
    img->nslots = nslots;
    img->slot_size = slot_size;
    img->symtab_off = symtab_off;
    img->strtab_off = strtab_off;
    img->strtab_used = 1;
    publish(img);
    return img;
}

/* Room for `len` more bytes of names: the image moves to a mapping large
   enough, registered before the old one goes.  0, or -1 and errno. */
static int
make_room(_PyPerfImage *img, size_t len)
{
    size_t need = img->strtab_off + img->strtab_used + len;
    if (need <= img->mem_size) {
        return 0;
    }
    size_t size = img->mem_size * 2;
    while (size < need) {
        size *= 2;
    }
    unsigned char *mem = map_image(size);
    if (mem == NULL) {
        return -1;
    }
    unsigned char *old = img->mem;
    size_t old_size = img->mem_size;
    memcpy(mem, old, img->strtab_off + img->strtab_used);
    img->mem = mem;
    img->mem_size = size;
    publish(img);
    munmap(old, old_size);
    return 0;
}

int
_PyPerfImage_Name(_PyPerfImage *img, size_t i, const char *name, size_t len)
{
    if (i >= img->nslots) {
        errno = EINVAL;
        return -1;
    }
    if (img->strtab_used + len + 1 > UINT32_MAX) {
        errno = EFBIG;
        return -1;
    }
    if (make_room(img, len + 1) < 0) {
        return -1;
    }
    size_t name_off = img->strtab_used;
    memcpy(img->mem + img->strtab_off + name_off, name, len);
    img->mem[img->strtab_off + name_off + len] = '\0';
    img->strtab_used = name_off + len + 1;
    Elf64_Sym sym = {
        .st_name = (Elf64_Word)name_off,
        .st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC),
        .st_other = STV_DEFAULT,
        .st_shndx = SEC_TEXT,
        .st_value = (uint64_t)i * img->slot_size,
        .st_size = _PyPerf_CodeSize(),
    };
    memcpy(img->mem + img->symtab_off + (i + 1) * sizeof(Elf64_Sym), &sym,
           sizeof(sym));
    publish(img);
    return 0;
}

#elif defined(PY_HAVE_PERF_TRAMPOLINE)

/* 32-bit targets: no image (no template is written for one yet). */
_PyPerfImage *
_PyPerfImage_New(const char *Py_UNUSED(code), size_t Py_UNUSED(nslots),
                 size_t Py_UNUSED(slot_size))
{
    errno = ENOSYS;
    return NULL;
}

int
_PyPerfImage_Name(_PyPerfImage *Py_UNUSED(img), size_t Py_UNUSED(i),
                  const char *Py_UNUSED(name), size_t Py_UNUSED(len))
{
    errno = ENOSYS;
    return -1;
}

#endif
