// Package pgtest runs a throwaway PostgreSQL server for tests: initdb into a
// temporary directory and pg_ctl start on 127.0.0.1 (as the postgres user
// when the tests run as root, which PostgreSQL refuses), one server per test
// binary, stopped and removed by Stop.
//
// When PostgreSQL's binaries are missing, the tests fail — unless
// HEARTH_TEST_POSTGRES=skip says locally that they may be skipped. CI never
// sets it (.ci/run installs postgresql).
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Server is a running test server.
type Server struct {
	Dir  string
	Port int
	bin  string
	asPG bool // run the binaries as the postgres user
	n    atomic.Int64
}

// ErrMissing is returned by Start when PostgreSQL is not installed.
var ErrMissing = errors.New("PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql, or set HEARTH_TEST_POSTGRES=skip to skip these tests locally")

// Skip reports whether missing PostgreSQL may skip the tests.
func Skip() bool { return os.Getenv("HEARTH_TEST_POSTGRES") == "skip" }

func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil && version(d) >= 15 {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrMissing
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start initialises and starts a server listening on 127.0.0.1:port with
// user hearth (trust authentication); see Durable.
func Start(port int) (*Server, error) {
	closeInheritedOnExec()
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	stopLeftover(bin, port)
	dir, err := os.MkdirTemp("", "hearth-pg-*")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Dir: dir, Port: port, bin: bin, asPG: os.Geteuid() == 0}
	if s.asPG {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.run("initdb", "-N", "-D", filepath.Join(dir, "data"), "-U", "hearth", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.Restart(); err != nil {
		// The server's log says why (often: the port is taken by a server
		// an interrupted run left behind).
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, log)
	}
	return s, nil
}

// closeInheritedOnExec marks the descriptors this process inherited (past
// stdin, stdout and stderr) close-on-exec, so the server pg_ctl starts does
// not hold them: tests run under `flock <lock file> go test …`, and a
// server a killed test left behind would otherwise hold the lock, so the
// next run (whose Start would stop that server) waits for it forever.
func closeInheritedOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// stopLeftover stops and removes a server on port that a test process which
// has since died left behind (a panicking test ends the process before
// TestMain can stop its server): one whose directory's owner file names a
// process that no longer runs. A live owner's server is left alone.
func stopLeftover(bin string, port int) {
	pids, _ := filepath.Glob(filepath.Join(os.TempDir(), "hearth-pg-*", "data", "postmaster.pid"))
	for _, pidFile := range pids {
		b, err := os.ReadFile(pidFile)
		lines := strings.Split(string(b), "\n")
		if err != nil || len(lines) < 4 || strings.TrimSpace(lines[3]) != strconv.Itoa(port) {
			continue
		}
		dir := filepath.Dir(filepath.Dir(pidFile))
		owner, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(string(owner)); err != nil || syscall.Kill(pid, 0) == nil {
			continue // not ours to judge, or its owner still runs
		}
		s := &Server{Dir: dir, Port: port, bin: bin, asPG: os.Geteuid() == 0}
		s.run("pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	}
}

func (s *Server) run(tool string, args ...string) error {
	name := filepath.Join(s.bin, tool)
	if s.asPG {
		args = append([]string{"-u", "postgres", "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = s.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", tool, err, out.String())
	}
	return nil
}

// Durable reports whether HEARTH_TEST_POSTGRES_DURABLE=1 asks for a server
// that syncs its WAL at commit (PostgreSQL's defaults: benchmarks comparing
// with Badger's synced commits); otherwise fsync and synchronous_commit are
// off, for fast tests.
func Durable() bool { return os.Getenv("HEARTH_TEST_POSTGRES_DURABLE") == "1" }

// Restart starts the server (again, after StopServer).
func (s *Server) Restart() error {
	o := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=100 -c shared_buffers=32MB", s.Port, s.Dir)
	if !Durable() {
		o += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	return s.run("pg_ctl", "-D", filepath.Join(s.Dir, "data"), "-l", filepath.Join(s.Dir, "log"), "-w", "-o", o, "start")
}

// StopServer stops the server (fast shutdown: connections are cut), leaving
// its data for Restart.
func (s *Server) StopServer() error {
	return s.run("pg_ctl", "-D", filepath.Join(s.Dir, "data"), "-m", "fast", "-w", "stop")
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	s.StopServer()
	os.RemoveAll(s.Dir)
}

// DSN is the connection string of database db.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=hearth dbname=%s sslmode=disable", s.Port, db)
}

// NewDatabase creates a fresh database and returns its DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", s.n.Add(1))
	conn, err := pgx.Connect(context.Background(), s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	return s.DSN(name)
}

// Main is TestMain for a package using the server: it starts one on port,
// runs the tests and stops it. With PostgreSQL missing it fails, unless
// Skip(); then *srv stays nil and the tests call Need to skip.
func Main(m *testing.M, port int, srv **Server) {
	s, err := Start(port)
	if err != nil {
		if !(errors.Is(err, ErrMissing) && Skip()) {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "pgtest: skipping PostgreSQL tests:", err)
	}
	*srv = s
	code := m.Run()
	if s != nil {
		s.Stop()
	}
	os.Exit(code)
}

// Need skips t when there is no server (only possible with Skip()).
func Need(t testing.TB, s *Server) {
	if s == nil {
		t.Skip("PostgreSQL not installed and HEARTH_TEST_POSTGRES=skip")
	}
}
