package storage

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// A domain of the test: its state counts the records its transaction
// wrote; its before hook writes the count with the transaction, its after
// hook reports it (as the library's filter counts and indexer notes).
type countingTx struct{ n int }

var (
	countingState = NewTxState[countingTx]()
	// countingAfter records what the after hook saw; countingFail, when
	// set, is its error.
	countingAfter []int
	countingFail  error
)

func init() {
	OnCommit(func(tx *Tx) error {
		ct := countingState.Peek(tx)
		if ct == nil {
			return nil
		}
		return tx.Put(Key("testcount", "n"), []byte(strconv.Itoa(ct.n)), 0)
	}, func(ctx context.Context, s *Store, tx *Tx) error {
		if ct := countingState.Peek(tx); ct != nil {
			countingAfter = append(countingAfter, ct.n)
			return countingFail
		}
		return nil
	})
}

func TestTxStateAndCommitHooks(t *testing.T) {
	st := openTestStore(t)
	ctx := context.Background()
	countingAfter, countingFail = nil, nil
	t.Cleanup(func() { countingAfter, countingFail = nil, nil })
	readCount := func() string {
		t.Helper()
		var got string
		if err := st.View(ctx, func(tx *Tx) error {
			if countingState.Peek(tx) != nil {
				t.Error("a View holds the domain's state")
			}
			b, err := tx.Get(Key("testcount", "n"))
			got = string(b)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}

	// A transaction that writes none of the domain's records: no state,
	// the hooks do nothing.
	if err := st.Update(ctx, func(tx *Tx) error { return tx.Put(Key("other", "x"), []byte("1"), 0) }); err != nil {
		t.Fatal(err)
	}
	if got := readCount(); got != "" || len(countingAfter) != 0 {
		t.Fatalf("a transaction without the domain's state ran its hooks: count %q, after %v", got, countingAfter)
	}

	// A conflict retries the function with fresh state: the first
	// attempt's counts are not carried into the commit.
	attempts := 0
	err := st.Update(ctx, func(tx *Tx) error {
		attempts++
		if attempts > 1 && countingState.Peek(tx) != nil {
			t.Error("a retry starts with the previous attempt's state")
		}
		for range 3 {
			countingState.Of(tx).n++
		}
		if attempts == 1 {
			return kv.ErrConflict
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 2 {
		t.Fatalf("attempts = %d, want 2 (one conflict, one retry)", attempts)
	}
	if got := readCount(); got != "3" {
		t.Fatalf("count written before the commit = %q, want 3", got)
	}
	if len(countingAfter) != 1 || countingAfter[0] != 3 {
		t.Fatalf("after hook saw %v, want [3] (once, after the commit)", countingAfter)
	}

	// A function that fails commits nothing and runs no after hook.
	countingAfter = nil
	boom := errors.New("boom")
	err = st.Update(ctx, func(tx *Tx) error {
		countingState.Of(tx).n = 7
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the function's", err)
	}
	if got := readCount(); got != "3" || len(countingAfter) != 0 {
		t.Fatalf("a failed transaction: count %q (want 3), after hook ran %v", got, countingAfter)
	}

	// The after hook's error is the Update's; the commit stays.
	countingFail = errors.New("after failed")
	err = st.Update(ctx, func(tx *Tx) error {
		countingState.Of(tx).n = 5
		return nil
	})
	if !errors.Is(err, countingFail) {
		t.Fatalf("err = %v, want the after hook's", err)
	}
	if got := readCount(); got != "5" {
		t.Fatalf("count after a failing after hook = %q, want 5 (committed)", got)
	}
}
