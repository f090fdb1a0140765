package kvtest

// Transactions that meet: write skew, lost updates, retried transactions
// (kv.RunTx) and the notifications their commits send, on one engine or
// across two engines on one store.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// testWriteSkew: each transaction reads both "on call" keys and takes one
// off call if the other is on: serially one of them must see the other's
// change and stay. SERIALIZABLE refuses the second commit.
func testWriteSkew(t *testing.T, a, b kv.Engine) {
	if b == nil {
		b = a
	}
	Put(t, a, []byte("oncall/alice"), []byte("1"), []byte("oncall/bob"), []byte("1"))
	offIfOther := func(w kv.Writer, me, other string) error {
		vals, err := w.GetMany([][]byte{[]byte("oncall/" + me), []byte("oncall/" + other)})
		if err != nil {
			return err
		}
		if string(vals[0]) == "1" && string(vals[1]) == "1" {
			return w.Put([]byte("oncall/"+me), []byte("0"), 0)
		}
		return nil
	}
	read := make(chan struct{})
	done := make(chan error, 1)
	var errA error
	wait := make(chan struct{})
	go func() {
		errA = a.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
			if _, err := w.GetMany([][]byte{[]byte("oncall/alice"), []byte("oncall/bob")}); err != nil {
				return err
			}
			close(read)
			if err := <-done; err != nil {
				return fmt.Errorf("the other transaction: %w", err)
			}
			return offIfOther(w, "alice", "bob")
		})
		close(wait)
	}()
	<-read
	done <- b.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return offIfOther(w, "bob", "alice") })
	<-wait
	if !errors.Is(errA, kv.ErrConflict) {
		t.Fatalf("write skew committed: got %v, want ErrConflict", errA)
	}
	mustGet(t, a, "oncall/alice", "1")
	mustGet(t, a, "oncall/bob", "0")
}

// testLostUpdate: two read-modify-writes of one key; the later commit is
// refused.
func testLostUpdate(t *testing.T, e kv.Engine) {
	Put(t, e, []byte("n"), []byte("0"))
	read := make(chan struct{})
	other := make(chan error, 1)
	var errFirst error
	wait := make(chan struct{})
	go func() {
		errFirst = e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
			if _, err := w.Get([]byte("n")); err != nil {
				return err
			}
			close(read)
			if err := <-other; err != nil {
				return err
			}
			return w.Put([]byte("n"), []byte("first"), 0)
		})
		close(wait)
	}()
	<-read
	other <- e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		if _, err := w.Get([]byte("n")); err != nil {
			return err
		}
		return w.Put([]byte("n"), []byte("second"), 0)
	})
	<-wait
	if !errors.Is(errFirst, kv.ErrConflict) {
		t.Fatalf("lost update committed: %v", errFirst)
	}
	mustGet(t, e, "n", "second")
}

// testRunTx: concurrent increments of one counter through RunTx, on one or
// two engines: none is lost.
func testRunTx(t *testing.T, a, b kv.Engine) {
	if b == nil {
		b = a
	}
	Put(t, a, []byte("ctr"), []byte("0"))
	const workers, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	var attempts atomic.Int64
	for i := range workers {
		e := a
		if i%2 == 1 {
			e = b
		}
		wg.Go(func() {
			for range each {
				errs <- kv.RunTx(bg, e, kv.TxOptions{}, func(w kv.Writer) error {
					attempts.Add(1)
					v, err := w.Get([]byte("ctr"))
					if err != nil {
						return err
					}
					var n int
					fmt.Sscan(string(v), &n)
					return w.Put([]byte("ctr"), fmt.Append(nil, n+1), 0)
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	mustGet(t, a, "ctr", fmt.Sprint(workers*each))
	t.Logf("%d increments took %d attempts", workers*each, attempts.Load())
	// fn's own error is not retried.
	n := 0
	boom := errors.New("boom")
	if err := kv.RunTx(bg, a, kv.TxOptions{}, func(w kv.Writer) error { n++; return boom }); !errors.Is(err, boom) || n != 1 {
		t.Fatalf("RunTx with fn failing: %v after %d runs", err, n)
	}
	// A cancelled context ends the retries.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := kv.RunTx(ctx, a, kv.TxOptions{}, func(w kv.Writer) error { return nil }); err == nil {
		t.Fatal("RunTx with a cancelled context succeeded")
	}
}

// testNotify: a notification reaches subscribers (of the other engine too)
// once its transaction commits, never when it rolls back, in order.
func testNotify(t *testing.T, a, b kv.Engine) {
	if b == nil {
		b = a
	}
	Eventually(t, "both engines listen", func() bool { return a.Live() && b.Live() })
	got, stop := Notes(t, b, "chan-a", 100)
	other, _ := Notes(t, b, "chan-b", 100)
	boom := errors.New("boom")
	if err := a.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		w.Notify("chan-a", "rolled back")
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := a.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
			if err := w.Put([]byte("n"), []byte("x"), 0); err != nil {
				return err
			}
			return w.Notify("chan-a", fmt.Sprintf("payload %d\nline two ✓", i))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Notify("chan-b", "b") }); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		select {
		case p := <-got:
			if want := fmt.Sprintf("payload %d\nline two ✓", i); p != want {
				t.Fatalf("notification %d: %q, want %q", i, p, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("notification %d never arrived", i)
		}
	}
	select {
	case p := <-other:
		if p != "b" {
			t.Fatalf("chan-b got %q", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("chan-b's notification never arrived")
	}
	// chan-b arrived after every chan-a one was sent, so nothing else
	// (the rolled-back one) is still coming for chan-a.
	select {
	case p := <-got:
		t.Fatalf("unexpected notification %q", p)
	default:
	}
	stop()
	if err := a.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Notify("chan-a", "after stop") }); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Notify("chan-b", "b2") }); err != nil {
		t.Fatal(err)
	}
	<-other
	select {
	case p := <-got:
		t.Fatalf("notification %q after stop", p)
	default:
	}
}
