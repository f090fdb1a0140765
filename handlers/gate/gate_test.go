package gate_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/gate"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// TestPrepareStripsWhatClientsSend: whatever spelling a client uses for the
// identity headers (case, '_' for '-', which CGI and PHP read as the same
// variable), the app behind sees only the gate's; Hearth's session cookie
// goes, the app's own cookies stay.
func TestPrepareStripsWhatClientsSend(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, k := range []string{"Remote-User", "REMOTE-USER", "Remote_User", "remote_email", "Remote-Groups", "Remote_Name"} {
		r.Header[k] = []string{"mallory"}
	}
	r.Header.Set("Cookie", "theme=dark; hearth_session=hs_secret; lang=en")
	gate.Prepare(r, &members.Member{Username: "alice", DisplayName: "Alice\nInjected: x"})
	for k, v := range r.Header {
		for _, s := range v {
			if s == "mallory" {
				t.Errorf("the client's %s reached the app", k)
			}
		}
	}
	if r.Header.Get("Remote-User") != "alice" || r.Header.Get("Remote-Name") != "AliceInjected: x" {
		t.Errorf("identity %q %q", r.Header.Get("Remote-User"), r.Header.Get("Remote-Name"))
	}
	if r.Header.Get("Remote-Email") != "" || r.Header.Get("Remote-Groups") != "" {
		t.Errorf("headers for what the member lacks: %v", r.Header)
	}
	if got := r.Header.Get("Cookie"); got != "theme=dark; lang=en" {
		t.Errorf("Cookie upstream %q", got)
	}
}

// TestGateRulesReadHowTheSessionSignedIn: require_passkey lets through only
// a session that signed in with a passkey, require_two_factor one with two
// factors (a passkey alone counts); an ended session stops passing once
// the gate's last read of it is SessionCacheTTL old.
func TestGateRulesReadHowTheSessionSignedIn(t *testing.T) {
	st, err := storage.Open(t.TempDir(), storage.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	m, err := members.Of(st).CreateMember(ctx, "alice", "Alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	session := func(amr ...string) string {
		id, err := members.Of(st).CreateSessionWith(ctx, m, time.Hour, members.SessionInfo{AMR: amr})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	password, passkey, both := session("pwd"), session("hwk", "mfa"), session("pwd", "hwk", "mfa")
	check := func(g *gate.Gate, id string) gate.Verdict {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(&http.Cookie{Name: account.CookieName, Value: id})
		v, _, err := g.Check(r)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name string
		opts gate.Options
		want map[string]gate.Verdict
	}{
		{"require_passkey", gate.Options{RequirePasskey: true}, map[string]gate.Verdict{password: gate.Forbidden, passkey: gate.Pass, both: gate.Pass}},
		{"require_two_factor", gate.Options{RequireTwoFactor: true}, map[string]gate.Verdict{password: gate.Forbidden, passkey: gate.Pass, both: gate.Pass}},
		{"every member", gate.Options{}, map[string]gate.Verdict{password: gate.Pass, passkey: gate.Pass, both: gate.Pass}},
	} {
		g := gate.New(st, c.opts)
		for id, want := range c.want {
			if got := check(g, id); got != want {
				t.Errorf("%s: a session signed in with %v: verdict %d, want %d", c.name, map[string]string{password: "a password", passkey: "a passkey", both: "both"}[id], got, want)
			}
		}
	}

	g := gate.New(st, gate.Options{})
	if check(g, passkey) != gate.Pass {
		t.Fatal("the session does not pass")
	}
	if err := members.Of(st).DeleteSession(ctx, passkey); err != nil {
		t.Fatal(err)
	}
	time.Sleep(gate.SessionCacheTTL)
	if v := check(g, passkey); v != gate.SignIn {
		t.Fatalf("an ended session %s later: verdict %d, want SignIn", gate.SessionCacheTTL, v)
	}
}
