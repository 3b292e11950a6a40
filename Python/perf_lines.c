/*
 * cpython-perf: the source line of each slot of an arena file, in DWARF.
 *
 * Why
 * ---
 * perf (through binutils' addr2line) and hotspot (through elfutils) read a
 * source line for an address from DWARF's line table, so each slot of an
 * arena file (Python/perf_elf.c) gets its function's
 * co_filename:co_firstlineno there.  The sections are DWARF 5, the version
 * whose file table names its files by offsets into a string section:
 * .debug_abbrev, .debug_info and .debug_aranges (one compile unit over
 * .text, for the readers that look an address up in one or the other),
 * and .debug_line, one after another.
 *
 * Written once, named in place
 * ----------------------------
 * Everything but two fields is written when the arena is made: file entry
 * i + 1 of the table is slot i's, and one sequence over .text has one row
 * per slot (set the file, advance the line, emit the row, advance the line
 * back to 1, advance the address by one slot), with line 0 (no source)
 * and the compile unit's name as file until the slot is handed out (a
 * file entry naming the empty string crashes gdb).  Each line advance is
 * a signed LEB128 padded to 5 bytes, so naming a slot rewrites it in
 * place, and the file entry is 4 bytes: an offset into .debug_line_str.
 * The arena file makes that section the same bytes as its .strtab: the
 * file name is the end of the slot's symbol name "py::QUALNAME:FILENAME",
 * NUL included, so it costs no byte.
 *
 * Elsewhere
 * ---------
 * The objects that describe arenas to debuggers (Python/perf_debugger.c)
 * carry the same sections for slots of line trampolines, in memory of
 * their own: their .debug_line_str is their .strtab too, where each file
 * name is a string of its own after the slot's name (a debugger's name
 * does not end with the file).  A block of rows does not depend on where
 * it is (it starts and ends at its slot's start and line 1), so the
 * rows written once for a slot (into the arena file, or without one into
 * the arena's object) are copied to the objects that name it.  An
 * object's compile unit moves to the addresses it describes now, by
 * rewriting three addresses, and its .debug_line has rows for the slots
 * named so far only: it grows as they are named, its room laid out as a
 * whole table's, so that the pages of slots never named are never
 * touched.
 *
 * This file knows DWARF and nothing of ELF: Python/perf_elf_image.c and
 * Python/perf_debugger.c place the sections and call it to write them,
 * Python/perf_elf.c and Python/perf_debugger.c to name a slot.
 */

#include "Python.h"
#include "pycore_code.h"          // _PyCode_InitAddressRange()
#include "perf_internal.h"

#if defined(PY_HAVE_PERF_TRAMPOLINE) && SIZEOF_VOID_P == 8

#include <string.h>

/* The DWARF 5 codes used here (its standard's numbers). */
enum {
    TAG_compile_unit = 0x11, UT_compile = 0x01,
    AT_name = 0x03, AT_stmt_list = 0x10, AT_low_pc = 0x11,
    AT_high_pc = 0x12, AT_comp_dir = 0x1b,
    FORM_addr = 0x01, FORM_data8 = 0x07, FORM_string = 0x08,
    FORM_udata = 0x0f, FORM_sec_offset = 0x17, FORM_line_strp = 0x1f,
    LNS_copy = 1, LNS_advance_pc = 2, LNS_advance_line = 3, LNS_set_file = 4,
    LNS_fixed_advance_pc = 9, LNE_end_sequence = 1, LNE_set_address = 2,
    LINE_OPCODE_BASE = 13, LNCT_path = 1, LNCT_directory_index = 2,
};

#define CU_NAME _PyPerfLines_CU_NAME
#define CU_NAME_STR _PyPerfLines_CU_NAME_STR

/* .debug_abbrev: abbreviation 1, a compile unit without children, with
   its name and directory (strings), its line program (at offset 0 of
   .debug_line), its address range (.text's start and size). */
static const unsigned char debug_abbrev[] = {
    1, TAG_compile_unit, 0 /* no children */,
    AT_name, FORM_string, AT_comp_dir, FORM_string,
    AT_stmt_list, FORM_sec_offset, AT_low_pc, FORM_addr,
    AT_high_pc, FORM_data8, 0, 0,
    0 /* end of the abbreviations */
};
static const unsigned char standard_opcode_lengths[LINE_OPCODE_BASE - 1] = {
    0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};
/* A slot's line: advance_line(line - 1), copy (the row), then
   advance_line(1 - line) back to 1 for the next slot, each advance a
   signed LEB128 of 5 bytes, so that it is rewritten in place. */
#define ROW_LINE_SIZE 13
/* The bytes of a file entry: DW_FORM_line_strp (4), directory 0 (1). */
#define FILE_ENTRY_SIZE 5

static size_t
uleb_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* `v` (|v| < 2**34) as a signed LEB128 of exactly 5 bytes. */
static void
store_sleb5(unsigned char *p, int64_t v)
{
    for (int k = 0; k < 4; k++) {
        p[k] = 0x80 | (unsigned char)(((uint64_t)v >> (7 * k)) & 0x7f);
    }
    p[4] = (unsigned char)(((uint64_t)v >> 28) & 0x7f);
}

/* A slot's line, the block that naming it rewrites in place (composed
   whole: it is written for every new function). */
static void
put_line(_PyPerfBytes *w, int64_t line)
{
    unsigned char b[ROW_LINE_SIZE];
    b[0] = LNS_advance_line;
    store_sleb5(b + 1, line - 1);
    b[6] = LNS_copy;
    b[7] = LNS_advance_line;
    store_sleb5(b + 8, 1 - line);
    _PyPerfBytes_Put(w, b, sizeof(b));
}

/* Offset of slot i's rows from slot 0's.  Slot j's are set_file(j + 1)
   (1 + uleb_size(j + 1) bytes), then `block` bytes: its line,
   fixed_advance_pc (3 bytes), and for a line trampoline the rest of the
   room its pads' rows may take; the ULEB128 sizes of 1 .. i add up to i,
   plus one for each number from 128, one more for each from 16384. */
static uint64_t
rows_at(size_t i, size_t block)
{
    uint64_t n = (uint64_t)i;
    uint64_t uleb = n + (n > 127 ? n - 127 : 0) + (n > 16383 ? n - 16383 : 0);
    return n * (1 + block) + uleb;
}

/* The block of a line trampoline's slot `slot_size` bytes long: room for
   rows, a byte per code unit its pads can stand for, and its end. */
static size_t
pads_block(size_t slot_size)
{
    return ROW_LINE_SIZE + 3 + 32 + slot_size / 2;
}

/* `n` (2 to 5) bytes that change nothing: advance_pc by 0, in a ULEB128
   of n - 1 bytes. */
static void
put_nop(_PyPerfBytes *w, size_t n)
{
    _PyPerfBytes_U8(w, LNS_advance_pc);
    for (size_t k = 2; k < n; k++) {
        _PyPerfBytes_U8(w, 0x80);
    }
    _PyPerfBytes_U8(w, 0);
}

/* Eight no-ops of 5 bytes, copied whole: most of a line trampoline's
   block is no-ops, written for every slot when an arena is made. */
#define NOP5 LNS_advance_pc, 0x80, 0x80, 0x80, 0
static const unsigned char nops5[40] = {
    NOP5, NOP5, NOP5, NOP5, NOP5, NOP5, NOP5, NOP5};
#undef NOP5

/* Fill a block that started at `start` up to `block` bytes with no-ops
   (never 1 byte short: the caller leaves 0 or at least 2): 5-byte ones
   while more than 7 bytes are left, then one or two to the end. */
static void
pad_block(_PyPerfBytes *w, size_t start, size_t block)
{
    size_t left = start + block - w->n;
    if (left > 7) {
        size_t fives = 5 * ((left - 3) / 5);
        for (size_t k = 0; k < fives; k += sizeof(nops5)) {
            size_t n = fives - k;
            _PyPerfBytes_Put(w, nops5, n < sizeof(nops5) ? n : sizeof(nops5));
        }
        left -= fives;
    }
    while (left > 0) {
        size_t n = left > 7 ? 5 : left > 5 ? left - 2 : left;
        assert(n >= 2);
        put_nop(w, n);
        left -= n;
    }
}

/* .debug_info: one compile unit over .text. */
static void
put_debug_info(_PyPerfBytes *w, uint64_t text_addr, uint64_t text_size,
               _PyPerfLinesLayout *at)
{
    size_t unit = _PyPerfBytes_BeginUnit(w);
    _PyPerfBytes_U16(w, 5);                     /* version */
    _PyPerfBytes_U8(w, UT_compile);
    _PyPerfBytes_U8(w, 8);                      /* address size */
    _PyPerfBytes_U32(w, 0);                     /* .debug_abbrev offset */
    _PyPerfBytes_U8(w, 1);                      /* abbreviation 1 */
    _PyPerfBytes_Put(w, CU_NAME, sizeof(CU_NAME));
    _PyPerfBytes_Put(w, ".", 2);                /* DW_AT_comp_dir */
    _PyPerfBytes_U32(w, 0);                     /* DW_AT_stmt_list */
    at->info_pc = w->n;
    _PyPerfBytes_U64(w, text_addr);
    _PyPerfBytes_U64(w, text_size);
    _PyPerfBytes_EndUnit(w, unit);
}

/* .debug_aranges: the compile unit's one range, for readers that look an
   address up there (elfutils) rather than in the unit itself. */
static void
put_debug_aranges(_PyPerfBytes *w, uint64_t text_addr, uint64_t text_size,
                  _PyPerfLinesLayout *at)
{
    size_t unit = _PyPerfBytes_BeginUnit(w);
    _PyPerfBytes_U16(w, 2);                     /* version */
    _PyPerfBytes_U32(w, 0);                     /* .debug_info offset */
    _PyPerfBytes_U8(w, 8);                      /* address size */
    _PyPerfBytes_U8(w, 0);                      /* segment selector size */
    _PyPerfBytes_U32(w, 0);                     /* (to 16 bytes) */
    at->aranges_pc = w->n;
    _PyPerfBytes_U64(w, text_addr);
    _PyPerfBytes_U64(w, text_size);
    _PyPerfBytes_U64(w, 0);                     /* the terminating pair */
    _PyPerfBytes_U64(w, 0);
    _PyPerfBytes_EndUnit(w, unit);
}

/* Slot i's rows before it is handed out: set_file(i + 1), then the same
   bytes for every slot: its line 0, the advance to the next slot, and
   for a line trampoline no-ops to the end of its block. */
static void
put_unnamed_block(_PyPerfBytes *w, const _PyPerfLinesLayout *at)
{
    size_t block = w->n;
    put_line(w, 0);
    _PyPerfBytes_U8(w, LNS_fixed_advance_pc);
    _PyPerfBytes_U16(w, (uint16_t)at->slot_size);
    pad_block(w, block, at->block);
}

static void
put_unnamed(_PyPerfBytes *w, size_t i, const _PyPerfLinesLayout *at)
{
    _PyPerfBytes_U8(w, LNS_set_file);
    _PyPerfBytes_Uleb(w, i + 1);
    put_unnamed_block(w, at);
}

/* The end of the sequence and of the unit. */
static void
put_end_sequence(_PyPerfBytes *w)
{
    _PyPerfBytes_U8(w, 0);                      /* DW_LNE_end_sequence */
    _PyPerfBytes_U8(w, 1);
    _PyPerfBytes_U8(w, LNE_end_sequence);
}

/* .debug_line: a header whose file entry i + 1 is slot i's file (CU_NAME
   until it is handed out), and one sequence over .text with a row
   per slot (line 0, no source, until it is handed out) for the first
   `filled` slots (_PyPerfLines_Fill() adds the others). */
static void
put_debug_line(_PyPerfBytes *w, size_t nslots, size_t slot_size,
               _PyPerfKind kind, uint64_t text_addr, size_t filled,
               _PyPerfLinesLayout *at)
{
    size_t unit = _PyPerfBytes_BeginUnit(w);
    _PyPerfBytes_U16(w, 5);                     /* version */
    _PyPerfBytes_U8(w, 8);                      /* address size */
    _PyPerfBytes_U8(w, 0);                      /* segment selector size */
    size_t header_length = w->n;
    _PyPerfBytes_U32(w, 0);                     /* patched */
    _PyPerfBytes_U8(w, 1);          /* minimum instruction length */
    _PyPerfBytes_U8(w, 1);          /* maximum operations per instruction */
    _PyPerfBytes_U8(w, 1);                      /* default_is_stmt */
    _PyPerfBytes_U8(w, (unsigned char)-5);      /* line_base */
    _PyPerfBytes_U8(w, 14);                     /* line_range */
    _PyPerfBytes_U8(w, LINE_OPCODE_BASE);
    _PyPerfBytes_Put(w, standard_opcode_lengths,
                     sizeof(standard_opcode_lengths));
    _PyPerfBytes_U8(w, 1);                      /* directory entry format */
    _PyPerfBytes_U8(w, LNCT_path);
    _PyPerfBytes_U8(w, FORM_string);
    /* One directory, ".", which DW_AT_comp_dir names too: a relative
       file name is relative to the process's working directory, which
       is not known.  Without them elfutils printed "/<string>" (an empty
       directory) or "(null)./<string>", where binutils and LLVM printed
       "./<string>"; now all three print "././<string>", and gdb
       "./<string>". */
    _PyPerfBytes_U8(w, 1);
    _PyPerfBytes_Put(w, ".", 2);
    _PyPerfBytes_U8(w, 2);                      /* file entry format */
    _PyPerfBytes_U8(w, LNCT_path);
    _PyPerfBytes_U8(w, FORM_line_strp);
    _PyPerfBytes_U8(w, LNCT_directory_index);
    _PyPerfBytes_U8(w, FORM_udata);
    _PyPerfBytes_Uleb(w, nslots + 1);
    at->files = w->n;
    _PyPerfBytes_U32(w, CU_NAME_STR);           /* file 0 */
    _PyPerfBytes_U8(w, 0);                      /* in directory 0 */
    /* the slots' files: CU_NAME too until named (gdb crashes on a file
       entry that names the empty string), in directory 0 */
    for (size_t i = 0; i < nslots; i++) {
        _PyPerfBytes_U32(w, CU_NAME_STR);
        _PyPerfBytes_U8(w, 0);
    }
    _PyPerfBytes_Patch32(w, header_length,
                         (uint32_t)(w->n - (header_length + 4)));
    _PyPerfBytes_U8(w, 0);                      /* DW_LNE_set_address */
    _PyPerfBytes_U8(w, 9);
    _PyPerfBytes_U8(w, LNE_set_address);
    at->line_pc = w->n;
    _PyPerfBytes_U64(w, text_addr);
    at->block = kind == _PyPerf_LINES ? pads_block(slot_size)
                                      : ROW_LINE_SIZE + 3;
    at->slot_size = slot_size;
    at->rows = w->n;
    for (size_t i = 0; i < filled; i++) {
        assert(w->n == at->rows + rows_at(i, at->block));
        put_unnamed(w, i, at);
    }
    at->filled = filled;
    put_end_sequence(w);
    _PyPerfBytes_EndUnit(w, unit);
}

/* The sections, with the rows of the first `filled` slots. */
static void
put_sections(_PyPerfBytes *w, size_t nslots, size_t slot_size,
             _PyPerfKind kind, uint64_t text_addr, size_t filled,
             _PyPerfLinesLayout *at)
{
    assert(nslots < _PyPerfLines_MAX_SLOTS && slot_size <= UINT16_MAX);
    uint64_t text_size = (uint64_t)nslots * slot_size;
    _PyPerfBytes_Put(w, debug_abbrev, sizeof(debug_abbrev));
    at->info = w->n;
    put_debug_info(w, text_addr, text_size, at);
    at->aranges = w->n;
    put_debug_aranges(w, text_addr, text_size, at);
    at->line = w->n;
    put_debug_line(w, nslots, slot_size, kind, text_addr, filled, at);
    at->line_end = w->n;
    /* (room for every slot's rows: the end of a full table) */
    at->end = at->rows + rows_at(nslots, at->block) + 3;
}

void
_PyPerfLines_Put(_PyPerfBytes *w, size_t nslots, size_t slot_size,
                 _PyPerfKind kind, uint64_t text_addr,
                 _PyPerfLinesLayout *at)
{
    put_sections(w, nslots, slot_size, kind, text_addr, nslots, at);
    assert(w->n == at->end);
}

void
_PyPerfLines_PutEmpty(_PyPerfBytes *w, size_t nslots, size_t slot_size,
                      _PyPerfKind kind, uint64_t text_addr,
                      _PyPerfLinesLayout *at)
{
    put_sections(w, nslots, slot_size, kind, text_addr, 0, at);
}

void
_PyPerfLines_Fill(unsigned char *debug, _PyPerfLinesLayout *at,
                  size_t upto)
{
    if (upto <= at->filled) {
        return;
    }
    /* the unnamed slots' rows over the end of the sequence, then a new
       end, and the unit's new length */
    size_t start = at->rows + rows_at(at->filled, at->block);
    _PyPerfBytes w = {debug + start, 0, at->end - start};
    for (size_t i = at->filled; i < upto; i++) {
        put_unnamed(&w, i, at);
    }
    put_end_sequence(&w);
    assert(w.n <= w.cap);
    at->filled = upto;
    at->line_end = start + w.n;
    unsigned char length[4];
    _PyPerfBytes lw = {length, 0, sizeof(length)};
    _PyPerfBytes_U32(&lw, (uint32_t)(at->line_end - at->line - 4));
    memcpy(debug + at->line, length, sizeof(length));
}

void
_PyPerfLines_Name(unsigned char *debug, const _PyPerfLinesLayout *at,
                  size_t i, int64_t line, uint32_t file_str)
{
    unsigned char file[4], row[ROW_LINE_SIZE];
    _PyPerfBytes fw = {file, 0, sizeof(file)};
    _PyPerfBytes_U32(&fw, file_str);
    _PyPerfBytes lw = {row, 0, sizeof(row)};
    put_line(&lw, line > 0 ? line : 0);
    assert(fw.n == sizeof(file) && lw.n == sizeof(row));
    /* (the row's line after its set_file, then the file entry) */
    memcpy(debug + at->rows + rows_at(i, at->block) + 1 + uleb_size(i + 1),
           row, sizeof(row));
    memcpy(debug + at->files + (i + 1) * FILE_ENTRY_SIZE, file,
           sizeof(file));
}

void
_PyPerfLines_Place(unsigned char *debug, const _PyPerfLinesLayout *at,
                   uint64_t text_addr, uint64_t text_size)
{
    unsigned char range[16];
    _PyPerfBytes w = {range, 0, sizeof(range)};
    _PyPerfBytes_U64(&w, text_addr);
    _PyPerfBytes_U64(&w, text_size);
    /* (DW_AT_low_pc and DW_AT_high_pc, the address range's pair, and the
       sequence's DW_LNE_set_address, which is the address alone) */
    memcpy(debug + at->info_pc, range, sizeof(range));
    memcpy(debug + at->aranges_pc, range, sizeof(range));
    memcpy(debug + at->line_pc, range, sizeof(text_addr));
}

/* Slot i's block: its rows after its set_file. */
static size_t
block_at(const _PyPerfLinesLayout *at, size_t i)
{
    return at->rows + rows_at(i, at->block) + 1 + uleb_size(i + 1);
}

const unsigned char *
_PyPerfLines_SlotRows(const unsigned char *debug,
                      const _PyPerfLinesLayout *at, size_t i)
{
    return debug + block_at(at, i);
}

void
_PyPerfLines_PutRows(unsigned char *debug, const _PyPerfLinesLayout *at,
                     size_t i, const unsigned char *rows, uint32_t file_str)
{
    /* A block's rows are relative to its slot's start (each one ends by
       advancing to the next slot), so the bytes are the same anywhere. */
    memcpy(debug + block_at(at, i), rows, at->block);
    unsigned char file[4];
    _PyPerfBytes fw = {file, 0, sizeof(file)};
    _PyPerfBytes_U32(&fw, file_str);
    memcpy(debug + at->files + (i + 1) * FILE_ENTRY_SIZE, file, sizeof(file));
}

/* A row at `addr` (from the slot's start) of line `line`, after a row at
   `*addr_p` of line `*line_p`: a special opcode when the two advances
   fit in one, else advance_pc, advance_line and copy. */
static void
put_row(_PyPerfBytes *w, size_t *addr_p, int64_t *line_p, size_t addr,
        int64_t line)
{
    uint64_t da = addr - *addr_p;
    int64_t dl = line - *line_p;
    /* (the header's line_base -5, line_range 14) */
    if (dl >= -5 && dl < 9 && (uint64_t)(dl + 5) + 14 * da + LINE_OPCODE_BASE <= 255) {
        _PyPerfBytes_U8(w, (unsigned char)((dl + 5) + 14 * da
                                           + LINE_OPCODE_BASE));
    }
    else {
        _PyPerfBytes_U8(w, LNS_advance_pc);
        _PyPerfBytes_Uleb(w, da);
        _PyPerfBytes_U8(w, LNS_advance_line);
        _PyPerfBytes_Sleb(w, dl);
        _PyPerfBytes_U8(w, LNS_copy);
    }
    *addr_p = addr;
    *line_p = line;
}

size_t
_PyPerfLines_Used(PyCodeObject *code)
{
    return _PyPerf_CodeSize(_PyPerf_LINES) + 2 * ((size_t)Py_SIZE(code) + 1);
}

int
_PyPerfLines_Rows(PyCodeObject *code, size_t limit, _PyPerfRowFunc row,
                  void *arg)
{
    size_t pads = _PyPerf_CodeSize(_PyPerf_LINES);
    int64_t line = code->co_firstlineno > 0 ? code->co_firstlineno : 0;
    /* the template and pad 0: the def line */
    if (row(arg, 0, line) < 0) {
        return -1;
    }
    PyCodeAddressRange range;
    _PyCode_InitAddressRange(code, &range);
    while (_PyLineTable_NextAddressRange(&range)) {
        if (range.ar_line < 0 || range.ar_line == line) {
            continue;
        }
        /* code unit k's line from the byte before pad k + 1 */
        size_t at = pads + (size_t)range.ar_start + 1;
        if (at >= limit) {
            break;
        }
        line = range.ar_line;
        if (row(arg, at, line) < 0) {
            return -1;
        }
    }
    return 0;
}

typedef struct {
    _PyPerfBytes *w;
    size_t addr;                  /* the last row's */
    int64_t line;
} pads_writer;

static int
put_pads_row(void *arg, size_t at, int64_t line)
{
    pads_writer *pw = (pads_writer *)arg;
    put_row(pw->w, &pw->addr, &pw->line, at, line);
    return 0;
}

/* The rows of line trampoline `code`'s slot, `slot_size` bytes, into `w`
   (a writer with cap 0 measures them), the line register 1 at the start
   and at the end, the address advanced to the next slot; `end` bytes in
   all, padded with no-ops (never 1 byte short: the last advance_pc takes
   a wider ULEB128 then). */
static void
put_pads_rows(_PyPerfBytes *w, size_t slot_size, PyCodeObject *code,
              size_t end)
{
    size_t start = w->n;
    /* (the rows start from line 1, address 0) */
    pads_writer pw = {w, 0, 1};
    _PyPerfLines_Rows(code, slot_size, put_pads_row, &pw);
    size_t addr = pw.addr;
    uint64_t da = slot_size - addr;
    size_t width = uleb_size(da);
    size_t fixed = 1 + 1 + 5;     /* advance_pc's opcode, advance_line */
    if (end != 0 && end - (w->n - start) - (fixed + width) == 1) {
        width++;
    }
    _PyPerfBytes_U8(w, LNS_advance_pc);
    for (size_t k = 1; k < width; k++) {
        _PyPerfBytes_U8(w, 0x80 | (unsigned char)(da & 0x7f));
        da >>= 7;
    }
    _PyPerfBytes_U8(w, (unsigned char)da);
    unsigned char back[5];
    store_sleb5(back, 1 - pw.line);
    _PyPerfBytes_U8(w, LNS_advance_line);
    _PyPerfBytes_Put(w, back, sizeof(back));
    /* (rows that passed the end are the caller's to undo) */
    if (end != 0 && w->n - start <= end) {
        pad_block(w, start, end);
    }
}

int
_PyPerfLines_PadsFit(PyCodeObject *code, size_t slot_size)
{
    if (_PyPerfLines_Used(code) > slot_size || slot_size > UINT16_MAX) {
        return 0;
    }
    _PyPerfBytes measure = {NULL, 0, 0};
    put_pads_rows(&measure, slot_size, code, 0);
    /* (room for the widest ULEB128 and a no-op after it) */
    return measure.n + 3 <= pads_block(slot_size);
}

int
_PyPerfLines_NamePads(unsigned char *debug, const _PyPerfLinesLayout *at,
                      size_t i, size_t slot_size, PyCodeObject *code,
                      uint32_t file_str)
{
    if (_PyPerfLines_Used(code) > slot_size || slot_size > UINT16_MAX
        || at->block != pads_block(slot_size))
    {
        return -1;
    }
    unsigned char *block = debug + at->rows + rows_at(i, at->block) + 1
                           + uleb_size(i + 1);
    /* Written without measuring first (slot_shape() in perf_codes.c
       chose the slot for rows that fit: one walk of the line table less
       per new function); rows that would not fit are never written past
       the block, and the block is then left unnamed. */
    _PyPerfBytes w = {block, 0, at->block};
    put_pads_rows(&w, slot_size, code, at->block);
    if (w.n != at->block) {
        _PyPerfBytes unnamed = {block, 0, at->block};
        put_unnamed_block(&unnamed, at);
        return -1;
    }
    unsigned char file[4];
    _PyPerfBytes fw = {file, 0, sizeof(file)};
    _PyPerfBytes_U32(&fw, file_str);
    memcpy(debug + at->files + (i + 1) * FILE_ENTRY_SIZE, file,
           sizeof(file));
    return 0;
}

#endif /* PY_HAVE_PERF_TRAMPOLINE && SIZEOF_VOID_P == 8 */
