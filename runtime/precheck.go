package runtime

import "fmt"

// precheck reads a module's structure just far enough to refuse one that
// declares more than it contains. wazero sizes its decoding allocations
// from the counts and lengths a module declares (section entries, function
// parameters, names, data segments, locals, element initialisers, the name
// section's maps), so a few hundred bytes could
// otherwise make the host allocate gigabytes before the decoder notices
// (found by FuzzLoad: 68 million function bodies in a 5-byte section, 834
// million parameters in a type). A count is refused when it exceeds the
// bytes left to hold it; anything merely unusual is left for wazero to
// judge, and parsing of a section stops quietly at anything it does not
// recognise.
func precheck(b []byte) error {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil
	}
	for pos := 8; pos < len(b); {
		id := b[pos]
		size, n := uleb32(b[pos+1:])
		if n == 0 {
			return nil
		}
		start := pos + 1 + n
		end := start + int(size)
		if end > len(b) || end < start {
			return fmt.Errorf("section %d declares %d bytes; only %d remain", id, size, len(b)-start)
		}
		s := &scan{b: b[start:end], id: id}
		if err := s.section(); err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// maxLocals bounds the locals of one function (wazero would allocate for
// up to 2^32).
const maxLocals = 50_000

// scan walks one section; errStop ends the walk without a verdict.
type scan struct {
	b   []byte
	pos int
	id  byte
}

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
		for n := s.count("entries"); n > 0; n-- {
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
		for n := s.count("entries"); n > 0; n-- {
			s.skip(s.count("bytes of module name"))
			s.skip(s.count("bytes of import name"))
			switch s.byte() {
			case 0x00, 0x04: // func (type index), tag (attribute was a byte for tags: skip both forms)
				s.u32()
			default:
				return nil // tables, memories, globals: left to wazero
			}
		}
	case 7: // exports
		for n := s.count("entries"); n > 0; n-- {
			s.skip(s.count("bytes of export name"))
			s.byte()
			s.u32()
		}
	case 10: // code
		for n := s.count("entries"); n > 0; n-- {
			size := s.count("bytes of function body")
			body := &scan{b: s.b[s.pos : s.pos+int(size)], id: s.id}
			var total uint64
			for g := body.count("local groups"); g > 0; g-- {
				total += uint64(body.u32())
				if total > maxLocals {
					return fmt.Errorf("a function declares more than %d locals", maxLocals)
				}
				body.valType()
			}
			s.skip(size)
		}
	case 11: // data
		for n := s.count("entries"); n > 0; n-- {
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
	case 9: // elements: each segment's vector of function indices or expressions
		for n := s.count("entries"); n > 0; n-- {
			switch flags := s.u32(); flags {
			case 0:
				s.constExpr()
				s.funcIndices()
			case 1, 3:
				s.byte() // element kind
				s.funcIndices()
			case 2:
				s.u32() // table
				s.constExpr()
				s.byte()
				s.funcIndices()
			case 4:
				s.constExpr()
				s.constExprs()
			case 5, 7:
				s.valType() // reference type
				s.constExprs()
			case 6:
				s.u32()
				s.constExpr()
				s.valType()
				s.constExprs()
			default:
				return nil
			}
		}
	case 0: // custom: its name, and the maps of the "name" section
		name := s.count("bytes of custom section name")
		if string(s.b[s.pos:s.pos+int(name)]) != "name" {
			return nil
		}
		s.skip(name)
		for s.left() > 0 {
			sub := s.byte()
			size := s.count("bytes of name subsection")
			body := &scan{b: s.b[s.pos : s.pos+int(size)], id: s.id}
			switch sub {
			case 0: // module name
				body.skip(body.count("bytes of module name"))
			case 1: // function names
				body.names("function names")
			case 2: // local names, per function
				for n := body.count("functions with local names"); n > 0; n-- {
					body.u32()
					body.names("local names")
				}
			}
			s.skip(size)
		}
	case 3, 4, 5, 6, 13: // functions, tables, memories, globals, tags: at least a byte each
		s.count("entries")
	}
	return nil
}

// funcIndices and constExprs walk an element segment's initialisers.
func (s *scan) funcIndices() {
	for n := s.count("element indices"); n > 0; n-- {
		s.u32()
	}
}

func (s *scan) constExprs() {
	for n := s.count("element expressions"); n > 0; n-- {
		s.constExpr()
	}
}

// names walks a name map: (index, name) pairs.
func (s *scan) names(what string) {
	for n := s.count(what); n > 0; n-- {
		s.u32()
		s.skip(s.count("bytes of a name"))
	}
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
