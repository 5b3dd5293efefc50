package strictjson

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/packrun/packrun/internal/textclip"
)

// Kinds of problem Check reports; a *CheckError matches (errors.Is)
// exactly one.
var (
	ErrSyntax       = errors.New("not valid JSON")
	ErrInvalidUTF8  = errors.New("not valid UTF-8")
	ErrDuplicateKey = errors.New("duplicate key")
	ErrTooDeep      = errors.New("nested too deeply")
)

// CheckError is the first problem Check found in a document.
type CheckError struct {
	Err    error  // ErrSyntax, ErrInvalidUTF8, ErrDuplicateKey or ErrTooDeep
	Path   string // where: "$", "$.payload.name", `$["odd key"][3]`; bounded (see maxPath)
	Offset int    // byte offset of the problem in the document
	Detail string // more about it, may be empty
}

// Error reads "duplicate key at $.payload.a (byte 40)", with ": detail"
// when there is one.
func (e *CheckError) Error() string {
	s := fmt.Sprintf("%s at %s (byte %d)", e.Err, e.Path, e.Offset)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *CheckError) Unwrap() error { return e.Err }

// Check returns nil if b is exactly one JSON value (RFC 8259, with
// whitespace around it) that is also strict: valid UTF-8 throughout, no
// \u escape of an unpaired surrogate (I-JSON, RFC 7493), no object with
// two keys that are equal once unescaped, and at most maxDepth objects and
// arrays nested. The error is a *CheckError naming the path of the first
// problem.
//
// It is one pass over the bytes that allocates nothing for the documents
// an API receives (objects of up to 16 keys without escapes); it accepts
// a subset of what encoding/json accepts, so a checked document decodes.
func Check(b []byte, maxDepth int) error {
	c := checkers.Get().(*checker)
	c.b, c.i, c.maxDepth = b, 0, maxDepth
	err := c.run()
	// Keep neither the document nor what a hostile one made grow.
	if cap(c.stack) <= 64 && cap(c.keys) <= 256 {
		clear(c.stack[:cap(c.stack)])
		clear(c.keys[:cap(c.keys)])
		*c = checker{stack: c.stack[:0], keys: c.keys[:0]}
		checkers.Put(c)
	}
	return err
}

// checkers are reused, so that checking the usual document allocates
// nothing.
var checkers = sync.Pool{New: func() any {
	return &checker{stack: make([]frame, 0, 8), keys: make([]keyRef, 0, 32)}
}}

type checker struct {
	b        []byte
	i        int
	maxDepth int
	stack    []frame
	keys     []keyRef // the keys of the open objects, innermost last
}

// frame is one open object or array.
type frame struct {
	obj   bool
	index int // array: the current element
	// object: where its keys start in checker.keys, and a set of them once
	// there are many.
	keys0 int
	set   map[string]struct{}
	// object: whether its current key has been read (false while the
	// next one is read); the path names it.
	hasKey bool
}

// keyRef is a key of an open object: its raw bytes b[s:e] (without the
// quotes), and when it has escapes, its value.
type keyRef struct {
	s, e int
	esc  bool
	val  string
}

// manyKeys is when an object's keys go into a map instead of being
// compared one by one.
const manyKeys = 16

// plain marks the bytes a string may hold as they are: printable ASCII
// other than '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return
}()

func (c *checker) run() error {
	b := c.b
	const (
		stValue = iota // a value starts here (after whitespace)
		stKey          // an object key starts here (after whitespace)
		stAfter        // a value has ended
	)
	st := stValue
	c.ws()
	for {
		switch st {
		case stValue:
			if c.i >= len(b) {
				return c.syntax("unexpected end of input")
			}
			switch ch := b[c.i]; {
			case ch == '{' || ch == '[':
				if len(c.stack) >= c.maxDepth {
					return c.fail(ErrTooDeep, fmt.Sprintf("more than %d levels", c.maxDepth))
				}
				c.stack = append(c.stack, frame{obj: ch == '{', keys0: len(c.keys)})
				c.i++
				c.ws()
				if c.i < len(b) && b[c.i] == ch+2 { // '}' is '{'+2, ']' is '['+2
					c.i++
					c.pop()
					st = stAfter
				} else if ch == '{' {
					st = stKey
				}
			case ch == '"':
				if _, _, err := c.str(false); err != nil {
					return err
				}
				st = stAfter
			case ch == 't':
				if err := c.lit("true"); err != nil {
					return err
				}
				st = stAfter
			case ch == 'f':
				if err := c.lit("false"); err != nil {
					return err
				}
				st = stAfter
			case ch == 'n':
				if err := c.lit("null"); err != nil {
					return err
				}
				st = stAfter
			case ch == '-' || ch >= '0' && ch <= '9':
				if err := c.num(); err != nil {
					return err
				}
				st = stAfter
			default:
				return c.unexpected("looking for the beginning of a value")
			}
		case stKey:
			c.stack[len(c.stack)-1].hasKey = false
			if c.i >= len(b) {
				return c.syntax("unexpected end of input")
			}
			if b[c.i] != '"' {
				return c.unexpected("looking for an object key")
			}
			if err := c.key(); err != nil {
				return err
			}
			c.ws()
			if c.i >= len(b) {
				return c.syntax("unexpected end of input")
			}
			if b[c.i] != ':' {
				return c.unexpected("after an object key")
			}
			c.i++
			c.ws()
			st = stValue
		case stAfter:
			c.ws()
			if len(c.stack) == 0 {
				if c.i != len(b) {
					return c.unexpected("after the top-level value")
				}
				return nil
			}
			if c.i >= len(b) {
				return c.syntax("unexpected end of input")
			}
			top := &c.stack[len(c.stack)-1]
			switch ch := b[c.i]; {
			case ch == ',':
				c.i++
				c.ws()
				if top.obj {
					st = stKey
				} else {
					top.index++
					st = stValue
				}
			case ch == '}' && top.obj, ch == ']' && !top.obj:
				c.i++
				c.pop()
			default:
				if top.obj {
					return c.unexpected("after an object's value")
				}
				return c.unexpected("after an array element")
			}
		}
	}
}

func (c *checker) pop() {
	top := &c.stack[len(c.stack)-1]
	c.keys = c.keys[:top.keys0]
	*top = frame{}
	c.stack = c.stack[:len(c.stack)-1]
}

func (c *checker) ws() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// key reads an object key, makes it the current key of the innermost
// object, and refuses it if the object has it already. An object with many
// keys keeps them in a set, and only its current one in c.keys.
func (c *checker) key() error {
	start := c.i
	esc, val, err := c.str(true)
	if err != nil {
		return err
	}
	k := keyRef{s: start + 1, e: c.i - 1, esc: esc, val: val}
	top := &c.stack[len(c.stack)-1]
	top.hasKey = true
	if top.set != nil {
		var dup bool
		if k.esc {
			_, dup = top.set[k.val]
		} else {
			_, dup = top.set[string(c.b[k.s:k.e])]
		}
		c.keys = append(c.keys[:top.keys0], k)
		if dup {
			c.i = start
			return c.fail(ErrDuplicateKey, "")
		}
		top.set[c.keyString(k)] = struct{}{}
		return nil
	}
	for _, o := range c.keys[top.keys0:] {
		if c.keyEqual(o, k) {
			c.keys = append(c.keys, k)
			c.i = start
			return c.fail(ErrDuplicateKey, "")
		}
	}
	c.keys = append(c.keys, k)
	if len(c.keys)-top.keys0 > manyKeys {
		top.set = make(map[string]struct{}, 4*manyKeys)
		for _, o := range c.keys[top.keys0:] {
			top.set[c.keyString(o)] = struct{}{}
		}
		c.keys = append(c.keys[:top.keys0], k)
	}
	return nil
}

// keyEqual compares two keys by value without copying them.
func (c *checker) keyEqual(x, y keyRef) bool {
	switch {
	case !x.esc && !y.esc:
		return string(c.b[x.s:x.e]) == string(c.b[y.s:y.e])
	case x.esc && y.esc:
		return x.val == y.val
	case x.esc:
		return x.val == string(c.b[y.s:y.e])
	}
	return y.val == string(c.b[x.s:x.e])
}

// keyString is the value of key k, as a new string.
func (c *checker) keyString(k keyRef) string {
	if k.esc {
		return k.val
	}
	return string(c.b[k.s:k.e])
}

// str reads a string starting at the '"' at c.i and leaves c.i after its
// closing quote. With decode set, a string with escapes is also decoded
// (for comparing keys).
func (c *checker) str(decode bool) (esc bool, val string, err error) {
	b := c.b
	c.i++
	var dec []byte
	lit := c.i // start of the bytes not yet copied into dec
	for c.i < len(b) {
		ch := b[c.i]
		if plain[ch] {
			c.i++
			continue
		}
		switch {
		case ch == '"':
			if esc && decode {
				dec = append(dec, b[lit:c.i]...)
				val = string(dec)
			}
			c.i++
			return esc, val, nil
		case ch == '\\':
			if decode {
				dec = append(dec, b[lit:c.i]...)
			}
			esc = true
			r, n, err := c.escape()
			if err != nil {
				return false, "", err
			}
			if decode {
				dec = utf8.AppendRune(dec, r)
			}
			c.i += n
			lit = c.i
		case ch < 0x20:
			return false, "", c.syntax(fmt.Sprintf("control character %#02x in a string; escape it", ch))
		default:
			r, n := utf8.DecodeRune(b[c.i:])
			if r == utf8.RuneError && n == 1 {
				return false, "", c.badUTF8()
			}
			c.i += n
		}
	}
	c.i = len(b)
	return false, "", c.syntax("unexpected end of input in a string")
}

// escape reads the escape at c.i ('\\') and returns its rune and length.
func (c *checker) escape() (rune, int, error) {
	b := c.b[c.i:]
	if len(b) < 2 {
		c.i = len(c.b)
		return 0, 0, c.syntax("unexpected end of input in a string")
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r, ok := hex4(b[2:])
		if !ok {
			return 0, 0, c.syntax(`\u must be followed by 4 hex digits`)
		}
		if !utf16.IsSurrogate(r) {
			return r, 6, nil
		}
		if r < 0xdc00 && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := hex4(b[8:]); ok {
				if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
					return d, 12, nil
				}
			}
		}
		return 0, 0, c.fail(ErrInvalidUTF8, fmt.Sprintf(`unpaired surrogate \u%04x encodes no character`, r))
	}
	c.i++
	return 0, 0, c.unexpected("in a string escape")
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, ch := range b[:4] {
		switch {
		case ch >= '0' && ch <= '9':
			ch -= '0'
		case ch >= 'a' && ch <= 'f':
			ch -= 'a' - 10
		case ch >= 'A' && ch <= 'F':
			ch -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(ch)
	}
	return r, true
}

func (c *checker) lit(word string) error {
	for k := 0; k < len(word); k++ {
		if c.i >= len(c.b) {
			return c.syntax("unexpected end of input in literal " + word)
		}
		if c.b[c.i] != word[k] {
			return c.unexpected("in literal " + word)
		}
		c.i++
	}
	return nil
}

// num reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *checker) num() error {
	b := c.b
	if b[c.i] == '-' {
		c.i++
	}
	digits := func() int {
		n := 0
		for c.i < len(b) && b[c.i] >= '0' && b[c.i] <= '9' {
			c.i++
			n++
		}
		return n
	}
	need := func(what string) error {
		if c.i >= len(b) {
			return c.syntax("unexpected end of input in a number")
		}
		return c.unexpected(what)
	}
	switch {
	case c.i < len(b) && b[c.i] == '0':
		c.i++
	case digits() == 0:
		return need("in a number")
	}
	if c.i < len(b) && b[c.i] == '.' {
		c.i++
		if digits() == 0 {
			return need("after a decimal point")
		}
	}
	if c.i < len(b) && (b[c.i] == 'e' || b[c.i] == 'E') {
		c.i++
		if c.i < len(b) && (b[c.i] == '+' || b[c.i] == '-') {
			c.i++
		}
		if digits() == 0 {
			return need("in an exponent")
		}
	}
	return nil
}

func (c *checker) syntax(detail string) error { return c.fail(ErrSyntax, detail) }

// unexpected reports the byte at c.i, or the invalid UTF-8 there.
func (c *checker) unexpected(where string) error {
	if c.i >= len(c.b) {
		return c.syntax("unexpected end of input")
	}
	r, n := utf8.DecodeRune(c.b[c.i:])
	if r == utf8.RuneError && n == 1 {
		return c.fail(ErrInvalidUTF8, "")
	}
	return c.syntax(fmt.Sprintf("unexpected %s %s", quoteRune(r), where))
}

// badUTF8 reports invalid UTF-8 at c.i inside a string: a value, or a
// key of the innermost object (which has no current key while one is
// read).
func (c *checker) badUTF8() error {
	if n := len(c.stack); n > 0 && c.stack[n-1].obj && !c.stack[n-1].hasKey {
		return c.fail(ErrInvalidUTF8, "in an object key")
	}
	return c.fail(ErrInvalidUTF8, "")
}

func quoteRune(r rune) string {
	if r < 0x20 || r == 0x7f {
		return fmt.Sprintf("byte %#02x", r)
	}
	return strconv.QuoteRune(r)
}

func (c *checker) fail(kind error, detail string) error {
	return &CheckError{Err: kind, Path: c.path(), Offset: c.i, Detail: detail}
}

// maxPath bounds CheckError.Path: a longer path keeps its end (and at
// least its last step, a key cut to 64 bytes).
const maxPath = 128

// path is the path of where c.i is: the open containers, each object by
// its current key (once it has one), each array by its current index.
func (c *checker) path() string {
	steps := make([]string, 0, len(c.stack))
	for n, f := range c.stack {
		if !f.obj {
			steps = append(steps, "["+strconv.Itoa(f.index)+"]")
			continue
		}
		// An object's current key is its last one in c.keys, before the
		// keys of the object nested in it (if any).
		end := len(c.keys)
		if n+1 < len(c.stack) {
			end = c.stack[n+1].keys0
		}
		if !f.hasKey || end <= f.keys0 {
			continue
		}
		steps = append(steps, FieldPath("", textclip.Clip(c.keyString(c.keys[end-1]), 64)))
	}
	i, size := len(steps), 0
	for i > 0 && (i == len(steps) || size+len(steps[i-1]) <= maxPath) {
		i--
		size += len(steps[i])
	}
	if i > 0 {
		return "$…" + strings.Join(steps[i:], "")
	}
	return "$" + strings.Join(steps, "")
}
