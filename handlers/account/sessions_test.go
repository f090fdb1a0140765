package account_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func TestDeviceSummary(t *testing.T) {
	for ua, want := range map[string]string{
		"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0":                                                                  "Firefox on Linux",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36":                   "Chrome on Android",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1": "Safari on iPhone",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0":           "Edge on Windows",
		"curl/8.5.0":                "curl",
		"":                          "Unknown device",
		"\x00\x01<script>":          "<script>",
		strings.Repeat("x", 100000): strings.Repeat("x", 40),
		"Go-http-client/1.1":        "Go-http-client",
	} {
		got := account.DeviceSummary(ua)
		if got != want {
			t.Errorf("DeviceSummary(%.60q) = %q, want %q", ua, got, want)
		}
		if len(got) > 64 {
			t.Errorf("DeviceSummary(%.60q) is %d bytes", ua, len(got))
		}
	}
}

// A sign-in records the browser's device and address; page views update
// last seen only once the last record is older than the touch interval.
func TestSessionRecordsDeviceAddressAndLastSeen(t *testing.T) {
	f := newFixture(t, account.Options{ClientIP: func(r *http.Request) string { return "198.51.100.23" }})
	m := f.member("alice")
	c := f.browser()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/auth/sign_in", strings.NewReader("username=alice&password="+strings.ReplaceAll(password, " ", "+")))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")
	wantStatus(t, do(t, c, req), http.StatusSeeOther)

	list, err := members.Of(f.store).Sessions(req.Context(), m.ID)
	if err != nil || len(list) != 1 {
		t.Fatalf("sessions: %v %v", list, err)
	}
	s := list[0]
	if s.Device != "Firefox on Linux" || s.Address != "198.51.100.23" {
		t.Fatalf("session metadata: %+v", s)
	}
	page := f.get(c, "/settings/account")
	wantBody(t, page, "Firefox on Linux <strong>(this device)</strong>")
	wantBody(t, page, `<td data-label="Address">198.51.100.23</td>`)
	first := s.LastSeen()
	time.Sleep(5 * time.Millisecond)
	for range 3 {
		wantStatus(t, f.get(c, "/settings"), http.StatusOK)
	}
	if list, _ := members.Of(f.store).Sessions(req.Context(), m.ID); !list[0].LastSeen().Equal(first) {
		t.Fatalf("page views within the interval wrote last seen: %v then %v", first, list[0].LastSeen())
	}
	// The same store served with an interval so short that every view is
	// past it (the browser's cookie is for the host, whatever the port).
	touching := newFixtureOn(t, f.store, account.Options{SessionTouchInterval: time.Nanosecond})
	wantStatus(t, touching.get(c, "/settings"), http.StatusOK)
	if list, _ := members.Of(f.store).Sessions(req.Context(), m.ID); !list[0].LastSeen().After(first) {
		t.Fatalf("a page view after the interval did not record last seen: %v", list[0].LastSeen())
	}
}
