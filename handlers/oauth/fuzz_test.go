package oauth_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
)

// serve runs one request through the server in-process (no network, so
// the fuzzer runs fast); a panic fails the fuzz target.
func (f *fixture) serve(method, path, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, req)
	return w
}

// FuzzRegister feeds arbitrary bodies to POST /api/v1/apps: never a panic
// or a 500; a registration or an error in the API's {"error": ...} shape.
func FuzzRegister(f *testing.F) {
	fx := newFixture(f, func(o *oauth.Options) { o.MaxBodyBytes = 8 << 10 })
	form, js, mp := "application/x-www-form-urlencoded", "application/json", "multipart/form-data; boundary=b"
	for _, seed := range []struct{ ct, body string }{
		{form, "client_name=App&redirect_uris=https%3A%2F%2Fapp.example%2Fcb&scopes=read+write+follow+push&website=https%3A%2F%2Fapp.example"},
		{form, "client_name=App&redirect_uris=urn%3Aietf%3Awg%3Aoauth%3A2.0%3Aoob"},
		{form, "client_name=App&redirect_uris=https%3A%2F%2Fa.example%2Fcb%0Amyapp%3A%2F%2Fcb&redirect_uris[]=http%3A%2F%2Flocalhost%2Fcb"},
		{form, "client_name=App&redirect_uris=javascript%3Aalert(1)&scopes=admin"},
		{form, "client_name=%ff%fe&redirect_uris=https%3A%2F%2Fa.example%2F%23x"},
		{form, "client_name=%zz"},
		{js, `{"client_name":"App","redirect_uris":["https://app.example/cb","com.example:/cb"],"scopes":"read write"}`},
		{js, `{"client_name":"App","redirect_uris":"https://app.example/cb\nurn:ietf:wg:oauth:2.0:oob","scopes":["read","push"]}`},
		{js, `{"client_name":1,"redirect_uris":{"x":[]},"scopes":null,"website":true}`},
		{js, `[]`},
		{js, `{"client_name":"\u0000","redirect_uris":["data:,x"]}`},
		{js, `{"client_name":`},
		{mp, "--b\r\nContent-Disposition: form-data; name=\"client_name\"\r\n\r\nApp\r\n--b\r\nContent-Disposition: form-data; name=\"redirect_uris\"\r\n\r\nhttps://a.example/cb\r\n--b--\r\n"},
		{mp, "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x\"\r\n\r\nxx\r\n--b--\r\n"},
		{"", "client_name=App"},
		{"text/plain; charset=\"", "x"},
	} {
		f.Add(seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		w := fx.serve(http.MethodPost, oauth.AppsPath, contentType, body)
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("HTTP %d, body not a JSON object: %q", w.Code, w.Body.String())
		}
		switch w.Code {
		case http.StatusOK:
			for _, k := range []string{"client_id", "client_secret", "redirect_uris", "scopes"} {
				if out[k] == nil {
					t.Fatalf("registration without %s: %s", k, w.Body.String())
				}
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
			e, _ := out["error"].(string)
			if e == "" || (w.Code == http.StatusUnprocessableEntity && !strings.HasPrefix(e, "Validation failed: ")) {
				t.Fatalf("HTTP %d with error %q", w.Code, out["error"])
			}
		default:
			t.Fatalf("HTTP %d: %s", w.Code, w.Body.String())
		}
	})
}

// FuzzToken feeds arbitrary bodies to POST /oauth/token. The placeholders
// {client_id}, {client_secret} and {code} are replaced by a real app's
// credentials and a live code, so the fuzzer reaches the grants. Never a
// panic or a 500; a token response or an RFC 6749 error.
func FuzzToken(f *testing.F) {
	fx := newFixture(f, func(o *oauth.Options) { o.TokenLimit = -1 })
	alice := fx.member("alice")
	app := fx.register("App", "https://app.example/cb\nurn:ietf:wg:oauth:2.0:oob", "read write follow push")
	form, js := "application/x-www-form-urlencoded", "application/json"
	for _, seed := range []struct{ ct, body string }{
		{form, "grant_type=client_credentials&client_id={client_id}&client_secret={client_secret}"},
		{form, "grant_type=client_credentials&client_id={client_id}&client_secret={client_secret}&scope=read+write%3Astatuses"},
		{form, "grant_type=client_credentials&client_id={client_id}&client_secret={client_secret}&scope=admin"},
		{form, "grant_type=authorization_code&client_id={client_id}&client_secret={client_secret}&code={code}&redirect_uri=https%3A%2F%2Fapp.example%2Fcb"},
		{form, "grant_type=authorization_code&client_id={client_id}&client_secret={client_secret}&code={code}&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&code_verifier=" + strings.Repeat("a", 43)},
		{form, "grant_type=authorization_code&client_id={client_id}&client_secret={client_secret}&code=hac_x"},
		{form, "grant_type=password&username=alice&password=x&client_id={client_id}&client_secret={client_secret}"},
		{form, "grant_type=refresh_token&refresh_token=x"},
		{form, "grant_type=client_credentials&grant_type=client_credentials"},
		{form, "grant_type=%zz"},
		{form, ""},
		{js, `{"grant_type":"client_credentials","client_id":"{client_id}","client_secret":"{client_secret}"}`},
		{js, `{"grant_type":"authorization_code","client_id":"{client_id}","client_secret":"{client_secret}","code":"{code}","redirect_uri":"urn:ietf:wg:oauth:2.0:oob"}`},
		{js, `{"grant_type":["client_credentials"]}`},
		{js, `null`},
		{js, `{"grant_type":`},
		{"multipart/form-data; boundary=b", "--b--\r\n"},
		{"", "grant_type=client_credentials"},
	} {
		f.Add(seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		if bytes.Contains(body, []byte("{code}")) {
			// A live code, as the consent page issues it (the browser flow
			// itself is tested elsewhere; here it would only slow the fuzzer).
			code, err := grants.Of(fx.store).CreateCode(t.Context(), app.ClientID, alice, "https://app.example/cb", []string{"read"}, "")
			if err != nil {
				t.Fatal(err)
			}
			body = bytes.ReplaceAll(body, []byte("{code}"), []byte(code))
		}
		body = bytes.ReplaceAll(body, []byte("{client_id}"), []byte(app.ClientID))
		body = bytes.ReplaceAll(body, []byte("{client_secret}"), []byte(app.ClientSecret))
		w := fx.serve(http.MethodPost, oauth.TokenPath, contentType, body)
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("HTTP %d, body not a JSON object: %q", w.Code, w.Body.String())
		}
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("HTTP %d without Cache-Control: no-store", w.Code)
		}
		switch w.Code {
		case http.StatusOK:
			if out["access_token"] == nil || out["token_type"] != "Bearer" || out["scope"] == nil || out["created_at"] == nil || len(out) != 4 {
				t.Fatalf("token response %s", w.Body.String())
			}
		case http.StatusBadRequest, http.StatusUnauthorized:
			e, _ := out["error"].(string)
			d, _ := out["error_description"].(string)
			if e == "" || d == "" || (w.Code == http.StatusUnauthorized) != (e == "invalid_client") {
				t.Fatalf("HTTP %d: %s", w.Code, w.Body.String())
			}
			if e == "invalid_client" && w.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("invalid_client without WWW-Authenticate")
			}
		default:
			t.Fatalf("HTTP %d: %s", w.Code, w.Body.String())
		}
	})
}
