package pgkv

// The backup stream: Export, Import and ReplaceAll (kv.Engine), in key
// order, on one snapshot or in one transaction.

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/jackc/pgx/v5"
)

// Export implements kv.Engine: one SERIALIZABLE READ ONLY DEFERRABLE
// snapshot, which never fails with a serialization error, in key order.
func (e *Engine) Export(ctx context.Context, fn func(kv.Record) error) error {
	return e.run(ctx, beginExport, false, func(t *txn) error {
		return t.scan(kv.Range{}, true, func(x row) (bool, error) {
			return true, fn(kv.Record{Key: x.k, Value: x.v, ExpiresAt: x.exp})
		})
	})
}

// Import implements kv.Engine in one transaction: the records are copied
// into a temporary table (COPY), then ImportReplace deletes every row and
// both modes upsert the copied ones. Any error, an invalid record included,
// rolls everything back: the store is unchanged.
func (e *Engine) Import(ctx context.Context, next func() (kv.Record, error), mode kv.ImportMode) error {
	tx, err := e.beginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := e.importIn(ctx, tx, next, mode == kv.ImportReplace); err != nil {
		return err
	}
	return mapErr(ctx, tx.Commit(ctx))
}

// importIn copies what next yields into a temporary table, deletes every
// row when replace is set, and upserts the copied rows, in tx.
func (e *Engine) importIn(ctx context.Context, tx pgx.Tx, next func() (kv.Record, error), replace bool) error {
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE hearth_kv_import (k bytea NOT NULL, v bytea NOT NULL, expires_at timestamptz) ON COMMIT DROP`); err != nil {
		return mapErr(ctx, err)
	}
	var ferr error
	src := pgx.CopyFromFunc(func() ([]any, error) {
		r, err := next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err == nil {
			err = kv.CheckKey(r.Key)
		}
		if err == nil {
			err = kv.CheckValue(r.Value)
		}
		if err != nil {
			ferr = err
			return nil, err
		}
		var exp any
		if r.ExpiresAt != 0 {
			exp = time.Unix(int64(r.ExpiresAt), 0)
		}
		v := r.Value
		if v == nil {
			v = []byte{}
		}
		return []any{r.Key, v, exp}, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"hearth_kv_import"}, []string{"k", "v", "expires_at"}, src); err != nil {
		if ferr != nil {
			return ferr
		}
		return mapErr(ctx, err)
	}
	if replace {
		if _, err := tx.Exec(ctx, `DELETE FROM `+e.p+`_kv`); err != nil {
			return mapErr(ctx, err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+e.p+`_kv (k, v, expires_at)
		SELECT DISTINCT ON (k) k, v, expires_at FROM hearth_kv_import WHERE expires_at IS NULL OR expires_at > now() ORDER BY k
		ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, expires_at = EXCLUDED.expires_at`); err != nil {
		return mapErr(ctx, err)
	}
	return nil
}

// ReplaceAll implements kv.Replacer in one SERIALIZABLE transaction that
// first takes a transaction-scoped advisory lock (pg_try_advisory_xact_lock:
// released at its end, also when the node dies; works through poolers in
// transaction mode), so a second replace on any node gets
// kv.ErrReplaceRunning. The records saved and the rows deleted are the
// same snapshot: a row another node changed since is a serialization
// failure (kv.ErrConflict, nothing changed); a row it inserted meanwhile
// is not deleted (that write comes after the replace in the serial order),
// or, if the import has the same key, a conflict.
func (e *Engine) ReplaceAll(ctx context.Context, r kv.Replacement) error {
	for _, n := range r.Notes {
		if err := kv.CheckNotify(n.Channel, n.Payload); err != nil {
			return err
		}
	}
	tx, err := e.beginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var locked bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtext($1))`, e.p+"_replace").Scan(&locked); err != nil {
		return mapErr(ctx, err)
	}
	if !locked {
		return kv.ErrReplaceRunning
	}
	rows, err := tx.Query(ctx, `SELECT k, v, coalesce(ceil(extract(epoch from expires_at))::bigint, 0) FROM `+e.p+`_kv
		WHERE expires_at IS NULL OR expires_at > now() ORDER BY k`)
	if err != nil {
		return mapErr(ctx, err)
	}
	var k, v []byte
	var exp int64
	_, err = pgx.ForEachRow(rows, []any{&k, &v, &exp}, func() error {
		return r.Save(kv.Record{Key: k, Value: v, ExpiresAt: uint64(exp)})
	})
	if err != nil {
		return mapErr(ctx, err)
	}
	if r.Saved != nil {
		if err := r.Saved(); err != nil {
			return err
		}
	}
	if err := e.importIn(ctx, tx, r.Next, true); err != nil {
		return err
	}
	for _, n := range r.Notes {
		if _, err := tx.Exec(ctx, e.q.notify, e.q.channel, n.Channel+"\n"+n.Payload); err != nil {
			return mapErr(ctx, err)
		}
	}
	return mapErr(ctx, tx.Commit(ctx))
}
