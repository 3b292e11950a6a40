/*
 * cpython-perf: arenas of trampolines as ELF files that perf reads by
 * itself.
 *
 * Why
 * ---
 * perf names an address in anonymous memory from /tmp/perf-PID.map, but
 * it cannot unwind through it: there is no unwind table, so
 * `perf record --call-graph dwarf` stops at the first trampoline on an
 * interpreter built without frame pointers.  The jitdump's answer,
 * `perf inject --jit`, writes one ELF file per function afterwards.  perf
 * reads symbols and unwind tables from the *file* behind an executable
 * mapping, though.  So an arena can be such a file from the start: the
 * slots' code, one FDE per slot (every slot is a copy of the same
 * template, so the whole table is known when the arena is made), and a
 * symbol per slot, written when the slot is handed to a code object.
 * perf, hotspot, eu-stack and any other reader of the files behind
 * mappings then name and unwind the trampolines with no inject and no
 * extra recording option.  (Debuggers learn of arenas otherwise:
 * Python/perf_debugger.c.)
 *
 * The file, /tmp/py-perf-PID-N.so (N counts this process's arena files)
 * --------------------------------------------------------------------------
 * Not /tmp/perf-*: perf takes any file of that prefix for a perf map.
 * Every address is the file offset (vaddr == offset), so readers need no
 * section-to-segment arithmetic, and the mapping starts at offset 0:
 *
 *     0        ELF header, 3 program headers (PT_LOAD of [0, end of
 *              .eh_frame_hdr) read+execute, PT_GNU_EH_FRAME, PT_NOTE),
 *              .note.gnu.build-id (20 random bytes, so that perf's build-id
 *              cache and `perf archive` keep each file apart; a build-id
 *              only once the file is sealed: see "Sealing and lines")
 *     320      .text: nslots copies of the template, slot_size apart
 *              .eh_frame: CIE, one FDE per slot, terminator
 *              .eh_frame_hdr: one table entry per slot
 *     -------- (mapped up to here, read+execute, never writable)
 *     page     the tables, mapped shared and writable right after the
 *              code, at the address their offset says:
 *              .symtab: a null symbol, then one entry per slot, all zeros
 *              (no symbol) until the slot is handed out; all local, so
 *              that the zero entries are well-formed too
 *              .debug_abbrev, .debug_info, .debug_aranges: one compile
 *              unit over .text; .debug_line: its line table (see "Source
 *              lines")
 *              .shstrtab, the section headers
 *              .strtab: 256 bytes a slot, and room for the longest name;
 *              .debug_line_str is the same bytes
 *
 * The unwind tables must be inside the code's mapping: perf's libunwind
 * glue reads them through the mapping that holds their address.  The
 * tables start at a page of their own, so that no page of the code is
 * ever writable, in any mapping.
 *
 * Naming through memory
 * ---------------------
 * Naming slot i is stores into the tables' mapping, no system call, in
 * the order readers need: its name into .strtab, its line and file (see
 * "Sealing and lines"), symbol i's value and size, then symbol i's first word
 * (name, type, section) in one 8-byte store, so that a reader that loads
 * it whole (libelf copies a section with memcpy, which may not) sees a
 * zero symbol or a whole one that points to a whole name.  The stores
 * reach the file's pages at once: perf, or any reader, reads them, and a
 * process killed at any point leaves them.
 *
 * Every section's size is fixed when the file is made, .strtab's too (the
 * bytes not written yet are a hole, which costs no disk): a reader that
 * read the section headers early (libelf, for perf top or a second
 * report) never finds a name beyond the sizes it read.  Before a slot is
 * handed out, _PyPerfElf_Reserve() makes sure that .strtab's disk is
 * allocated for one more name of any length, 16 KiB at a time and to the
 * end of a page: a store into a hole of a full file system would be
 * SIGBUS (btrfs and NFS do not keep that promise of fallocate()).  When
 * it cannot (a full disk, or the names took more than 256 bytes a slot),
 * the arena hands out no more slots, and the next ones go to a new file
 * or, if that fails too, to anonymous memory and the map, with a
 * warning.
 *
 * Sealing and lines
 * -----------------
 * While names are added, the file has no build-id: its note says so until
 * the file is sealed, when its names are final (Python/perf_seal.c, which
 * also seals it at a crash).  Each slot's source line is in DWARF's line
 * table (Python/perf_lines.c), whose file names are the ends of the
 * symbol names: .debug_line_str is .strtab's bytes.

 * Safety
 * ------
 * The name is predictable and /tmp is shared: the file is created 0600
 * with O_EXCL and O_NOFOLLOW, and a name already taken (a stale file of an
 * earlier process with our pid, a planted symlink, anything) is left
 * alone: the next N is tried.  Existing files are never reused or cut:
 * cutting a file that a live process maps (one with our pid in another
 * pid namespace sharing /tmp) would kill it with SIGBUS.  A file's
 * descriptor and its tables' mapping stay only while its arena has slots
 * to name; a forked child lets go of the ones it inherited (it never
 * names the parent's slots), and before the descriptor allocates disk
 * (once per 16 KiB of names) it is checked to be still the file (a daemon
 * that closes every descriptor may have reused its number).  Truncating
 * or rewriting the file in place while the process runs (`truncate`,
 * `strip`) is its owner's doing and is not guarded against: the process
 * may then fault, or its later names be wrong.
 * Where the mapping cannot be made executable (/tmp mounted noexec, a
 * security policy), the file is removed and the caller falls back to
 * anonymous memory.
 *
 * This file calls the unwind table (Python/perf_unwind.c), the line
 * table (Python/perf_lines.c), the sealing (Python/perf_seal.c) and the
 * writer's checks of /tmp (Python/perf_file.c); Python/perf_arena.c calls
 * it, and Python/perf_debugger.c its ELF header writer.
 */

#include "Python.h"
#include "perf_internal.h"

#if defined(PY_HAVE_PERF_TRAMPOLINE) && SIZEOF_VOID_P == 8

#include <elf.h>
#include <errno.h>
#include <fcntl.h>                // open()
#include <stddef.h>               // offsetof()
#include <string.h>
#include <sys/mman.h>             // mmap()
#include <sys/stat.h>             // fstat()
#include <unistd.h>

/* The fixed part at the start of the file. */
#define NPHDRS 3
#define NOTE_OFF _PyPerfSeal_NOTE_OFF
#define NOTE_SIZE _PyPerfSeal_NOTE_SIZE
_Static_assert(NOTE_OFF == sizeof(Elf64_Ehdr) + NPHDRS * sizeof(Elf64_Phdr),
               "the build-id note follows the program headers");
#define TEXT_OFF 320
_Static_assert(NOTE_OFF + NOTE_SIZE <= TEXT_OFF, "headers fit before .text");

/* Sections, in the order of the section header table. */
enum {
    SEC_NULL, SEC_NOTE, SEC_TEXT, SEC_EH_FRAME, SEC_EH_FRAME_HDR,
    SEC_SYMTAB, SEC_ABBREV, SEC_INFO, SEC_ARANGES, SEC_LINE, SEC_SHSTRTAB,
    SEC_STRTAB, SEC_LINE_STR, NSECTIONS
};
static const char shstrtab[] =
    "\0.note.gnu.build-id\0.text\0.eh_frame\0.eh_frame_hdr\0.symtab"
    "\0.debug_abbrev\0.debug_info\0.debug_aranges\0.debug_line"
    "\0.shstrtab\0.strtab\0.debug_line_str";
/* Offsets of the names in shstrtab, by section. */
static const Elf64_Word shname[NSECTIONS] = {
    0, 1, 20, 26, 36, 50, 58, 72, 84, 99, 111, 121, 129};

/* Names tried before giving up: stale files of earlier processes with our
   pid (a container's pid 1, restarted with the same /tmp) pile up. */
#define MAX_TRIES 1024
/* .strtab's size, fixed when the file is made: this much per slot (a
   name is 60 to 150 bytes, most often), and room for one of the longest.
   Bytes never written are a hole: they cost no disk. */
#define NAME_ROOM 256
/* Its bytes are allocated on disk this much at a time, ahead of the names
   written there (a write through a mapping into a hole of a full file
   system would be SIGBUS). */
#define STRTAB_CHUNK (16 * 1024)
/* The file's path: "/tmp/py-perf-PID-N.so". */
#define PATH_ROOM _PyPerf_ELF_PATH_ROOM

struct _PyPerfElf {
    int fd;
    dev_t dev;                    /* the file the descriptor must still be */
    ino_t ino;
    char path[PATH_ROOM];
    size_t slot_size;
    unsigned char *tables;        /* the file from tables_off to its end,
                                     shared, read+write */
    size_t tables_len;
    uint64_t tables_off;
    /* Offsets from `tables`: */
    size_t symtab_off;            /* of symbol 0 */
    size_t debug_off;             /* of .debug_abbrev, the first debug
                                     section */
    _PyPerfLinesLayout lines;     /* the others, from there */
    size_t strtab_off;
    size_t strtab_size;           /* what its section header declares */
    size_t strtab_used;           /* bytes of names written */
    size_t strtab_backed;         /* bytes allocated on disk */
    uint64_t page;
};

static unsigned int files_made;   /* N of the next file */


/* .strtab opens with the empty string and the line table's compile unit
   name (Python/perf_lines.c). */
#define STRTAB_INIT_SIZE (1 + sizeof(_PyPerfLines_CU_NAME))

/* Write all of buf at `off`.  A short write goes on where it stopped:
   the file is ours alone and every byte has its place.  (Appending to a
   map or dump, Python/perf_file.c gives up instead and takes the part
   back: another writer may append between two write()s.) */
static int
write_at(int fd, const void *buf, size_t size, uint64_t off)
{
    const char *p = buf;
    while (size > 0) {
        ssize_t n = pwrite(fd, p, size, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if (n == 0) {
            errno = ENOSPC;
            return -1;
        }
        p += n;
        size -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

/* Allocate `size` bytes of the file at `off` on disk (zeros where
   nothing was written), so that writes through a mapping cannot meet a
   full file system.  (glibc writes zeros on file systems without
   fallocate().)  0, or -1 and errno. */
static int
allocate(int fd, uint64_t off, uint64_t size)
{
    int r;
    do {
        r = posix_fallocate(fd, (off_t)off, (off_t)size);
    } while (r == EINTR);
    if (r != 0) {
        errno = r;
        return -1;
    }
    return 0;
}

/* A new file of ours, open, or -1 and errno.  See "Safety". */
static int
create_file(char *path, size_t path_size)
{
    long pid = (long)getpid();
    for (int tries = 0; tries < MAX_TRIES; tries++) {
        PyOS_snprintf(path, path_size, "/tmp/py-perf-%ld-%u.so", pid,
                      files_made++);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW
                            | O_CLOEXEC, 0600);
        if (fd >= 0) {
            return fd;
        }
        if (errno != EEXIST) {
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

void
_PyPerfElf_Header(void *ehdr, int type, unsigned int shnum,
                  unsigned int shstrndx)
{
    Elf64_Ehdr *eh = ehdr;
    memset(eh, 0, sizeof(*eh));
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
#if PY_LITTLE_ENDIAN
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
#else
    eh->e_ident[EI_DATA] = ELFDATA2MSB;
#endif
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_ident[EI_OSABI] = ELFOSABI_NONE;
    eh->e_type = (Elf64_Half)type;
    eh->e_machine = _PyPerf_elf_machine;
    eh->e_version = EV_CURRENT;
    eh->e_ehsize = sizeof(Elf64_Ehdr);
    eh->e_shentsize = sizeof(Elf64_Shdr);
    eh->e_shnum = (Elf64_Half)shnum;
    eh->e_shstrndx = (Elf64_Half)shstrndx;
}

/* --- The file, section by section (see "The file" above) -------------- */

/* Where everything is: file offsets, which are addresses too. */
typedef struct {
    size_t nslots;
    size_t slot_size;
    uint64_t page;
    uint64_t text_size;
    uint64_t eh_off, eh_size;         /* .eh_frame */
    uint64_t hdr_off, hdr_size;       /* .eh_frame_hdr */
    uint64_t mapped_end;              /* of the code's part (PT_LOAD) */
    uint64_t map_len;                 /* of its mapping, whole pages */
    uint64_t tables_off;              /* .symtab, first of the tables */
    uint64_t symtab_off, symtab_size;
    uint64_t abbrev_off;              /* the debug sections, from here */
    _PyPerfLinesLayout at;            /* ... at these offsets from it */
    uint64_t shstrtab_off;
    uint64_t shdr_off;                /* the section headers */
    uint64_t strtab_off, strtab_size;
    uint64_t file_size;
} file_layout;

/* The layout of a file of `nslots` slots `slot_size` apart.  0, or -1,
   errno and *what. */
static int
plan_file(size_t nslots, size_t slot_size, file_layout *L,
          const char **what)
{
    long pagesz = sysconf(_SC_PAGESIZE);
    L->page = pagesz > 0 ? (uint64_t)pagesz : 4096;
    L->nslots = nslots;
    L->slot_size = slot_size;
    L->text_size = (uint64_t)nslots * slot_size;
    L->eh_off = _Py_SIZE_ROUND_UP(TEXT_OFF + L->text_size, 8);
    size_t eh_size, hdr_size;
    *what = "describe the trampoline template's frames for";
    if (_PyPerfUnwind_Table(nslots, slot_size, L->eh_off - TEXT_OFF, NULL,
                            0, &eh_size, &hdr_size) < 0)
    {
        return -1;
    }
    L->eh_size = eh_size;
    L->hdr_off = L->eh_off + eh_size;
    L->hdr_size = hdr_size;
    L->mapped_end = L->hdr_off + hdr_size;
    L->map_len = _Py_SIZE_ROUND_UP(L->mapped_end, L->page);
    /* The tables start at a page of their own: they are mapped shared
       and writable, and no page of the code may be. */
    L->tables_off = L->map_len;
    L->symtab_off = L->tables_off;
    L->symtab_size = ((uint64_t)nslots + 1) * sizeof(Elf64_Sym);
    L->abbrev_off = L->symtab_off + L->symtab_size;
    if (nslots >= _PyPerfLines_MAX_SLOTS || slot_size > UINT16_MAX) {
        *what = "describe so many trampolines in";
        errno = EFBIG;
        return -1;
    }
    _PyPerfBytes measure = {NULL, 0, 0};
    _PyPerfLines_Put(&measure, nslots, slot_size, TEXT_OFF, &L->at);
    L->shstrtab_off = L->abbrev_off + L->at.end;
    L->shdr_off = _Py_SIZE_ROUND_UP(L->shstrtab_off + sizeof(shstrtab), 8);
    L->strtab_off = L->shdr_off + NSECTIONS * sizeof(Elf64_Shdr);
    L->strtab_size = STRTAB_INIT_SIZE + (uint64_t)nslots * NAME_ROOM
                     + _PyPerf_NAME_MAX + 1;
    L->file_size = L->strtab_off + L->strtab_size;
    if (L->strtab_size > UINT32_MAX) {
        *what = "describe so many trampolines in";
        errno = EFBIG;
        return -1;
    }
    return 0;
}

/* The code's part, [0, mapped_end): the ELF header, the program headers,
   .note.gnu.build-id, .text, .eh_frame, .eh_frame_hdr.  0, or -1 and
   errno. */
static int
put_code_part(unsigned char *img, const file_layout *L)
{
    memset(img, 0, TEXT_OFF + L->slot_size);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    _PyPerfElf_Header(eh, ET_DYN, NSECTIONS, SEC_SHSTRTAB);
    eh->e_phoff = sizeof(Elf64_Ehdr);
    eh->e_shoff = L->shdr_off;
    eh->e_phentsize = sizeof(Elf64_Phdr);
    eh->e_phnum = NPHDRS;
    Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof(Elf64_Ehdr));
    ph[0] = (Elf64_Phdr){.p_type = PT_LOAD, .p_flags = PF_R | PF_X,
                         .p_offset = 0, .p_vaddr = 0, .p_paddr = 0,
                         .p_filesz = L->mapped_end,
                         .p_memsz = L->mapped_end, .p_align = L->page};
    ph[1] = (Elf64_Phdr){.p_type = PT_GNU_EH_FRAME, .p_flags = PF_R,
                         .p_offset = L->hdr_off, .p_vaddr = L->hdr_off,
                         .p_paddr = L->hdr_off, .p_filesz = L->hdr_size,
                         .p_memsz = L->hdr_size, .p_align = 4};
    ph[2] = (Elf64_Phdr){.p_type = PT_NOTE, .p_flags = PF_R,
                         .p_offset = NOTE_OFF, .p_vaddr = NOTE_OFF,
                         .p_paddr = NOTE_OFF, .p_filesz = NOTE_SIZE,
                         .p_memsz = NOTE_SIZE, .p_align = 4};
    _PyPerfSeal_PutNote(img + NOTE_OFF);
    /* (the first slot was zeroed above: the gaps are zeros) */
    unsigned char *text = img + TEXT_OFF;
    _PyPerf_FillSlots(text, L->nslots, L->slot_size);
    /* (zeros from the last copy to the .eh_frame) */
    memset(text + L->text_size, 0,
           (size_t)(L->eh_off - TEXT_OFF - L->text_size));
    size_t eh_size, hdr_size;
    return _PyPerfUnwind_Table(L->nslots, L->slot_size,
                               L->eh_off - TEXT_OFF, img + L->eh_off,
                               (size_t)(L->mapped_end - L->eh_off),
                               &eh_size, &hdr_size);
}

/* The section header table. */
static void
put_section_headers(Elf64_Shdr *sh, const file_layout *L)
{
    const _PyPerfLinesLayout *at = &L->at;
    sh[SEC_NOTE] = (Elf64_Shdr){
        .sh_type = SHT_NOTE, .sh_flags = SHF_ALLOC, .sh_addr = NOTE_OFF,
        .sh_offset = NOTE_OFF, .sh_size = NOTE_SIZE, .sh_addralign = 4};
    sh[SEC_TEXT] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
        .sh_addr = TEXT_OFF, .sh_offset = TEXT_OFF,
        .sh_size = L->text_size, .sh_addralign = 16};
    sh[SEC_EH_FRAME] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC,
        .sh_addr = L->eh_off, .sh_offset = L->eh_off,
        .sh_size = L->eh_size, .sh_addralign = 8};
    sh[SEC_EH_FRAME_HDR] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC,
        .sh_addr = L->hdr_off, .sh_offset = L->hdr_off,
        .sh_size = L->hdr_size, .sh_addralign = 4};
    sh[SEC_SYMTAB] = (Elf64_Shdr){
        .sh_type = SHT_SYMTAB, .sh_offset = L->symtab_off,
        .sh_size = L->symtab_size, .sh_link = SEC_STRTAB,
        .sh_info = (Elf64_Word)(L->nslots + 1),
        .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym)};
    sh[SEC_ABBREV] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_offset = L->abbrev_off,
        .sh_size = at->info, .sh_addralign = 1};
    sh[SEC_INFO] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_offset = L->abbrev_off + at->info,
        .sh_size = at->aranges - at->info, .sh_addralign = 1};
    sh[SEC_ARANGES] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_offset = L->abbrev_off + at->aranges,
        .sh_size = at->line - at->aranges, .sh_addralign = 1};
    sh[SEC_LINE] = (Elf64_Shdr){
        .sh_type = SHT_PROGBITS, .sh_offset = L->abbrev_off + at->line,
        .sh_size = at->end - at->line, .sh_addralign = 1};
    sh[SEC_STRTAB] = (Elf64_Shdr){
        .sh_type = SHT_STRTAB, .sh_offset = L->strtab_off,
        .sh_size = L->strtab_size, .sh_addralign = 1};
    /* The same bytes: a file name is the end of its function's symbol
       name (see "Source lines"). */
    sh[SEC_LINE_STR] = sh[SEC_STRTAB];
    sh[SEC_LINE_STR].sh_type = SHT_PROGBITS;
    sh[SEC_LINE_STR].sh_flags = SHF_MERGE | SHF_STRINGS;
    sh[SEC_LINE_STR].sh_entsize = 1;
    sh[SEC_SHSTRTAB] = (Elf64_Shdr){
        .sh_type = SHT_STRTAB, .sh_offset = L->shstrtab_off,
        .sh_size = sizeof(shstrtab), .sh_addralign = 1};
    for (int i = 0; i < NSECTIONS; i++) {
        sh[i].sh_name = shname[i];
    }
}

/* What is written of the tables, from .debug_abbrev to .strtab's first
   strings: the debug sections, .shstrtab, the section headers. */
#define TAIL_SIZE(L) ((L)->strtab_off + STRTAB_INIT_SIZE - (L)->abbrev_off)

static void
put_tables_tail(unsigned char *tail, const file_layout *L)
{
    memset(tail, 0, (size_t)TAIL_SIZE(L));
    _PyPerfLinesLayout at;
    _PyPerfBytes debug = {tail, 0, L->at.end};
    _PyPerfLines_Put(&debug, L->nslots, L->slot_size, TEXT_OFF, &at);
    assert(debug.n == L->at.end);
    memcpy(tail + (L->shstrtab_off - L->abbrev_off), shstrtab,
           sizeof(shstrtab));
    put_section_headers((Elf64_Shdr *)(tail + (L->shdr_off - L->abbrev_off)),
                        L);
    memcpy(tail + (L->strtab_off - L->abbrev_off) + 1, _PyPerfLines_CU_NAME,
           sizeof(_PyPerfLines_CU_NAME));
}

/* The bytes of .strtab (at file offset `off`, `size` bytes) to allocate
   on disk when `used` are written: a chunk more, to the end of a page (a
   write fault reserves the whole page's blocks on some file systems). */
static uint64_t
backed_end(uint64_t off, uint64_t used, uint64_t size, uint64_t page)
{
    uint64_t end = _Py_SIZE_ROUND_UP(off + used + STRTAB_CHUNK, page) - off;
    return end < size ? end : size;
}

/* The file at its full size, a hole but for what is written: the code's
   part and the tail; then disk for .symtab and the first 16 KiB of names
   (*backed).  0, or -1, errno and *what. */
static int
write_file(int fd, const unsigned char *img, const unsigned char *tail,
           const file_layout *L, uint64_t *backed, const char **what)
{
    *what = "write";
    if (ftruncate(fd, (off_t)L->file_size) < 0
        || write_at(fd, img, (size_t)L->mapped_end, 0) < 0
        || write_at(fd, tail, (size_t)TAIL_SIZE(L), L->abbrev_off) < 0)
    {
        return -1;
    }
    *what = "allocate room for the names in";
    *backed = backed_end(L->strtab_off, 0, L->strtab_size, L->page);
    if (allocate(fd, L->symtab_off, L->symtab_size) < 0
        || allocate(fd, L->strtab_off, *backed) < 0)
    {
        return -1;
    }
    return 0;
}

/* Let go of `len` bytes of address space at `mem`; with `keep`, hold
   on to the range instead (no access, no memory), for a later file of the
   same layout.  Whether it is held.  (A failed MAP_FIXED may have left a
   hole, which another thread's mmap() can take at once: nothing is
   unmapped after one.) */
static int
release_range(void *mem, size_t len, int keep)
{
    if (!keep) {
        munmap(mem, len);
        return 0;
    }
    return mmap(mem, len, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                -1, 0) != MAP_FAILED;
}

/* The code read+execute, then the tables shared and writable right after
   it, at the addresses their file offsets say (readers that take a
   file's mappings for one module, elfutils', need that): address space
   for both first.  The start, or NULL, errno and *what. */
static char *
map_file(int fd, const file_layout *L, const char **what)
{
    *what = "map executable";
    size_t tables_len = (size_t)(L->file_size - L->tables_off);
    size_t len = (size_t)L->map_len + tables_len;
    char *mem = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (mem == MAP_FAILED) {
        return NULL;
    }
    /* (No cache flush: nothing is stored through the code's mapping; the
       kernel keeps instruction caches coherent with the file's pages.) */
    if (mmap(mem, (size_t)L->map_len, PROT_READ | PROT_EXEC,
             MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED)
    {
        goto fail;
    }
    *what = "map for writing the names";
    if (mmap(mem + L->map_len, tables_len, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED, fd, (off_t)L->tables_off) == MAP_FAILED)
    {
        goto fail;
    }
    return mem;
fail:;
    int saved = errno;
    munmap(mem, len);
    errno = saved;
    return NULL;
}

/* The same in the range `at` of a dead arena's file of the same layout,
   whose tables' addresses were held: the tables first, then the code in
   one step (a frame returning through a dead trampoline meets the same
   bytes in the old file and the new).  A failure leaves the code as it
   is, and the range is not to be used again.  0, or -1, errno and
   *what. */
static int
map_file_at(int fd, const file_layout *L, char *at, const char **what)
{
    size_t tables_len = (size_t)(L->file_size - L->tables_off);
    *what = "map for writing the names";
    if (mmap(at + L->map_len, tables_len, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED, fd, (off_t)L->tables_off) == MAP_FAILED)
    {
        return -1;
    }
    *what = "map executable";
    if (mmap(at, (size_t)L->map_len, PROT_READ | PROT_EXEC,
             MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED)
    {
        int saved = errno;
        (void)release_range(at + L->map_len, tables_len, 1);
        errno = saved;
        return -1;
    }
    return 0;
}

_PyPerfElf *
_PyPerfElf_New(size_t nslots, size_t slot_size, char *at, size_t at_size,
               char **code, const char **what)
{
    file_layout L;
    if (plan_file(nslots, slot_size, &L, what) < 0) {
        return NULL;
    }
    if (at != NULL && L.map_len + (L.file_size - L.tables_off) != at_size) {
        *what = "lay out in a dead arena's addresses";
        errno = ERANGE;
        return NULL;
    }
    _PyPerfElf *elf = PyMem_RawCalloc(1, sizeof(_PyPerfElf));
    unsigned char *img = PyMem_RawMalloc((size_t)(L.mapped_end
                                                  + TAIL_SIZE(&L)));
    if (elf == NULL || img == NULL) {
        PyMem_RawFree(elf);
        PyMem_RawFree(img);
        *what = "allocate memory for";
        errno = ENOMEM;
        return NULL;
    }
    unsigned char *tail = img + L.mapped_end;
    int saved;
    *what = "describe the trampoline template's frames for";
    if (put_code_part(img, &L) < 0) {
        goto fail_early;
    }

    /* Room for its whole size: what it takes once every slot is
       named. */
    uint64_t spare;
    *what = "find room beside /tmp's reserve for";
    if (_PyPerf_TmpRoom(-1, L.file_size, &spare) < 0) {
        goto fail_early;
    }
    *what = "create";
    elf->fd = create_file(elf->path, sizeof(elf->path));
    if (elf->fd < 0) {
        goto fail_early;
    }
    put_tables_tail(tail, &L);
    uint64_t backed;
    char *mem;
    struct stat st;
    if (write_file(elf->fd, img, tail, &L, &backed, what) < 0) {
        goto fail;
    }
    if (at != NULL) {
        if (map_file_at(elf->fd, &L, at, what) < 0) {
            goto fail;
        }
        mem = at;
    }
    else if ((mem = map_file(elf->fd, &L, what)) == NULL) {
        goto fail;
    }
    if (fstat(elf->fd, &st) < 0) {
        saved = errno;
        size_t tables_len = (size_t)(L.file_size - L.tables_off);
        if (at != NULL) {
            /* (the code stays: the same bytes as the old file's) */
            (void)release_range(mem + L.map_len, tables_len, 1);
        }
        else {
            munmap(mem, (size_t)L.map_len + tables_len);
        }
        errno = saved;
        goto fail;
    }
    PyMem_RawFree(img);
    _PyPerfSeal_AtCrash(elf->fd, st.st_dev, st.st_ino);
    elf->dev = st.st_dev;
    elf->ino = st.st_ino;
    elf->slot_size = slot_size;
    elf->tables = (unsigned char *)mem + L.map_len;
    elf->tables_len = (size_t)(L.file_size - L.tables_off);
    elf->tables_off = L.tables_off;
    elf->symtab_off = (size_t)(L.symtab_off - L.tables_off);
    elf->debug_off = (size_t)(L.abbrev_off - L.tables_off);
    elf->lines = L.at;
    elf->strtab_off = (size_t)(L.strtab_off - L.tables_off);
    elf->strtab_size = (size_t)L.strtab_size;
    elf->strtab_used = STRTAB_INIT_SIZE;
    elf->strtab_backed = (size_t)backed;
    elf->page = L.page;
    *code = mem + TEXT_OFF;
    return elf;

fail:
    saved = errno;
    /* Ours, just made, and held open: gone with its descriptor. */
    (void)unlink(elf->path);
    close(elf->fd);
    errno = saved;
fail_early:
    saved = errno;
    PyMem_RawFree(img);
    PyMem_RawFree(elf);
    errno = saved;
    return NULL;
}

/* (Python/perf_file.c: a descriptor closed behind our back is not ours
   to write to or close.) */
static int
still_ours(_PyPerfElf *elf)
{
    return _PyPerf_KeepIfSameFile(&elf->fd, elf->dev, elf->ino);
}

int
_PyPerfElf_Reserve(_PyPerfElf *elf)
{
    if (_PyPerfSeal_SealedAtCrash(elf->fd)) {
        /* (sealed at a fault that the process survived) */
        errno = EPERM;
        return -1;
    }
    size_t need = elf->strtab_used + _PyPerf_NAME_MAX + 1;
    if (need <= elf->strtab_backed) {
        return 0;
    }
    if (need > elf->strtab_size) {
        /* The slots' names took more than NAME_ROOM each. */
        errno = ENOSPC;
        return -1;
    }
    if (!still_ours(elf)) {
        errno = EBADF;
        return -1;
    }
    size_t end = (size_t)backed_end(elf->tables_off + elf->strtab_off,
                                    need, elf->strtab_size, elf->page);
    uint64_t spare;
    if (_PyPerf_TmpRoom(elf->fd, end - elf->strtab_backed, &spare) < 0
        || allocate(elf->fd, elf->tables_off + elf->strtab_off
                             + elf->strtab_backed,
                    end - elf->strtab_backed) < 0)
    {
        return -1;
    }
    elf->strtab_backed = end;
    return 0;
}

int
_PyPerfElf_Name(_PyPerfElf *elf, size_t i, PyCodeObject *code,
                const char *name, size_t name_len, size_t file_at)
{
    size_t len = name_len + 1;
    size_t name_off = elf->strtab_used;
    if (name_off + len > elf->strtab_backed) {
        /* (_PyPerfElf_Reserve() made room for any name.) */
        errno = ENOSPC;
        return -1;
    }
    /* Through the shared mapping, in the order readers need: the name;
       the slot's line and file (the end of the name); the symbol's value
       and size; then, in one store after the others, its first word,
       which points to the name and makes it a function (a reader that
       loads the word whole sees a zero symbol until then).  See "Naming
       through memory". */
    unsigned char *t = elf->tables;
    memcpy(t + elf->strtab_off + name_off, name, len);
    elf->strtab_used = name_off + len;
    _PyPerfLines_Name(t + elf->debug_off, &elf->lines, i,
                      code->co_firstlineno, (uint32_t)(name_off + file_at));
    Elf64_Sym *sym = (Elf64_Sym *)(t + elf->symtab_off
                                   + (i + 1) * sizeof(Elf64_Sym));
    sym->st_value = TEXT_OFF + (uint64_t)i * elf->slot_size;
    sym->st_size = _PyPerf_CodeSize();
    Elf64_Sym head = {
        .st_name = (Elf64_Word)name_off,
        .st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC),
        .st_other = STV_DEFAULT,
        .st_shndx = SEC_TEXT,
    };
    uint64_t word;
    _Static_assert(offsetof(Elf64_Sym, st_value) == sizeof(word),
                   "a symbol's first word ends before its value");
    memcpy(&word, &head, sizeof(word));
    __atomic_store_n((uint64_t *)sym, word, __ATOMIC_RELEASE);
    return 0;
}

int
_PyPerfElf_Close(_PyPerfElf *elf, int keep_range, _PyPerfElfName *name)
{
    int kept = release_range(elf->tables, elf->tables_len, keep_range);
    if (name != NULL) {
        memset(name, 0, sizeof(*name));
    }
    int fd = elf->fd;
    if (still_ours(elf)) {
        _PyPerfSeal_Seal(elf->fd);
    }
    /* (after the seal: a crash in between seals it too) */
    _PyPerfSeal_Forget(fd);
    if (elf->fd >= 0) {
        struct stat st;
        if (name != NULL && fstat(elf->fd, &st) == 0) {
            memcpy(name->path, elf->path, sizeof(name->path));
            name->dev = st.st_dev;
            name->ino = st.st_ino;
            name->bytes = (uint64_t)st.st_blocks * 512;
        }
        close(elf->fd);
    }
    PyMem_RawFree(elf);
    return kept;
}

size_t
_PyPerfElf_CodeMapSize(const _PyPerfElf *elf)
{
    /* (the code's mapping ends where the tables' starts: vaddr ==
       offset) */
    return (size_t)elf->tables_off;
}

size_t
_PyPerfElf_RangeSize(const _PyPerfElf *elf)
{
    return (size_t)elf->tables_off + elf->tables_len;
}

void
_PyPerfElf_Drop(_PyPerfElf *elf)
{
    /* A fork() child handler: no allocator call (tracemalloc's lock may
       be held by a thread that does not exist in the child); the few bytes
       of the record stay.  The parent's file is the parent's to write. */
    _PyPerfSeal_Forget(elf->fd);
    if (elf->tables != NULL) {
        munmap(elf->tables, elf->tables_len);
        elf->tables = NULL;
    }
    if (still_ours(elf)) {
        close(elf->fd);
        elf->fd = -1;
    }
}

void
_PyPerfElf_AfterFork(void)
{
    files_made = 0;
    _PyPerfSeal_AfterFork();
}

#elif defined(PY_HAVE_PERF_TRAMPOLINE)

/* 32-bit targets: no arena files (no template is written for one yet);
   arenas are anonymous. */
_PyPerfElf *
_PyPerfElf_New(size_t Py_UNUSED(nslots), size_t Py_UNUSED(slot_size),
               char *Py_UNUSED(at), size_t Py_UNUSED(at_size),
               char **Py_UNUSED(code), const char **what)
{
    *what = "make an ELF arena file on this platform for";
    errno = ENOSYS;
    return NULL;
}

int
_PyPerfElf_Reserve(_PyPerfElf *Py_UNUSED(elf))
{
    errno = ENOSYS;
    return -1;
}

int
_PyPerfElf_Name(_PyPerfElf *Py_UNUSED(elf), size_t Py_UNUSED(i),
                PyCodeObject *Py_UNUSED(code), const char *Py_UNUSED(name),
                size_t Py_UNUSED(len), size_t Py_UNUSED(file_at))
{
    errno = ENOSYS;
    return -1;
}

int
_PyPerfElf_Close(_PyPerfElf *Py_UNUSED(elf), int Py_UNUSED(keep_range),
                 _PyPerfElfName *name)
{
    if (name != NULL) {
        name->path[0] = '\0';
    }
    return 0;
}

size_t
_PyPerfElf_CodeMapSize(const _PyPerfElf *Py_UNUSED(elf))
{
    return 0;
}

size_t
_PyPerfElf_RangeSize(const _PyPerfElf *Py_UNUSED(elf))
{
    return 0;
}

void
_PyPerfElf_Drop(_PyPerfElf *Py_UNUSED(elf))
{
}

void
_PyPerfElf_AfterFork(void)
{
}

#endif
