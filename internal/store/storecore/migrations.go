package storecore

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Migrations reads a driver's schema migrations from dir in fsys (its
// embedded migrations/ folder): files named NNNN_summary.sql, numbered
// from 0001 without a gap; the i-th returned is version i+1. A published
// file is never edited, only a new one added. A driver calls it once, at
// package initialisation, through MustMigrations.
func Migrations(fsys fs.FS, dir string) ([]string, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries { // sorted by name, so by number
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %s: the name is not NNNN_summary.sql", name)
		}
		if n != len(out)+1 {
			return nil, fmt.Errorf("migration %s: expected number %04d (numbers run from 0001 without a gap)", name, len(out)+1)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return out, nil
}

// MustMigrations is Migrations for a driver's embedded files, which are
// part of the build: a bad name is a programming error.
func MustMigrations(fsys fs.FS, dir string) []string {
	m, err := Migrations(fsys, dir)
	if err != nil {
		panic(err)
	}
	return m
}
