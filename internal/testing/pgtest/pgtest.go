// Package pgtest starts a real PostgreSQL server for a package's tests: no
// mock of the database. The server (Debian's postgresql package: initdb and
// pg_ctl) runs in a temporary directory on a free loopback port, once per
// test binary, and each test gets a database of its own.
//
// A package using it calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and DSN(t) in each test. The server is started on the first DSN call and
// stopped (its directory removed) when the tests are done; a server left
// behind by a test binary that was killed is stopped and removed by the
// next Start. Missing
// binaries fail the test, naming the package to install; they never skip
// it.
//
// Environment: PG_BIN names the directory of initdb and pg_ctl (default:
// the newest /usr/lib/postgresql/*/bin). The server runs with fsync=off,
// which only matters if the machine crashes mid-test; PGTEST_DURABLE=1
// keeps fsync on (for benchmarks of durable commits). PGTEST_OPTIONS adds
// server options (e.g. "-c shared_preload_libraries=pg_stat_statements",
// to count a benchmark's statements).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL server started by this package.
type Server struct {
	// Dir holds the data directory (Dir/data), the server's log
	// (Dir/log) and its Unix socket.
	Dir string
	// Bin is the directory of initdb and pg_ctl.
	Bin string
	// Port is the server's TCP port on 127.0.0.1.
	Port int
	// runAs is the user commands run as ("postgres" when the tests run
	// as root, which initdb refuses), or "" for the current user.
	runAs string
}

var (
	once    sync.Once
	shared  *Server
	started error
	dbs     atomic.Int64
)

// Main runs the tests, then the cleanups, then stops the shared server (if one was started)
// and removes its directory, and exits with the tests' code.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Shared returns the test binary's server, starting it on first use. A
// server that could not start fails t (and every later caller).
func Shared(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, started = Start() })
	if started != nil {
		t.Fatalf("pgtest: %v", started)
	}
	return shared
}

// DSN creates a fresh database on the shared server for t, drops it when t
// ends, and returns its connection string (TCP on 127.0.0.1, user
// postgres, no password).
func DSN(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	name := fmt.Sprintf("t%d_%s", dbs.Add(1), sanitize(t.Name()))
	if err := s.Exec("CREATE DATABASE " + pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Exec("DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s.DSN(name)
}

// sanitize keeps a database name readable and within PostgreSQL's 63
// bytes.
func sanitize(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// DSN is the connection string of database db on s.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// Exec runs one statement on s's postgres database.
func (s *Server) Exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// FindBin returns the directory holding initdb and pg_ctl: $PG_BIN, or
// the newest /usr/lib/postgresql/*/bin.
func FindBin() (string, error) {
	const install = "install PostgreSQL (apt-get install postgresql) or set PG_BIN to the directory of initdb and pg_ctl"
	if dir := os.Getenv("PG_BIN"); dir != "" {
		if err := hasBinaries(dir); err != nil {
			return "", fmt.Errorf("PG_BIN=%s: %v; %s", dir, err, install)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest first: versions compare as numbers (15 after 9.6).
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if hasBinaries(dir) == nil {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: " + install)
}

func version(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func hasBinaries(dir string) error {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("no %s there", name)
		}
	}
	return nil
}

// Start initialises and starts a new server in a temporary directory, on
// a free port of 127.0.0.1. Stop it with Stop.
func Start() (*Server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	s := &Server{Bin: bin}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		s.runAs = "postgres"
	}
	sweepStale(bin)
	if s.Dir, err = os.MkdirTemp("", "pgtest"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.Dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	if err := s.own(); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	if err := s.run("initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	// A free port can be taken between asking and listening: try again.
	for try := 0; ; try++ {
		if s.Port, err = freePort(); err == nil {
			if err = s.start(); err == nil {
				return s, nil
			}
		}
		if try == 2 {
			os.RemoveAll(s.Dir)
			return nil, err
		}
	}
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// own gives the directory to the user the server runs as.
func (s *Server) own() error {
	if s.runAs == "" {
		return nil
	}
	u, err := user.Lookup(s.runAs)
	if err != nil {
		return fmt.Errorf("running as root, the server needs the %s user: %v (apt-get install postgresql creates it)", s.runAs, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(s.Dir, uid, gid)
}

func (s *Server) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", s.Port, s.Dir)
	if os.Getenv("PGTEST_DURABLE") != "1" {
		opts += " -c fsync=off -c full_page_writes=off"
	}
	if extra := os.Getenv("PGTEST_OPTIONS"); extra != "" {
		opts += " " + extra
	}
	return s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.Dir, "log"), "-o", opts, "-w", "-t", "60", "start")
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() error {
	err := s.run("pg_ctl", "-D", s.data(), "-m", "fast", "-w", "stop")
	if rerr := os.RemoveAll(s.Dir); err == nil {
		err = rerr
	}
	return err
}

// run runs one of the server's programs, as runAs if set.
func (s *Server) run(prog string, args ...string) error {
	path := filepath.Join(s.Bin, prog)
	var cmd *exec.Cmd
	if s.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if log, lerr := os.ReadFile(filepath.Join(s.Dir, "log")); lerr == nil && prog == "pg_ctl" {
			msg += "\nserver log:\n" + string(log)
		}
		return fmt.Errorf("%s: %v: %s", prog, err, msg)
	}
	return nil
}

// ownerFile, in a server's directory, holds the pid of the test binary
// that started it.
const ownerFile = "owner.pid"

// sweepStale stops and removes the servers of test binaries that died
// without stopping theirs (killed by go test's -timeout, say, before Main
// could clean up): each directory whose owner is no longer running.
func sweepStale(bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || alive(pid) {
			continue
		}
		stale := &Server{Dir: dir, Bin: bin}
		if os.Geteuid() == 0 {
			stale.runAs = "postgres"
		}
		// Best effort: a stale server may already be gone; its directory goes
		// either way.
		_ = stale.run("pg_ctl", "-D", stale.data(), "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	}
}

// alive reports whether a process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// freePort returns a TCP port of 127.0.0.1 free at the time of asking.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
