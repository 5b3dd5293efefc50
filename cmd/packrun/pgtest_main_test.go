package main

import (
	"testing"

	"github.com/packrun/packrun/internal/testing/pgtest"
)

// TestMain stops the PostgreSQL server pgtest.DSN starts for the tests
// that need one (store migrate, --store).
func TestMain(m *testing.M) { pgtest.Main(m) }
