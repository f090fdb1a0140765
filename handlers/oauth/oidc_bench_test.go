package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/hearthkit/caddy-hearth/handlers/oauth"
	"github.com/hearthkit/caddy-hearth/storage/grants"
)

// The code exchange of an operator client with openid (an ID token signed
// RS256, or ES256 for a client registered so) against a Mastodon app's
// exchange, through the real token endpoint on a real store; the codes
// come from the real authorization endpoint, as a signed-in member's
// browser gets them (bench/README.md):
//
//	go test -tags nobadger,nomysql,nopgx -run '^$' -bench 'CodeExchange|IDTokenSignature|AuthorizeCode' -benchtime 1000x -count 5 ./handlers/oauth/
func BenchmarkCodeExchangeMastodon(b *testing.B)    { benchmarkCodeExchange(b, "") }
func BenchmarkCodeExchangeOpenID(b *testing.B)      { benchmarkCodeExchange(b, "RS256") }
func BenchmarkCodeExchangeOpenIDES256(b *testing.B) { benchmarkCodeExchange(b, "ES256") }

// The authorization step that issues those codes: a signed-in member
// whose grant already covers the request, so the answer is the redirect
// with the code at once (no consent page).
func BenchmarkAuthorizeCodeMastodon(b *testing.B)    { benchmarkAuthorizeCode(b, "") }
func BenchmarkAuthorizeCodeOpenID(b *testing.B)      { benchmarkAuthorizeCode(b, "RS256") }
func BenchmarkAuthorizeCodeOpenIDES256(b *testing.B) { benchmarkAuthorizeCode(b, "ES256") }

// codeBench is a client, alice signed in on a browser, and the client's
// authorization request, after one code went through (so the grant
// covers the request and the signing key exists).
type codeBench struct {
	f       *fixture
	browser *browser
	query   url.Values
	form    func(code string) url.Values
}

// newCodeBench sets up a Mastodon app (alg "") or an operator client with
// openid whose ID tokens are signed with alg.
func newCodeBench(b *testing.B, alg string) *codeBench {
	f := newFixture(b, func(o *oauth.Options) { o.TokenLimit, o.AuthorizeLimit = -1, -1 })
	f.member("alice")
	const cb = "https://rp.example/cb"
	var app credentialApplication
	scope := "profile"
	if alg == "" {
		app = f.register("bench", cb, scope)
	} else {
		scope = "openid profile"
		c, secret, err := oauth.RegisterClient(context.Background(), f.store, oauth.ClientSpec{Name: "bench", RedirectURIs: []string{cb},
			Scopes: []string{"openid", "profile"}, IDTokenSignedResponseAlg: alg})
		if err != nil {
			b.Fatal(err)
		}
		app = credentialApplication{ClientID: c.ClientID, ClientSecret: secret, RedirectURIs: []string{cb}}
	}
	q := authQuery(app, cb, scope, "st")
	if alg != "" {
		q.Set("nonce", "n-0S6_WzA2Mj")
	}
	cbench := &codeBench{f: f, browser: f.signedIn("alice"), query: q,
		form: func(code string) url.Values { return codeForm(app, code, cb, "") }}
	cbench.exchange(b, cbench.browser.approve(q))
	return cbench
}

func (c *codeBench) exchange(b *testing.B, code string) {
	r := c.f.token(c.form(code))
	if r.StatusCode != http.StatusOK {
		b.Fatalf("HTTP %d: %s", r.StatusCode, r.body)
	}
}

func benchmarkCodeExchange(b *testing.B, alg string) {
	c := newCodeBench(b, alg)
	codes := make([]string, b.N)
	for i := range codes {
		codes[i] = c.browser.approve(c.query)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.exchange(b, codes[i])
	}
}

func benchmarkAuthorizeCode(b *testing.B, alg string) {
	c := newCodeBench(b, alg)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.browser.approve(c.query)
	}
}

// The ID token's signature alone, with the keyring's keys as the token
// endpoint signs (go-jose, an ID token's size): the floor under the OpenID
// exchange's extra cost, measured in the same run as the exchanges.
func BenchmarkIDTokenSignatureRS256(b *testing.B) { benchmarkIDTokenSignature(b, jose.RS256) }
func BenchmarkIDTokenSignatureES256(b *testing.B) { benchmarkIDTokenSignature(b, jose.ES256) }

func benchmarkIDTokenSignature(b *testing.B, alg jose.SignatureAlgorithm) {
	f := newFixture(b)
	keys, err := grants.Of(f.store).SigningKeys(context.Background(), grants.KeyPolicy{Rotation: time.Hour, PublishAhead: time.Minute, Retain: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	key := jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: keys.Signer.Private(), KeyID: keys.Signer.ID}}
	if alg == jose.ES256 {
		key = jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: keys.Signer.ECPrivate(), KeyID: keys.Signer.ECKeyID()}}
	}
	payload := []byte(`{"iss":"https://example.org/","sub":"0123456789abcdef0123456789abcdef","aud":"0123456789abcdef","azp":"0123456789abcdef","iat":1795795825,"exp":1795799425,"auth_time":1795795825,"nonce":"n-0S6_WzA2Mj","amr":["pwd"],"at_hash":"77QmUPtjPfzWtF2AnpK9RQ","preferred_username":"alice","name":"Alice"}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		signer, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
		if err != nil {
			b.Fatal(err)
		}
		obj, err := signer.Sign(payload)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := obj.CompactSerialize(); err != nil {
			b.Fatal(err)
		}
	}
}
