package caddymodule

import (
	"bufio"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// scrapeHearth reads the hearth_* samples from Caddy's /metrics on the
// admin endpoint, keyed by name and labels as exposed.
func scrapeHearth(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + testAdmin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "hearth_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// Hearth's counters move with what clients do, and the store's gauges and
// sync histogram are exposed, in Caddy's registry at /metrics.
func TestMetricsThroughCaddy(t *testing.T) {
	startHearth(t, hearthCaddyfile(t.TempDir(), testSite+` {
	hearth_oauth {
		token_limit 4 1h
	}
}
`))
	adminJSONOK(t, http.MethodPost, "/hearth/members", `{"username":"mia","password":"mia's password"}`, http.StatusCreated, nil)
	before := scrapeHearth(t)

	clientID, clientSecret := registerApp(t, url.Values{"client_name": {"Tooter"}, "redirect_uris": {"urn:ietf:wg:oauth:2.0:oob"}})
	grant := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {clientSecret}}
	wrong := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {"nope"}}
	for i, form := range []url.Values{grant, grant, wrong, grant, grant} { // the fifth is over the limit
		resp, err := http.PostForm(testSite+"/oauth/token", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := []int{200, 200, 401, 200, 429}[i]
		if resp.StatusCode != want {
			t.Fatalf("token request %d: HTTP %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if p := newBrowser(t, testSite).signIn("mia", "wrong password"); p.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password: HTTP %d", p.StatusCode)
	}
	if p := newBrowser(t, testSite).signIn("mia", "mia's password"); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: HTTP %d", p.StatusCode)
	}

	after := scrapeHearth(t)
	for name, want := range map[string]float64{
		`hearth_oauth_apps_registered_total`:                              1,
		`hearth_oauth_tokens_issued_total{grant="client_credentials"}`:    3,
		`hearth_oauth_token_errors_total{error="invalid_client"}`:         1,
		`hearth_rate_limited_total{limit="oauth_token"}`:                  1,
		`hearth_signins_total{result="failure"}`:                          1,
		`hearth_signins_total{result="success"}`:                          1,
		`hearth_store_sync_duration_seconds_count{result="ok"}`:           -1, // at least one more
		`hearth_store_size_bytes{part="tables"}`:                          -2, // present
		`hearth_store_size_bytes{part="value_logs"}`:                      -2,
		`hearth_oauth_tokens_issued_total{grant="authorization_code"}`:    0,
		`hearth_signins_total{result="rate_limited"}`:                     0,
		`hearth_rate_limited_total{limit="oauth_registration"}`:           0,
		`hearth_oauth_token_errors_total{error="unsupported_grant_type"}`: 0,
	} {
		got, ok := after[name]
		delta := got - before[name]
		switch {
		case want == -2 && !ok:
			t.Errorf("%s not exposed", name)
		case want == -1 && delta < 1:
			t.Errorf("%s moved by %v, want at least 1", name, delta)
		case want >= 0 && delta != want:
			t.Errorf("%s moved by %v, want %v", name, delta, want)
		}
	}
}
