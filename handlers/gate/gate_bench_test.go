package gate_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/gate"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// A request with a valid session through the gate, against the same
// route without it, over loopback HTTP on a real store (bench/README.md):
//
//	go test -tags nobadger,nomysql,nopgx -run '^$' -bench Gate -benchtime 5000x ./handlers/gate/
func BenchmarkGatePass(b *testing.B)   { benchmarkRoute(b, true) }
func BenchmarkGateAbsent(b *testing.B) { benchmarkRoute(b, false) }

func benchmarkRoute(b *testing.B, gated bool) {
	st, err := storage.Open(b.TempDir(), storage.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	m, err := members.Of(st).CreateMember(ctx, "alice", "Alice", "correct horse battery")
	if err != nil {
		b.Fatal(err)
	}
	sid, err := members.Of(st).CreateSession(ctx, m.ID, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	respond := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })
	h := http.Handler(respond)
	if gated {
		g := gate.New(st, gate.Options{})
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v, m, _ := g.Check(r)
			if v != gate.Pass {
				g.Refuse(w, r, v, r.URL.RequestURI())
				return
			}
			gate.Prepare(r, m)
			respond.ServeHTTP(w, r)
		})
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/", nil)
	req.AddCookie(&http.Cookie{Name: account.CookieName, Value: sid})
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := ts.Client().Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("HTTP %d", res.StatusCode)
			}
		}
	})
}
