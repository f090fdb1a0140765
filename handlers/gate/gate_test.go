package gate_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/gate"
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
