package runtime

import (
	"errors"
	"fmt"
)

// renameImports returns wasm with every function import from module from
// whose field is in fields moved to module to (the field kept). Nothing
// else changes: the import section is re-encoded with its new size and
// every other byte is copied. The module is untrusted: every length and
// LEB128 is bounds-checked, and a malformed header or import section is
// an error naming it. A module with no such import is returned as is.
func renameImports(wasm []byte, from, to string, fields map[string]bool) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module (no \\0asm header)")
	}
	for pos := 8; pos < len(wasm); {
		id := wasm[pos]
		size, n, err := leb32(wasm[pos+1:])
		if err != nil {
			return nil, fmt.Errorf("section %d at byte %d: size: %w", id, pos, err)
		}
		start := pos + 1 + n
		if uint64(size) > uint64(len(wasm)-start) {
			return nil, fmt.Errorf("section %d at byte %d declares %d bytes; only %d remain", id, pos, size, len(wasm)-start)
		}
		end := start + int(size)
		if id != 2 {
			pos = end
			continue
		}
		body, changed, err := renameInSection(wasm[start:end], from, to, fields)
		if err != nil {
			return nil, fmt.Errorf("import section at byte %d: %w", pos, err)
		}
		if !changed {
			return wasm, nil
		}
		out := make([]byte, 0, len(wasm)+len(body)-int(size)+5)
		out = append(out, wasm[:pos+1]...)
		out = appendLeb32(out, uint32(len(body)))
		out = append(out, body...)
		return append(out, wasm[end:]...), nil
	}
	return wasm, nil
}

// renameInSection rewrites an import section's body.
func renameInSection(b []byte, from, to string, fields map[string]bool) ([]byte, bool, error) {
	r := &reader{b: b}
	count, err := r.u32("import count")
	if err != nil {
		return nil, false, err
	}
	out := appendLeb32(make([]byte, 0, len(b)+16), count)
	changed := false
	for i := uint32(0); i < count; i++ {
		mod, err := r.name(fmt.Sprintf("import %d module name", i))
		if err != nil {
			return nil, false, err
		}
		field, err := r.name(fmt.Sprintf("import %d field name", i))
		if err != nil {
			return nil, false, err
		}
		descStart := r.pos
		if err := r.importDesc(i); err != nil {
			return nil, false, err
		}
		if mod == from && fields[field] && b[descStart] == 0x00 {
			mod, changed = to, true
		}
		out = appendLeb32(out, uint32(len(mod)))
		out = append(out, mod...)
		out = appendLeb32(out, uint32(len(field)))
		out = append(out, field...)
		out = append(out, b[descStart:r.pos]...)
	}
	if r.pos != len(b) {
		return nil, false, fmt.Errorf("%d bytes after the last of %d imports", len(b)-r.pos, count)
	}
	return out, changed, nil
}

// reader reads a section body; every read is bounds-checked.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) byte(what string) (byte, error) {
	if r.pos >= len(r.b) {
		return 0, fmt.Errorf("%s: unexpected end of section", what)
	}
	r.pos++
	return r.b[r.pos-1], nil
}

func (r *reader) u32(what string) (uint32, error) {
	v, n, err := leb32(r.b[r.pos:])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	r.pos += n
	return v, nil
}

// u64 reads an unsigned LEB128 of at most 10 bytes (a memory64 limit).
func (r *reader) u64(what string) error {
	for i := 0; i < 10; i++ {
		c, err := r.byte(what)
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			if i == 9 && c > 1 {
				return fmt.Errorf("%s: LEB128 overflows 64 bits", what)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: LEB128 longer than 10 bytes", what)
}

func (r *reader) name(what string) (string, error) {
	n, err := r.u32(what + " length")
	if err != nil {
		return "", err
	}
	if uint64(n) > uint64(len(r.b)-r.pos) {
		return "", fmt.Errorf("%s: declares %d bytes; only %d remain", what, n, len(r.b)-r.pos)
	}
	r.pos += int(n)
	return string(r.b[r.pos-int(n) : r.pos]), nil
}

// importDesc skips import i's description: a function, table, memory,
// global or tag type.
func (r *reader) importDesc(i uint32) error {
	what := fmt.Sprintf("import %d", i)
	kind, err := r.byte(what + " kind")
	if err != nil {
		return err
	}
	switch kind {
	case 0x00: // function: type index
		_, err = r.u32(what + " type index")
	case 0x01: // table: reference type, limits
		if _, err = r.byte(what + " table type"); err == nil {
			err = r.limits(what)
		}
	case 0x02: // memory: limits
		err = r.limits(what)
	case 0x03: // global: value type, mutability
		if _, err = r.byte(what + " global type"); err == nil {
			_, err = r.byte(what + " global mutability")
		}
	case 0x04: // tag: attribute, type index
		if _, err = r.byte(what + " tag attribute"); err == nil {
			_, err = r.u32(what + " tag type index")
		}
	default:
		return fmt.Errorf("%s has unknown kind 0x%02x", what, kind)
	}
	return err
}

// limits skips a table or memory type's limits (flags: bit 0 a maximum,
// bit 1 shared, bit 2 64-bit).
func (r *reader) limits(what string) error {
	flags, err := r.byte(what + " limits")
	if err != nil {
		return err
	}
	if flags > 0x07 {
		return fmt.Errorf("%s has unknown limits flags 0x%02x", what, flags)
	}
	n := 1 + int(flags&1)
	for range n {
		if flags&4 != 0 {
			err = r.u64(what + " limit")
		} else {
			_, err = r.u32(what + " limit")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// leb32 decodes an unsigned LEB128 u32 of at most 5 bytes whose value
// fits in 32 bits.
func leb32(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0, errors.New("unexpected end in a LEB128")
		}
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, 0, errors.New("LEB128 overflows 32 bits")
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("LEB128 longer than 5 bytes")
}

func appendLeb32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
