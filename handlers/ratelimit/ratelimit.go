// Package ratelimit is Hearth's one rate limiter for the services: a fixed
// number of events per key in a sliding window, kept in memory in a bounded
// structure (internal/ratelimit's Limiter) or, when several nodes share one
// store, in the store (Shared: the same arithmetic in one database round
// trip). Every service uses it for its own keys (client IP, username,
// token) and answers 429 with Retry-After in its own error format.
package ratelimit

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/internal/ratelimit"
)

// Result is the outcome of a Counter's Allow or Peek.
type Result = ratelimit.Result

// Counter is what a service needs from a limit: Registry.Counter gives one,
// counting in this process (*Limiter) or in the store shared by every node
// (Shared). ctx bounds the round trip to a shared store.
type Counter interface {
	// Allow records one event for key if it is within the limit. When
	// the count could not be made (the shared store did not answer),
	// Result.Err is set and Allowed is the limit's Policy: allowed for
	// FailOpen, refused for FailClosed (the service answers 503 then,
	// not 429).
	Allow(ctx context.Context, key string) Result
	// Peek is Allow without recording.
	Peek(ctx context.Context, key string) Result
	// Undo gives back one event Allow recorded (see Limiter.Undo).
	Undo(ctx context.Context, key string)
	// Reset forgets key.
	Reset(ctx context.Context, key string)
}

// AddressKey is the key under which every per-address limit counts a
// client (sign-in failures, sign-ups, token guesses, app registrations,
// GraphQL, newsletters, the directory): "ip:" and the address, an IPv6
// address (not an IPv4-mapped one) reduced to its /64, the smallest
// allocation one subscriber gets (RFC 6177), so that rotating addresses
// within it does not escape the limit. IPv4 (and IPv4-mapped) addresses
// count one by one; a value that is no address is kept as it is. Every
// limit keyed by a client address builds its key here, and nowhere else.
func AddressKey(addr string) string {
	a, err := netip.ParseAddr(strings.Trim(addr, "[]"))
	if err != nil {
		return "ip:" + addr
	}
	a = a.WithZone("").Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return "ip:" + p.String()
	}
	return "ip:" + a.String()
}

// RetryAfterSeconds is the Retry-After value for a wait: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(wait time.Duration) int {
	return max(1, int((wait+time.Second-1)/time.Second))
}
