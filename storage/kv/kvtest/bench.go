package kvtest

import (
	"fmt"
	"testing"

	"github.com/hearthkit/caddy-hearth/storage/kv"
)

// Bench runs the engine benchmarks on e: a point read, a synchronous put, a
// scan of 100 records (values of 200 bytes), and a read-write transaction
// (read one record, write it back changed) — the base of the
// "within 10 %" comparison. Each operation is its own transaction.
func Bench(b *testing.B, e kv.Engine) {
	const n = 10000
	val := make([]byte, 200)
	for i := 0; i < n; i += 1000 {
		if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error {
			for j := i; j < i+1000; j++ {
				if err := w.Put(fmt.Appendf(nil, "bench/%06d", j), val, 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Get", func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := fmt.Appendf(nil, "bench/%06d", i%n)
			i += 7
			if err := e.View(bg, func(r kv.Reader) error { _, err := r.Get(k); return err }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Put", func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := fmt.Appendf(nil, "bench/put/%09d", i)
			i++
			if err := e.Update(bg, kv.TxOptions{}, func(w kv.Writer) error { return w.Put(k, val, 0) }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Scan100", func(b *testing.B) {
		i := 0
		for b.Loop() {
			start := fmt.Appendf(nil, "bench/%06d", (i*37)%(n-100))
			i++
			got := 0
			if err := e.View(bg, func(r kv.Reader) error {
				return r.Scan(kv.Range{Prefix: []byte("bench/0"), Start: start, Limit: 100}, func(k, v []byte) (bool, error) {
					got++
					return true, nil
				})
			}); err != nil || got != 100 {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("ReadWriteTx", func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := fmt.Appendf(nil, "bench/%06d", (i*13)%n)
			i++
			if err := kv.RunTx(bg, e, kv.TxOptions{}, func(w kv.Writer) error {
				v, err := w.Get(k)
				if err != nil {
					return err
				}
				v[0]++
				return w.Put(k, v, 0)
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
