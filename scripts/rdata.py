"""Reader for R's serialization format and the files built on it (Python standard library only).

Reads what an R package ships its data in, without an R installation:
  - lazy-load databases (`data/Rdata.rdx` + `data/Rdata.rdb`, what `LazyData: true` packages install),
  - `.rda`/`.RData` files (`save()`), and `.rds` files (`saveRDS()`).

Format, as written by R's src/main/serialize.c (R_Serialize / R_Unserialize) and src/library/base/R/lazyload.R:
  - A stream starts with the format byte pair: b"X\\n" (XDR, big-endian; the only one R writes by default and the
    only one read here; b"A\\n" ascii and b"B\\n" native binary are rejected with a message), then int version
    (2 or 3), int writer R version, int minimal reader R version; version 3 adds int n + n bytes naming the
    writer's native encoding (the encoding of strings that carry no encoding flag).
  - Then one item. An item starts with an int `flags`: type = flags & 0xFF, is-object bit 8, has-attributes
    bit 9, has-tag bit 10, `levels` = flags >> 12 (for a CHARSXP, its encoding: UTF8 1<<3, LATIN1 1<<2,
    BYTES 1<<1, ASCII 1<<6).
  - Pairlist-like items (LISTSXP, LANGSXP, CLOSXP, PROMSXP, DOTSXP): [attributes] [tag] car cdr.
  - Vectors: length (an int; -1 means a long length follows as two ints, upper then lower 32 bits), the data
    (LGLSXP/INTSXP: ints, NA = INT_MIN; REALSXP: IEEE doubles; CPLXSXP: pairs of doubles; STRSXP: CHARSXP
    items; VECSXP/EXPRSXP: items; RAWSXP: bytes), then [attributes].
  - CHARSXP: int length (-1 = NA_character_), then that many bytes.
  - Back-references: SYMSXP, ENVSXP, EXTPTRSXP, WEAKREFSXP, PACKAGESXP, NAMESPACESXP and PERSISTSXP items enter
    a table in reading order; REFSXP (255) points back into it (index = flags >> 8, or the next int when 0).
  - ALTREP_SXP (238): class info pairlist (class symbol, package symbol, type), state, attributes. Only the
    base R classes with a documented state layout are expanded (compact_intseq, compact_realseq, wrap_*).
  - File wrappers: `.rds` is a (gzip/bzip2/xz-compressed or plain) stream; `.rda` is b"RDX2\\n"/b"RDX3\\n" followed
    by a stream of a pairlist tag=name, car=value. A lazy-load index `.rdx` is an `.rds` of
    list(variables = <named list of c(offset, length) into .rdb>, references = ..., compressed = TRUE|2|3).
    Each `.rdb` blob is a 4-byte big-endian uncompressed length then: zlib data (compressed TRUE), or a type
    byte and data (compressed 2 or 3: '0' stored, '1' zlib, '2' bzip2, 'Z' raw LZMA2 at xz preset 6; R's
    R_decompress1/2/3 in src/main/connections.c).

Python values: NULL -> None; logical/integer/double vectors -> RVector (a list, NA as None) with .rtype and
.attributes; character vectors -> RVector of str (NA as None); lists -> RVector of values; symbols -> RSymbol;
pairlists -> RPairlist (list of (tag, value)); environments -> REnvironment. Anything malformed raises RDataError
with the byte offset; nothing here executes R code.
"""

import bz2
import gzip
import lzma
import struct
import zlib

# SEXP types (R's Rinternals.h) and serialization pseudo-types (serialize.c).
NILSXP, SYMSXP, LISTSXP, CLOSXP, ENVSXP, PROMSXP, LANGSXP = 0, 1, 2, 3, 4, 5, 6
SPECIALSXP, BUILTINSXP, CHARSXP, LGLSXP = 7, 8, 9, 10
INTSXP, REALSXP, CPLXSXP, STRSXP, DOTSXP = 13, 14, 15, 16, 17
VECSXP, EXPRSXP, BCODESXP, EXTPTRSXP, WEAKREFSXP, RAWSXP, S4SXP = 19, 20, 21, 22, 23, 24, 25
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, UNBOUNDVALUE_SXP, MISSINGARG_SXP = 255, 254, 253, 252, 251
BASENAMESPACE_SXP, NAMESPACESXP, PACKAGESXP, PERSISTSXP = 250, 249, 248, 247
CLASSREFSXP, GENERICREFSXP, BCREPDEF, EMPTYENV_SXP, BASEENV_SXP = 246, 245, 244, 242, 241
ATTRLANGSXP, ATTRLISTSXP, ALTREP_SXP = 240, 239, 238

IS_OBJECT_BIT = 1 << 8
HAS_ATTR_BIT = 1 << 9
HAS_TAG_BIT = 1 << 10
UTF8_MASK, LATIN1_MASK, BYTES_MASK, ASCII_MASK = 1 << 3, 1 << 2, 1 << 1, 1 << 6
NA_INTEGER = -(2 ** 31)

_PAIRLIST_TYPES = {LISTSXP, LANGSXP, CLOSXP, PROMSXP, DOTSXP, ATTRLANGSXP, ATTRLISTSXP}
_TYPE_NAMES = {LGLSXP: "logical", INTSXP: "integer", REALSXP: "double", CPLXSXP: "complex", STRSXP: "character",
               VECSXP: "list", EXPRSXP: "expression", RAWSXP: "raw"}


class RDataError(ValueError):
    """Malformed or unsupported R serialized data; the message names the source and the byte offset."""


class RVector(list):
    """An R atomic vector or list: the elements as a Python list, plus `rtype` ('character', 'integer', ...)
    and `attributes` (dict name -> value, in file order)."""

    def __init__(self, rtype, values, attributes=None):
        super().__init__(values)
        self.rtype = rtype
        self.attributes = attributes or {}


class RSymbol(str):
    """An R symbol (a name), e.g. the tag of a pairlist cell."""


class RPairlist(list):
    """An R pairlist / language object: a list of (tag or None, value); `rtype` is 'pairlist', 'language', ...;
    `attributes` as for RVector."""

    def __init__(self, rtype, cells, attributes=None):
        super().__init__(cells)
        self.rtype = rtype
        self.attributes = attributes or {}


class REnvironment:
    """An R environment: `frame` maps variable name -> value (from the frame pairlist and the hash table),
    `enclos` the enclosing environment; special environments carry only `name` ('R_GlobalEnv', ...)."""

    def __init__(self, name=None):
        self.name = name
        self.frame = {}
        self.enclos = None
        self.locked = False
        self.attributes = {}

    def __repr__(self):
        return f"<REnvironment {self.name or ''} {sorted(self.frame)}>"


class RObject:
    """Any other R object kept opaque (closure, external pointer, S4 object, ...): `rtype` and its parts."""

    def __init__(self, rtype, **parts):
        self.rtype = rtype
        self.parts = parts
        self.attributes = parts.get("attributes") or {}


def _attributes_dict(pairlist):
    if pairlist is None:
        return {}
    if not isinstance(pairlist, RPairlist):
        raise RDataError("attributes are not a pairlist")
    return {str(tag): value for tag, value in pairlist}


class _Reader:
    """Reads one XDR serialization stream from `data` (bytes). `source` names it in error messages."""

    def __init__(self, data, source):
        self.data = data
        self.pos = 0
        self.source = source
        self.refs = []
        self.native_encoding = "UTF-8"

    def fail(self, what):
        raise RDataError(f"{self.source}: {what} (at byte {self.pos} of {len(self.data)})")

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            self.fail(f"truncated: need {n} bytes")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int(self):
        return struct.unpack(">i", self.take(4))[0]

    def length(self):
        n = self.int()
        if n == -1:
            upper, lower = struct.unpack(">II", self.take(8))
            n = (upper << 32) | lower
        if n < 0:
            self.fail(f"negative vector length {n}")
        # Every element takes at least one byte, so a length beyond the data is corrupt (avoids huge allocations).
        if n > len(self.data) - self.pos:
            self.fail(f"vector length {n} exceeds the remaining data")
        return n

    def header(self):
        fmt = self.take(2)
        if fmt == b"A\n":
            self.fail("ascii serialization format is not supported (only XDR, b'X\\n')")
        if fmt == b"B\n":
            self.fail("native binary serialization format is not supported (only XDR, b'X\\n')")
        if fmt != b"X\n":
            self.fail(f"not an R serialization stream (format bytes {fmt!r}, expected b'X\\n')")
        version = self.int()
        self.int()  # writer R version
        self.int()  # minimal reader R version
        if version == 3:
            n = self.int()
            if n < 0 or n > 64:
                self.fail(f"bad native encoding name length {n}")
            self.native_encoding = self.take(n).decode("ascii", "replace")
        elif version != 2:
            self.fail(f"unsupported serialization version {version} (expected 2 or 3)")
        return version

    def charsxp(self, levels):
        n = self.int()
        if n == -1:
            return None  # NA_character_
        if n < 0:
            self.fail(f"bad string length {n}")
        raw = self.take(n)
        if levels & LATIN1_MASK:
            return raw.decode("latin-1")
        if levels & BYTES_MASK:
            self.fail("a string marked as 'bytes' has no text encoding")
        encoding = "utf-8" if levels & (UTF8_MASK | ASCII_MASK) else self.native_encoding
        try:
            return raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as e:
            self.fail(f"string is not valid {encoding}: {e}")

    def string_vec(self):
        """InStringVec: an int 0, a length, then CHARSXP items (used by PACKAGESXP, NAMESPACESXP, PERSISTSXP)."""
        if self.int() != 0:
            self.fail("names in persistent strings are not supported")
        return [self.item() for _ in range(self.length())]

    def attributes_if(self, flags):
        return _attributes_dict(self.item()) if flags & HAS_ATTR_BIT else {}

    def item(self):
        start = self.pos
        flags = self.int()
        sxp = flags & 0xFF
        levels = flags >> 12
        if sxp == NILVALUE_SXP or sxp == NILSXP:
            return None
        if sxp in (GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP, BASENAMESPACE_SXP):
            return REnvironment({GLOBALENV_SXP: "R_GlobalEnv", EMPTYENV_SXP: "R_EmptyEnv",
                                 BASEENV_SXP: "base", BASENAMESPACE_SXP: "namespace:base"}[sxp])
        if sxp == UNBOUNDVALUE_SXP:
            return RObject("unbound")
        if sxp == MISSINGARG_SXP:
            return RObject("missing_arg")
        if sxp == REFSXP:
            index = flags >> 8
            if index == 0:
                index = self.int()
            if not 1 <= index <= len(self.refs):
                self.fail(f"back-reference {index} outside the {len(self.refs)} objects read so far")
            return self.refs[index - 1]
        if sxp in (PERSISTSXP, PACKAGESXP, NAMESPACESXP):
            kind = {PERSISTSXP: "persistent", PACKAGESXP: "package", NAMESPACESXP: "namespace"}[sxp]
            value = RObject(kind, names=self.string_vec())
            self.refs.append(value)
            return value
        if sxp == SYMSXP:
            name = self.item()
            if not isinstance(name, str):
                self.fail("symbol name is not a string")
            value = RSymbol(name)
            self.refs.append(value)
            return value
        if sxp == ENVSXP:
            env = REnvironment()
            self.refs.append(env)
            env.locked = self.int() != 0
            env.enclos = self.item()
            frame = self.item()
            hashtab = self.item()
            env.attributes = _attributes_dict(self.item())
            for cells in [frame] + (list(hashtab) if isinstance(hashtab, RVector) else []):
                if isinstance(cells, RPairlist):
                    env.frame.update({str(tag): value for tag, value in cells})
            return env
        if sxp in _PAIRLIST_TYPES:
            return self.pairlist(flags)
        if sxp == CHARSXP:
            value = self.charsxp(levels)
            if flags & HAS_ATTR_BIT:
                self.item()  # old writers attached the CHARSXP cache chain; R reads and drops it
            return value
        if sxp in (LGLSXP, INTSXP):
            n = self.length()
            ints = struct.unpack(f">{n}i", self.take(4 * n))
            if sxp == LGLSXP:
                values = [None if v == NA_INTEGER else bool(v) for v in ints]
            else:
                values = [None if v == NA_INTEGER else v for v in ints]
            return RVector(_TYPE_NAMES[sxp], values, self.attributes_if(flags))
        if sxp == REALSXP:
            n = self.length()
            return RVector("double", list(struct.unpack(f">{n}d", self.take(8 * n))), self.attributes_if(flags))
        if sxp == CPLXSXP:
            n = self.length()
            parts = struct.unpack(f">{2 * n}d", self.take(16 * n))
            values = [complex(parts[2 * i], parts[2 * i + 1]) for i in range(n)]
            return RVector("complex", values, self.attributes_if(flags))
        if sxp == RAWSXP:
            n = self.length()
            return RVector("raw", list(self.take(n)), self.attributes_if(flags))
        if sxp == STRSXP:
            n = self.length()
            values = []
            for _ in range(n):
                element_flags = self.int()
                if element_flags & 0xFF != CHARSXP:
                    self.fail(f"character vector element has type {element_flags & 0xFF}, expected CHARSXP (9)")
                values.append(self.charsxp(element_flags >> 12))
                if element_flags & HAS_ATTR_BIT:
                    self.item()
            return RVector("character", values, self.attributes_if(flags))
        if sxp in (VECSXP, EXPRSXP):
            n = self.length()
            values = [self.item() for _ in range(n)]
            return RVector(_TYPE_NAMES[sxp], values, self.attributes_if(flags))
        if sxp in (SPECIALSXP, BUILTINSXP):
            n = self.int()
            name = self.take(n).decode("ascii", "replace") if n >= 0 else self.fail("bad builtin name length")
            return RObject("builtin", name=name)
        if sxp == S4SXP:
            return RObject("S4", attributes=self.attributes_if(flags))
        if sxp == EXTPTRSXP:
            obj = RObject("externalptr")
            self.refs.append(obj)
            obj.parts["prot"] = self.item()
            obj.parts["tag"] = self.item()
            obj.attributes = self.attributes_if(flags)
            return obj
        if sxp == WEAKREFSXP:
            obj = RObject("weakref")
            self.refs.append(obj)
            obj.attributes = self.attributes_if(flags)
            return obj
        if sxp == ALTREP_SXP:
            return self.altrep()
        if sxp == BCODESXP:
            self.pos = start
            self.fail("byte code (BCODESXP) is not supported")
        self.pos = start
        self.fail(f"unknown item type {sxp} (flags 0x{flags:x})")

    def pairlist(self, flags):
        """LISTSXP and friends, read iteratively along the CDR chain (R writes long pairlists that way)."""
        rtype = {LISTSXP: "pairlist", LANGSXP: "language", CLOSXP: "closure", PROMSXP: "promise",
                 DOTSXP: "dots", ATTRLANGSXP: "language", ATTRLISTSXP: "pairlist"}[flags & 0xFF]
        cells = []
        attributes = {}
        first = True
        while True:
            sxp = flags & 0xFF
            cell_attrs = _attributes_dict(self.item()) if flags & HAS_ATTR_BIT else {}
            if first:
                attributes = cell_attrs
                first = False
            tag = self.item() if flags & HAS_TAG_BIT else None
            car = self.item()
            cells.append((tag, car))
            # Peek at the CDR: another cell of a pairlist type continues the chain; anything else ends it.
            save = self.pos
            next_flags = self.int()
            if next_flags & 0xFF in _PAIRLIST_TYPES and sxp in _PAIRLIST_TYPES:
                flags = next_flags
                continue
            self.pos = save
            cdr = self.item()
            if cdr is not None:
                cells.append((None, cdr))  # a dotted pair (rare; e.g. closures store their body here)
            return RPairlist(rtype, cells, attributes)

    def altrep(self):
        info = self.item()
        state = self.item()
        attributes = _attributes_dict(self.item())
        if not isinstance(info, RPairlist) or len(info) < 1:
            self.fail("ALTREP class information is not a pairlist")
        cls = str(info[0][1])
        if cls == "compact_intseq" or cls == "compact_realseq":
            if not isinstance(state, RVector) or len(state) != 3:
                self.fail(f"{cls} state is not c(length, start, step)")
            n, first, step = state
            values = [first + i * step for i in range(int(n))]
            if cls == "compact_intseq":
                return RVector("integer", [int(v) for v in values], attributes)
            return RVector("double", [float(v) for v in values], attributes)
        if cls.startswith("wrap_"):
            if not isinstance(state, RVector) or len(state) < 1:
                self.fail(f"{cls} state is not list(x, meta)")
            inner = state[0]
            if isinstance(inner, RVector):
                return RVector(inner.rtype, list(inner), attributes or inner.attributes)
            return inner
        self.fail(f"ALTREP class '{cls}' is not supported (known: compact_intseq, compact_realseq, wrap_*)")


def unserialize(data, source="<bytes>"):
    """Decodes one R serialization stream (bytes, starting with b'X\\n') and returns the Python value.
    Raises RDataError on malformed or unsupported input; trailing bytes after the item are an error."""
    reader = _Reader(data, source)
    reader.header()
    value = reader.item()
    if reader.pos != len(data):
        reader.fail(f"{len(data) - reader.pos} unexpected bytes after the object")
    return value


def decompress_file_bytes(data):
    """Undoes the whole-file compression R's saveRDS()/save() apply: gzip (the default), bzip2, xz, or none."""
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:3] == b"BZh":
        return bz2.decompress(data)
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.decompress(data)
    return data


def read_rds(path):
    """Reads a `saveRDS()` file (e.g. a lazy-load `.rdx` index) and returns its value."""
    with open(path, "rb") as f:
        return unserialize(decompress_file_bytes(f.read()), str(path))


def read_rda(path):
    """Reads a `save()` file (.rda/.RData, magic b'RDX2\\n' or b'RDX3\\n') and returns {name: value}."""
    with open(path, "rb") as f:
        data = decompress_file_bytes(f.read())
    if data[:5] not in (b"RDX2\n", b"RDX3\n"):
        raise RDataError(f"{path}: not an R save() file (magic {data[:5]!r}, expected b'RDX2\\n' or b'RDX3\\n')")
    value = unserialize(data[5:], str(path))
    if not isinstance(value, RPairlist):
        raise RDataError(f"{path}: save() file does not hold a pairlist of variables")
    return {str(tag): v for tag, v in value}


def decompress_lazyload_blob(blob, compressed, source):
    """Undoes R_compress1/2/3 on one `.rdb` blob (`compressed` is the index's flag: True/1, 2 or 3, or False)."""
    if not compressed:
        return blob
    if len(blob) < 5:
        raise RDataError(f"{source}: compressed blob of {len(blob)} bytes is too short")
    expected = struct.unpack(">I", blob[:4])[0]
    try:
        if compressed is True or compressed == 1:
            out = zlib.decompress(blob[4:])
        else:
            kind, payload = blob[4:5], blob[5:]
            if kind == b"0":
                out = payload
            elif kind == b"1":
                out = zlib.decompress(payload)
            elif kind == b"2":
                out = bz2.decompress(payload)
            elif kind == b"Z":
                out = lzma.decompress(payload, format=lzma.FORMAT_RAW,
                                      filters=[{"id": lzma.FILTER_LZMA2, "preset": 6}])
            else:
                raise RDataError(f"{source}: unknown compression type byte {kind!r} (expected 0, 1, 2 or Z)")
    except (zlib.error, OSError, lzma.LZMAError) as e:
        raise RDataError(f"{source}: cannot decompress: {e}") from e
    if len(out) != expected:
        raise RDataError(f"{source}: decompressed to {len(out)} bytes, the header says {expected}")
    return out


def read_lazyload_db(base):
    """Reads every variable of a lazy-load database `base`.rdx / `base`.rdb (e.g. '<pkg>/data/Rdata') and
    returns {name: value}. Raises RDataError when the index or a blob is malformed or points outside the .rdb."""
    index = read_rds(f"{base}.rdx")
    if not isinstance(index, RVector) or index.rtype != "list":
        raise RDataError(f"{base}.rdx: index is not a list")
    fields = dict(zip(index.attributes.get("names", []), index))
    if "variables" not in fields or "compressed" not in fields:
        raise RDataError(f"{base}.rdx: index lacks 'variables' or 'compressed'")
    compressed = fields["compressed"][0]
    if isinstance(compressed, float):
        compressed = int(compressed)
    variables = fields["variables"]
    names = variables.attributes.get("names", [])
    with open(f"{base}.rdb", "rb") as f:
        rdb = f.read()
    out = {}
    for name, key in zip(names, variables):
        if not isinstance(key, RVector) or len(key) != 2:
            raise RDataError(f"{base}.rdx: key of '{name}' is not c(offset, length)")
        offset, length = int(key[0]), int(key[1])
        if offset < 0 or length < 0 or offset + length > len(rdb):
            raise RDataError(f"{base}.rdb: '{name}' at [{offset}, {offset + length}) lies outside the "
                             f"{len(rdb)}-byte file")
        source = f"{base}.rdb['{name}']"
        out[name] = unserialize(decompress_lazyload_blob(rdb[offset:offset + length], compressed, source), source)
    return out
