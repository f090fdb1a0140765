// Package metrics holds Hearth's Prometheus collectors, all named hearth_*.
// They count events of the services (tokens issued, sign-ins, requests
// refused by a rate limit, store syncs), not requests: Caddy's own metrics
// count those. The collectors are process-wide, as Caddy's are, so their
// counts carry over config reloads; caddymodule registers them in the
// metrics registry of each config, which Caddy serves at /metrics on its
// admin endpoint.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	appsRegistered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hearth_oauth_apps_registered_total",
		Help: "Applications registered at POST /api/v1/apps.",
	})
	tokensIssued = counterVec("hearth_oauth_tokens_issued_total",
		"Access tokens issued by POST /oauth/token, by grant type.", "grant")
	tokenErrors = counterVec("hearth_oauth_token_errors_total",
		"Refused requests to POST /oauth/token, by OAuth error code.", "error")
	signIns = counterVec("hearth_signins_total",
		"Sign-in attempts on the member pages, by result: success, failure (wrong username or password), suspended, rate_limited.", "result")
	rateLimited = counterVec("hearth_rate_limited_total",
		"Requests answered 429 by a Hearth rate limit, by limit.", "limit")
	storeSyncs = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hearth_store_sync_duration_seconds",
		Help:    "Flushes of the store's logs to disk (one serves every commit that waited for it), by result: ok, error.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	}, []string{"result"})
)

// counterVec is a counter of the events named, by one label.
func counterVec(name, help, label string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
}

// Limit names of RateLimited.
const (
	LimitOAuthRegistration = "oauth_registration"
	LimitOAuthToken        = "oauth_token"
	LimitOAuthFailedCode   = "oauth_failed_code"
	LimitOAuthAuthorize    = "oauth_authorize"
	LimitSignIn            = "signin"
	LimitSignUp            = "signup"
	LimitAccountChanges    = "account_changes"
	LimitGraphQL           = "graphql"
	LimitNewsletter        = "newsletter"
	LimitAgentRegistration = "agent_registration"
	LimitAgentEvents       = "agent_events"
)

// Sign-in results of SignIn.
const (
	SignInSuccess     = "success"
	SignInFailure     = "failure"
	SignInSuspended   = "suspended"
	SignInRateLimited = "rate_limited"
)

// AppRegistered counts an application registration.
func AppRegistered() { appsRegistered.Inc() }

// TokenIssued counts a token issued with grant.
func TokenIssued(grant string) { tokensIssued.WithLabelValues(grant).Inc() }

// TokenError counts a token request refused with an OAuth error code.
func TokenError(code string) { tokenErrors.WithLabelValues(code).Inc() }

// SignIn counts a sign-in attempt with one of the SignIn* results.
func SignIn(result string) { signIns.WithLabelValues(result).Inc() }

// RateLimited counts a request refused by the limit named (Limit*).
func RateLimited(limit string) { rateLimited.WithLabelValues(limit).Inc() }

// StoreSynced records a flush of the store's logs that took d.
func StoreSynced(d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	storeSyncs.WithLabelValues(result).Observe(d.Seconds())
}

// Register adds the collectors to reg, and extra with them (collectors of
// one config, such as the size of its store). Collectors reg already has
// are left as they are.
func Register(reg prometheus.Registerer, extra ...prometheus.Collector) error {
	all := append([]prometheus.Collector{appsRegistered, tokensIssued, tokenErrors, signIns, rateLimited, storeSyncs}, extra...)
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}
