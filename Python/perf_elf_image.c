/*
 * cpython-perf: the bytes of an arena file, /tmp/py-perf-PID-N.so.
 *
 * Python/perf_elf.c makes, maps, names and lets go of arena files; this
 * file says where each part of one goes and what it holds when it is made,
 * and stores a slot's symbol, into buffers and mappings it is given.
 *
 * The layout
 * ----------
 * Every address is the file offset (vaddr == offset), so readers need no
 * section-to-segment arithmetic, and the mapping starts at offset 0:
 *
 *     0        ELF header, 3 program headers (PT_LOAD of [0, end of
 *              .eh_frame_hdr) read+execute, PT_GNU_EH_FRAME, PT_NOTE),
 *              .note.gnu.build-id (20 random bytes, so that perf's build-id
 *              cache and `perf archive` keep each file apart; a build-id
 *              only once the file is sealed: Python/perf_seal.c)
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
 *              unit over .text; .debug_line: its line table
 *              (Python/perf_lines.c)
 *              .shstrtab, the section headers
 *              .strtab: 256 bytes a slot, and room for the longest name;
 *              .debug_line_str is the same bytes
 *
 * The unwind tables must be inside the code's mapping: perf's libunwind
 * glue reads them through the mapping that holds their address.  The
 * tables start at a page of their own, so that no page of the code is
 * ever writable, in any mapping.
 *
 * This file calls the unwind table (Python/perf_unwind.c), the line table
 * (Python/perf_lines.c) and the sealing's note (Python/perf_seal.c);
 * Python/perf_elf.c calls it, and Python/perf_debugger.c its ELF header
 * writer.
 */

#include "Python.h"
#include "perf_internal.h"

#if defined(PY_HAVE_PERF_TRAMPOLINE) && SIZEOF_VOID_P == 8

#include <elf.h>
#include <errno.h>
#include <stddef.h>               // offsetof()
#include <string.h>
#include <unistd.h>               // sysconf()

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

/* .strtab's size, fixed when the file is made: this much per slot (a
   name is 60 to 150 bytes, most often), and room for one of the longest.
   Bytes never written are a hole: they cost no disk. */
#define NAME_ROOM 256
/* .strtab opens with the empty string and the line table's compile unit
   name (Python/perf_lines.c). */
#define STRTAB_INIT_SIZE \
    (_PyPerfLines_CU_NAME_STR + sizeof(_PyPerfLines_CU_NAME))

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

int
_PyPerfElfImage_Plan(size_t nslots, size_t slot_size, _PyPerfKind kind,
                     _PyPerfElfLayout *L, const char **what)
{
    long pagesz = sysconf(_SC_PAGESIZE);
    L->page = pagesz > 0 ? (uint64_t)pagesz : 4096;
    L->nslots = nslots;
    L->slot_size = slot_size;
    L->kind = kind;
    L->text_off = TEXT_OFF;
    L->text_size = (uint64_t)nslots * slot_size;
    L->eh_off = _Py_SIZE_ROUND_UP(TEXT_OFF + L->text_size, 8);
    size_t eh_size, hdr_size;
    *what = "describe the trampoline template's frames for";
    if (_PyPerfUnwind_Table(kind, nslots, slot_size,
                            _PyPerf_Covered(slot_size, kind),
                            L->eh_off - TEXT_OFF, NULL, 0, &eh_size,
                            &hdr_size) < 0)
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
    _PyPerfLines_Put(&measure, nslots, slot_size, kind, TEXT_OFF, &L->at);
    L->shstrtab_off = L->abbrev_off + L->at.end;
    L->shdr_off = _Py_SIZE_ROUND_UP(L->shstrtab_off + sizeof(shstrtab), 8);
    L->strtab_off = L->shdr_off + NSECTIONS * sizeof(Elf64_Shdr);
    L->strtab_init = STRTAB_INIT_SIZE;
    L->strtab_size = STRTAB_INIT_SIZE + (uint64_t)nslots * NAME_ROOM
                     + _PyPerf_NAME_MAX + 1;
    L->file_size = L->strtab_off + L->strtab_size;
    L->tail_size = L->strtab_off + STRTAB_INIT_SIZE - L->abbrev_off;
    if (L->strtab_size > UINT32_MAX) {
        *what = "describe so many trampolines in";
        errno = EFBIG;
        return -1;
    }
    return 0;
}

int
_PyPerfElfImage_PutCode(unsigned char *img, const _PyPerfElfLayout *L)
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
    _PyPerf_FillSlots(text, L->nslots, L->slot_size, L->kind);
    /* (zeros from the last copy to the .eh_frame) */
    memset(text + L->text_size, 0,
           (size_t)(L->eh_off - TEXT_OFF - L->text_size));
    size_t eh_size, hdr_size;
    return _PyPerfUnwind_Table(L->kind, L->nslots, L->slot_size,
                               _PyPerf_Covered(L->slot_size, L->kind),
                               L->eh_off - TEXT_OFF, img + L->eh_off,
                               (size_t)(L->mapped_end - L->eh_off),
                               &eh_size, &hdr_size);
}

/* The section header table. */
static void
put_section_headers(Elf64_Shdr *sh, const _PyPerfElfLayout *L)
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
       name (Python/perf_lines.c). */
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

void
_PyPerfElfImage_PutTail(unsigned char *tail, const _PyPerfElfLayout *L)
{
    memset(tail, 0, (size_t)L->tail_size);
    _PyPerfLinesLayout at;
    _PyPerfBytes debug = {tail, 0, L->at.end};
    _PyPerfLines_Put(&debug, L->nslots, L->slot_size, L->kind, TEXT_OFF,
                     &at);
    assert(debug.n == L->at.end);
    memcpy(tail + (L->shstrtab_off - L->abbrev_off), shstrtab,
           sizeof(shstrtab));
    put_section_headers((Elf64_Shdr *)(tail + (L->shdr_off - L->abbrev_off)),
                        L);
    memcpy(tail + (L->strtab_off - L->abbrev_off) + _PyPerfLines_CU_NAME_STR,
           _PyPerfLines_CU_NAME, sizeof(_PyPerfLines_CU_NAME));
}

void
_PyPerfElfImage_Name(unsigned char *symtab, size_t i, size_t slot_size,
                     size_t size, uint32_t name_off)
{
    Elf64_Sym *sym = (Elf64_Sym *)(symtab + (i + 1) * sizeof(Elf64_Sym));
    sym->st_value = TEXT_OFF + (uint64_t)i * slot_size;
    sym->st_size = size;
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
}

#endif /* PY_HAVE_PERF_TRAMPOLINE && SIZEOF_VOID_P == 8 */
