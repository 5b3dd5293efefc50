package runtime

import (
	"encoding/binary"
	"fmt"
	"time"
)

// ModuleLimits bound the shape of a module the host agrees to compile.
// What wazero allocates to decode, validate, compile and instantiate a
// module grows with these counts and sizes (and compilation time with
// nesting depth, br_table sizes and body sizes), so a small hostile module
// could otherwise cost gigabytes or minutes on every load. A module beyond
// any of them is refused before wazero sees it, naming the limit. Zero
// fields mean "use the default".
type ModuleLimits struct {
	// ModuleBytes caps the module's size.
	ModuleBytes int `json:"moduleBytes"`
	// Functions caps the functions a module defines (its code section).
	Functions int `json:"functions"`
	// BodyBytes caps the size of one function body.
	BodyBytes int `json:"bodyBytes"`
	// Nesting caps the depth of nested blocks, loops and ifs in one body.
	Nesting int `json:"nesting"`
	// BrTableTargets caps the targets of one br_table instruction.
	BrTableTargets int `json:"brTableTargets"`
	// Locals caps the locals one function declares.
	Locals int `json:"locals"`
	// Globals caps the globals a module defines.
	Globals int `json:"globals"`
	// TableEntries caps the size every table may reach. A table declaring
	// a larger maximum is refused; one declaring none (as Go's toolchain
	// emits) gets this as its maximum, so table.grow beyond it returns -1,
	// as the specification lets any grow do. Without it one table.grow,
	// which cannot be interrupted, could take gigabytes.
	TableEntries int `json:"tableEntries"`
	// ElementEntries caps the entries of all element segments together.
	ElementEntries int `json:"elementEntries"`
	// DataSegments caps the number of data segments.
	DataSegments int `json:"dataSegments"`
	// Entries caps every other per-section count: types, imports, exports,
	// and the entries of the "name" section.
	Entries int `json:"entries"`
	// CompileTimeout caps the time compiling the module may take; a module
	// still compiling then is refused.
	CompileTimeout time.Duration `json:"compileTimeoutNs"`
}

// DefaultModuleLimits hold the largest modules this repository's
// toolchains produce (a Go module: 3.4 MB, 2 400 functions, a 1 400-entry
// table) with room of more than tenfold, while bounding what a hostile module
// can cost to tens of megabytes and a few seconds (BENCHMARKS.md,
// "Containment").
func DefaultModuleLimits() ModuleLimits {
	return ModuleLimits{
		ModuleBytes:    64 << 20,
		Functions:      200_000,
		BodyBytes:      4 << 20,
		Nesting:        1_000,
		BrTableTargets: 16_384,
		Locals:         50_000,
		Globals:        50_000,
		TableEntries:   1 << 20,
		ElementEntries: 1 << 18,
		DataSegments:   100_000,
		Entries:        100_000,
		CompileTimeout: 30 * time.Second,
	}
}

func (l ModuleLimits) orDefault(d ModuleLimits) ModuleLimits {
	set := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	set(&l.ModuleBytes, d.ModuleBytes)
	set(&l.Functions, d.Functions)
	set(&l.BodyBytes, d.BodyBytes)
	set(&l.Nesting, d.Nesting)
	set(&l.BrTableTargets, d.BrTableTargets)
	set(&l.Locals, d.Locals)
	set(&l.Globals, d.Globals)
	set(&l.TableEntries, d.TableEntries)
	set(&l.ElementEntries, d.ElementEntries)
	set(&l.DataSegments, d.DataSegments)
	set(&l.Entries, d.Entries)
	if l.CompileTimeout <= 0 {
		l.CompileTimeout = d.CompileTimeout
	}
	return l
}

// ShapeError is why a module's shape was refused: one named limit and what
// the module declares.
type ShapeError struct {
	Limit    string // the ModuleLimits field, in words (e.g. "block nesting depth")
	Max      int64
	Observed int64
	Where    string // e.g. "function 12", "table 0"
}

func (e *ShapeError) Error() string {
	where := ""
	if e.Where != "" {
		where = e.Where + ": "
	}
	return fmt.Sprintf("%s%s %d exceeds the host's limit of %d", where, e.Limit, e.Observed, e.Max)
}

// shape is what precheck learned about a module that wazero does not
// report: imports of kinds the host never serves, and the tables declared
// without a maximum.
type shape struct {
	otherImports []string // "module.name (table|global|tag)"
	// tables is the table section's place in the module and its tables,
	// kept to give tables without a maximum one (bounded).
	tableSec   [2]int // [start, end) of the section body
	tables     []tableType
	unboundedT bool
}

type tableType struct {
	ref      []byte // the reference type's encoding
	min, max uint32
	hasMax   bool
}

// bounded returns the module to compile: b itself, or, when a table
// declares no maximum, b with the table section rewritten to give each
// such table the host's limit as its maximum. The module's identity (its
// digest) stays that of b.
func (sh *shape) bounded(b []byte, lim ModuleLimits) []byte {
	if !sh.unboundedT {
		return b
	}
	body := binary.AppendUvarint(nil, uint64(len(sh.tables)))
	for _, t := range sh.tables {
		if !t.hasMax {
			t.max = uint32(max(lim.TableEntries, int(t.min)))
		}
		body = append(body, t.ref...)
		body = append(body, 0x01)
		body = binary.AppendUvarint(body, uint64(t.min))
		body = binary.AppendUvarint(body, uint64(t.max))
	}
	// The section header (id, size) sits just before its body: find where
	// it starts by walking back over the size's LEB bytes.
	start, end := sh.tableSec[0], sh.tableSec[1]
	hdr := start - 1
	for hdr > 0 && b[hdr-1]&0x80 != 0 {
		hdr--
	}
	hdr-- // the section id
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:hdr]...)
	out = append(out, 4)
	out = binary.AppendUvarint(out, uint64(len(body)))
	out = append(out, body...)
	return append(out, b[end:]...)
}

// precheck reads a module's structure before wazero does. It refuses a
// module that declares more than it contains (wazero sizes its decoding
// allocations from declared counts, so a few hundred bytes could otherwise
// make the host allocate gigabytes: FuzzLoad found 68 million function
// bodies declared in a 5-byte section) and one whose shape exceeds lim.
// Function bodies are walked instruction by instruction to measure nesting
// and br_table sizes; an opcode outside what the host's engine accepts
// (WebAssembly 2.0) refuses the module, so no instruction can hide what
// follows it. Anything else unusual is left for wazero to judge, and the
// walk of a section stops quietly at what it does not recognise.
func precheck(b []byte, lim ModuleLimits) (*shape, error) {
	sh := &shape{}
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return sh, nil
	}
	for pos := 8; pos < len(b); {
		id := b[pos]
		size, n := uleb32(b[pos+1:])
		if n == 0 {
			return sh, nil
		}
		start := pos + 1 + n
		end := start + int(size)
		if end > len(b) || end < start {
			return nil, fmt.Errorf("section %d declares %d bytes; only %d remain", id, size, len(b)-start)
		}
		s := &scan{b: b[start:end], id: id, lim: &lim, sh: sh}
		if err := s.section(); err != nil {
			return nil, err
		}
		if id == 4 {
			sh.tableSec = [2]int{start, end}
		}
		pos = end
	}
	return sh, nil
}

// scan walks one section.
type scan struct {
	b   []byte
	pos int
	id  byte
	lim *ModuleLimits
	sh  *shape
}

// stop ends the walk of a section without a verdict.
type stop struct{}

func (s *scan) left() int { return len(s.b) - s.pos }

func (s *scan) u32() uint32 {
	v, n := uleb32(s.b[s.pos:])
	if n == 0 {
		panic(stop{})
	}
	s.pos += n
	return v
}

// sleb skips a signed LEB128 of at most 10 bytes.
func (s *scan) sleb() {
	for i := 0; ; i++ {
		if i == 10 {
			panic(stop{})
		}
		if s.byte()&0x80 == 0 {
			return
		}
	}
}

func (s *scan) byte() byte {
	if s.pos >= len(s.b) {
		panic(stop{})
	}
	s.pos++
	return s.b[s.pos-1]
}

func (s *scan) skip(n uint32) {
	if uint64(n) > uint64(s.left()) {
		panic(stop{})
	}
	s.pos += int(n)
}

// count reads a declared count or length and refuses it if it cannot fit.
func (s *scan) count(what string) uint32 {
	n := s.u32()
	if uint64(n) > uint64(s.left()) {
		panic(fmt.Errorf("section %d declares %d %s in %d bytes", s.id, n, what, s.left()))
	}
	return n
}

// limit refuses observed > max. where (a string or a funcWhere) is only
// formatted for a refusal.
func limit(name string, observed, max int, where any) {
	if observed > max {
		panic(&ShapeError{Limit: name, Max: int64(max), Observed: int64(observed), Where: fmt.Sprint(where)})
	}
}

// funcWhere names function i in a refusal.
type funcWhere int

func (f funcWhere) String() string { return fmt.Sprintf("function %d", int(f)) }

// entries reads a section's entry count, refused beyond max.
func (s *scan) entries(name string, max int) uint32 {
	n := s.count("entries")
	limit(name, int(n), max, "")
	return n
}

func (s *scan) section() (err error) {
	defer func() {
		switch r := recover().(type) {
		case nil, stop:
		case error:
			err = r
		default:
			panic(r)
		}
	}()
	switch s.id {
	case 1: // types
		for n := s.entries("type count", s.lim.Entries); n > 0; n-- {
			if s.byte() != 0x60 {
				return nil
			}
			for _, what := range []string{"parameters", "results"} {
				for k := s.count(what); k > 0; k-- {
					s.valType()
				}
			}
		}
	case 2: // imports
		for n := s.entries("import count", s.lim.Entries); n > 0; n-- {
			mod := s.name("bytes of module name")
			name := s.name("bytes of import name")
			switch kind := s.byte(); kind {
			case 0x00: // func: type index
				s.u32()
			case 0x02: // memory: wazero reports it
				s.limits()
			case 0x01, 0x03, 0x04: // table, global, tag: the host serves none
				what := map[byte]string{1: "table", 3: "global", 4: "tag"}[kind]
				s.sh.otherImports = append(s.sh.otherImports, mod+"."+name+" ("+what+")")
				switch kind {
				case 0x01:
					s.valType()
					s.limits()
				case 0x03:
					s.valType()
					s.byte()
				case 0x04:
					s.byte()
					s.u32()
				}
			default:
				return nil
			}
		}
	case 3: // functions
		s.entries("function count", s.lim.Functions)
	case 4: // tables
		n := s.entries("table count", 100)
		unbounded := false
		for i := range n {
			at := s.pos
			s.valType()
			t := tableType{ref: s.b[at:s.pos]}
			where := fmt.Sprintf("table %d", i)
			if s.left() > 0 && s.b[s.pos] > 0x01 {
				return nil // not a WebAssembly 2.0 table: left to wazero
			}
			t.min, t.max, t.hasMax = s.limits()
			limit("table size", int(t.min), s.lim.TableEntries, where)
			if t.hasMax {
				limit("table maximum size", int(t.max), s.lim.TableEntries, where)
			} else {
				unbounded = true
			}
			s.sh.tables = append(s.sh.tables, t)
		}
		// Only a section understood whole is rewritten.
		s.sh.unboundedT = unbounded && s.left() == 0
	case 6: // globals
		s.entries("global count", s.lim.Globals)
	case 7: // exports
		for n := s.entries("export count", s.lim.Entries); n > 0; n-- {
			s.skip(s.count("bytes of export name"))
			s.byte()
			s.u32()
		}
	case 9: // elements: each segment's vector of function indices or expressions
		total := 0
		for n := s.count("entries"); n > 0; n-- {
			switch flags := s.u32(); flags {
			case 0:
				s.constExpr()
				total += s.funcIndices()
			case 1, 3:
				s.byte() // element kind
				total += s.funcIndices()
			case 2:
				s.u32() // table
				s.constExpr()
				s.byte()
				total += s.funcIndices()
			case 4:
				s.constExpr()
				total += s.constExprs()
			case 5, 7:
				s.valType() // reference type
				total += s.constExprs()
			case 6:
				s.u32()
				s.constExpr()
				s.valType()
				total += s.constExprs()
			default:
				return nil
			}
			limit("element segment entries", total, s.lim.ElementEntries, "")
		}
	case 10: // code
		for i := range s.entries("function count", s.lim.Functions) {
			size := s.count("bytes of function body")
			where := funcWhere(i)
			limit("function body bytes", int(size), s.lim.BodyBytes, where)
			body := &scan{b: s.b[s.pos : s.pos+int(size)], id: s.id, lim: s.lim, sh: s.sh}
			body.code(where)
			s.skip(size)
		}
	case 11: // data
		for n := s.entries("data segment count", s.lim.DataSegments); n > 0; n-- {
			switch flags := s.u32(); flags {
			case 0:
				s.constExpr()
			case 1:
			case 2:
				s.u32()
				s.constExpr()
			default:
				return nil
			}
			s.skip(s.count("bytes of data"))
		}
	case 0: // custom: its name, and the maps of the "name" section
		name := s.count("bytes of custom section name")
		if string(s.b[s.pos:s.pos+int(name)]) != "name" {
			return nil
		}
		s.skip(name)
		entries := 0
		for s.left() > 0 {
			sub := s.byte()
			size := s.count("bytes of name subsection")
			body := &scan{b: s.b[s.pos : s.pos+int(size)], id: s.id, lim: s.lim, sh: s.sh}
			switch sub {
			case 0: // module name
				body.skip(body.count("bytes of module name"))
			case 1: // function names
				entries += body.names("function names")
			case 2: // local names, per function
				for n := body.count("functions with local names"); n > 0; n-- {
					body.u32()
					entries += 1 + body.names("local names")
					limit("name section entries", entries, s.lim.Entries, "")
				}
			}
			limit("name section entries", entries, s.lim.Entries, "")
			s.skip(size)
		}
	case 5, 13: // memories, tags: at least a byte each
		s.count("entries")
	}
	return nil
}

// name reads a length-prefixed name.
func (s *scan) name(what string) string {
	n := s.count(what)
	v := string(s.b[s.pos : s.pos+int(n)])
	s.skip(n)
	return v
}

// limits reads a table or memory type's limits.
func (s *scan) limits() (min, max uint32, hasMax bool) {
	switch s.byte() {
	case 0x00:
		return s.u32(), 0, false
	case 0x01:
		return s.u32(), s.u32(), true
	case 0x02: // shared memory: min only
		return s.u32(), 0, false
	case 0x03:
		return s.u32(), s.u32(), true
	}
	panic(stop{})
}

// funcIndices and constExprs walk an element segment's initialisers and
// return how many there are.
func (s *scan) funcIndices() int {
	n := s.count("element indices")
	for range n {
		s.u32()
	}
	return int(n)
}

func (s *scan) constExprs() int {
	n := s.count("element expressions")
	for range n {
		s.constExpr()
	}
	return int(n)
}

// names walks a name map: (index, name) pairs.
func (s *scan) names(what string) int {
	n := s.count(what)
	for range n {
		s.u32()
		s.skip(s.count("bytes of a name"))
	}
	return int(n)
}

// valType skips a value type; reference types with a heap type are skipped
// too, anything else stops the walk.
func (s *scan) valType() {
	switch b := s.byte(); b {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69:
	case 0x63, 0x64:
		s.u32() // heap type (small non-negative indices and abstract types encode as one byte)
	default:
		panic(stop{})
	}
}

// constExpr skips a constant expression up to its end opcode.
func (s *scan) constExpr() {
	for {
		switch op := s.byte(); op {
		case 0x0b:
			return
		case 0x41, 0x42, 0x23, 0xd2: // i32.const, i64.const (LEB), global.get, ref.func
			for s.byte()&0x80 != 0 {
			}
		case 0x43:
			s.skip(4)
		case 0x44:
			s.skip(8)
		case 0xd0:
			s.byte()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant expressions
		default:
			panic(stop{})
		}
	}
}

// code walks one function body: its locals, then every instruction,
// tracking block nesting and br_table sizes. The instruction set is
// WebAssembly 2.0 (what wazero's default engine accepts): MVP, sign
// extension, saturating truncation, bulk memory, reference types,
// multi-value and fixed-width SIMD.
func (s *scan) code(where funcWhere) {
	// A body that ends inside an instruction is malformed; refusing it
	// here, rather than stopping quietly, keeps the bodies after it from
	// going unmeasured.
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stop); ok {
				r = fmt.Errorf("%v: its body ends inside an instruction or declaration at byte %d", where, s.pos)
			}
			panic(r)
		}
	}()
	total := 0
	for g := s.count("local groups"); g > 0; g-- {
		total += int(s.u32())
		if total > s.lim.Locals {
			limit("locals", total, s.lim.Locals, where)
		}
		s.valType()
	}
	depth := 1 // the body is a block
	for s.left() > 0 {
		at := s.pos
		switch op := s.byte(); {
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if: a block type
			depth++
			limit("block nesting depth", depth, s.lim.Nesting, where)
			s.sleb()
		case op == 0x0b: // end
			depth--
		case op <= 0x01 || op == 0x05 || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
			// unreachable, nop, else, return, drop, select, ref.is_null
		case op == 0x0c || op == 0x0d || op == 0x10 || op == 0xd2 || (op >= 0x20 && op <= 0x26):
			s.u32() // br, br_if, call, ref.func, local/global/table get/set/tee
		case op == 0x0e: // br_table
			n := s.count("br_table targets")
			limit("br_table targets", int(n), s.lim.BrTableTargets, where)
			for i := uint32(0); i <= n; i++ {
				s.u32()
			}
		case op == 0x11: // call_indirect
			s.u32()
			s.u32()
		case op == 0x1c: // select with types
			for n := s.count("select types"); n > 0; n-- {
				s.valType()
			}
		case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
			s.u32()
			s.u32()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			s.u32()
		case op == 0x41 || op == 0x42: // i32.const, i64.const
			s.sleb()
		case op == 0x43:
			s.skip(4)
		case op == 0x44:
			s.skip(8)
		case op >= 0x45 && op <= 0xc4: // numeric, sign extension
		case op == 0xd0: // ref.null
			s.byte()
		case op == 0xfc:
			s.prefixFC(where, at)
		case op == 0xfd:
			s.prefixFD(where, at)
		default:
			panic(fmt.Errorf("%v: opcode %#x at byte %d of its body is not one this host's engine accepts", where, op, at))
		}
	}
}

func (s *scan) prefixFC(where funcWhere, at int) {
	switch sub := s.u32(); {
	case sub <= 7: // saturating truncation
	case sub == 8 || sub == 12 || sub == 14: // memory.init, table.init, table.copy
		s.u32()
		s.u32()
	case sub == 10: // memory.copy
		s.u32()
		s.u32()
	case sub == 9 || sub == 11 || sub == 13 || (sub >= 15 && sub <= 17):
		s.u32() // data.drop, memory.fill, elem.drop, table.grow/size/fill
	default:
		panic(fmt.Errorf("%v: opcode 0xfc %d at byte %d of its body is not one this host's engine accepts", where, sub, at))
	}
}

func (s *scan) prefixFD(where funcWhere, at int) {
	switch sub := s.u32(); {
	case sub <= 11 || sub == 92 || sub == 93: // loads, stores: memarg
		s.u32()
		s.u32()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		s.skip(16)
	case sub >= 21 && sub <= 34: // extract/replace lane
		s.byte()
	case sub >= 84 && sub <= 91: // load/store lane: memarg, lane
		s.u32()
		s.u32()
		s.byte()
	case sub <= 255:
	default:
		panic(fmt.Errorf("%v: opcode 0xfd %d at byte %d of its body is not one this host's engine accepts", where, sub, at))
	}
}

// uleb32 decodes an unsigned LEB128 u32; n is 0 when b does not start with one.
func uleb32(b []byte) (v uint32, n int) {
	var shift uint
	for i := 0; i < len(b) && i < 5; i++ {
		v |= uint32(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
		shift += 7
	}
	return 0, 0
}
