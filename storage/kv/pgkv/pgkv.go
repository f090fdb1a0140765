// Package pgkv is the kv.Engine on PostgreSQL ≥ 15 through pgx/v5: several
// Caddy nodes on one database are one site (docs/several-nodes.md).
//
//   - Schema: created on first use and versioned in <prefix>_schema_version
//     (one row per applied version), under a transaction-scoped advisory
//     lock so nodes starting together apply it once.
//   - Records: <prefix>_kv (k bytea PRIMARY KEY, v bytea, expires_at
//     timestamptz); bytea compares as memcmp, so ORDER BY k is kv's order.
//   - Update: SERIALIZABLE; serialization failures (40001), deadlocks (40P01)
//     and unique violations (23505) become kv.ErrConflict. View: REPEATABLE
//     READ READ ONLY (a snapshot); Export: SERIALIZABLE READ ONLY DEFERRABLE.
//   - TTL: expires_at = now() + ttl on the database's clock; every read
//     filters expires_at IS NULL OR expires_at > now(); Sweep (run by the
//     holder of the "kv:sweep" lease every SweepEvery) deletes expired rows.
//   - Notify: pg_notify on one PostgreSQL channel per prefix, sent inside
//     the transaction (delivered only on commit); one listening connection
//     per Engine dispatches to local subscribers.
//   - Leases and id slots: rows of <prefix>_lease with a holder and an
//     expiry on the database's clock, renewed every LeaseTTL/3; the holder
//     gives up (cancels its work) when it has not renewed for 2/3 of
//     LeaseTTL, so it stops before another node can take the lease.
//   - Counters: one row per key in an UNLOGGED table, the sliding window of
//     internal/ratelimit computed by a PL/pgSQL function under the row lock
//     on the database's clock, one round trip per call.
//   - While the database cannot be reached every call fails with an error
//     wrapping kv.ErrUnavailable (never a panic); pgxpool reconnects by
//     itself, the listener reconnects with backoff.
package pgkv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure the engine.
type Options struct {
	// DSN is a libpq connection string or URL.
	DSN string
	// Prefix names the tables (<Prefix>_kv, …), so several sites can share
	// one database; default "hearth". Lowercase letters, digits and _.
	Prefix string
	// MaxConns bounds the pool; default 10.
	MaxConns int32
	// SweepEvery is how often the lease holder deletes expired rows;
	// default one minute, negative: never (tests call Sweep).
	SweepEvery time.Duration
	// LeaseTTL is how long a lease lasts unrenewed; default 10 s.
	LeaseTTL time.Duration
}

// SchemaVersion is the schema this code writes and reads.
const SchemaVersion = 1

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,30}$`)

// Engine is the PostgreSQL kv.Engine.
type Engine struct {
	pool   *pgxpool.Pool
	cfg    *pgxpool.Config
	p      string // table prefix
	q      queries
	holder string // this engine's identity in lease rows
	opts   Options
	hub    kv.Hub

	schemaMu sync.Mutex
	schemaOK atomic.Bool

	// listening is the listener's epoch (times it has connected) << 1,
	// plus 1 while it is connected (Live).
	listening atomic.Uint64
	ctx       context.Context
	cancel    context.CancelFunc
	bg        sync.WaitGroup
	closeOnce sync.Once

	slotMu    sync.Mutex
	slot      int // -1 when none
	slotSince atomic.Int64
}

var (
	_ kv.Engine     = (*Engine)(nil)
	_ kv.Counters   = (*Engine)(nil)
	_ kv.Leases     = (*Engine)(nil)
	_ kv.IDSlots    = (*Engine)(nil)
	_ kv.LiveEpochs = (*Engine)(nil)
	_ kv.Replacer   = (*Engine)(nil)
)

// Open prepares the engine. It does not need the database to be up: the
// schema is created (or checked) on first use, and calls fail with
// kv.ErrUnavailable until the database answers.
func Open(o Options) (*Engine, error) {
	if o.Prefix == "" {
		o.Prefix = "hearth"
	}
	if !prefixRE.MatchString(o.Prefix) {
		return nil, fmt.Errorf("postgres table prefix %q: use 1 to 31 lowercase letters, digits and _", o.Prefix)
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 10
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = time.Minute
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 10 * time.Second
	}
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		// pgx's message repeats the DSN with the password redacted as best
		// it can; a secret must never reach a log, so none of it is kept.
		return nil, errors.New("postgres dsn: cannot be parsed (a libpq key=value string or a postgres:// URL; not repeated here since it may hold a password)")
	}
	cfg.MaxConns = o.MaxConns
	cfg.MinConns = 0
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > 5*time.Second {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", err)
	}
	var id [12]byte
	rand.Read(id[:])
	e := &Engine{pool: pool, cfg: cfg, p: o.Prefix, q: newQueries(o.Prefix), holder: hex.EncodeToString(id[:]), opts: o, slot: -1}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.bg.Add(1)
	go e.listen()
	if o.SweepEvery > 0 {
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			e.Lead(e.ctx, "kv:sweep", func(ctx context.Context) {
				t := time.NewTicker(o.SweepEvery)
				defer t.Stop()
				for {
					e.Sweep(ctx)
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
				}
			})
		}()
	}
	return e, nil
}

// Pool is the connection pool (size, statistics, operations).
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }

type queries struct {
	get, put, del, notify, channel string
}

func newQueries(p string) queries {
	return queries{
		get: `SELECT v FROM ` + p + `_kv WHERE k = $1 AND (expires_at IS NULL OR expires_at > now())`,
		put: `INSERT INTO ` + p + `_kv (k, v, expires_at) VALUES ($1, $2, CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 microsecond' END)
			ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, expires_at = EXCLUDED.expires_at`,
		del:     `DELETE FROM ` + p + `_kv WHERE k = $1`,
		notify:  `SELECT pg_notify($1, $2)`,
		channel: p + `_kv_notify`,
	}
}

// migrations[i] brings the schema from version i to i+1.
func (e *Engine) migrations() []string {
	p := e.p
	return []string{
		`CREATE TABLE ` + p + `_kv (k bytea PRIMARY KEY, v bytea NOT NULL, expires_at timestamptz);
		CREATE INDEX ` + p + `_kv_expiry ON ` + p + `_kv (expires_at) WHERE expires_at IS NOT NULL;
		CREATE TABLE ` + p + `_lease (name text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL);
		CREATE UNLOGGED TABLE ` + p + `_counter (k text PRIMARY KEY, win_start bigint NOT NULL, win_ms bigint NOT NULL, prev int NOT NULL, curr int NOT NULL);
		CREATE FUNCTION ` + p + `_count(p_key text, p_limit int, p_window_ms bigint, p_op int,
			OUT allowed boolean, OUT remaining int, OUT retry_ms bigint) LANGUAGE plpgsql AS $f$
		DECLARE
			now_ms bigint := floor(extract(epoch from clock_timestamp()) * 1000)::bigint;
			start_ms bigint := now_ms - now_ms % p_window_ms;
			r record;
			pv int := 0;
			cu int := 0;
			elapsed bigint := now_ms - start_ms;
			used float8;
			free float8;
			t float8;
		BEGIN
			-- p_op: 1 allow (count if allowed), 0 peek, -1 undo.
			IF p_op <> 0 THEN
				INSERT INTO ` + p + `_counter VALUES (p_key, start_ms, p_window_ms, 0, 0) ON CONFLICT (k) DO NOTHING;
				SELECT win_start, prev, curr INTO r FROM ` + p + `_counter WHERE k = p_key FOR UPDATE;
			ELSE
				SELECT win_start, prev, curr INTO r FROM ` + p + `_counter WHERE k = p_key;
			END IF;
			IF FOUND THEN
				IF r.win_start = start_ms THEN pv := r.prev; cu := r.curr;
				ELSIF start_ms - r.win_start = p_window_ms THEN pv := r.curr; cu := 0;
				END IF;
			END IF;
			used := pv * (1 - elapsed::float8 / p_window_ms) + cu;
			retry_ms := 0;
			IF p_op = -1 THEN
				IF cu > 0 THEN cu := cu - 1; ELSIF pv > 0 THEN pv := pv - 1; END IF;
				allowed := true;
			ELSIF used + 1 > p_limit THEN
				allowed := false;
				remaining := 0;
				free := p_limit - 1 - cu;
				IF pv > 0 AND free >= 0 THEN
					t := p_window_ms * (1 - free / pv);
					IF t > elapsed THEN retry_ms := ceil(t - elapsed)::bigint; END IF;
				END IF;
				IF retry_ms = 0 THEN
					retry_ms := p_window_ms - elapsed;
					IF cu > 0 THEN
						t := greatest(0, p_window_ms * (1 - (p_limit - 1)::float8 / cu));
						retry_ms := retry_ms + ceil(t)::bigint;
					END IF;
				END IF;
			ELSE
				allowed := true;
				IF p_op = 1 THEN
					cu := cu + 1;
					remaining := greatest(0, floor(p_limit - used - 1));
				ELSE
					remaining := greatest(0, floor(p_limit - used));
				END IF;
			END IF;
			IF p_op <> 0 THEN
				UPDATE ` + p + `_counter SET win_start = start_ms, win_ms = p_window_ms, prev = pv, curr = cu WHERE k = p_key;
			END IF;
		END $f$;`,
	}
}

// ensureSchema creates or upgrades the schema once per engine, the first
// time the database answers.
func (e *Engine) ensureSchema(ctx context.Context) error {
	if e.schemaOK.Load() {
		return nil
	}
	e.schemaMu.Lock()
	defer e.schemaMu.Unlock()
	if e.schemaOK.Load() {
		return nil
	}
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, e.p+"_schema"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+e.p+`_schema_version (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+e.p+`_schema_version`).Scan(&v); err != nil {
			return err
		}
		if v > SchemaVersion {
			return fmt.Errorf("the database's schema is version %d, newer than this Hearth's (%d): upgrade Hearth", v, SchemaVersion)
		}
		for i, m := range e.migrations()[v:] {
			if _, err := tx.Exec(ctx, m); err != nil {
				return fmt.Errorf("schema version %d: %w", v+i+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+e.p+`_schema_version (version) VALUES ($1)`, v+i+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return mapErr(ctx, err)
	}
	e.schemaOK.Store(true)
	return nil
}

// mapErr maps PostgreSQL's and pgx's errors onto kv's.
func mapErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "23505":
			return fmt.Errorf("%w (postgres %s)", kv.ErrConflict, pe.Code)
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03",
			strings.HasPrefix(pe.Code, "53"):
			return fmt.Errorf("%w: %v", kv.ErrUnavailable, err)
		}
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, kv.ErrInvalid) || errors.Is(err, kv.ErrNotFound) || errors.Is(err, kv.ErrClosed) {
		return err
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool") {
		if strings.Contains(err.Error(), "closed pool") {
			return kv.ErrClosed
		}
		return fmt.Errorf("%w: %v", kv.ErrUnavailable, err)
	}
	return err
}

// beginTx starts a pgx transaction (Import).
func (e *Engine) beginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	if e.ctx.Err() != nil {
		return nil, kv.ErrClosed
	}
	if err := e.ensureSchema(ctx); err != nil {
		return nil, err
	}
	tx, err := e.pool.BeginTx(ctx, o)
	if err != nil {
		return nil, mapErr(ctx, err)
	}
	return tx, nil
}

// The statements starting each kind of transaction.
const (
	beginView   = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
	beginExport = `BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE`
	beginUpdate = `BEGIN ISOLATION LEVEL SERIALIZABLE`
	asyncCommit = `SET LOCAL synchronous_commit = off`
)

// run starts a transaction on a pooled connection, calls fn and ends the
// transaction: COMMIT when fn returned nil and commit is set, otherwise
// ROLLBACK. Statements go out lazily (see txn).
func (e *Engine) run(ctx context.Context, begin string, commit bool, fn func(t *txn) error) error {
	if e.ctx.Err() != nil {
		return kv.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.ensureSchema(ctx); err != nil {
		return err
	}
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return mapErr(ctx, err)
	}
	// A connection left inside a transaction (a failed ROLLBACK) or broken
	// is destroyed by Release rather than reused.
	defer conn.Release()
	t := &txn{ctx: ctx, e: e, conn: conn, begin: begin}
	if err := fn(t); err != nil {
		t.rollback()
		return err
	}
	if !commit {
		t.rollback()
		return t.err
	}
	return t.commit()
}

// View implements kv.Engine: REPEATABLE READ READ ONLY, one snapshot.
func (e *Engine) View(ctx context.Context, fn func(kv.Reader) error) error {
	return e.run(ctx, beginView, false, func(t *txn) error { return fn(t) })
}

// Update implements kv.Engine: SERIALIZABLE.
func (e *Engine) Update(ctx context.Context, opts kv.TxOptions, fn func(kv.Writer) error) error {
	return e.run(ctx, beginUpdate, true, func(t *txn) error {
		if opts.Async {
			t.queue(asyncCommit)
		}
		return fn(t)
	})
}

// txn is one transaction on one connection. Nothing is sent until a read
// needs an answer: BEGIN, the writes queued since the last read and the read
// go out together as one pipelined batch (one round trip), and the last
// writes, the notifications and COMMIT as another. A write-only Update is one
// round trip, a View of one Get two (the second ends the transaction). The
// first error ends the transaction: every later call returns it.
type txn struct {
	ctx     context.Context
	e       *Engine
	conn    *pgxpool.Conn
	begin   string
	begun   bool // BEGIN was sent
	pending []stmt
	notes   []string
	err     error
}

type stmt struct {
	sql  string
	args []any
}

func (t *txn) queue(sql string, args ...any) {
	t.pending = append(t.pending, stmt{sql, args})
}

// send sends BEGIN (first time), the pending statements and then, when sql is
// set, the query sql whose rows read consumes.
func (t *txn) send(sql string, args []any, read func(pgx.Rows) error) error {
	if t.err != nil {
		return t.err
	}
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(t.begin)
	}
	for _, s := range t.pending {
		b.Queue(s.sql, s.args...)
	}
	execs := b.Len()
	if sql != "" {
		b.Queue(sql, args...)
	}
	if b.Len() == 0 {
		return nil
	}
	t.pending = t.pending[:0]
	t.begun = true
	br := t.conn.SendBatch(t.ctx, b)
	var err error
	for i := 0; i < execs && err == nil; i++ {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		if err == nil && tag.String() == "ROLLBACK" {
			err = errors.New("postgres rolled the transaction back")
		}
	}
	if err == nil && sql != "" {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			err = read(rows)
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.err = mapErr(t.ctx, err)
		return t.err
	}
	return nil
}

func (t *txn) commit() error {
	if t.err != nil {
		t.rollback()
		return t.err
	}
	if !t.begun && len(t.pending) == 0 && len(t.notes) == 0 {
		return nil // nothing read or written: nothing to commit
	}
	for _, n := range t.notes {
		t.queue(t.e.q.notify, t.e.q.channel, n)
	}
	t.queue("COMMIT")
	if err := t.send("", nil, nil); err != nil {
		t.rollback()
		return err
	}
	return nil
}

func (t *txn) rollback() {
	if !t.begun || t.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 5*time.Second)
	defer cancel()
	if _, err := t.conn.Exec(ctx, "ROLLBACK"); err != nil {
		// Not reusable: Release destroys a closed connection.
		t.conn.Conn().Close(ctx)
	}
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if err := kv.CheckKey(key); err != nil {
		return nil, err
	}
	var v []byte
	found := false
	err := t.send(t.e.q.get, []any{key}, func(rows pgx.Rows) error {
		if rows.Next() {
			found = true
			return rows.Scan(&v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, kv.ErrNotFound
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	for _, k := range keys {
		if err := kv.CheckKey(k); err != nil {
			return nil, err
		}
	}
	out := make([][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	got := map[string][]byte{}
	err := t.send(`SELECT k, v FROM `+t.e.p+`_kv WHERE k = ANY($1) AND (expires_at IS NULL OR expires_at > now())`, []any{keys}, func(rows pgx.Rows) error {
		for rows.Next() {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				return err
			}
			if v == nil {
				v = []byte{}
			}
			got[string(k)] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		out[i] = got[string(k)]
	}
	return out, nil
}

// Scan batches: the first of 64 rows (a page of 50 is one round trip), or
// of the scan's Limit up to 1024, then four times more up to 1024.
const (
	scanFirst = 64
	scanMax   = 1024
)

func (t *txn) Scan(r kv.Range, fn func(key, val []byte) (bool, error)) error {
	return t.scan(r, false, func(x row) (bool, error) { return fn(x.k, x.v) })
}

type row struct {
	k, v []byte
	exp  uint64 // Unix seconds, rounded up; 0 none
}

// scan runs r as keyset batches and calls fn per row; each batch is read
// whole before fn runs, so fn may Get. With withExpiry, rows carry their
// expiry (Export).
func (t *txn) scan(r kv.Range, withExpiry bool, fn func(row) (bool, error)) error {
	if r.Limit < 0 {
		return fmt.Errorf("%w: negative scan limit", kv.ErrInvalid)
	}
	// Bounds: lo inclusive; hi exclusive, or inclusive (hiIncl) for a
	// reverse scan's Start.
	lo := r.Prefix
	if lo == nil {
		lo = []byte{}
	}
	hi := kv.PrefixEnd(r.Prefix)
	hiIncl := false
	if r.Start != nil {
		if !r.Reverse {
			if string(r.Start) > string(lo) {
				lo = r.Start
			}
		} else if hi == nil || string(r.Start) < string(hi) {
			hi, hiIncl = r.Start, true
		}
	}
	cols := "k, v, 0::bigint"
	if r.KeysOnly {
		cols = "k, NULL::bytea, 0::bigint"
	}
	if withExpiry {
		cols = strings.Replace(cols, "0::bigint", "coalesce(ceil(extract(epoch from expires_at))::bigint, 0)", 1)
	}
	order := "ASC"
	if r.Reverse {
		order = "DESC"
	}
	// A scan with a limit (a page) asks for all of it at once.
	batch, left := scanFirst, r.Limit
	if r.Limit > 0 {
		batch = min(r.Limit, scanMax)
	}
	buf := make([]row, 0, batch)
	for {
		n := batch
		if r.Limit > 0 {
			n = min(n, left)
		}
		// Each bound is in the statement's text only when there is one:
		// pgx prepares every statement, and PostgreSQL's generic plan for
		// "$2 IS NULL OR k < $2" cannot use $2 as an index bound: it would
		// read every key past lo (or, reversed, every key from the
		// table's end down to lo) and filter them.
		where, args := `k >= $1`, []any{lo, n}
		switch {
		case hi != nil && hiIncl:
			where, args = `k >= $1 AND k <= $3`, append(args, hi)
		case hi != nil:
			where, args = `k >= $1 AND k < $3`, append(args, hi)
		}
		q := `SELECT ` + cols + ` FROM ` + t.e.p + `_kv WHERE ` + where + `
			AND (expires_at IS NULL OR expires_at > now()) ORDER BY k ` + order + ` LIMIT $2`
		buf = buf[:0]
		err := t.send(q, args, func(rows pgx.Rows) error {
			for rows.Next() {
				var x row
				var exp int64
				if err := rows.Scan(&x.k, &x.v, &exp); err != nil {
					return err
				}
				if !r.KeysOnly && x.v == nil {
					x.v = []byte{}
				}
				x.exp = uint64(exp)
				buf = append(buf, x)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, x := range buf {
			more, err := fn(x)
			if err != nil || !more {
				return err
			}
		}
		if len(buf) < n {
			return nil
		}
		if r.Limit > 0 {
			if left -= len(buf); left <= 0 {
				return nil
			}
		}
		last := buf[len(buf)-1].k
		if r.Reverse {
			hi, hiIncl = last, false
		} else {
			// The smallest key after last.
			lo = append(append([]byte{}, last...), 0)
		}
		batch = min(batch*4, scanMax)
	}
}

// Put and Delete are queued: they go out with the next read or the commit.
// A statement failing there (a conflict detected early, the connection
// lost) ends the transaction with that error.
func (t *txn) Put(key, val []byte, ttl time.Duration) error {
	if t.err != nil {
		return t.err
	}
	if err := kv.CheckKey(key); err != nil {
		return err
	}
	if err := kv.CheckValue(val); err != nil {
		return err
	}
	if val == nil {
		val = []byte{}
	}
	t.queue(t.e.q.put, bytes.Clone(key), bytes.Clone(val), max(int64(0), ttl.Microseconds()))
	return nil
}

func (t *txn) Delete(key []byte) error {
	if t.err != nil {
		return t.err
	}
	if err := kv.CheckKey(key); err != nil {
		return err
	}
	t.queue(t.e.q.del, bytes.Clone(key))
	return nil
}

func (t *txn) Notify(channel, payload string) error {
	if err := kv.CheckNotify(channel, payload); err != nil {
		return err
	}
	t.notes = append(t.notes, channel+"\n"+payload)
	return nil
}

// Sweep deletes expired rows, 1000 per statement, and counters idle for two
// windows; it returns how many records it deleted.
func (e *Engine) Sweep(ctx context.Context) (int64, error) {
	if err := e.ensureSchema(ctx); err != nil {
		return 0, err
	}
	var total int64
	for {
		tag, err := e.pool.Exec(ctx, `DELETE FROM `+e.p+`_kv WHERE k IN (SELECT k FROM `+e.p+`_kv WHERE expires_at <= now() LIMIT 1000)`)
		if err != nil {
			return total, mapErr(ctx, err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 1000 {
			break
		}
	}
	_, err := e.pool.Exec(ctx, `DELETE FROM `+e.p+`_counter WHERE win_start + 2 * win_ms < floor(extract(epoch from clock_timestamp()) * 1000)::bigint`)
	return total, mapErr(ctx, err)
}

// Ping implements kv.Engine.
func (e *Engine) Ping(ctx context.Context) error {
	if e.ctx.Err() != nil {
		return kv.ErrClosed
	}
	if err := e.pool.Ping(ctx); err != nil {
		return mapErr(ctx, err)
	}
	return e.ensureSchema(ctx)
}

// Close implements kv.Engine: stops the listener and the sweeper, gives up
// this engine's leases and closes the pool.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.cancel()
		e.bg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		e.pool.Exec(ctx, `DELETE FROM `+e.p+`_lease WHERE holder = $1`, e.holder)
		cancel()
		e.listening.Store(e.listening.Load() &^ 1)
		e.pool.Close()
	})
	return nil
}
