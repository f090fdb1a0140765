package kvtest

// The backup stream: records an engine exports, and a round trip through
// Export and Import.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Records returns every record of e's Export (copies).
func Records(t testing.TB, e kv.Engine) []kv.Record {
	t.Helper()
	var out []kv.Record
	if err := e.Export(bg, func(r kv.Record) error {
		out = append(out, kv.Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), ExpiresAt: r.ExpiresAt})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Fill writes a mixed set of records: binary keys, a big value, TTLs.
func Fill(t testing.TB, e kv.Engine) {
	t.Helper()
	if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
		for i, k := range orderKeys {
			if err := w.Put([]byte(k), fmt.Appendf(nil, "value %d", i), 0); err != nil {
				return err
			}
		}
		for i := range 500 {
			if err := w.Put(fmt.Appendf(nil, "u/m%03d/item", i), bytes.Repeat([]byte{byte(i)}, i*7), 0); err != nil {
				return err
			}
		}
		if err := w.Put([]byte("session/x"), []byte("sess"), 2*time.Hour); err != nil {
			return err
		}
		return w.Put([]byte("empty"), []byte{}, 0)
	}); err != nil {
		t.Fatal(err)
	}
	Put(t, e, []byte("big"), bytes.Repeat([]byte("b"), 3<<20))
}

// SameRecords fails unless a and b hold the same records.
func SameRecords(t testing.TB, a, b []kv.Record) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d records, want %d", len(b), len(a))
	}
	for i := range a {
		// Expiries may differ by the rounding to seconds.
		if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) ||
			(a[i].ExpiresAt == 0) != (b[i].ExpiresAt == 0) || max(a[i].ExpiresAt, b[i].ExpiresAt)-min(a[i].ExpiresAt, b[i].ExpiresAt) > 1 {
			t.Fatalf("record %d: %q (%d bytes, expires %d), want %q (%d bytes, expires %d)",
				i, b[i].Key, len(b[i].Value), b[i].ExpiresAt, a[i].Key, len(a[i].Value), a[i].ExpiresAt)
		}
	}
}

// RoundTrip writes src's backup stream and imports it into dst (replacing
// what dst held), returning the stream's bytes.
func RoundTrip(t testing.TB, src, dst kv.Engine) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := kv.WriteStream(bg, &buf, src); err != nil {
		t.Fatal(err)
	}
	next, closeFn, err := kv.ReadStream(bytes.NewReader(buf.Bytes()), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if err := dst.Import(bg, next, kv.ImportReplace); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testExportImport(t *testing.T, a, b kv.Engine) {
	Fill(t, a)
	Put(t, b, []byte("only in b"), []byte("gone after a replace"))
	want := Records(t, a)
	stream := RoundTrip(t, a, b)
	SameRecords(t, want, Records(t, b))
	mustAbsent(t, b, "only in b")
	// A damaged or cut stream is refused before anything is imported.
	for name, bad := range map[string][]byte{
		"flipped byte": func() []byte { s := bytes.Clone(stream); s[len(s)/2] ^= 1; return s }(),
		"cut short":    stream[:len(stream)-40],
		"not a backup": []byte("hello"),
		"trailing":     append(bytes.Clone(stream), 'x'),
	} {
		if _, _, err := kv.ReadStream(bytes.NewReader(bad), t.TempDir()); !errors.Is(err, kv.ErrNotStream) {
			t.Errorf("%s: got %v, want ErrNotStream", name, err)
		}
	}
	// Merge keeps what is there.
	Put(t, b, []byte("extra"), []byte("kept"))
	next, closeFn, err := kv.ReadStream(bytes.NewReader(stream), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if err := b.Import(bg, next, kv.ImportMerge); err != nil {
		t.Fatal(err)
	}
	mustGet(t, b, "extra", "kept")
	if n := len(Records(t, b)); n != len(want)+1 {
		t.Fatalf("after a merge: %d records, want %d", n, len(want)+1)
	}
}
