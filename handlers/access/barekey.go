package access

import (
	"net/http"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage/apitokens"
)

// bareAPIKey reads Omnivore's form of the Authorization header, the API
// key alone without a scheme, as Omnivore's clients send it
// (@omnivore-app/api's src/client.ts @ ce99d23, and the Obsidian and Logseq
// plugins' POST /api/content), on the routes that declare BareAPIKey. Only
// a value shaped as an API token is taken; anything else keeps Bearer's
// error (err), so an OAuth token stays RFC 6750's.
func bareAPIKey(r *http.Request, err error) (string, error) {
	h := r.Header.Get("Authorization")
	if strings.ContainsAny(h, " \t") || !apitokens.LooksLike(h) {
		return "", err
	}
	return h, nil
}

// SentBareKey reports whether r's Authorization header is Omnivore's form
// (bareAPIKey), whether or not the key names anyone.
func SentBareKey(r *http.Request) bool {
	k, _ := bareAPIKey(r, nil)
	return k != ""
}
