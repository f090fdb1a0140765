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
// RS256) against a Mastodon app's exchange, through the real token
// endpoint on a real store (bench/README.md):
//
//	go test -tags nobadger,nomysql,nopgx -run '^$' -bench 'CodeExchange' -benchtime 300x ./handlers/oauth/
func BenchmarkCodeExchangeMastodon(b *testing.B)    { benchmarkCodeExchange(b, false, "") }
func BenchmarkCodeExchangeOpenID(b *testing.B)      { benchmarkCodeExchange(b, true, "") }
func BenchmarkCodeExchangeOpenIDES256(b *testing.B) { benchmarkCodeExchange(b, true, "ES256") }

func benchmarkCodeExchange(b *testing.B, openid bool, alg string) {
	f := newFixture(b, func(o *oauth.Options) { o.TokenLimit = -1 })
	m := f.member("alice")
	ctx := context.Background()
	g := grants.Of(f.store)
	const cb = "https://rp.example/cb"
	var app *grants.App
	var secret string
	var err error
	if openid {
		app, secret, err = g.CreateClient(ctx, "bench", []string{cb}, []string{"openid", "profile"}, grants.ClientSettings{IDTokenAlg: alg})
	} else {
		app, secret, err = g.CreateApp(ctx, "bench", "", []string{cb}, []string{"profile"})
	}
	if err != nil {
		b.Fatal(err)
	}
	codes := make([]string, b.N)
	for i := range codes {
		if openid {
			codes[i], err = g.CreateCodeOIDC(ctx, app.ClientID, m, cb, []string{"openid", "profile"}, "",
				&grants.CodeOIDC{Nonce: "n", AuthTime: time.Now(), AMR: []string{"pwd"}, AccessTTL: time.Hour})
		} else {
			codes[i], err = g.CreateCode(ctx, app.ClientID, m, cb, []string{"profile"}, "")
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	// The first exchange creates the signing key: not what is measured.
	if openid {
		if _, err := g.SigningKeys(ctx, grants.KeyPolicy{Rotation: time.Hour, PublishAhead: time.Minute, Retain: time.Hour}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := f.token(url.Values{"grant_type": {"authorization_code"}, "client_id": {app.ClientID}, "client_secret": {secret},
			"redirect_uri": {cb}, "code": {codes[i]}})
		if r.StatusCode != http.StatusOK {
			b.Fatalf("HTTP %d: %s", r.StatusCode, r.body)
		}
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
