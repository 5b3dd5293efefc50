//go:build linux

package pgbench

import (
	"testing"

	"github.com/packrun/packrun/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
