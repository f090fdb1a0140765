package graphql_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/graphql"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// When the store refuses writes for now (its disk is below the free-space
// reserve) reads keep working and a mutation gets Inboxt's answer for such
// errors: HTTP 200, extensions.status 507, Retry-After; nothing is
// written. A closed store (a reload moved away from it) answers
// extensions.status 503 the same way, never a 500 or a panic.
func TestStoreRefusalsAreInboxtErrorsWithRetryAfter(t *testing.T) {
	dir := t.TempDir()
	st := graphql.StoreForTest(t, dir)
	m, token := graphql.MemberForTest(t, st, "alice")
	if _, err := library.Of(st).CreateLabel(t.Context(), m.ID, "kept", "#ff0000"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// A reserve larger than any disk: every write is refused as on a full one.
	noSync := false
	st, err := storage.Open(dir, storage.Options{SyncWrites: &noSync, GCInterval: -1, MinFreeBytes: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := httptest.NewServer(served(newAPI(st, options{})))
	defer srv.Close()
	e := &env{t: t, store: st, srv: srv, token: token}

	r := e.post(token, labelsQuery, nil)
	if r.Status != http.StatusOK || len(r.Errors) > 0 {
		t.Fatalf("a read on a full disk: %d %+v", r.Status, r.Errors)
	}

	check := func(r *response, status float64, code string) {
		t.Helper()
		if r.Status != http.StatusOK || len(r.Errors) == 0 {
			t.Fatalf("HTTP %d, errors %+v; want 200 with an error", r.Status, r.Errors)
		}
		if got, _ := r.Errors[0].Extensions["status"].(float64); got != status || r.Errors[0].Code() != code {
			t.Fatalf("error %+v; want extensions.status %v, code %s", r.Errors[0], status, code)
		}
		if r.Header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
	}
	check(e.post(token, createLabelMutation, map[string]any{"data": map[string]any{"name": "new", "color": "#00ff00"}}), 507, "INSUFFICIENT_STORAGE")
	ls, err := library.Of(st).Labels(t.Context(), m.ID)
	if err != nil || len(ls) != 1 {
		t.Fatalf("labels after a refused mutation: %d, %v", len(ls), err)
	}

	st.Close()
	check(e.post(token, labelsQuery, nil), 503, "SERVICE_UNAVAILABLE")
}

// A newsletter posted to an inbound URL while the store refuses for now
// (closed by a reload: storage.ErrClosed) gets 503 and Retry-After, a
// status a mail provider retries on, never a 500.
func TestInboundOnRefusingStoreIs503WithRetryAfter(t *testing.T) {
	e := newEnv(t, options{})
	url := inboundURL(t, e)
	e.store.Close()
	resp, err := http.Post(url, "message/rfc822", strings.NewReader(newsletterMessage))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("inbound on a closed store: HTTP %d, want 503", resp.StatusCode)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}

// The mail webhook on a store that refuses for now (closed by a reload
// while the request ran) answers 503 with Retry-After, which providers
// retry, never a 500.
func TestMailWebhookOnClosedStoreIs503(t *testing.T) {
	e, rcpt := webhookEnv(t, nil)
	e.store.Close()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+inbound.MailWebhookPath, strings.NewReader(webhookPayloads(rcpt)["postmark"]))
	req.Header.Set("Content-Type", "application/json")
	withHeader(req)
	resp, b := send(t, req)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "SERVICE_UNAVAILABLE") {
		t.Fatalf("mail webhook on a closed store: HTTP %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}
