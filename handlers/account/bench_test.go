package account_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// BenchmarkSettingsPage measures a signed-in page view: session lookup in
// Badger plus rendering the layout. The session carries the metadata a
// sign-in records; its last-seen time is fresh, as it is for all but one
// request every account.SessionTouchInterval, so the view does not write.
func BenchmarkSettingsPage(b *testing.B) {
	st, err := storage.Open(b.TempDir(), storage.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	m, err := members.Of(st).CreateMember(b.Context(), "alice", "Alice", "correct horse battery")
	if err != nil {
		b.Fatal(err)
	}
	id, err := members.Of(st).CreateSessionWith(b.Context(), m, 3600e9, members.SessionInfo{Device: "Firefox on Linux", Address: "198.51.100.7"})
	if err != nil {
		b.Fatal(err)
	}
	p := account.New(st, account.Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodGet, "/settings", nil)
			req.AddCookie(&http.Cookie{Name: account.CookieName, Value: id})
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d", rec.Code)
			}
		}
	})
}

// BenchmarkSignInForm measures the signed-out sign-in form.
func BenchmarkSignInForm(b *testing.B) {
	st, err := storage.Open(b.TempDir(), storage.Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	p := account.New(st, account.Options{})
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/sign_in", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
