package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
)

// TestRegisterReturnsCredentialApplication: form and JSON registrations
// answer with Mastodon's CredentialApplication, every field present.
func TestRegisterReturnsCredentialApplication(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		send func() resp
	}{
		{"form", func() resp {
			return f.postForm(oauth.AppsPath, url.Values{
				"client_name":   {"Tooter"},
				"redirect_uris": {"https://app.example/cb\nurn:ietf:wg:oauth:2.0:oob"},
				"scopes":        {"read write:statuses"},
				"website":       {"https://app.example"},
			})
		}},
		{"json", func() resp {
			return f.postJSON(oauth.AppsPath, map[string]any{
				"client_name":   "Tooter",
				"redirect_uris": []string{"https://app.example/cb", "urn:ietf:wg:oauth:2.0:oob"},
				"scopes":        "read write:statuses",
				"website":       "https://app.example",
			})
		}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.send()
			wantStatus(t, r, http.StatusOK)
			if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store (the secret is in the body)", cc)
			}
			raw := r.json(t)
			for _, k := range []string{"id", "name", "website", "scopes", "redirect_uri", "redirect_uris", "client_id", "client_secret", "client_secret_expires_at"} {
				if _, ok := raw[k]; !ok {
					t.Errorf("field %s missing: %s", k, r.body)
				}
			}
			var app credentialApplication
			if err := json.Unmarshal([]byte(r.body), &app); err != nil {
				t.Fatal(err)
			}
			if app.ID == "" || app.ClientID == "" || app.ClientSecret == "" {
				t.Fatalf("id, client_id or client_secret empty: %s", r.body)
			}
			if app.Name != "Tooter" || app.Website == nil || *app.Website != "https://app.example" {
				t.Errorf("name/website: %s", r.body)
			}
			if !reflect.DeepEqual(app.Scopes, []string{"read", "write:statuses"}) {
				t.Errorf("scopes %v", app.Scopes)
			}
			wantURIs := []string{"https://app.example/cb", oauth.OOBRedirectURI}
			if !reflect.DeepEqual(app.RedirectURIs, wantURIs) || app.RedirectURI != strings.Join(wantURIs, "\n") {
				t.Errorf("redirect_uris %v, redirect_uri %q", app.RedirectURIs, app.RedirectURI)
			}
			if app.ClientSecretExpiresAt == nil || *app.ClientSecretExpiresAt != 0 {
				t.Errorf("client_secret_expires_at: %s", r.body)
			}
			if seen[app.ClientID] || seen[app.ClientSecret] || app.ClientID == app.ClientSecret {
				t.Errorf("client_id and client_secret are not fresh")
			}
			seen[app.ClientID], seen[app.ClientSecret] = true, true
		})
	}
}

// TestRegisterDefaultScopeIsRead: scopes left out means read (Mastodon),
// and the website may be left out (null).
func TestRegisterDefaultScopeIsRead(t *testing.T) {
	f := newFixture(t)
	for _, send := range []func() resp{
		func() resp {
			return f.postForm(oauth.AppsPath, url.Values{"client_name": {"A"}, "redirect_uris": {"https://a.example/cb"}})
		},
		func() resp {
			return f.postJSON(oauth.AppsPath, map[string]any{"client_name": "A", "redirect_uris": "https://a.example/cb", "scopes": "  "})
		},
	} {
		r := send()
		wantStatus(t, r, http.StatusOK)
		body := r.json(t)
		if !reflect.DeepEqual(body["scopes"], []any{"read"}) {
			t.Errorf("scopes %v, want [read]", body["scopes"])
		}
		if w, ok := body["website"]; !ok || w != nil {
			t.Errorf("website %v, want null", w)
		}
	}
}

// TestRegisterValidation: each broken registration is 422 with Mastodon's
// "Validation failed: ..." message; each allowed redirect URI kind is 200.
func TestRegisterValidation(t *testing.T) {
	f := newFixture(t)
	long := "https://app.example/" + strings.Repeat("a", 2000)
	cases := []struct {
		name         string
		clientName   string
		redirectURIs string
		scopes       string
		website      string
		want         string // "" means accepted
	}{
		{"https redirect", "App", "https://app.example/cb", "", "", ""},
		{"https with port and query", "App", "https://app.example:8443/cb?x=1", "", "", ""},
		{"oob", "App", "urn:ietf:wg:oauth:2.0:oob", "", "", ""},
		{"custom scheme", "App", "com.example.app:/oauth2redirect", "", "", ""},
		{"custom scheme with host", "App", "myapp://callback", "", "", ""},
		{"http localhost", "App", "http://localhost:8080/cb", "", "", ""},
		{"http 127.0.0.1", "App", "http://127.0.0.1/cb", "", "", ""},
		{"http ::1", "App", "http://[::1]:9000/cb", "", "", ""},
		{"several", "App", "https://a.example/cb\nmyapp://cb\nurn:ietf:wg:oauth:2.0:oob", "", "", ""},
		{"mastodon defaults", "App", "https://app.example/cb", "read write follow push", "", ""},
		{"fragment", "App", "https://app.example/cb#frag", "", "", "Redirect URI cannot contain a fragment."},
		{"empty fragment", "App", "https://app.example/cb#", "", "", "Redirect URI cannot contain a fragment."},
		{"relative", "App", "/cb", "", "", "Redirect URI must be an absolute URI."},
		{"scheme-relative", "App", "//app.example/cb", "", "", "Redirect URI must be an absolute URI."},
		{"no host", "App", "https:///cb", "", "", "Redirect URI must be an absolute URI."},
		{"javascript", "App", "javascript:alert(1)", "", "", "Redirect URI is forbidden by the server."},
		{"javascript upper case", "App", "JavaScript://app.example/%0aalert(1)", "", "", "Redirect URI is forbidden by the server."},
		{"data", "App", "data:text/html,<script>alert(1)</script>", "", "", "Redirect URI is forbidden by the server."},
		{"vbscript", "App", "vbscript:msgbox(1)", "", "", "Redirect URI is forbidden by the server."},
		{"plain http", "App", "http://app.example/cb", "", "", "Redirect URI must be an HTTPS/SSL URI."},
		{"plain http lookalike of localhost", "App", "http://localhost.app.example/cb", "", "", "Redirect URI must be an HTTPS/SSL URI."},
		{"spaces", "App", "https://app.example/c b", "", "", "Redirect URI must be a valid URI."},
		{"user info", "App", "https://user@app.example/cb", "", "", "Redirect URI must be a valid URI."},
		{"too long", "App", long, "", "", "Redirect URI is too long (maximum is 2000 characters)"},
		{"missing redirect", "App", "", "", "", "Redirect URI can't be blank"},
		{"unknown scope", "App", "https://app.example/cb", "read admin:read", "", "Scopes doesn't match configured on the server."},
		{"made-up scope", "App", "https://app.example/cb", "everything", "", "Scopes doesn't match configured on the server."},
		{"missing name", "", "https://app.example/cb", "", "", "Application name can't be blank"},
		{"blank name", "   ", "https://app.example/cb", "", "", "Application name can't be blank"},
		{"long name", strings.Repeat("n", 61), "https://app.example/cb", "", "", "Application name is too long (maximum is 60 characters)"},
		{"website not http", "App", "https://app.example/cb", "", "javascript:alert(1)", "Application website is invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, enc := range []string{"form", "json"} {
				var r resp
				if enc == "form" {
					r = f.postForm(oauth.AppsPath, url.Values{"client_name": {tc.clientName}, "redirect_uris": {tc.redirectURIs}, "scopes": {tc.scopes}, "website": {tc.website}})
				} else {
					r = f.postJSON(oauth.AppsPath, map[string]any{"client_name": tc.clientName, "redirect_uris": strings.Split(tc.redirectURIs, "\n"), "scopes": tc.scopes, "website": tc.website})
				}
				if tc.want == "" {
					wantStatus(t, r, http.StatusOK)
					continue
				}
				wantJSONError(t, r, http.StatusUnprocessableEntity, "Validation failed: "+tc.want)
			}
		})
	}
}

// TestRegisterAllowHTTPRedirects: the Caddyfile may allow plain http
// redirect URIs on any host.
func TestRegisterAllowHTTPRedirects(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.AllowHTTPRedirects = true })
	app := f.register("App", "http://app.example/cb", "")
	if app.RedirectURI != "http://app.example/cb" {
		t.Fatalf("redirect_uri %q", app.RedirectURI)
	}
	// The other rules still hold.
	r := f.postForm(oauth.AppsPath, url.Values{"client_name": {"App"}, "redirect_uris": {"javascript:alert(1)"}})
	wantJSONError(t, r, http.StatusUnprocessableEntity, "Validation failed: Redirect URI is forbidden by the server.")
}

// TestRegisterReportsEveryProblem: all problems of a registration are
// named in one message, as Rails does.
func TestRegisterReportsEveryProblem(t *testing.T) {
	f := newFixture(t)
	r := f.postForm(oauth.AppsPath, url.Values{"redirect_uris": {"https://a.example/#x"}, "scopes": {"root"}})
	wantJSONError(t, r, http.StatusUnprocessableEntity,
		"Validation failed: Application name can't be blank, Redirect URI cannot contain a fragment., Scopes doesn't match configured on the server.")
}

// TestRegisterBadBodies: bodies that can't be read are 400 or 413 in the
// API's error shape, never a 500.
func TestRegisterBadBodies(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.MaxBodyBytes = 1024 })
	cases := []struct {
		name, contentType, body string
		status                  int
	}{
		{"broken json", "application/json", `{"client_name":`, http.StatusBadRequest},
		{"json array", "application/json", `[1,2]`, http.StatusBadRequest},
		{"broken form", "application/x-www-form-urlencoded", "client_name=%zz", http.StatusBadRequest},
		{"broken multipart", "multipart/form-data; boundary=x", "--y\r\n", http.StatusBadRequest},
		{"too large", "application/json", `{"client_name":"` + strings.Repeat("a", 2000) + `"}`, http.StatusRequestEntityTooLarge},
		{"too large form", "application/x-www-form-urlencoded", "client_name=" + strings.Repeat("a", 2000), http.StatusRequestEntityTooLarge},
		{"json wrong types", "application/json", `{"client_name":1,"redirect_uris":{"a":1},"scopes":[1]}`, http.StatusUnprocessableEntity},
		{"no content type", "", "client_name=A", http.StatusUnprocessableEntity},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.request(http.MethodPost, oauth.AppsPath, tc.contentType, strings.NewReader(tc.body))
			wantStatus(t, r, tc.status)
			if e, _ := r.json(t)["error"].(string); e == "" {
				t.Fatalf("no error message: %s", r.body)
			}
		})
	}
}

// TestRegisterMultipart: multipart bodies (some clients upload this way)
// are read like forms, with repeated redirect_uris[] fields.
func TestRegisterMultipart(t *testing.T) {
	f := newFixture(t)
	body := "--b\r\nContent-Disposition: form-data; name=\"client_name\"\r\n\r\nMulti\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"redirect_uris[]\"\r\n\r\nhttps://a.example/cb\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"redirect_uris[]\"\r\n\r\nmyapp://cb\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"scopes\"\r\n\r\nread write\r\n--b--\r\n"
	r := f.request(http.MethodPost, oauth.AppsPath, "multipart/form-data; boundary=b", strings.NewReader(body))
	wantStatus(t, r, http.StatusOK)
	var app credentialApplication
	_ = json.Unmarshal([]byte(r.body), &app)
	if app.Name != "Multi" || !slices.Equal(app.RedirectURIs, []string{"https://a.example/cb", "myapp://cb"}) || !slices.Equal(app.Scopes, []string{"read", "write"}) {
		t.Fatalf("registered %+v", app)
	}
}

// TestRegisterOnlyPost: other methods are 405 with Allow.
func TestRegisterOnlyPost(t *testing.T) {
	f := newFixture(t)
	r := f.request(http.MethodGet, oauth.AppsPath, "", nil)
	wantStatus(t, r, http.StatusMethodNotAllowed)
	if r.Header.Get("Allow") != http.MethodPost {
		t.Fatalf("Allow %q", r.Header.Get("Allow"))
	}
}

// TestRegisterThrottledPerIP: by default 5 registrations per IP in 10
// minutes, as Mastodon; the sixth is 429 with Retry-After, other IPs go on.
func TestRegisterThrottledPerIP(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) {
		o.RegistrationLimit, o.RegistrationWindow = 0, 0 // the defaults
		o.ClientIP = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
	})
	form := url.Values{"client_name": {"App"}, "redirect_uris": {"https://a.example/cb"}}
	for range oauth.DefaultRegistrationLimit {
		wantStatus(t, f.postForm(oauth.AppsPath, form, "X-Test-Client", "192.0.2.1"), http.StatusOK)
	}
	// Invalid registrations count too, and are refused before validation.
	r := f.postForm(oauth.AppsPath, url.Values{}, "X-Test-Client", "192.0.2.1")
	wantJSONError(t, r, http.StatusTooManyRequests, "Too many requests")
	ra := r.Header.Get("Retry-After")
	if ra == "" || ra == "0" || strings.HasPrefix(ra, "-") {
		t.Fatalf("Retry-After %q", ra)
	}
	if oauth.DefaultRegistrationLimit != 5 || oauth.DefaultRegistrationWindow.Minutes() != 10 {
		t.Fatalf("defaults %d per %v, want 5 per 10 minutes", oauth.DefaultRegistrationLimit, oauth.DefaultRegistrationWindow)
	}
	wantStatus(t, f.postForm(oauth.AppsPath, form, "X-Test-Client", "192.0.2.2"), http.StatusOK)
}

// TestRegisterThrottleConfigurable: the limit comes from the options.
func TestRegisterThrottleConfigurable(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.RegistrationLimit = 2 })
	form := url.Values{"client_name": {"App"}, "redirect_uris": {"https://a.example/cb"}}
	wantStatus(t, f.postForm(oauth.AppsPath, form), http.StatusOK)
	wantStatus(t, f.postForm(oauth.AppsPath, form), http.StatusOK)
	wantStatus(t, f.postForm(oauth.AppsPath, form), http.StatusTooManyRequests)
}
