package pgkv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/kv/badgerkv"
	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv"
	"github.com/hearthkit/caddy-hearth/storage/kv/pgkv/pgtest"
)

// testPort is this package's PostgreSQL port (15433: the kv task's port of
// 15432..15439 on the shared machine).
const testPort = 15433

var srv *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, testPort, &srv) }

var (
	dsn      string
	prefixes atomic.Int64
)

// database returns the DSN of the package's database, created once; each
// engine gets its own table prefix, so tests do not see one another.
func database(t testing.TB) string {
	pgtest.Need(t, srv)
	if dsn == "" {
		dsn = srv.NewDatabase(t)
	}
	return dsn
}

func newPrefix() string { return fmt.Sprintf("t%d", prefixes.Add(1)) }

func open(t testing.TB, prefix string) *pgkv.Engine {
	t.Helper()
	e, err := pgkv.Open(pgkv.Options{DSN: database(t), Prefix: prefix, SweepEvery: -1, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t testing.TB) kv.Engine { return open(t, newPrefix()) })
}

// Two engines on one database: two nodes.
func TestConformanceShared(t *testing.T) {
	kvtest.RunShared(t, func(t testing.TB) (kv.Engine, kv.Engine) {
		p := newPrefix()
		return open(t, p), open(t, p)
	})
}

var bg = context.Background()

func TestSchemaVersioned(t *testing.T) {
	p := newPrefix()
	e := open(t, p)
	if err := e.Ping(bg); err != nil {
		t.Fatal(err)
	}
	var versions []int
	rows, err := e.Pool().Query(bg, `SELECT version FROM `+p+`_schema_version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		rows.Scan(&v)
		versions = append(versions, v)
	}
	if len(versions) != 1 || versions[0] != pgkv.SchemaVersion {
		t.Fatalf("schema versions %v, want [%d]", versions, pgkv.SchemaVersion)
	}
	// A second node on the same tables applies nothing again.
	if err := open(t, p).Ping(bg); err != nil {
		t.Fatal(err)
	}
	var n int
	e.Pool().QueryRow(bg, `SELECT count(*) FROM `+p+`_schema_version`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d schema rows after a second start", n)
	}
	// A schema newer than the code is refused, with a clear error.
	if _, err := e.Pool().Exec(bg, `INSERT INTO `+p+`_schema_version (version) VALUES ($1)`, pgkv.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	err = open(t, p).Update(bg, kv.TxOptions{}, func(kv.Writer) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "newer than this Hearth") {
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := pgkv.Open(pgkv.Options{DSN: database(t), Prefix: "Bad-Prefix"}); err == nil {
		t.Fatal("a prefix that is not an identifier was accepted")
	}
}

func TestSweep(t *testing.T) {
	p := newPrefix()
	e := open(t, p)
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		if err := w.Put([]byte("a"), []byte("1"), time.Second); err != nil {
			return err
		}
		return w.Put([]byte("b"), []byte("2"), time.Hour)
	}); err != nil {
		t.Fatal(err)
	}
	rows := func() int {
		var n int
		if err := e.Pool().QueryRow(bg, `SELECT count(*) FROM `+p+`_kv`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	kvtest.Eventually(t, "the key expires", func() bool {
		var err error
		e.View(bg, func(r kv.Reader) error { _, err = r.Get([]byte("a")); return nil })
		return errors.Is(err, kv.ErrNotFound)
	})
	if n := rows(); n != 2 {
		t.Fatalf("%d rows before the sweep, want 2 (the expired row is only invisible)", n)
	}
	n, err := e.Sweep(bg)
	if err != nil || n != 1 {
		t.Fatalf("Sweep: %d, %v; want 1", n, err)
	}
	if n := rows(); n != 1 {
		t.Fatalf("%d rows after the sweep", n)
	}
}

// Records move Badger → PostgreSQL → Badger through the backup stream
// unchanged.
func TestBadgerPostgresRoundTrip(t *testing.T) {
	newBadger := func() *badgerkv.Engine {
		b, err := badgerkv.Open(t.TempDir(), badgerkv.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	src := newBadger()
	kvtest.Fill(t, src)
	want := kvtest.Records(t, src)
	pg := open(t, newPrefix())
	kvtest.RoundTrip(t, src, pg)
	kvtest.SameRecords(t, want, kvtest.Records(t, pg))
	back := newBadger()
	kvtest.RoundTrip(t, pg, back)
	kvtest.SameRecords(t, want, kvtest.Records(t, back))
}

// While the server is stopped every call fails with ErrUnavailable (no
// panic); once it is back the same engine serves again, and subscribers are
// told they may have missed notifications.
func TestUnavailableAndRecovery(t *testing.T) {
	e := open(t, newPrefix())
	kvtest.Put(t, e, []byte("k"), []byte("before"))
	kvtest.Eventually(t, "the listener is live", e.Live)
	var missed atomic.Int32
	got := make(chan string, 10)
	stop, err := e.Subscribe("c", func(p string) {
		if p == kv.Missed {
			missed.Add(1)
			return
		}
		got <- p
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	if err := srv.StopServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			srv.Restart()
		}
	}()
	err = e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Put([]byte("k"), []byte("during"), 0) })
	if !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("Update while the database is down: %v, want ErrUnavailable", err)
	}
	if err := e.View(bg, func(r kv.Reader) error { _, err := r.Get([]byte("k")); return err }); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("View while the database is down: %v", err)
	}
	if err := e.Ping(bg); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("Ping while the database is down: %v", err)
	}
	if _, _, _, err := e.CountAllow(bg, "x", 1, time.Minute); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("CountAllow while the database is down: %v", err)
	}
	kvtest.Eventually(t, "Live turns false", func() bool { return !e.Live() })

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	kvtest.Eventually(t, "the engine serves again", func() bool { return e.Ping(bg) == nil })
	kvtest.Eventually(t, "the listener is back and subscribers were told", func() bool { return e.Live() && missed.Load() >= 1 })
	kvtest.Put(t, e, []byte("k"), []byte("after"))
	var v []byte
	if err := e.View(bg, func(r kv.Reader) error { var err error; v, err = r.Get([]byte("k")); return err }); err != nil || string(v) != "after" {
		t.Fatalf("after recovery: %q, %v", v, err)
	}
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Notify("c", "hello again") }); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != "hello again" {
			t.Fatalf("notification %q", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notification after recovery")
	}
}

// BenchmarkEngine: go test -tags nobadger,nomysql,nopgx -run '^$' -bench . ./storage/kv/pgkv/
func BenchmarkEngine(b *testing.B) {
	kvtest.Bench(b, open(b, newPrefix()))
}

// A holder that loses its lease row (it expired and another node took it,
// as after a partition) has its work cancelled, and a waiting node takes
// over from the row's expiry, without the holder releasing anything.
func TestLeaseLostAndTakenOver(t *testing.T) {
	p := newPrefix()
	a, b := open(t, p), open(t, p)
	startedA, startedB := make(chan struct{}), make(chan struct{})
	endedA, testDone := make(chan struct{}), make(chan struct{})
	defer close(testDone)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	go a.Lead(ctx, "work", func(ctx context.Context) {
		close(startedA)
		<-ctx.Done()
		close(endedA)
		<-testDone // a dead node never releases: block until the test ends
	})
	<-startedA
	go b.Lead(ctx, "work", func(ctx context.Context) { close(startedB); <-ctx.Done() })
	// Another node took the row after it expired.
	if _, err := a.Pool().Exec(bg, `UPDATE `+p+`_lease SET holder = 'elsewhere', expires_at = now() + interval '2 seconds' WHERE name = 'work'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-endedA:
	case <-time.After(60 * time.Second):
		t.Fatal("the holder kept working after losing its lease")
	}
	select {
	case <-startedB:
	case <-time.After(60 * time.Second):
		t.Fatal("no node took the lease over after it expired")
	}
}

// An import that meets an invalid record changes nothing (one transaction).
func TestImportRefusedChangesNothing(t *testing.T) {
	e := open(t, newPrefix())
	kvtest.Put(t, e, []byte("kept"), []byte("1"))
	recs := []kv.Record{{Key: []byte("a"), Value: []byte("x")}, {Key: nil, Value: []byte("bad")}, {Key: []byte("b"), Value: []byte("y")}}
	i := 0
	err := e.Import(bg, func() (kv.Record, error) {
		if i == len(recs) {
			return kv.Record{}, io.EOF
		}
		i++
		return recs[i-1], nil
	}, kv.ImportReplace)
	if !errors.Is(err, kv.ErrInvalid) {
		t.Fatalf("import of an empty key: %v, want ErrInvalid", err)
	}
	if got := kvtest.ScanKeys(t, e, kv.Range{}); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("after a refused import: %q", got)
	}
}

// A DSN that does not parse is refused without repeating its password.
// pgx's own message redacts what it recognises as a password, but not
// "password = …" with spaces (pgconn v5.11.0 redactPW): checked below.
func TestBadDSNKeepsSecret(t *testing.T) {
	for _, dsn := range []string{"postgres://hearth:s3cr3t-pw@db:notaport/hearth", "host=db password = s3cr3t-pw port=x"} {
		_, err := pgkv.Open(pgkv.Options{DSN: dsn})
		if err == nil {
			t.Fatalf("%q accepted", dsn)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("the error repeats the password: %v", err)
		}
	}
}

// With SweepEvery set, the holder of the sweep lease removes expired rows by
// itself.
func TestSweepRunsOnItsOwn(t *testing.T) {
	p := newPrefix()
	e, err := pgkv.Open(pgkv.Options{DSN: database(t), Prefix: p, SweepEvery: 200 * time.Millisecond, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Put([]byte("short"), []byte("x"), time.Second) }); err != nil {
		t.Fatal(err)
	}
	kvtest.Eventually(t, "the sweeper deletes the expired row", func() bool {
		var n int
		if err := e.Pool().QueryRow(bg, `SELECT count(*) FROM `+p+`_kv`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// Two transactions each count a range and insert into it if it holds fewer
// than one key: serially the second sees the first's insert. PostgreSQL's
// predicate locks refuse the second commit; Badger does not see inserts into
// a scanned range (storage/shared.go's guard keys exist for that), so this is
// PostgreSQL's test, not the conformance suite's.
func TestRangeInsertSkewRefused(t *testing.T) {
	e := open(t, newPrefix())
	insertIfEmpty := func(w kv.Writer, key string) error {
		n := 0
		if err := w.Scan(kv.Range{Prefix: []byte("lim/")}, func(k, v []byte) (bool, error) { n++; return true, nil }); err != nil {
			return err
		}
		if n < 1 {
			return w.Put([]byte("lim/"+key), []byte("x"), 0)
		}
		return nil
	}
	scanned := make(chan struct{})
	other := make(chan error, 1)
	var errA error
	done := make(chan struct{})
	go func() {
		defer close(done)
		errA = e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
			if err := w.Scan(kv.Range{Prefix: []byte("lim/")}, func(k, v []byte) (bool, error) { return true, nil }); err != nil {
				return err
			}
			close(scanned)
			if err := <-other; err != nil {
				return err
			}
			return insertIfEmpty(w, "a")
		})
	}()
	<-scanned
	other <- e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return insertIfEmpty(w, "b") })
	<-done
	if !errors.Is(errA, kv.ErrConflict) {
		t.Fatalf("range insert skew committed: %v", errA)
	}
	if got := kvtest.ScanKeys(t, e, kv.Range{Prefix: []byte("lim/")}); len(got) != 1 || got[0] != "lim/b" {
		t.Fatalf("range holds %q", got)
	}
}

// BenchmarkNotifyAcrossEngines: a commit with a notification on one engine
// until the subscriber of another engine on the same database has it
// (commit, NOTIFY delivery, dispatch), one at a time: the cross-node
// invalidation lag several nodes may see.
func BenchmarkNotifyAcrossEngines(b *testing.B) {
	p := newPrefix()
	a, c := open(b, p), open(b, p)
	kvtest.Eventually(b, "both listen", func() bool { return a.Live() && c.Live() })
	got, _ := kvtest.Notes(b, c, "lag", 1)
	i := 0
	for b.Loop() {
		i++
		want := strconv.Itoa(i)
		if err := a.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Notify("lag", want) }); err != nil {
			b.Fatal(err)
		}
		if s := <-got; s != want {
			b.Fatalf("got %q, want %q", s, want)
		}
	}
}

// BenchmarkCountAllow: one shared rate-limit decision (one round trip).
func BenchmarkCountAllow(b *testing.B) {
	e := open(b, newPrefix())
	i := 0
	for b.Loop() {
		i++
		if _, _, _, err := e.CountAllow(bg, "ip:"+strconv.Itoa(i%1000), 1<<30, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// ReplaceAll (kv.Replacer) on two engines of one store: Save gets the
// records of the snapshot, a second ReplaceAll meanwhile is
// kv.ErrReplaceRunning, a write of the other engine to a replaced key after
// the save makes it fail with kv.ErrConflict and change nothing, and a
// committed one leaves exactly the imported records and notifies the other
// engine.
func TestReplaceAll(t *testing.T) {
	p := newPrefix()
	a, b := open(t, p), open(t, p)
	kvtest.Put(t, a, []byte("old/1"), []byte("1"), []byte("old/2"), []byte("2"))
	kvtest.Eventually(t, "b listens", b.Live)
	got, _ := kvtest.Notes(t, b, "c", 4)
	records := func(keys ...string) func() (kv.Record, error) {
		return func() (kv.Record, error) {
			if len(keys) == 0 {
				return kv.Record{}, io.EOF
			}
			k := keys[0]
			keys = keys[1:]
			return kv.Record{Key: []byte(k), Value: []byte("new")}, nil
		}
	}
	replace := func(e *pgkv.Engine, saved *[]string, during func(), keys ...string) error {
		next := records(keys...)
		return e.ReplaceAll(bg, kv.Replacement{
			Save: func(r kv.Record) error {
				*saved = append(*saved, string(r.Key))
				return nil
			},
			Saved: func() error {
				if during != nil {
					during()
				}
				return nil
			},
			Next:  next,
			Notes: []kv.Note{{Channel: "c", Payload: "replaced"}},
		})
	}

	// Another replace meanwhile; then a write of b to a saved key.
	var saved []string
	var second, write error
	err := replace(a, &saved, func() {
		var s2 []string
		second = replace(b, &s2, nil, "x")
		write = b.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Put([]byte("old/1"), []byte("changed"), 0) })
	}, "new/1")
	if !errors.Is(second, kv.ErrReplaceRunning) {
		t.Fatalf("a second replace meanwhile: %v, want ErrReplaceRunning", second)
	}
	if write != nil {
		t.Fatalf("the write on b: %v", write)
	}
	if !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("replace after a write to a saved key: %v, want ErrConflict", err)
	}
	if keys := kvtest.ScanKeys(t, a, kv.Range{}); strings.Join(keys, " ") != "old/1 old/2" {
		t.Fatalf("after the failed replace: %q", keys)
	}
	if fmt.Sprint(saved) != "[old/1 old/2]" {
		t.Fatalf("saved %v", saved)
	}

	saved = nil
	if err := replace(a, &saved, nil, "new/1", "new/2"); err != nil {
		t.Fatal(err)
	}
	if keys := kvtest.ScanKeys(t, b, kv.Range{}); strings.Join(keys, " ") != "new/1 new/2" {
		t.Fatalf("after the replace: %q", keys)
	}
	if s := <-got; s != "replaced" {
		t.Fatalf("b got %q", s)
	}
}

// A scan of a few keys reads a few rows whatever lies beyond its range,
// under PostgreSQL's generic plans too (which it picks for a statement
// prepared and run often, as pgx prepares every one): a bound written as
// "$2 IS NULL OR k < $2" is no index bound in a generic plan, and each
// scan then read every row from its start to the table's end (reversed,
// from the end down), which made a large library's pages and its
// trash's emptying slow on PostgreSQL alone. The rows a scan reads are
// the table's idx_tup_fetch in pg_stat_user_tables, flushed by
// pg_stat_force_next_flush on the one connection the engine has.
func TestScanOfAFewKeysReadsAFewRows(t *testing.T) {
	p := newPrefix()
	e, err := pgkv.Open(pgkv.Options{
		DSN:    database(t) + " options='-c plan_cache_mode=force_generic_plan'",
		Prefix: p, MaxConns: 1, SweepEvery: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	const beyond = 5000
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		for i := range 3 {
			if err := w.Put(fmt.Appendf(nil, "a/%d", i), []byte("x"), 0); err != nil {
				return err
			}
		}
		for i := range beyond {
			if err := w.Put(fmt.Appendf(nil, "b/%05d", i), []byte("x"), 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fetched := func() int64 {
		var n int64
		if _, err := e.Pool().Exec(bg, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := e.Pool().QueryRow(bg, `SELECT coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables WHERE relname = $1`, p+"_kv").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := fetched()
	const scans = 20
	for _, r := range []kv.Range{
		{Prefix: []byte("a/")},
		{Prefix: []byte("a/"), Reverse: true},
		{Prefix: []byte("a/"), Start: []byte("a/1"), Reverse: true},
		{Prefix: []byte("a/"), KeysOnly: true, Limit: 2},
	} {
		for range scans {
			if got := kvtest.ScanKeys(t, e, r); len(got) == 0 {
				t.Fatalf("scan %+v found nothing", r)
			}
		}
	}
	if read := fetched() - before; read > 4*scans*4 {
		t.Fatalf("%d scans of at most 3 keys read %d rows (%d lie beyond them), want at most %d", 4*scans, read, beyond, 4*scans*4)
	}
}
