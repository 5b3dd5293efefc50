package pgtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Each DSN is a database of its own: a table made in one is not in the
// other, and the database is gone once its test ends.
func TestDSNFreshDatabases(t *testing.T) {
	ctx := context.Background()
	var first string
	t.Run("a", func(t *testing.T) {
		conn := connect(t, DSN(t))
		if _, err := conn.Exec(ctx, `CREATE TABLE only_here (x int)`); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&first); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("b", func(t *testing.T) {
		conn := connect(t, DSN(t))
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatal("a table of another test's database is visible")
		}
	})
	admin := connect(t, Shared(t).DSN("postgres"))
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, first).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if first == "" || n != 0 {
		t.Fatalf("database %q of a finished test still exists (%d)", first, n)
	}
}

// The server listens on loopback only, runs from its temporary directory
// and, unless PGTEST_DURABLE=1, without fsync.
func TestServerSettings(t *testing.T) {
	ctx := context.Background()
	s := Shared(t)
	conn := connect(t, DSN(t))
	for name, want := range map[string]string{"listen_addresses": "127.0.0.1", "fsync": "off", "unix_socket_directories": s.Dir, "server_encoding": "UTF8"} {
		if name == "fsync" && os.Getenv("PGTEST_DURABLE") == "1" {
			want = "on"
		}
		var got string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "data", "PG_VERSION")); err != nil {
		t.Fatal(err)
	}
}

// Missing binaries are an error naming the package to install.
func TestFindBinMissing(t *testing.T) {
	t.Setenv("PG_BIN", t.TempDir())
	_, err := FindBin()
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("FindBin with an empty PG_BIN: %v", err)
	}
}

// A second server starts beside the shared one (on another port) and Stop
// stops it and removes its directory.
func TestStartStop(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	if s.Port == Shared(t).Port {
		t.Fatal("two servers on one port")
	}
	conn, err := pgx.Connect(context.Background(), s.DSN("postgres"))
	if err != nil {
		s.Stop()
		t.Fatal(err)
	}
	conn.Close(context.Background())
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s left behind: %v", s.Dir, err)
	}
	if _, err := pgx.Connect(context.Background(), s.DSN("postgres")); err == nil {
		t.Fatal("the stopped server still answers")
	}
}

// PGTEST_OPTIONS reaches the server's command line.
func TestStartOptions(t *testing.T) {
	t.Setenv("PGTEST_OPTIONS", "-c work_mem=7MB")
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	conn, err := pgx.Connect(context.Background(), s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var got string
	if err := conn.QueryRow(context.Background(), `SHOW work_mem`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "7MB" {
		t.Fatalf("work_mem = %s, want 7MB", got)
	}
}

func TestSanitize(t *testing.T) {
	got := sanitize("TestX/sub-case with spaces and a very long name that goes on")
	if len(got) > 40 || strings.Trim(got, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		t.Fatalf("sanitize gave %q", got)
	}
}

// A server whose test binary died is stopped and removed by the next
// Start's sweep.
func TestSweepStale(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		s.Stop()
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, ownerFile), []byte(strconv.Itoa(dead.Process.Pid)), 0o644); err != nil {
		s.Stop()
		t.Fatal(err)
	}
	sweepStale(s.Bin)
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		s.Stop()
		t.Fatalf("the stale server's directory is still there: %v", err)
	}
	if conn, err := pgx.Connect(context.Background(), s.DSN("postgres")); err == nil {
		conn.Close(context.Background())
		t.Fatal("the stale server still answers")
	}
	// The shared server, whose owner is alive, is untouched.
	if _, err := os.Stat(Shared(t).Dir); err != nil {
		t.Fatal(err)
	}
}
