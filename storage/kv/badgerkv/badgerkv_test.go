package badgerkv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/kv"
	"github.com/hearthkit/caddy-hearth/storage/kv/badgerkv"
	"github.com/hearthkit/caddy-hearth/storage/kv/kvtest"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func open(t testing.TB) *badgerkv.Engine {
	t.Helper()
	e, err := badgerkv.Open(t.TempDir(), badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t testing.TB) kv.Engine { return open(t) })
}

// One process per directory: the "pair" is the same engine twice.
func TestConformanceShared(t *testing.T) {
	kvtest.RunShared(t, func(t testing.TB) (kv.Engine, kv.Engine) { e := open(t); return e, e })
}

func TestSecondProcessLocked(t *testing.T) {
	dir := t.TempDir()
	e, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := badgerkv.Open(dir, badgerkv.Options{}); !errors.Is(err, badgerkv.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	e.Close()
	if err := e.Update(context.Background(), kv.TxOptions{}, func(kv.Writer) error { return nil }); !errors.Is(err, kv.ErrClosed) {
		t.Fatalf("Update after Close: %v", err)
	}
	if err := e.Sync(); !errors.Is(err, kv.ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
}

// A storage_dir written by today's storage package opens unchanged: the
// same keys and values, and what badgerkv writes storage reads back.
func TestOpensStorageDir(t *testing.T) {
	dir := t.TempDir()
	opts := storage.Options{GCInterval: -1, MinFreeBytes: -1}
	s, err := storage.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := members.Of(s).CreateMember(t.Context(), "alice", "Alice", "correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	var backup bytes.Buffer
	if err := s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e, err := badgerkv.Open(dir, badgerkv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Update(ctx, kv.TxOptions{}, func(w kv.Writer) error {
		id, err := w.Get([]byte("member/name/alice"))
		if err != nil || string(id) != m.ID {
			t.Errorf("member/name/alice = %q, %v; want %q", id, err, m.ID)
		}
		rec, err := w.Get([]byte("member/id/" + m.ID))
		if err != nil {
			return err
		}
		var got struct{ Username string }
		if err := json.Unmarshal(rec, &got); err != nil || got.Username != "alice" {
			t.Errorf("member record %s: %v", rec, err)
		}
		// A display name changed through the engine, read back by storage.
		var full map[string]any
		json.Unmarshal(rec, &full)
		full["display_name"] = "Alice via kv"
		b, _ := json.Marshal(full)
		return w.Put([]byte("member/id/"+m.ID), b, 0)
	}); err != nil {
		t.Fatal(err)
	}
	direct := kvtest.Records(t, e)
	// storage's own backup stream (format 2) imports into a fresh engine
	// with the same records.
	f := open(t)
	next, closeFn, err := kv.ReadStream(bytes.NewReader(backup.Bytes()), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if err := f.Import(ctx, next, kv.ImportReplace); err != nil {
		t.Fatal(err)
	}
	if len(kvtest.Records(t, f)) != len(direct) {
		t.Fatalf("storage's backup imported %d records, the directory has %d", len(kvtest.Records(t, f)), len(direct))
	}
	// The engine's stream restores with storage's Replace (caddy hearth restore).
	var ours bytes.Buffer
	if err := kv.WriteStream(ctx, &ours, e); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = storage.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := members.Of(s).Member(ctx, "alice")
	if err != nil || got.DisplayName != "Alice via kv" {
		t.Fatalf("storage reads %+v, %v", got, err)
	}
	s.Close()

	other, err := storage.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Replace(bytes.NewReader(ours.Bytes())); err != nil {
		t.Fatalf("storage refuses the engine's backup stream: %v", err)
	}
	if got, err := members.Of(other).Member(ctx, "alice"); err != nil || got.DisplayName != "Alice via kv" || got.ID != m.ID {
		t.Fatalf("after restoring the engine's stream: %+v, %v", got, err)
	}
}

// BenchmarkEngine: go test -tags nobadger,nomysql,nopgx -run '^$' -bench . ./storage/kv/badgerkv/
func BenchmarkEngine(b *testing.B) {
	kvtest.Bench(b, open(b))
}

// BenchmarkSyncedCommitsParallel compares concurrent synchronous commits of
// one read-modify-write each (a counter raised, as the directory's relay
// cursor once was) through storage (Store.Update) and through badgerkv
// alone (kv.RunTx), both on durable.go's group commit, 16 writers on
// distinct keys: what the store's transaction wrapper adds to a durable
// write.
func BenchmarkSyncedCommitsParallel(b *testing.B) {
	var ids atomic.Int64
	b.Run("storage", func(b *testing.B) {
		s, err := storage.Open(b.TempDir(), storage.Options{GCInterval: -1, MinFreeBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			key := fmt.Appendf(nil, "agent/relay/wss://relay%d.example", ids.Add(1))
			for t := int64(1); pb.Next(); t++ {
				if err := s.Update(b.Context(), func(tx *storage.Tx) error {
					v, err := tx.Get(key)
					if err == nil {
						if cur, perr := strconv.ParseInt(string(v), 10, 64); perr == nil && cur >= t {
							return nil
						}
					} else if !errors.Is(err, storage.ErrNotFound) {
						return err
					}
					return tx.Put(key, strconv.AppendInt(nil, t, 10), 0)
				}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("badgerkv", func(b *testing.B) {
		e := open(b)
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			key := fmt.Appendf(nil, "agent/relay/wss://relay%d.example", ids.Add(1))
			for t := int64(1); pb.Next(); t++ {
				if err := kv.RunTx(context.Background(), e, kv.TxOptions{}, func(w kv.Writer) error {
					v, err := w.Get(key)
					if err == nil {
						if cur, perr := strconv.ParseInt(string(v), 10, 64); perr == nil && cur >= t {
							return nil
						}
					} else if !errors.Is(err, kv.ErrNotFound) {
						return err
					}
					return w.Put(key, strconv.AppendInt(nil, t, 10), 0)
				}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// PutEach writes its one value under each key, from the caller's buffers
// as they were: changing them after the call (before the commit) changes
// nothing stored; an empty value is stored as one, and a key the engine
// refuses fails the call.
func TestPutEachWritesEveryKeyFromACopy(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	buf := []byte("k/1k/2k/3")
	keys := [][]byte{buf[0:3], buf[3:6], buf[6:9]}
	val := []byte("the record")
	err := e.Update(ctx, kv.TxOptions{}, func(w kv.Writer) error {
		if err := w.(kv.EachPutter).PutEach(keys, val, 0); err != nil {
			return err
		}
		copy(buf, "x/1x/2x/3")
		copy(val, "overwrite!")
		return w.(kv.EachPutter).PutEach([][]byte{[]byte("e/1"), []byte("e/2")}, nil, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.View(ctx, func(r kv.Reader) error {
		for _, k := range []string{"k/1", "k/2", "k/3"} {
			v, err := r.Get([]byte(k))
			if err != nil || string(v) != "the record" {
				t.Errorf("%s: %q, %v; want the record", k, v, err)
			}
		}
		for _, k := range []string{"x/1", "x/2"} {
			if _, err := r.Get([]byte(k)); !errors.Is(err, kv.ErrNotFound) {
				t.Errorf("%s: %v, want not found", k, err)
			}
		}
		for _, k := range []string{"e/1", "e/2"} {
			if v, err := r.Get([]byte(k)); err != nil || len(v) != 0 {
				t.Errorf("%s: %q, %v; want an empty value", k, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Update(ctx, kv.TxOptions{}, func(w kv.Writer) error {
		return w.(kv.EachPutter).PutEach([][]byte{[]byte("ok"), nil}, []byte("v"), 0)
	})
	if err == nil {
		t.Fatal("PutEach with an empty key: no error")
	}
}
