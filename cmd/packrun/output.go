package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// Output formats of --output (README "CLI conventions").
const (
	outTable = "table" // for people: a table, or a show command's text
	outJSON  = "json"  // one JSON document (a listing: one array)
	outJSONL = "jsonl" // one JSON value a line (a listing: each item)
)

// outputValue is a command's --output; --json sets it to json (the two
// disagreeing is a usage error). It keeps the command's "structured" bool
// (its old asJSON) in step, so a command reads either.
type outputValue struct {
	format             string
	byOutput, byJSON   bool
	structured         *bool
	defaultIsStructure bool
}

func (o *outputValue) Set(s string) error {
	switch s {
	case outTable, outJSON, outJSONL:
	default:
		return fmt.Errorf("want table, json or jsonl")
	}
	if o.byJSON && s != outJSON {
		return fmt.Errorf("--json is --output json; --output %s contradicts it", s)
	}
	o.format, o.byOutput = s, true
	o.sync()
	return nil
}
func (o *outputValue) String() string { return o.format }
func (o *outputValue) Type() string   { return "format" }
func (o *outputValue) sync() {
	if o.structured != nil {
		*o.structured = o.format != outTable
	}
}

// jsonSynonym is --json: --output json.
type jsonSynonym struct{ o *outputValue }

func (j jsonSynonym) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("--json takes no value (it is --output json)")
	}
	if !on {
		return nil // --json=false: as without it
	}
	if j.o.byOutput && j.o.format != outJSON {
		return fmt.Errorf("--json is --output json; --output %s contradicts it", j.o.format)
	}
	j.o.format, j.o.byJSON = outJSON, true
	j.o.sync()
	return nil
}
func (j jsonSynonym) String() string { return strconv.FormatBool(j.o.byJSON) }
func (j jsonSynonym) Type() string   { return "bool" }

// outputVar defines --output table|json|jsonl and its synonym --json on
// fs (default table); structured, if not nil, is true unless the format
// is table.
func outputVar(fs *pflag.FlagSet, structured *bool) {
	outputVarDefault(fs, outTable, structured)
}

// outputVarDefault is outputVar with another default: json for the show
// commands that printed JSON only before --output existed.
func outputVarDefault(fs *pflag.FlagSet, def string, structured *bool) {
	o := &outputValue{format: def, structured: structured}
	o.sync()
	fs.Var(o, "output", "output format: table, json or jsonl (default "+def+")")
	f := fs.VarPF(jsonSynonym{o}, "json", "", "print JSON: the same as --output json")
	f.NoOptDefVal = "true"
}

// output is the format the running command was asked for (table for a
// command without --output).
func (a *app) output() string {
	if a.out == nil {
		return outTable
	}
	return a.out.format
}

// emit prints v as the running command's --output asks: json, one
// compact document; jsonl, each element of a slice on its own line (any
// other value on one line). Table output is the caller's.
func (a *app) emit(v any) error {
	if a.output() == outJSONL {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
			for i := range rv.Len() {
				if err := writeJSON(a.stdout, rv.Index(i).Interface()); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return writeJSON(a.stdout, v)
}

// emitRecord prints one record (a show command without a text form of
// its own): json or jsonl as emit, table as "field: value" lines in the
// record's own order, each value compact JSON (strings bare).
func (a *app) emitRecord(v any) error {
	if a.output() != outTable {
		return a.emit(v)
	}
	return writeFields(a.stdout, v)
}

// writeFields prints a JSON object's fields as aligned "field: value"
// lines; anything else as JSON.
func writeFields(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return writeJSON(w, v)
	}
	var keys []string
	var vals []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return err
		}
		s := string(val)
		if uq, err := strconv.Unquote(s); err == nil && len(s) > 0 && s[0] == '"' {
			s = uq
		}
		keys, vals = append(keys, k.(string)), append(vals, s)
	}
	width := 0
	for _, k := range keys {
		width = max(width, len(k))
	}
	for i, k := range keys {
		if _, err := fmt.Fprintf(w, "%s:%s %s\n", k, strings.Repeat(" ", width-len(k)), oneLine(vals[i])); err != nil {
			return err
		}
	}
	return nil
}

// cursorVar defines --cursor: where a paged listing starts (the cursor a
// previous page ended with; the API's cursor / next_cursor).
func cursorVar(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "cursor", "", "start after this cursor: the one the previous page printed (more: --cursor C)")
}

// more says where the next page starts when a page was full: the table's
// last line, or a line on stderr beside a JSON document.
func (a *app) more(cursor string) {
	if cursor == "" {
		return
	}
	if a.output() == outTable {
		fmt.Fprintf(a.stdout, "more: --cursor %s\n", cursor)
		return
	}
	fmt.Fprintf(a.stderr, "packrun: more: --cursor %s\n", cursor)
}

// seqCursor reads a --cursor that is a seq (attempts, events, messages).
func seqCursor(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, usageError("--cursor %q: want the cursor a previous page printed (a number)", v)
	}
	return n, nil
}
