package oauth

import (
	"strings"

	"github.com/hearthkit/caddy-hearth/storage/grants"
)

// maxScopeLen bounds a scope string; every known scope together is shorter.
const maxScopeLen = 1024

// parseScopes splits a space-separated scope string into its distinct
// scopes, in order. It reports false when a scope is not recognised.
// An empty string gives nil.
func parseScopes(s string) ([]string, bool) {
	if len(s) > maxScopeLen {
		return nil, false
	}
	var out []string
	for _, sc := range strings.Fields(s) {
		if !grants.IsScope(sc) {
			return nil, false
		}
		if !contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, true
}

// covered reports whether every requested scope is covered by registered.
func covered(requested, registered []string) bool {
	for _, sc := range requested {
		if !grants.ScopesCover(registered, sc) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scopeWords says in plain words what each scope lets an app do, for the
// consent and settings pages.
var scopeWords = map[string]string{
	"profile":             "See your profile: your username, display name and when you joined",
	"read":                "Read everything in your account",
	"read:accounts":       "See account information",
	"read:blocks":         "See whom you block",
	"read:bookmarks":      "See your bookmarks",
	"read:favourites":     "See your favourites",
	"read:filters":        "See your filters",
	"read:follows":        "See whom you follow",
	"read:lists":          "See your lists",
	"read:mutes":          "See whom you mute",
	"read:notifications":  "See your notifications",
	"read:search":         "Search on your behalf",
	"read:statuses":       "Read your timelines and posts",
	"write":               "Change everything in your account",
	"write:accounts":      "Change your profile",
	"write:blocks":        "Block and unblock accounts and domains",
	"write:bookmarks":     "Bookmark posts",
	"write:conversations": "Mute and delete conversations",
	"write:favourites":    "Favourite posts",
	"write:filters":       "Create and change filters",
	"write:follows":       "Follow and unfollow people",
	"write:lists":         "Create and change lists",
	"write:media":         "Upload files",
	"write:mutes":         "Mute people and conversations",
	"write:notifications": "Clear your notifications",
	"write:reports":       "Report other people",
	"write:statuses":      "Publish posts for you",
	"follow":              "Follow, unfollow, block and mute accounts",
	"push":                "Receive your push notifications",
	// The OpenID scopes of the clients the operator registers.
	"openid":         "Sign you in: learn an identifier of your account",
	"email":          "See your e-mail address",
	"groups":         "See the groups the site's operator put you in",
	"offline_access": "Stay signed in while you are away, until you revoke it",
}

// hereWords says what a scope gives an app on a Hearth site, whose
// routes check only these (each declares its scopes as an access.Route):
// verify_credentials (profile, read:accounts or read), /oauth/userinfo
// (profile), the GraphQL API (read for queries and for what a mutation's
// result shows beyond ids, write for mutations) and imports (write).
// Every other Mastodon scope names content Hearth does not hold.
func hereWords(scope string) string {
	switch scope {
	case "read":
		return "On this site: read your saved articles, newsletters, highlights and labels, and your profile."
	case "write":
		return "On this site: save, change and delete your saved articles, highlights and labels, and import files (seeing what it changed needs read too)."
	case "profile", "read:accounts":
		return "On this site: see your username, display name and when you joined."
	case "openid", "email", "groups", "offline_access":
		return "Given to an app the site's operator added."
	}
	return "On this site: nothing yet; this site has no such content."
}

// scopeItem is a scope with its plain-words meaning, as Mastodon words it
// and what it gives on this site.
type scopeItem struct{ Scope, Words, Here string }

func describeScopes(scopes []string) []scopeItem {
	out := make([]scopeItem, 0, len(scopes))
	for _, sc := range scopes {
		out = append(out, scopeItem{Scope: sc, Words: scopeWords[sc], Here: hereWords(sc)})
	}
	return out
}
