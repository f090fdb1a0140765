// Package kvtest is the conformance suite every kv.Engine passes: call Run
// from the engine's tests with a factory of fresh, empty engines, and
// RunShared with a factory of two engines on one store (two nodes).
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Factory returns a fresh, empty engine, closed when the test ends.
type Factory func(t testing.TB) kv.Engine

// Pair returns two engines on the same store (for an embedded engine, the
// same engine twice), closed when the test ends.
type Pair func(t testing.TB) (a, b kv.Engine)

// Run runs the single-engine conformance tests.
func Run(t *testing.T, f Factory) {
	t.Run("Order", func(t *testing.T) { testOrder(t, f(t)) })
	t.Run("ScanRanges", func(t *testing.T) { testScanRanges(t, f(t)) })
	t.Run("GetPutDelete", func(t *testing.T) { testGetPutDelete(t, f(t)) })
	t.Run("Invalid", func(t *testing.T) { testInvalid(t, f(t)) })
	t.Run("TTL", func(t *testing.T) { testTTL(t, f(t)) })
	t.Run("WriteSkew", func(t *testing.T) { testWriteSkew(t, f(t), nil) })
	t.Run("LostUpdate", func(t *testing.T) { testLostUpdate(t, f(t)) })
	t.Run("RunTx", func(t *testing.T) { testRunTx(t, f(t), nil) })
	t.Run("Notify", func(t *testing.T) { testNotify(t, f(t), nil) })
	t.Run("Snapshot", func(t *testing.T) { testSnapshot(t, f(t)) })
	t.Run("BigValue", func(t *testing.T) { testBigValue(t, f(t)) })
	t.Run("ExportImport", func(t *testing.T) { testExportImport(t, f(t), f(t)) })
	t.Run("Counters", func(t *testing.T) { testCounters(t, f(t), nil) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, f(t), nil) })
	t.Run("Context", func(t *testing.T) { testContext(t, f(t)) })
	t.Run("Sync", func(t *testing.T) { testSync(t, f(t)) })
}

// RunShared runs the tests of two engines on one store: conflicts, retries,
// notifications, counters, leases and id slots across them.
func RunShared(t *testing.T, p Pair) {
	t.Run("WriteSkew", func(t *testing.T) { a, b := p(t); testWriteSkew(t, a, b) })
	t.Run("RunTx", func(t *testing.T) { a, b := p(t); testRunTx(t, a, b) })
	t.Run("Notify", func(t *testing.T) { a, b := p(t); testNotify(t, a, b) })
	t.Run("Counters", func(t *testing.T) { a, b := p(t); testCounters(t, a, b) })
	t.Run("Leases", func(t *testing.T) { a, b := p(t); testLeases(t, a, b) })
	t.Run("IDSlots", func(t *testing.T) { a, b := p(t); testIDSlots(t, a, b) })
}

var bg = context.Background()

// Put writes records in one transaction (for tests and benchmarks).
func Put(t testing.TB, e kv.Engine, kvs ...[]byte) {
	t.Helper()
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		for i := 0; i+1 < len(kvs); i += 2 {
			if err := w.Put(kvs[i], kvs[i+1], 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// ScanKeys returns the keys of r (as strings).
func ScanKeys(t testing.TB, e kv.Engine, r kv.Range) []string {
	t.Helper()
	var out []string
	if err := e.View(bg, func(rd kv.Reader) error {
		return rd.Scan(r, func(k, v []byte) (bool, error) {
			if r.KeysOnly && v != nil {
				return false, fmt.Errorf("KeysOnly scan passed a value for %q", k)
			}
			if !r.KeysOnly && v == nil {
				return false, fmt.Errorf("scan passed a nil value for %q", k)
			}
			out = append(out, string(k))
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func get(t testing.TB, e kv.Engine, key string) ([]byte, error) {
	t.Helper()
	var v []byte
	err := e.View(bg, func(r kv.Reader) error {
		var err error
		v, err = r.Get([]byte(key))
		return err
	})
	return v, err
}

func mustGet(t testing.TB, e kv.Engine, key, want string) {
	t.Helper()
	v, err := get(t, e, key)
	if err != nil || string(v) != want {
		t.Fatalf("Get(%q) = %q, %v; want %q", key, v, err, want)
	}
}

func mustAbsent(t testing.TB, e kv.Engine, key string) {
	t.Helper()
	if v, err := get(t, e, key); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, v, err)
	}
}

// orderKeys contain 0x00 and 0xff bytes and keys that are prefixes of others.
var orderKeys = []string{
	"p/", "p/\x00", "p/\x00\x00", "p/\x00\xff", "p/\x01", "p/a", "p/a\x00", "p/ab", "p/b",
	"p/\x7f", "p/\x80", "p/\xfe", "p/\xff", "p/\xff\x00", "p/\xff\xff", "p/\xff\xff\xff",
}

func testOrder(t *testing.T, e kv.Engine) {
	var kvs [][]byte
	for i, k := range orderKeys {
		kvs = append(kvs, []byte(k), []byte(fmt.Sprint(i)))
	}
	// Neighbours outside the prefix on both sides.
	kvs = append(kvs, []byte("p"), []byte("x"), []byte("p0"), []byte("x"), []byte("o\xff"), []byte("x"), []byte("q"), []byte("x"))
	Put(t, e, kvs...)
	want := slices.Clone(orderKeys)
	slices.SortFunc(want, func(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) })
	if got := ScanKeys(t, e, kv.Range{Prefix: []byte("p/")}); !slices.Equal(got, want) {
		t.Fatalf("forward scan\n got %q\nwant %q", got, want)
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if got := ScanKeys(t, e, kv.Range{Prefix: []byte("p/"), Reverse: true, KeysOnly: true}); !slices.Equal(got, rev) {
		t.Fatalf("reverse scan\n got %q\nwant %q", got, rev)
	}
	// The whole store, both ways (an empty prefix; keys with 0xff last).
	all := append(slices.Clone(want), "o\xff", "p", "p0", "q")
	slices.SortFunc(all, func(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) })
	if got := ScanKeys(t, e, kv.Range{}); !slices.Equal(got, all) {
		t.Fatalf("scan of everything\n got %q\nwant %q", got, all)
	}
	slices.Reverse(all)
	if got := ScanKeys(t, e, kv.Range{Reverse: true}); !slices.Equal(got, all) {
		t.Fatalf("reverse scan of everything\n got %q\nwant %q", got, all)
	}
	// A prefix ending in 0xff: its end carries into the byte before.
	if got, w := ScanKeys(t, e, kv.Range{Prefix: []byte("p/\xff")}), []string{"p/\xff", "p/\xff\x00", "p/\xff\xff", "p/\xff\xff\xff"}; !slices.Equal(got, w) {
		t.Fatalf("prefix p/\\xff\n got %q\nwant %q", got, w)
	}
	if got, w := ScanKeys(t, e, kv.Range{Prefix: []byte("p/\xff"), Reverse: true}), []string{"p/\xff\xff\xff", "p/\xff\xff", "p/\xff\x00", "p/\xff"}; !slices.Equal(got, w) {
		t.Fatalf("reverse prefix p/\\xff\n got %q\nwant %q", got, w)
	}
	// Values come with their keys.
	if err := e.View(bg, func(r kv.Reader) error {
		return r.Scan(kv.Range{Prefix: []byte("p/")}, func(k, v []byte) (bool, error) {
			i := slices.Index(orderKeys, string(k))
			if string(v) != fmt.Sprint(i) {
				return false, fmt.Errorf("value of %q is %q, want %d", k, v, i)
			}
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

func testScanRanges(t *testing.T, e kv.Engine) {
	var kvs [][]byte
	for i := range 300 {
		kvs = append(kvs, fmt.Appendf(nil, "s/%04d", i), fmt.Appendf(nil, "v%d", i))
	}
	kvs = append(kvs, []byte("s0"), []byte("outside"), []byte("s."), []byte("outside"))
	Put(t, e, kvs...)
	keys := func(from, to int) []string { // from..to inclusive, either direction
		var out []string
		for i := from; ; {
			out = append(out, fmt.Sprintf("s/%04d", i))
			if i == to {
				return out
			}
			if from < to {
				i++
			} else {
				i--
			}
		}
	}
	cases := []struct {
		name string
		r    kv.Range
		want []string
	}{
		{"all", kv.Range{Prefix: []byte("s/")}, keys(0, 299)},
		{"all reverse (several batches)", kv.Range{Prefix: []byte("s/"), Reverse: true}, keys(299, 0)},
		{"start inclusive", kv.Range{Prefix: []byte("s/"), Start: []byte("s/0100")}, keys(100, 299)},
		{"start between keys", kv.Range{Prefix: []byte("s/"), Start: []byte("s/0100\x00")}, keys(101, 299)},
		{"reverse start inclusive", kv.Range{Prefix: []byte("s/"), Start: []byte("s/0100"), Reverse: true}, keys(100, 0)},
		{"reverse start between keys", kv.Range{Prefix: []byte("s/"), Start: []byte("s/0100\x00"), Reverse: true}, keys(100, 0)},
		{"limit", kv.Range{Prefix: []byte("s/"), Start: []byte("s/0010"), Limit: 50}, keys(10, 59)},
		{"reverse limit", kv.Range{Prefix: []byte("s/"), Start: []byte("s/0200"), Reverse: true, Limit: 70}, keys(200, 131)},
		{"limit over batches", kv.Range{Prefix: []byte("s/"), Limit: 250}, keys(0, 249)},
		{"start before prefix", kv.Range{Prefix: []byte("s/"), Start: []byte("a")}, keys(0, 299)},
		{"start after prefix", kv.Range{Prefix: []byte("s/"), Start: []byte("z")}, nil},
		{"reverse start after prefix", kv.Range{Prefix: []byte("s/"), Start: []byte("z"), Reverse: true, Limit: 3}, keys(299, 297)},
		{"reverse start before prefix", kv.Range{Prefix: []byte("s/"), Start: []byte("a"), Reverse: true}, nil},
		{"no such prefix", kv.Range{Prefix: []byte("r/")}, nil},
	}
	for _, c := range cases {
		if got := ScanKeys(t, e, c.r); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %d keys %q…, want %d %q…", c.name, len(got), head(got), len(c.want), head(c.want))
		}
		if c.r.Limit != 0 {
			continue // cursors have no limit
		}
		for _, fallback := range []bool{false, true} {
			if got := cursorKeys(t, e, c.r, fallback); !slices.Equal(got, c.want) {
				t.Errorf("%s: cursor (fallback %v) got %d keys %q…, want %d %q…", c.name, fallback, len(got), head(got), len(c.want), head(c.want))
			}
		}
	}
	// Seeks in both directions, to keys, between keys and outside the
	// prefix, after walking part of a batch.
	for _, fallback := range []bool{false, true} {
		for _, reverse := range []bool{false, true} {
			err := e.View(bg, func(r kv.Reader) error {
				if fallback {
					r = onlyReader{r}
				}
				c := kv.OpenCursor(r, kv.Range{Prefix: []byte("s/"), Reverse: reverse, KeysOnly: reverse})
				defer c.Close()
				for range 40 {
					c.Next()
				}
				for _, sk := range []struct{ seek, want string }{
					{"s/0150", "s/0150"}, {"s/0007", "s/0007"}, {"s/0250\x00", map[bool]string{false: "s/0251", true: "s/0250"}[reverse]},
					{"a", map[bool]string{false: "s/0000", true: ""}[reverse]}, {"z", map[bool]string{false: "", true: "s/0299"}[reverse]},
				} {
					c.Seek([]byte(sk.seek))
					got := ""
					if c.Valid() {
						got = string(c.Key())
						v, err := c.Value()
						if err != nil {
							return err
						}
						n, _ := strconv.Atoi(got[2:])
						if want := fmt.Sprintf("v%d", n); reverse && v != nil || !reverse && string(v) != want {
							return fmt.Errorf("value at %s: %q, want %q (none for keys only)", got, v, want)
						}
					}
					if got != sk.want {
						return fmt.Errorf("seek %q (reverse %v): at %q, want %q", sk.seek, reverse, got, sk.want)
					}
				}
				return kv.CursorErr(c)
			})
			if err != nil {
				t.Errorf("cursor (fallback %v): %v", fallback, err)
			}
		}
	}
	// Early stop, and Get inside the callback.
	n := 0
	if err := e.View(bg, func(r kv.Reader) error {
		return r.Scan(kv.Range{Prefix: []byte("s/")}, func(k, v []byte) (bool, error) {
			n++
			other, err := r.Get([]byte("s0"))
			if err != nil || string(other) != "outside" {
				return false, fmt.Errorf("get inside Scan: %q, %v", other, err)
			}
			return n < 7, nil
		})
	}); err != nil || n != 7 {
		t.Fatalf("early stop: %d keys, %v; want 7", n, err)
	}
	// An error from fn is returned unchanged.
	boom := errors.New("boom")
	if err := e.View(bg, func(r kv.Reader) error {
		return r.Scan(kv.Range{Prefix: []byte("s/")}, func(k, v []byte) (bool, error) { return true, boom })
	}); !errors.Is(err, boom) {
		t.Fatalf("fn's error: got %v", err)
	}
}

// onlyReader hides an engine's own cursors: kv.OpenCursor falls back to Scans.
type onlyReader struct{ r kv.Reader }

func (o onlyReader) Get(key []byte) ([]byte, error)          { return o.r.Get(key) }
func (o onlyReader) GetMany(keys [][]byte) ([][]byte, error) { return o.r.GetMany(keys) }
func (o onlyReader) Scan(r kv.Range, fn func(k, v []byte) (bool, error)) error {
	return o.r.Scan(r, fn)
}

// cursorKeys walks a cursor over r from its start to its end.
func cursorKeys(t testing.TB, e kv.Engine, r kv.Range, fallback bool) []string {
	t.Helper()
	var out []string
	if err := e.View(bg, func(rd kv.Reader) error {
		if fallback {
			rd = onlyReader{rd}
		}
		c := kv.OpenCursor(rd, r)
		defer c.Close()
		for ; c.Valid(); c.Next() {
			out = append(out, string(c.Key()))
		}
		return kv.CursorErr(c)
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func head(s []string) []string { return s[:min(3, len(s))] }

func testGetPutDelete(t *testing.T, e kv.Engine) {
	mustAbsent(t, e, "k")
	Put(t, e, []byte("k"), []byte("v1"), []byte("empty"), []byte{})
	mustGet(t, e, "k", "v1")
	mustGet(t, e, "empty", "")
	// Read-your-writes inside one transaction, scans included.
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		if err := w.Put([]byte("k"), []byte("v2"), 0); err != nil {
			return err
		}
		if err := w.Put([]byte("k2"), []byte("x"), 0); err != nil {
			return err
		}
		if err := w.Delete([]byte("empty")); err != nil {
			return err
		}
		if v, err := w.Get([]byte("k")); err != nil || string(v) != "v2" {
			return fmt.Errorf("own write: %q, %v", v, err)
		}
		if _, err := w.Get([]byte("empty")); !errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("own delete: %v", err)
		}
		vals, err := w.GetMany([][]byte{[]byte("k2"), []byte("nope"), []byte("k")})
		if err != nil || len(vals) != 3 || string(vals[0]) != "x" || vals[1] != nil || string(vals[2]) != "v2" {
			return fmt.Errorf("GetMany: %q, %v", vals, err)
		}
		var ks []string
		err = w.Scan(kv.Range{Prefix: []byte("k")}, func(k, _ []byte) (bool, error) { ks = append(ks, string(k)); return true, nil })
		if err != nil || !slices.Equal(ks, []string{"k", "k2"}) {
			return fmt.Errorf("own writes in a scan: %q, %v", ks, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mustGet(t, e, "k", "v2")
	mustAbsent(t, e, "empty")
	// An error from fn commits nothing.
	boom := errors.New("boom")
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		w.Put([]byte("k"), []byte("v3"), 0)
		w.Delete([]byte("k2"))
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("fn's error: got %v", err)
	}
	mustGet(t, e, "k", "v2")
	mustGet(t, e, "k2", "x")
	// Deleting an absent key is fine; an async commit is visible at once.
	if err := e.Update(bg, kv.TxOptions{Async: true}, func(w kv.Writer) error {
		if err := w.Delete([]byte("never")); err != nil {
			return err
		}
		return w.Put([]byte("async"), []byte("a"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	mustGet(t, e, "async", "a")
	// Put copies its key and value: the caller reuses its buffers.
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		k, v := []byte("reuse1"), []byte("first")
		if err := w.Put(k, v, 0); err != nil {
			return err
		}
		copy(k, "reuse2")
		copy(v, "other")
		return w.Put(k, v, 0)
	}); err != nil {
		t.Fatal(err)
	}
	mustGet(t, e, "reuse1", "first")
	mustGet(t, e, "reuse2", "other")
	var vals [][]byte
	if err := e.View(bg, func(r kv.Reader) error {
		var err error
		vals, err = r.GetMany(nil)
		return err
	}); err != nil || len(vals) != 0 {
		t.Fatalf("GetMany(nil) = %q, %v", vals, err)
	}
}

func testInvalid(t *testing.T, e kv.Engine) {
	Put(t, e, []byte("keep"), []byte("1"))
	long := bytes.Repeat([]byte("k"), kv.MaxKeySize+1)
	for name, fn := range map[string]func(w kv.Writer) error{
		"empty key":      func(w kv.Writer) error { return w.Put(nil, []byte("x"), 0) },
		"long key":       func(w kv.Writer) error { return w.Put(long, []byte("x"), 0) },
		"delete empty":   func(w kv.Writer) error { return w.Delete([]byte{}) },
		"get empty":      func(w kv.Writer) error { _, err := w.Get(nil); return err },
		"notify no chan": func(w kv.Writer) error { return w.Notify("", "x") },
		"notify long":    func(w kv.Writer) error { return w.Notify("c", string(make([]byte, kv.MaxPayload+1))) },
		"notify NUL":     func(w kv.Writer) error { return w.Notify("c", kv.Missed) },
	} {
		err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
			if err := w.Put([]byte("keep"), []byte("changed"), 0); err != nil {
				return err
			}
			return fn(w)
		})
		if !errors.Is(err, kv.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	mustGet(t, e, "keep", "1")
}

// Notes subscribes e to channel until the test ends (or stop) and returns
// what it receives (kv.Missed left out), up to n payloads buffered.
func Notes(t testing.TB, e kv.Engine, channel string, n int) (got <-chan string, stop func()) {
	t.Helper()
	ch := make(chan string, n)
	stop, err := e.Subscribe(channel, func(p string) {
		if p != kv.Missed {
			ch <- p
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return ch, stop
}

// Eventually polls cond until it holds, failing after a generous bound (the
// bound is a guard against hanging, not an assertion about speed).
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testTTL(t *testing.T, e kv.Engine) {
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		if err := w.Put([]byte("t/short"), []byte("s"), time.Second); err != nil {
			return err
		}
		if err := w.Put([]byte("t/long"), []byte("l"), time.Hour); err != nil {
			return err
		}
		return w.Put([]byte("t/none"), []byte("n"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	mustGet(t, e, "t/long", "l")
	var exp uint64
	if err := e.Export(bg, func(r kv.Record) error {
		if string(r.Key) == "t/long" {
			exp = r.ExpiresAt
		}
		if string(r.Key) == "t/none" && r.ExpiresAt != 0 {
			return fmt.Errorf("t/none exported with expiry %d", r.ExpiresAt)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if now := uint64(time.Now().Unix()); exp < now+3500 || exp > now+3700 {
		t.Fatalf("t/long exported with expiry %d, now is %d", exp, now)
	}
	// Expired = absent to Get, GetMany, Scan and Export.
	Eventually(t, "t/short expires", func() bool {
		_, err := get(t, e, "t/short")
		return errors.Is(err, kv.ErrNotFound)
	})
	if got := ScanKeys(t, e, kv.Range{Prefix: []byte("t/")}); !slices.Equal(got, []string{"t/long", "t/none"}) {
		t.Fatalf("scan after expiry: %q", got)
	}
	if err := e.View(bg, func(r kv.Reader) error {
		vals, err := r.GetMany([][]byte{[]byte("t/short"), []byte("t/none")})
		if err == nil && (vals[0] != nil || string(vals[1]) != "n") {
			err = fmt.Errorf("GetMany after expiry: %q", vals)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.Export(bg, func(r kv.Record) error {
		if string(r.Key) == "t/short" {
			return errors.New("export passed an expired key")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A Put without TTL clears the expiry.
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Put([]byte("t/short"), []byte("again"), 0) }); err != nil {
		t.Fatal(err)
	}
	mustGet(t, e, "t/short", "again")
}

// testSnapshot: a View sees one instant while writes commit.
func testSnapshot(t *testing.T, e kv.Engine) {
	Put(t, e, []byte("snap/a"), []byte("1"), []byte("snap/b"), []byte("1"))
	if err := e.View(bg, func(r kv.Reader) error {
		if _, err := r.Get([]byte("snap/a")); err != nil {
			return err
		}
		Put(t, e, []byte("snap/a"), []byte("2"), []byte("snap/b"), []byte("2"), []byte("snap/c"), []byte("2"))
		v, err := r.Get([]byte("snap/b"))
		if err != nil || string(v) != "1" {
			return fmt.Errorf("snapshot read a later commit: %q, %v", v, err)
		}
		var ks []string
		err = r.Scan(kv.Range{Prefix: []byte("snap/")}, func(k, v []byte) (bool, error) {
			ks = append(ks, string(k)+"="+string(v))
			return true, nil
		})
		if err == nil && !slices.Equal(ks, []string{"snap/a=1", "snap/b=1"}) {
			err = fmt.Errorf("snapshot scan: %q", ks)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mustGet(t, e, "snap/c", "2")
}

func testBigValue(t *testing.T, e kv.Engine) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB, above Badger's value-log threshold
	big[12345] = 0
	Put(t, e, []byte("big"), big)
	v, err := get(t, e, "big")
	if err != nil || !bytes.Equal(v, big) {
		t.Fatalf("big value: %d bytes, %v", len(v), err)
	}
}

func testContext(t *testing.T, e kv.Engine) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := e.Update(ctx, kv.TxOptions{}, func(w kv.Writer) error { return w.Put([]byte("ctx"), []byte("x"), 0) }); err == nil {
		t.Fatal("Update with a cancelled context succeeded")
	}
	mustAbsent(t, e, "ctx")
	if err := e.View(ctx, func(kv.Reader) error { return nil }); err == nil {
		t.Fatal("View with a cancelled context succeeded")
	}
	if err := e.Ping(bg); err != nil {
		t.Fatal(err)
	}
}

// testSync: an engine that syncs its own logs (kv.Syncer) syncs Async and
// synchronous commits on a healthy disk without a failure to count; one
// that does not (a server engine, whose commits fail themselves when they
// cannot be made durable) needs no Sync.
func testSync(t *testing.T, e kv.Engine) {
	sy, ok := e.(kv.Syncer)
	if !ok {
		t.Skip("the engine's commits are durable when they return (no kv.Syncer)")
	}
	ctx := context.Background()
	for i, async := range []bool{true, false, true} {
		if err := e.Update(ctx, kv.TxOptions{Async: async}, func(w kv.Writer) error {
			return w.Put([]byte(fmt.Sprintf("sync/%d", i)), []byte("v"), 0)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sy.Sync(); err != nil {
		t.Fatalf("Sync on a healthy disk: %v", err)
	}
	if n := sy.FailedSyncs(); n != 0 {
		t.Fatalf("FailedSyncs on a healthy disk: %d, want 0", n)
	}
}
