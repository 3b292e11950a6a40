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
 * The objects
 * -----------
 * Two per arena, anonymous or file-backed alike, each in anonymous memory
 * of its own: a core file holds anonymous memory but, by default, not the
 * pages of file mappings, and a core read on another machine has no
 * /tmp/py-perf-*.so beside it.  Each is a relocatable ELF object whose
 * sections carry the addresses they describe (what debuggers expect of a
 * JIT's object):
 *
 *     ELF header, section headers, .shstrtab
 *     .text      no bytes (SHT_NOBITS): the slots it names, at their address
 *     .eh_frame  in the arena's object one FDE per slot (empty in the
 *                other); its address is where an arena file keeps the same
 *                table, right after the slots (for an anonymous arena,
 *                where it would be), so that the pc-relative pointers are
 *                the ones Python/perf_unwind.c writes
 *     .symtab    a null symbol, then one per slot (zeros for a slot whose
 *                naming failed)
 *     .debug_abbrev, .debug_info, .debug_aranges, .debug_line
 *                for line trampolines (-X perf_lines) only: the arena
 *                file's line table (Python/perf_lines.c), the rows of
 *                each slot's pads, over the slots the object names
 *     .strtab    the names, the last section: it grows at the end; with
 *                a line table each name is followed by its file's, and
 *                .debug_line_str is the same bytes
 *
 * A plain trampolines' object has no line table: its name says its line
 * (below).  A line trampoline's function shows as two frames, its
 * trampoline's (the def line) and its line record's, whose address is a
 * pad: the line table gives that frame the pad's line, as it does to
 * perf from the arena file.  Its compile unit covers the object's .text
 * only, which publish() sets each time: a debugger looks an address's
 * line up in the unit whose range holds it, and an object's table has
 * rows only for the slots the object names.
 *
 * The arena's object unwinds every slot and names the slots up to a
 * point; the recent names' object names the slots after it, up to 128.
 * Once both are registered their .text sections do not overlap (a
 * debugger that finds two sections at one address names the frame from
 * only one of them).  gdb finds a slot's FDE in whichever object has it;
 * lldb looks only in the object whose section holds the address, and
 * unwinds the recent slots by reading their instructions (the frame
 * record the template makes), as the tests show on both kinds of build.
 *
 * A debugger's name is "py::QUALNAME (FILENAME:LINE)", not the one perf
 * shows ("py::QUALNAME:FILENAME"): gdb decodes a name without a space as
 * Ada's ("nest.py" becomes "nest[py]", "__init__" ".init.").
 *
 * Names given later
 * -----------------
 * A debugger reads an object when it is registered; a slot named after
 * that reaches a debugger attached from the start only through a new
 * registration, and each registration or unregistration stops the process
 * once in the debugger, which then reads the whole object.  So a name
 * goes into the recent names' object, registered anew under its second
 * entry before the first is unregistered (a core written at any moment
 * describes every slot): two stops that read at most 128 names.  Every
 * 128 names the arena's object, which holds every name already but shows
 * them only now, is registered anew, and the recent object starts again.
 * Without a debugger a registration is two calls of an empty function.
 * When the names outgrow an object's string table, it moves to a mapping
 * twice as large, registered before the old one is unmapped.
 *
 * A slot's rows are written once, into the arena file (Python/perf_elf.c)
 * or, for an arena without one, into the arena's object, and copied into
 * the objects (their bytes do not depend on where they are); at a
 * merge the recent object's line table starts again, empty, at its new
 * first slot.  An object's table has rows for the slots named so far
 * only (a block of 45 bytes and half a slot each, line 0 for a slot
 * skipped): .debug_line grows as names come, into room whose pages are
 * not touched before.
 *
 * Every caller holds the GIL (arenas are made and slots named with it),
 * which is what serializes changes of the list: the list is ours alone
 * (below).  A child of fork() keeps the list: the parent's arenas are
 * mapped in it too.
 *
 * This file calls the unwind table (Python/perf_unwind.c) and the ELF
 * header writer of the arena files (Python/perf_elf_image.c);
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
   Hidden: other JITs of the process (LLVM's, which numba uses, and any
   library that defines the interface) bind to their own definitions and
   change their own lists under their own locks.  Were ours in the dynamic
   symbol table, the dynamic linker would bind their references to it:
   one list changed under two locks.  gdb finds the descriptor of each
   object that has one (ours in the interpreter's .symtab, or in its
   split-off debug symbols when the binary is stripped), lldb the first it
   finds. */
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

extern PERF_TRAMPOLINE_HIDDEN struct jit_descriptor __jit_debug_descriptor;
extern PERF_TRAMPOLINE_HIDDEN void __jit_debug_register_code(void);

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

/* Sections, in the order of the section header table; a plain
   trampolines' object has the first NSECTIONS_PLAIN only, and the names of
   theirs only (SHSTRTAB_PLAIN bytes). */
enum {
    SEC_NULL, SEC_TEXT, SEC_EH_FRAME, SEC_SYMTAB, SEC_STRTAB, SEC_SHSTRTAB,
    SEC_ABBREV, SEC_INFO, SEC_ARANGES, SEC_LINE, SEC_LINE_STR,
    NSECTIONS
};
#define NSECTIONS_PLAIN SEC_ABBREV
static const char shstrtab[] =
    "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab"
    "\0.debug_abbrev\0.debug_info\0.debug_aranges\0.debug_line"
    "\0.debug_line_str";
static const Elf64_Word shname[NSECTIONS] = {
    0, 1, 7, 17, 25, 33, 43, 57, 69, 84, 96};
#define SHSTRTAB_PLAIN 43
_Static_assert(sizeof("\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab")
               == SHSTRTAB_PLAIN, "a plain object's section names");
/* .shstrtab follows the section headers. */
#define SHSTRTAB_OFF(nsections) \
    (sizeof(Elf64_Ehdr) + (nsections) * sizeof(Elf64_Shdr))
#define CU_NAME _PyPerfLines_CU_NAME
#define CU_NAME_STR _PyPerfLines_CU_NAME_STR

/* .strtab's first room, per symbol; it doubles when names need more. */
#define NAME_ROOM 64
/* Names a recent object holds before they go to the arena's object. */
#define RECENT_MAX 128

/* One object file in anonymous memory, registered under one of two
   entries: a new version is registered before the old one goes. */
typedef struct {
    struct jit_code_entry entry[2];
    int registered;               /* index of the registered entry, or -1 */
    unsigned char *mem;           /* the mapping */
    size_t mem_size;
    unsigned int nsections;       /* NSECTIONS with a line table */
    size_t symtab_off;
    size_t debug_off;             /* .debug_abbrev, with a line table */
    _PyPerfLinesLayout lines;     /* the line table's parts, from there */
    size_t strtab_off;
    size_t strtab_init;           /* bytes of .strtab before the names */
    size_t strtab_used;           /* bytes of .strtab written */
} jit_object;

struct _PyPerfImage {
    jit_object arena;             /* unwind table; names of slots < merged */
    jit_object recent;            /* names of slots merged .. named - 1 */
    uint64_t code;                /* the first slot's address */
    size_t nslots;
    size_t slot_size;
    _PyPerfKind kind;
    size_t merged;                /* slots described by `arena` */
    size_t named;                 /* slots named so far, the next one */
    size_t recent_max;            /* slots `recent` can name */
};

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

static Elf64_Shdr *
section_headers(jit_object *o)
{
    return (Elf64_Shdr *)(o->mem + sizeof(Elf64_Ehdr));
}

/* Register `o` as it is now, describing `nsyms` symbols of slots at
   `text` .. `text + text_size`, then unregister what a debugger read
   before. */
static void
publish(jit_object *o, uint64_t text, size_t text_size, size_t nsyms)
{
    Elf64_Shdr *sh = section_headers(o);
    sh[SEC_TEXT].sh_addr = text;
    sh[SEC_TEXT].sh_size = text_size;
    sh[SEC_SYMTAB].sh_size = (nsyms + 1) * sizeof(Elf64_Sym);
    sh[SEC_SYMTAB].sh_info = (Elf64_Word)(nsyms + 1);
    sh[SEC_STRTAB].sh_size = o->strtab_used;
    if (o->nsections == NSECTIONS) {
        sh[SEC_LINE].sh_size = o->lines.line_end - o->lines.line;
        sh[SEC_LINE_STR].sh_size = o->strtab_used;
        /* The compile unit over .text alone: the other object's, or
           another arena's, has the addresses around it. */
        _PyPerfLines_Place(o->mem + o->debug_off, &o->lines, text,
                           text_size);
    }
    int next = o->registered == 0;
    struct jit_code_entry *e = &o->entry[next];
    e->symfile_addr = (const char *)o->mem;
    e->symfile_size = o->strtab_off + o->strtab_used;
    link_entry(e);
    if (o->registered >= 0) {
        unlink_entry(&o->entry[o->registered]);
    }
    o->registered = next;
}

static void
withdraw(jit_object *o)
{
    if (o->registered >= 0) {
        unlink_entry(&o->entry[o->registered]);
        o->registered = -1;
    }
}

static unsigned char *
map_memory(size_t size)
{
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mem == MAP_FAILED ? NULL : mem;
}

/* Map `o` with room for `nsyms` symbols after `table_size` bytes of unwind
   table and write its headers (.text and .eh_frame at `text`, `eh_addr`),
   with room for `debug_size` bytes of line table if not 0 (put_lines()
   writes it).  The table is written at o->mem + *table_off.  0, or -1 and
   errno. */
static int
object_init(jit_object *o, size_t nsyms, size_t table_size,
            size_t *table_off, uint64_t eh_addr, size_t eh_size,
            size_t debug_size)
{
    o->nsections = debug_size != 0 ? NSECTIONS : NSECTIONS_PLAIN;
    size_t shstrtab_size = debug_size != 0 ? sizeof(shstrtab)
                                           : SHSTRTAB_PLAIN;
    size_t shstrtab_off = SHSTRTAB_OFF(o->nsections);
    size_t eh_off = _Py_SIZE_ROUND_UP(shstrtab_off + shstrtab_size, 8);
    /* The table may be written with more after it (the .eh_frame_hdr of
       an arena file), which the symbols then cover. */
    size_t symtab_off = _Py_SIZE_ROUND_UP(eh_off + eh_size, 8);
    size_t debug_off = symtab_off + (nsyms + 1) * sizeof(Elf64_Sym);
    size_t strtab_off = debug_off + debug_size;
    /* .strtab opens with the empty string, and with a line table the
       compile unit's name (its file until a slot is named) */
    size_t strtab_init = debug_size != 0
                         ? CU_NAME_STR + sizeof(CU_NAME) : 1;
    size_t end = strtab_off + (strtab_init - 1) + nsyms * NAME_ROOM;
    size_t table_end = eh_off + table_size;
    o->mem_size = _Py_SIZE_ROUND_UP(end > table_end ? end : table_end, 4096);
    o->mem = map_memory(o->mem_size);
    if (o->mem == NULL) {
        return -1;
    }
    *table_off = eh_off;
    o->registered = -1;
    o->symtab_off = symtab_off;
    o->debug_off = debug_off;
    o->strtab_off = strtab_off;
    o->strtab_init = strtab_init;
    o->strtab_used = 1;           /* the empty string; the pages are zeros */

    _PyPerfElf_Header(o->mem, ET_REL, o->nsections, SEC_SHSTRTAB);
    ((Elf64_Ehdr *)o->mem)->e_shoff = sizeof(Elf64_Ehdr);
    Elf64_Shdr *sh = section_headers(o);
    sh[SEC_TEXT] = (Elf64_Shdr){
        .sh_type = SHT_NOBITS, .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
        .sh_offset = eh_off, .sh_addralign = 16};
    /* Not SHF_ALLOC: its address (after the arena's code) is only the
       base of its pc-relative FDEs; an allocated section there would
       claim, in the debugger's map of addresses, the code of another
       arena mapped right after this one (gdb then named its frames ??). */
    sh[SEC_EH_FRAME] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_flags = 0,
        .sh_addr = eh_addr, .sh_offset = eh_off, .sh_size = eh_size,
        .sh_addralign = 8};
    sh[SEC_SYMTAB] = (Elf64_Shdr){
        .sh_type = SHT_SYMTAB, .sh_offset = symtab_off,
        .sh_link = SEC_STRTAB, .sh_addralign = 8,
        .sh_entsize = sizeof(Elf64_Sym)};
    sh[SEC_STRTAB] = (Elf64_Shdr){
        .sh_type = SHT_STRTAB, .sh_offset = strtab_off, .sh_addralign = 1};
    sh[SEC_SHSTRTAB] = (Elf64_Shdr){
        .sh_type = SHT_STRTAB, .sh_offset = shstrtab_off,
        .sh_size = shstrtab_size, .sh_addralign = 1};
    for (unsigned int i = 0; i < o->nsections; i++) {
        sh[i].sh_name = shname[i];
    }
    memcpy(o->mem + shstrtab_off, shstrtab, shstrtab_size);
    return 0;
}

/* The bytes of a line table for `nslots` line trampolines `slot_size`
   bytes apart, once every slot has its rows. */
static size_t
lines_size(size_t nslots, size_t slot_size)
{
    _PyPerfBytes measure = {NULL, 0, 0};
    _PyPerfLinesLayout at;
    _PyPerfLines_PutEmpty(&measure, nslots, slot_size, _PyPerf_LINES, 0,
                          &at);
    return at.end;
}

/* Write the line table of `o` (mapped by object_init() with room for it)
   for `nslots` line trampolines `slot_size` bytes apart from `text`, none
   named and no slot's rows yet (_PyPerfLines_Fill() adds them), over what
   was there; .strtab then holds no name.  (Its compile unit's range is
   publish()'s.)  The sections are the arena file's (Python/perf_lines.c);
   .debug_line_str is .strtab's bytes, as there. */
static void
put_lines(jit_object *o, size_t nslots, size_t slot_size, uint64_t text)
{
    _PyPerfBytes w = {o->mem + o->debug_off, 0,
                      o->strtab_off - o->debug_off};
    _PyPerfLinesLayout *at = &o->lines;
    /* (rows are added as slots are named: the pages of the rest stay
       untouched) */
    _PyPerfLines_PutEmpty(&w, nslots, slot_size, _PyPerf_LINES, text, at);
    assert(at->end == o->strtab_off - o->debug_off);
    memcpy(o->mem + o->strtab_off + CU_NAME_STR, CU_NAME, sizeof(CU_NAME));
    o->strtab_used = o->strtab_init;
    Elf64_Shdr *sh = section_headers(o);
    size_t parts[4][2] = {{0, at->info}, {at->info, at->aranges},
                          {at->aranges, at->line}, {at->line, at->end}};
    for (int k = 0; k < 4; k++) {
        sh[SEC_ABBREV + k] = (Elf64_Shdr){
            .sh_name = shname[SEC_ABBREV + k], .sh_type = SHT_PROGBITS,
            .sh_offset = o->debug_off + parts[k][0],
            .sh_size = parts[k][1] - parts[k][0], .sh_addralign = 1};
    }
    sh[SEC_LINE_STR] = (Elf64_Shdr){
        .sh_name = shname[SEC_LINE_STR], .sh_type = SHT_PROGBITS,
        .sh_flags = SHF_MERGE | SHF_STRINGS, .sh_offset = o->strtab_off,
        .sh_size = o->strtab_used, .sh_addralign = 1, .sh_entsize = 1};
}

/* Room for `len` more bytes of names in `o`: it moves to a mapping large
   enough.  The old mapping goes only after `o` was registered from the
   new one, at `text`, `text_size`, `nsyms` (what it described).  0, or
   -1 and errno. */
static int
make_room(jit_object *o, size_t len, uint64_t text, size_t text_size,
          size_t nsyms)
{
    size_t need = o->strtab_off + o->strtab_used + len;
    if (need <= o->mem_size) {
        return 0;
    }
    if (need > o->strtab_off + UINT32_MAX) {
        errno = EFBIG;
        return -1;
    }
    size_t size = o->mem_size * 2;
    while (size < need) {
        size *= 2;
    }
    unsigned char *mem = map_memory(size);
    if (mem == NULL) {
        return -1;
    }
    unsigned char *old = o->mem;
    size_t old_size = o->mem_size;
    /* (not the line table's room for rows not written yet: its pages are
       never touched) */
    size_t head = o->nsections == NSECTIONS
                  ? o->debug_off + o->lines.line_end : o->strtab_off;
    memcpy(mem, old, head);
    memcpy(mem + o->strtab_off, old + o->strtab_off, o->strtab_used);
    o->mem = mem;
    o->mem_size = size;
    if (o->registered >= 0) {
        /* Sizes as the debuggers know them: the newer names stay hidden
           until their own publish(). */
        size_t used = o->strtab_used;
        o->strtab_used = section_headers(o)[SEC_STRTAB].sh_size;
        publish(o, text, text_size, nsyms);
        o->strtab_used = used;
    }
    munmap(old, old_size);
    return 0;
}

/* `len` bytes at `s` as a string of `o`'s .strtab, whose offset it
   returns; make_room() made room for it. */
static uint32_t
put_string(jit_object *o, const char *s, size_t len)
{
    size_t off = o->strtab_used;
    unsigned char *p = o->mem + o->strtab_off + off;
    memcpy(p, s, len);
    p[len] = '\0';
    o->strtab_used = off + len + 1;
    return (uint32_t)off;
}

/* Write symbol `index` of `o` (a function `value` bytes into its .text)
   and its name, `len` bytes at `name` then `tail`; make_room() made room
   for them. */
static void
put_symbol(jit_object *o, size_t index, uint64_t value, uint64_t size,
           const char *name, size_t len, const char *tail, size_t tail_len)
{
    size_t name_off = o->strtab_used;
    unsigned char *p = o->mem + o->strtab_off + name_off;
    memcpy(p, name, len);
    memcpy(p + len, tail, tail_len);
    p[len + tail_len] = '\0';
    o->strtab_used = name_off + len + tail_len + 1;
    Elf64_Sym sym = {
        .st_name = (Elf64_Word)name_off,
        .st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC),
        .st_other = STV_DEFAULT,
        .st_shndx = SEC_TEXT,
        .st_value = value,
        .st_size = size,
    };
    memcpy(o->mem + o->symtab_off + index * sizeof(Elf64_Sym), &sym,
           sizeof(sym));
}

_PyPerfImage *
_PyPerfImage_New(const char *code, size_t nslots, size_t slot_size,
                 _PyPerfKind kind)
{
    size_t text_size = nslots * slot_size;
    size_t eh_before = _Py_SIZE_ROUND_UP(text_size, 8);
    size_t eh_size, hdr_size;
    if (_PyPerfUnwind_Table(kind, nslots, slot_size,
                            _PyPerf_Covered(slot_size, kind), eh_before,
                            NULL, 0,
                            &eh_size, &hdr_size) < 0)
    {
        return NULL;
    }
    _PyPerfImage *img = PyMem_RawCalloc(1, sizeof(_PyPerfImage));
    if (img == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    img->code = (uint64_t)(uintptr_t)code;
    img->nslots = nslots;
    img->slot_size = slot_size;
    img->kind = kind;
    img->recent_max = nslots < RECENT_MAX ? nslots : RECENT_MAX;
    /* Line trampolines' pads have lines: a line table in each object. */
    int lines = kind == _PyPerf_LINES;
    size_t table_off;
    jit_object *a = &img->arena;
    if (object_init(a, nslots, eh_size + hdr_size, &table_off,
                    img->code + eh_before, eh_size,
                    lines ? lines_size(nslots, slot_size) : 0) < 0)
    {
        goto fail;
    }
    if (_PyPerfUnwind_Table(kind, nslots, slot_size,
                            _PyPerf_Covered(slot_size, kind), eh_before,
                            a->mem + table_off, a->mem_size - table_off,
                            &eh_size, &hdr_size) < 0)
    {
        goto fail;
    }
    /* Over the .eh_frame_hdr: the null symbol and the unnamed slots (and
       the line table's room; no further: pages not written stay
       untouched). */
    size_t spilled = table_off + eh_size + hdr_size;
    if (spilled > a->symtab_off) {
        memset(a->mem + a->symtab_off, 0, spilled - a->symtab_off);
    }
    size_t unused;
    if (lines) {
        put_lines(a, nslots, slot_size, img->code);
    }
    if (object_init(&img->recent, img->recent_max, 0, &unused, img->code,
                    0, lines ? lines_size(img->recent_max, slot_size) : 0)
        < 0)
    {
        goto fail;
    }
    if (lines) {
        put_lines(&img->recent, img->recent_max, slot_size, img->code);
    }
    /* The unwind table now; the recent names' object with the first. */
    publish(a, img->code, 0, 0);
    return img;
fail:;
    int saved = errno;
    if (a->mem != NULL) {
        munmap(a->mem, a->mem_size);
    }
    PyMem_RawFree(img);
    errno = saved;
    return NULL;
}

/* Both objects unregistered and unmapped, then `img` freed. */
void
_PyPerfImage_Free(_PyPerfImage *img)
{
    jit_object *objects[2] = {&img->recent, &img->arena};
    for (int k = 0; k < 2; k++) {
        jit_object *o = objects[k];
        if (o->mem != NULL) {
            withdraw(o);
            munmap(o->mem, o->mem_size);
        }
    }
    /* (the entry last notified is gone) */
    __jit_debug_descriptor.relevant_entry = NULL;
    __jit_debug_descriptor.action_flag = JIT_NOACTION;
    PyMem_RawFree(img);
}

/* Where the recent object's .text starts, and its size: the slots after
   those the arena's object names. */
static uint64_t
recent_text(const _PyPerfImage *img, size_t *size)
{
    *size = (img->nslots - img->merged) * img->slot_size;
    return img->code + img->merged * img->slot_size;
}

/* The recent names join the arena's object; the recent object starts
   again after them, or goes when the arena has no slot left. */
static void
merge(_PyPerfImage *img)
{
    img->merged = img->named;
    publish(&img->arena, img->code, img->merged * img->slot_size,
            img->merged);
    jit_object *r = &img->recent;
    r->strtab_used = r->strtab_init;
    if (img->merged == img->nslots) {
        withdraw(r);
        munmap(r->mem, r->mem_size);
        r->mem = NULL;
    }
    else {
        size_t size;
        uint64_t text = recent_text(img, &size);
        if (r->nsections == NSECTIONS) {
            /* Its rows start again, at its new first slot. */
            put_lines(r, img->recent_max, img->slot_size, text);
        }
        publish(r, text, size, 0);
    }
}

/* `v` in decimal at `p`: the number of digits. */
static size_t
put_decimal(char *p, unsigned int v)
{
    char digits[10];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t k = 0; k < n; k++) {
        p[k] = digits[n - 1 - k];
    }
    return n;
}

int
_PyPerfImage_Name(_PyPerfImage *img, size_t i, PyCodeObject *code,
                  const char *name, size_t len, size_t file_at,
                  const unsigned char *rows)
{
    int lineno = code->co_firstlineno;
    if (i >= img->nslots || i < img->named || file_at == 0 || file_at > len) {
        errno = EINVAL;
        return -1;
    }
    /* "py::QUALNAME (FILENAME:LINE)": a space keeps gdb from decoding the
       name as Ada's (it shows "nest.py" as "nest[py]" and "__init__" as
       ".init."), and the line says where. */
    char tail[3 + _PyPerf_NAME_MAX + 16];
    size_t file_len = len - file_at;
    tail[0] = ' ';
    tail[1] = '(';
    memcpy(tail + 2, name + file_at, file_len);
    size_t tail_len = 2 + file_len;
    tail[tail_len++] = ':';
    tail_len += put_decimal(tail + tail_len,
                            lineno > 0 ? (unsigned int)lineno : 0);
    tail[tail_len++] = ')';
    size_t qual_len = file_at - 1;
    size_t need = qual_len + tail_len + 1;
    int lines = img->kind == _PyPerf_LINES;
    if (lines) {
        /* the line table's file name, a string of its own */
        need += file_len + 1;
    }
    if (i != img->named || i - img->merged >= RECENT_MAX) {
        /* After slots left unnamed, or when it is full, the recent
           object starts again here: its symbol k is slot merged + k. */
        img->named = i;
        merge(img);
    }

    /* The arena's object gets every name now, hidden from debuggers until
       the next merge(); the recent object shows it at once. */
    jit_object *a = &img->arena, *r = &img->recent;
    size_t k = i - img->merged;
    size_t recent_size;
    uint64_t recent = recent_text(img, &recent_size);
    if (make_room(a, need, img->code, img->merged * img->slot_size,
                  img->merged) < 0
        || make_room(r, need, recent, recent_size, k) < 0)
    {
        return -1;
    }
    put_symbol(a, i + 1, (uint64_t)i * img->slot_size,
               _PyPerf_Covered(img->slot_size, img->kind), name, qual_len,
               tail, tail_len);
    put_symbol(r, k + 1, (uint64_t)k * img->slot_size,
               _PyPerf_Covered(img->slot_size, img->kind), name, qual_len,
               tail, tail_len);
    if (lines) {
        /* The pads' rows, written once (Python/perf_lines.c): the arena
           file's, or without one here, then copied. */
        unsigned char *debug = a->mem + a->debug_off;
        uint32_t file = put_string(a, name + file_at, file_len);
        _PyPerfLines_Fill(debug, &a->lines, i + 1);
        _PyPerfLines_Fill(r->mem + r->debug_off, &r->lines, k + 1);
        if (rows != NULL) {
            _PyPerfLines_PutRows(debug, &a->lines, i, rows, file);
        }
        else {
            if (_PyPerfLines_NamePads(debug, &a->lines, i, img->slot_size,
                                      code, file) < 0)
            {
                _PyPerfLines_Name(debug, &a->lines, i, lineno, file);
            }
            rows = _PyPerfLines_SlotRows(debug, &a->lines, i);
        }
        _PyPerfLines_PutRows(r->mem + r->debug_off, &r->lines, k, rows,
                             put_string(r, name + file_at, file_len));
        /* A debugger that attaches, or a core dump, reads the arena's
           object as it is in memory, at any moment: its sections' sizes
           must always hold what the line table refers to (the table's
           length, the file names), while its symbols stay hidden. */
        Elf64_Shdr *sh = section_headers(a);
        sh[SEC_STRTAB].sh_size = a->strtab_used;
        sh[SEC_LINE_STR].sh_size = a->strtab_used;
        sh[SEC_LINE].sh_size = a->lines.line_end - a->lines.line;
        if (a->registered >= 0) {
            a->entry[a->registered].symfile_size = a->strtab_off
                                                   + a->strtab_used;
        }
    }
    img->named = i + 1;
    if (img->named == img->nslots || k + 1 == RECENT_MAX) {
        merge(img);
    }
    else {
        publish(r, recent, recent_size, k + 1);
    }
    return 0;
}

#elif defined(PY_HAVE_PERF_TRAMPOLINE)

/* 32-bit targets: no image (no template is written for one yet). */
_PyPerfImage *
_PyPerfImage_New(const char *Py_UNUSED(code), size_t Py_UNUSED(nslots),
                 size_t Py_UNUSED(slot_size), _PyPerfKind Py_UNUSED(kind))
{
    errno = ENOSYS;
    return NULL;
}

void
_PyPerfImage_Free(_PyPerfImage *Py_UNUSED(img))
{
}

int
_PyPerfImage_Name(_PyPerfImage *Py_UNUSED(img), size_t Py_UNUSED(i),
                  PyCodeObject *Py_UNUSED(code), const char *Py_UNUSED(name),
                  size_t Py_UNUSED(len), size_t Py_UNUSED(file_at),
                  const unsigned char *Py_UNUSED(rows))
{
    errno = ENOSYS;
    return -1;
}

#endif
