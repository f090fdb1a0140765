package account_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/hearthkit/caddy-hearth/handlers/account"
)

// TestPerAddressLimitsCountAnIPv6Slash64: the sign-in failures per client
// address (which the two-factor code page and the password checks of the
// account page share) and the sign-ups per address count every address of
// one IPv6 /64 together, so rotating addresses within it does not escape
// them; another /64 has its own count.
func TestPerAddressLimitsCountAnIPv6Slash64(t *testing.T) {
	var addr atomic.Value
	clientIP := func(*http.Request) string { return addr.Load().(string) }
	t.Run("sign-in failures", func(t *testing.T) {
		f := newFixture(t, account.Options{FailuresPerIP: 3, ClientIP: clientIP})
		for i := range 3 {
			addr.Store(fmt.Sprintf("2001:db8:1:2::%x", i+1))
			// A different username each time: only the address limit applies.
			wantStatus(t, f.signIn(f.browser(), fmt.Sprintf("nobody%d", i), "wrong password", ""), http.StatusUnauthorized)
		}
		addr.Store("2001:db8:1:2:ffff:ffff:ffff:ffff")
		wantStatus(t, f.signIn(f.browser(), "nobody9", "wrong password", ""), http.StatusTooManyRequests)
		addr.Store("2001:db8:1:3::1")
		wantStatus(t, f.signIn(f.browser(), "nobody9", "wrong password", ""), http.StatusUnauthorized)
	})
	t.Run("sign-ups", func(t *testing.T) {
		f := newFixture(t, account.Options{OpenRegistration: true, SignUpsPerIP: 2, ClientIP: clientIP})
		signUp := func(username string) resp {
			return f.post(f.browser(), account.SignUpPath, url.Values{"username": {username},
				"password": {password}, "password_confirmation": {password}})
		}
		for i := range 2 {
			addr.Store(fmt.Sprintf("2001:db8:1:2::%x", i+1))
			wantStatus(t, signUp(fmt.Sprintf("member%d", i)), http.StatusSeeOther)
		}
		addr.Store("2001:db8:1:2::abcd")
		wantStatus(t, signUp("member9"), http.StatusTooManyRequests)
		addr.Store("2001:db8:1:3::1")
		wantStatus(t, signUp("member9"), http.StatusSeeOther)
	})
}

// TestTakenUsernamesCountAgainstSignUps: a sign-up refused because its
// username is taken has hashed its password by then (argon2id), so it
// counts against the sign-ups per address as one that made an account
// does; else one address could make the server hash without end by
// signing up again and again as an existing member. Bad input, refused
// before anything is hashed, does not count.
func TestTakenUsernamesCountAgainstSignUps(t *testing.T) {
	f := newFixture(t, account.Options{OpenRegistration: true, SignUpsPerIP: 2})
	f.member("alice")
	signUp := func(username, pw string) resp {
		return f.post(f.browser(), account.SignUpPath, url.Values{"username": {username},
			"password": {pw}, "password_confirmation": {pw}})
	}
	for range 3 {
		wantStatus(t, signUp("bob", "short"), http.StatusBadRequest)
	}
	for range 2 {
		wantStatus(t, signUp("alice", password), http.StatusConflict)
	}
	wantStatus(t, signUp("bob", password), http.StatusTooManyRequests)
}
