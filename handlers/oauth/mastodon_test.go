package oauth_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

// These tests pin the behaviour real Mastodon clients depend on,
// in the request shapes those clients send. The clients themselves run
// against a Caddy built from the tree in interop/mastodon.

// TestTrailingSlashes: every endpoint answers the same with one trailing
// slash, as Rails routing does. toot 0.34 (toot/api.py
// get_browser_login_url) opens /oauth/authorize/?...; Mastodon.py 1.8
// (mastodon/instance.py __instance) reads /api/v1/instance/.
func TestTrailingSlashes(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	app := f.register("toot", oauth.OOBRedirectURI, "read write")
	for _, p := range []string{oauth.InstanceV1Path, oauth.InstanceV2Path, oauth.MetadataPath,
		oauth.NodeInfoWellKnownPath, oauth.NodeInfo20Path, oauth.NodeInfo21Path} {
		plain := f.request(http.MethodGet, p, "", nil)
		slash := f.request(http.MethodGet, p+"/", "", nil)
		wantStatus(t, plain, http.StatusOK)
		wantStatus(t, slash, http.StatusOK)
		if plain.body != slash.body {
			t.Errorf("%s/ answers differently:\n%s\n%s", p, plain.body, slash.body)
		}
	}
	// Registration, token, verify_credentials and revoke with slashes.
	r := f.postForm(oauth.AppsPath+"/", url.Values{"client_name": {"slash"}, "redirect_uris": {oauth.OOBRedirectURI}})
	wantStatus(t, r, http.StatusOK)
	tok := f.postForm(oauth.TokenPath+"/", url.Values{"grant_type": {"client_credentials"}, "client_id": {app.ClientID}, "client_secret": {app.ClientSecret}})
	wantStatus(t, tok, http.StatusOK)
	appTok := tok.json(t)["access_token"].(string)
	wantStatus(t, f.getWithToken(oauth.AppsVerifyPath+"/", appTok), http.StatusOK)

	// toot's out-of-band flow through /oauth/authorize/.
	b := f.signedIn("alice")
	q := url.Values{"response_type": {"code"}, "redirect_uri": {oauth.OOBRedirectURI}, "scope": {"read write"}, "client_id": {app.ClientID}}
	consent := b.get(oauth.AuthorizePath + "/?" + q.Encode())
	wantStatus(t, consent, http.StatusOK)
	wantBody(t, consent, "Authorize")
	shown := b.decide(consent, "approve")
	wantStatus(t, shown, http.StatusOK)
	code := secretPattern.FindString(shown.body)
	if !strings.HasPrefix(code, "hac_") {
		t.Fatalf("no code on the page:\n%s", shown.body)
	}
	member := f.exchange(app, code, oauth.OOBRedirectURI, "")
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath+"/", member), http.StatusOK)
	rv := f.postForm(oauth.RevokePath+"/", url.Values{"client_id": {app.ClientID}, "client_secret": {app.ClientSecret}, "token": {member}})
	wantStatus(t, rv, http.StatusOK)
	wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, member), http.StatusUnauthorized)

	// Two slashes are another path.
	if f.srv.Handles(&http.Request{URL: &url.URL{Path: oauth.InstanceV1Path + "//"}}) {
		t.Error("Handles a path with two trailing slashes")
	}
}

// TestUnservedAPIPathsAreJSON404: the paths a Caddy site hands on to later
// routes are told apart by oauth.IsAPIPath; NotFound is Mastodon's body.
func TestUnservedAPIPathsAreJSON404(t *testing.T) {
	for p, want := range map[string]bool{
		"/api/v1/timelines/home": true, "/api/v2/search": true, "/oauth/nothing": true, "/api/v1": true,
		"/oauth": true, "/api/v1x": false, "/oauthy": false, "/api/graphql": false, "/": false, "/api/v3/x": false,
	} {
		if got := oauth.IsAPIPath(p); got != want {
			t.Errorf("IsAPIPath(%q) = %v", p, got)
		}
	}
	f := newFixture(t)
	for _, p := range []string{"/api/v1/timelines/home", "/oauth/nothing/"} {
		if f.srv.Handles(&http.Request{URL: &url.URL{Path: p}}) {
			t.Errorf("Handles(%s)", p)
		}
	}
	rec := newRecorder()
	oauth.NotFound(rec)
	if rec.status != http.StatusNotFound || rec.body.String() != `{"error":"Record not found"}` || !strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") {
		t.Fatalf("NotFound wrote %d %q %v", rec.status, rec.body.String(), rec.header)
	}
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder                    { return &recorder{header: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(s int)           { r.status = s }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

// TestBearerHeaderIsNotClientAuthentication: Mastodon.py 1.8
// (mastodon/authentication.py revoke_access_token) and megalodon 10.3
// (src/mastodon.ts revokeToken) post client_id, client_secret and token in
// the body with the app's own token as "Authorization: Bearer". Doorkeeper
// 5.8 reads only Basic credentials from the header, so the revocation
// succeeds and the token is revoked; Basic stays refused (spec).
func TestBearerHeaderIsNotClientAuthentication(t *testing.T) {
	c := newCodeFixture(t, "read")
	tok := c.exchange(c.app, c.code("read", ""), c.cb, "")
	form := url.Values{"client_id": {c.app.ClientID}, "client_secret": {c.app.ClientSecret}, "token": {tok}}
	r := c.postForm(oauth.RevokePath, form, "Authorization", "Bearer "+tok)
	wantStatus(t, r, http.StatusOK)
	if strings.TrimSpace(r.body) != "{}" {
		t.Fatalf("revoke answered %q", r.body)
	}
	wantJSONError(t, c.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnauthorized, "The access token is invalid")

	// The token endpoint too.
	cc := url.Values{"grant_type": {"client_credentials"}, "client_id": {c.app.ClientID}, "client_secret": {c.app.ClientSecret}}
	wantStatus(t, c.token(cc, "Authorization", "Bearer whatever"), http.StatusOK)
	// A Bearer header does not stand in for the body's credentials.
	wantOAuthError(t, c.token(url.Values{"grant_type": {"client_credentials"}}, "Authorization", "Bearer "+tok), "invalid_client")
	wantOAuthError(t, c.token(cc, "Authorization", "basic eDp5"), "invalid_client")
}

// multipartBody encodes fields as multipart/form-data.
func multipartBody(t *testing.T, fields url.Values) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, vs := range fields {
		for _, v := range vs {
			if err := mw.WriteField(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), &buf
}

// TestMultipartBodies: token, revoke and registration accept
// multipart/form-data, as Rails parses it; a file part is refused.
func TestMultipartBodies(t *testing.T) {
	c := newCodeFixture(t, "read")
	code := c.code("read", "")
	ct, body := multipartBody(t, codeForm(c.app, code, c.cb, ""))
	r := c.request(http.MethodPost, oauth.TokenPath, ct, body)
	wantStatus(t, r, http.StatusOK)
	tok := r.json(t)["access_token"].(string)
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)

	ct, body = multipartBody(t, url.Values{"client_id": {c.app.ClientID}, "client_secret": {c.app.ClientSecret}, "token": {tok}})
	wantStatus(t, c.request(http.MethodPost, oauth.RevokePath, ct, body), http.StatusOK)
	wantStatus(t, c.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusUnauthorized)

	ct, body = multipartBody(t, url.Values{"client_name": {"multi"}, "redirect_uris": {"https://m.example/cb"}, "scopes": {"read"}})
	reg := c.request(http.MethodPost, oauth.AppsPath, ct, body)
	wantStatus(t, reg, http.StatusOK)
	if reg.json(t)["name"] != "multi" {
		t.Fatalf("registration %s", reg.body)
	}

	// A parameter twice and a file are invalid_request, and issue nothing.
	ct, body = multipartBody(t, url.Values{"grant_type": {"client_credentials", "client_credentials"}, "client_id": {c.app.ClientID}, "client_secret": {c.app.ClientSecret}})
	wantOAuthError(t, c.request(http.MethodPost, oauth.TokenPath, ct, body), "invalid_request")
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range map[string]string{"grant_type": "client_credentials", "client_id": c.app.ClientID, "client_secret": c.app.ClientSecret} {
		_ = mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("upload", "a.txt")
	_, _ = fw.Write([]byte("data"))
	_ = mw.Close()
	wantOAuthError(t, c.request(http.MethodPost, oauth.TokenPath, mw.FormDataContentType(), &buf), "invalid_request")
	// A broken multipart body.
	wantOAuthError(t, c.request(http.MethodPost, oauth.TokenPath, "multipart/form-data; boundary=x", strings.NewReader("--x\r\nnonsense")), "invalid_request")
}

// wantChallenge checks a protected resource's 401/403 carries an RFC 6750
// challenge with error=code.
func wantChallenge(t *testing.T, r resp, status int, code string) {
	t.Helper()
	wantStatus(t, r, status)
	h := r.Header.Get("WWW-Authenticate")
	if !strings.HasPrefix(h, "Bearer ") || !strings.Contains(h, `error="`+code+`"`) {
		t.Fatalf("%s: WWW-Authenticate %q, want Bearer with error=%q", r.Request.URL.Path, h, code)
	}
	if r.json(t)["error"] == "" {
		t.Fatalf("no JSON error: %s", r.body)
	}
}

// TestProtectedResourceChallenges: every 401 and 403 of a protected
// resource says why in WWW-Authenticate (RFC 6750 section 3), as
// Doorkeeper's ErrorResponse does.
func TestProtectedResourceChallenges(t *testing.T) {
	f := newFixture(t)
	app := f.register("Tooter", "https://app.example/cb", "read write profile")
	writeOnly := f.memberToken(app, "alice", "write")
	readTok := f.memberToken(app, "bob", "read")
	for _, p := range []string{oauth.VerifyCredentialsPath, oauth.AppsVerifyPath, oauth.UserinfoPath} {
		wantChallenge(t, f.request(http.MethodGet, p, "", nil), http.StatusUnauthorized, "invalid_token")
		wantChallenge(t, f.getWithToken(p, "hat_nope"), http.StatusUnauthorized, "invalid_token")
	}
	wantChallenge(t, f.getWithToken(oauth.VerifyCredentialsPath, writeOnly), http.StatusForbidden, "insufficient_scope")
	// userinfo needs profile; read does not cover it (Mastodon 4.4).
	wantChallenge(t, f.getWithToken(oauth.UserinfoPath, readTok), http.StatusForbidden, "insufficient_scope")
	if _, err := members.Of(f.store).SetSuspended(t.Context(), "alice", true); err != nil {
		t.Fatal(err)
	}
	wantChallenge(t, f.getWithToken(oauth.VerifyCredentialsPath, writeOnly), http.StatusForbidden, "invalid_token")
}

// TestNodeInfo: the discovery document links 2.0 and 2.1; both name Hearth
// honestly and carry metadata.upstream so megalodon 10.3's detector
// (src/detector.ts) takes the server for a Mastodon-compatible one.
func TestNodeInfo(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) {
		o.BaseURL, o.OpenRegistration, o.InstanceTitle = "https://social.example", true, "My Hearth"
	})
	f.member("alice")
	f.member("bob")
	wk := f.request(http.MethodGet, oauth.NodeInfoWellKnownPath, "", nil, "Origin", "https://web.example")
	wantStatus(t, wk, http.StatusOK)
	if wk.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("no CORS on %s", oauth.NodeInfoWellKnownPath)
	}
	links, _ := wk.json(t)["links"].([]any)
	hrefs := map[string]string{}
	for _, l := range links {
		m := l.(map[string]any)
		hrefs[m["rel"].(string)] = m["href"].(string)
	}
	for _, v := range []string{"2.0", "2.1"} {
		rel := "http://nodeinfo.diaspora.software/ns/schema/" + v
		if hrefs[rel] != "https://social.example/nodeinfo/"+v {
			t.Fatalf("link for %s: %v", v, hrefs)
		}
		r := f.request(http.MethodGet, "/nodeinfo/"+v, "", nil)
		wantStatus(t, r, http.StatusOK)
		doc := r.json(t)
		sw := doc["software"].(map[string]any)
		usage := doc["usage"].(map[string]any)
		users := usage["users"].(map[string]any)
		meta := doc["metadata"].(map[string]any)
		up, _ := meta["upstream"].(map[string]any)
		if doc["version"] != v || sw["name"] != "hearth" || sw["version"] == "" || doc["openRegistrations"] != true ||
			users["total"] != 2.0 || usage["localPosts"] != 0.0 || up["name"] != "mastodon" || up["version"] != "4.4.0" {
			t.Fatalf("nodeinfo %s: %s", v, r.body)
		}
		if _, ok := doc["protocols"].([]any); !ok {
			t.Fatalf("protocols is not a list: %s", r.body)
		}
		if _, ok := sw["repository"]; ok != (v == "2.1") {
			t.Errorf("software.repository present=%v in %s", ok, v)
		}
	}
	wantStatus(t, f.request(http.MethodPost, oauth.NodeInfo20Path, "", nil), http.StatusMethodNotAllowed)
}

// TestUserinfo: GET and POST /oauth/userinfo for a user token with profile
// (Mastodon 4.4 OAuth::UserinfoController, OAuthUserinfoSerializer);
// advertised as userinfo_endpoint.
func TestUserinfo(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.BaseURL = "https://social.example" })
	app := f.register("Tooter", "https://app.example/cb", "profile read")
	tok := f.memberToken(app, "alice", "profile")
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		r := f.request(method, oauth.UserinfoPath, "", nil, "Authorization", "Bearer "+tok)
		wantStatus(t, r, http.StatusOK)
		u := r.json(t)
		if u["iss"] != "https://social.example/" || u["sub"] != "https://social.example/users/alice" || u["preferred_username"] != "alice" ||
			u["name"] != "Display alice" || u["profile"] != "https://social.example/@alice" || !strings.HasSuffix(u["picture"].(string), oauth.MissingAvatarPath) {
			t.Fatalf("%s userinfo: %s", method, r.body)
		}
	}
	appTok := f.appToken(app, "profile")
	wantJSONError(t, f.getWithToken(oauth.UserinfoPath, appTok), http.StatusUnprocessableEntity, "This method requires an authenticated user")
	del := f.request(http.MethodDelete, oauth.UserinfoPath, "", nil)
	wantStatus(t, del, http.StatusMethodNotAllowed)
	if del.Header.Get("Allow") != "GET, POST" {
		t.Errorf("Allow %q", del.Header.Get("Allow"))
	}
	if got := f.request(http.MethodGet, oauth.MetadataPath, "", nil).json(t)["userinfo_endpoint"]; got != "https://social.example/oauth/userinfo" {
		t.Fatalf("userinfo_endpoint %v", got)
	}
}

// TestLoopbackRedirectAnyPort: an app registered with
// http://127.0.0.1/cb or http://[::1]/cb may be sent back to any port of
// the same URI, at authorization and token time (RFC 8252 section 7.3;
// Doorkeeper 5.8 lib/doorkeeper/oauth/helpers/uri_checker.rb). localhost
// and other hosts stay exact.
func TestLoopbackRedirectAnyPort(t *testing.T) {
	f := newFixture(t)
	f.member("alice")
	b := f.signedIn("alice")
	for _, tc := range []struct{ registered, used string }{
		{"http://127.0.0.1/cb", "http://127.0.0.1:53121/cb"},
		{"http://127.0.0.1:8000/cb", "http://127.0.0.1:9000/cb"},
		{"http://[::1]/cb?x=1", "http://[::1]:4000/cb?x=1"},
	} {
		app := f.register("native", tc.registered, "read")
		code := b.approve(authQuery(app, tc.used, "read", "st"))
		// Token time: the port may differ again, the rest may not.
		wantOAuthError(t, f.token(codeForm(app, code, strings.Replace(tc.used, "/cb", "/other", 1), "")), "invalid_grant")
		code = b.approve(authQuery(app, tc.used, "read", "st"))
		tok := f.exchange(app, code, tc.used, "")
		wantStatus(t, f.getWithToken(oauth.VerifyCredentialsPath, tok), http.StatusOK)
	}
	for _, tc := range []struct{ registered, used string }{
		{"http://localhost/cb", "http://localhost:8080/cb"},
		{"http://127.0.0.1/cb", "http://127.0.0.2:8080/cb"},
		{"http://127.0.0.1/cb", "http://127.0.0.1:8080/cb/"},
		{"http://127.0.0.1/cb", "http://127.0.0.1:8080/cb?x=1"},
		{"http://127.0.0.1/cb", "https://127.0.0.1:8080/cb"},
		{"http://127.0.0.1/cb", "http://127.0.0.1:/cb"},
		{"http://127.0.0.1/cb", "http://127.0.0.1:x/cb"},
		{"http://127.0.0.1/cb", "http://user@127.0.0.1:80/cb"},
		{"https://app.example/cb", "https://app.example:444/cb"},
	} {
		app := f.register("native", tc.registered, "read")
		r := b.get(oauth.AuthorizePath + "?" + authQuery(app, tc.used, "read", "st").Encode())
		wantStatus(t, r, http.StatusBadRequest)
		wantBody(t, r, "not registered")
	}
}

// TestInstanceEntitiesComplete: every key of Mastodon 4.4's Instance and
// V1_Instance entities is present (app/serializers/rest/instance_serializer.rb,
// rest/v1/instance_serializer.rb), and the version parses as Mastodon.py
// 1.8 (internals.py __normalize_version_string, utility.py
// parse_version_string) and megalodon read it.
func TestInstanceEntitiesComplete(t *testing.T) {
	f := newFixture(t)
	v2 := f.request(http.MethodGet, oauth.InstanceV2Path, "", nil).json(t)
	has := func(doc map[string]any, path string) any {
		var cur any = doc
		for _, k := range strings.Split(path, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%s: %v is not an object", path, cur)
			}
			if cur, ok = m[k]; !ok {
				t.Fatalf("missing %s", path)
			}
		}
		return cur
	}
	for _, k := range []string{"domain", "title", "version", "source_url", "description", "usage.users.active_month",
		"thumbnail.url", "icon", "languages", "configuration.urls.streaming", "configuration.urls.status",
		"configuration.urls.about", "configuration.urls.privacy_policy", "configuration.urls.terms_of_service",
		"configuration.vapid.public_key", "configuration.accounts.max_featured_tags", "configuration.accounts.max_pinned_statuses",
		"configuration.accounts.max_note_length", "configuration.accounts.max_profile_fields",
		"configuration.statuses.max_characters", "configuration.statuses.max_media_attachments",
		"configuration.statuses.characters_reserved_per_url", "configuration.media_attachments.supported_mime_types",
		"configuration.media_attachments.description_limit", "configuration.media_attachments.image_size_limit",
		"configuration.polls.max_options", "configuration.polls.max_expiration", "configuration.translation.enabled",
		"configuration.timelines_access.live_feeds.local", "configuration.limited_federation",
		"registrations.enabled", "registrations.approval_required", "registrations.reason_required",
		"registrations.message", "registrations.min_age", "registrations.url", "api_versions.mastodon",
		"contact.email", "contact.account", "rules"} {
		has(v2, k)
	}
	if has(v2, "configuration.vapid.public_key") != nil {
		t.Errorf("a VAPID key without push")
	}
	v1 := f.request(http.MethodGet, oauth.InstanceV1Path+"/", "", nil).json(t)
	for _, k := range []string{"uri", "title", "short_description", "description", "email", "version", "urls.streaming_api",
		"stats.user_count", "stats.status_count", "stats.domain_count", "thumbnail", "languages", "registrations",
		"approval_required", "invites_enabled", "configuration.accounts.max_featured_tags",
		"configuration.statuses.max_characters", "configuration.media_attachments.supported_mime_types",
		"configuration.polls.max_options", "contact_account", "rules"} {
		has(v1, k)
	}
	for _, doc := range []map[string]any{v1, v2} {
		// Mastodon.py: the part before the first space, split on ".", each
		// part's leading digits.
		parts := strings.Split(strings.Split(doc["version"].(string), " ")[0], ".")
		if len(parts) != 3 {
			t.Fatalf("version %q", doc["version"])
		}
		for _, p := range parts {
			if _, err := strconv.Atoi(p); err != nil {
				t.Fatalf("version %q", doc["version"])
			}
		}
	}
}

// TestRateLimitHeadersAgree: a 429's X-RateLimit-Reset is not before the
// moment Retry-After names (Mastodon.py 1.8 sleeps until Reset, then
// retries once), and Limit/Remaining are sent as Mastodon sends them.
func TestRateLimitHeadersAgree(t *testing.T) {
	f := newFixture(t, func(o *oauth.Options) { o.TokenLimit, o.TokenWindow = 2, time.Hour })
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"x"}, "client_secret": {"y"}}
	f.token(form)
	f.token(form)
	before := time.Now()
	r := f.token(form)
	wantStatus(t, r, http.StatusTooManyRequests)
	secs := wantRetryAfter(t, r)
	reset, err := time.Parse(time.RFC3339Nano, r.Header.Get("X-RateLimit-Reset"))
	if err != nil {
		t.Fatalf("X-RateLimit-Reset %q: %v", r.Header.Get("X-RateLimit-Reset"), err)
	}
	if reset.Before(before.Add(time.Duration(secs) * time.Second)) {
		t.Fatalf("X-RateLimit-Reset %s is before Retry-After (%d s from %s)", reset, secs, before)
	}
	if reset.After(time.Now().Add(time.Duration(secs+2) * time.Second)) {
		t.Fatalf("X-RateLimit-Reset %s is well after Retry-After (%d s)", reset, secs)
	}
	if r.Header.Get("X-RateLimit-Limit") != "2" || r.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("X-RateLimit-Limit %q Remaining %q", r.Header.Get("X-RateLimit-Limit"), r.Header.Get("X-RateLimit-Remaining"))
	}
}

// TestRoutesAnswerOtherMethodsAsMastodon: every endpoint declared with its
// methods answers another method with Mastodon's 405 (the methods in Allow,
// a JSON error), with or without a trailing slash; a path of ours with
// another segment after it, or not clean, is no route (Mastodon's JSON 404
// under /api and /oauth, not served otherwise), never a redirect.
func TestRoutesAnswerOtherMethodsAsMastodon(t *testing.T) {
	f := newFixture(t)
	for path, allowed := range map[string]string{
		oauth.AppsPath: "POST", oauth.AppsVerifyPath: "GET", oauth.TokenPath: "POST", oauth.RevokePath: "POST",
		oauth.VerifyCredentialsPath: "GET", oauth.MetadataPath: "GET", oauth.InstanceV1Path: "GET",
		oauth.InstanceV2Path: "GET", oauth.MissingAvatarPath: "GET", oauth.MissingHeaderPath: "GET",
		oauth.UserinfoPath: "GET, POST", oauth.NodeInfoWellKnownPath: "GET", oauth.NodeInfo20Path: "GET",
		oauth.NodeInfo21Path: "GET", oauth.DiscoveryPath: "GET", oauth.JWKSPath: "GET", oauth.IntrospectPath: "POST",
	} {
		for _, p := range []string{path, path + "/"} {
			r := f.request(http.MethodDelete, p, "", nil)
			if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != allowed ||
				r.body != `{"error":"This method is not allowed here"}` || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("DELETE %s: %d, Allow %q, %s %q", p, r.StatusCode, r.Header.Get("Allow"), r.Header.Get("Content-Type"), r.body)
			}
			if !f.srv.Handles(&http.Request{Method: http.MethodDelete, URL: &url.URL{Path: p}}) {
				t.Errorf("Handles(DELETE %s) = false", p)
			}
		}
	}
	for _, p := range []string{oauth.AppsPath + "/x", "/api/v1/./apps", "/api/v1//apps", oauth.InstanceV1Path + "//"} {
		// Caddy hands an unserved API path to ServeHTTP for the 404.
		rec := httptest.NewRecorder()
		f.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusNotFound || rec.Body.String() != `{"error":"Record not found"}` {
			t.Errorf("GET %s: %d %q, want Mastodon's 404", p, rec.Code, rec.Body.String())
		}
		if f.srv.Handles(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: p}}) {
			t.Errorf("Handles(GET %s) = true", p)
		}
	}
}
