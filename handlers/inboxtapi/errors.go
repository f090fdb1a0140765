// Package inboxtapi holds what the library's routes share of Inboxt's API
// (hearth_graphql's GraphQL endpoint, its REST routes and the newsletter
// routes): the error codes and their HTTP statuses, the two error shapes
// (GraphQL's errors array and the REST routes' exception filter), the
// store's refusals for now (503 or 507 with Retry-After), and the caller of
// a request: access.Authenticator's answer within the API's per-token and
// per-member rate limits (Gate), one for GraphQL and REST alike.
package inboxtapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
)

// Values of extensions.code. Inboxt's exception filter names an error by
// its HTTP status (HttpStatus[status]: UNAUTHORIZED, FORBIDDEN, NOT_FOUND,
// CONFLICT, BAD_REQUEST, TOO_MANY_REQUESTS) or uses Apollo's
// (BAD_USER_INPUT, INTERNAL_SERVER_ERROR, GRAPHQL_PARSE_FAILED,
// GRAPHQL_VALIDATION_FAILED); apps/api/src/common/exception-filters/
// global-exception.filter.ts @ 45f4314.
const (
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeTooManyRequests  = "TOO_MANY_REQUESTS"
	CodeParseFailed      = "GRAPHQL_PARSE_FAILED"
	CodeValidationFailed = "GRAPHQL_VALIDATION_FAILED"
	CodeForbidden        = "FORBIDDEN"
	CodeBadUserInput     = "BAD_USER_INPUT"
	CodeNotFound         = "NOT_FOUND"
	CodeConflict         = "CONFLICT"
	CodeBadRequest       = "BAD_REQUEST"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeRateLimited      = "RATE_LIMITED"
	CodeQueryTooDeep     = "QUERY_TOO_DEEP"
	CodeComplexityLimit  = "COMPLEXITY_LIMIT_EXCEEDED" // gqlgen's
	CodeFetchFailed      = "FETCH_FAILED"
	CodeInternal         = "INTERNAL_SERVER_ERROR"
	CodeUnavailable      = "SERVICE_UNAVAILABLE"  // 503: a restore, a reload
	CodeInsufficient     = "INSUFFICIENT_STORAGE" // 507: the disk is full
)

// StatusOf is extensions.status for an extensions.code: Inboxt puts the
// HTTP status of its exception on every error (global-exception.filter.ts
// @ 45f4314). Hearth's own codes get the status of their kind.
func StatusOf(code string) int {
	switch code {
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeTooManyRequests, CodeRateLimited:
		return http.StatusTooManyRequests
	case CodeFetchFailed:
		return http.StatusBadGateway
	case CodeInternal:
		return http.StatusInternalServerError
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeInsufficient:
		return http.StatusInsufficientStorage
	}
	// BAD_REQUEST, BAD_USER_INPUT, parse and validation failures, and the
	// limits on a query's depth, cost and content.
	return http.StatusBadRequest
}

// WriteError answers outside gqlgen (authentication, limits, bad bodies,
// the newsletter routes) in the GraphQL response format:
// {"errors":[{message, extensions:{code, status}}]}, with HTTP status
// httpStatus.
func WriteError(w http.ResponseWriter, httpStatus int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []any{map[string]any{"message": msg, "extensions": map[string]any{"code": code, "status": StatusOf(code)}}},
		"data":   nil,
	})
}

// WriteREST answers in Inboxt's error shape outside GraphQL (its
// GlobalExceptionFilter, common/exception-filters/global-exception.filter.ts
// at Inboxt/inboxt@45f4314: status, message, code, path). path is the
// request's path as the answer may show it (a route whose path holds a
// secret hides it).
func WriteREST(w http.ResponseWriter, status int, msg, path string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status": status, "message": msg, "code": strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_")), "path": path,
	})
}

// Refusal reports whether the store refused err for now
// (storage.Unavailable), with the HTTP status and error code to answer;
// when it did, it sets Retry-After on w.
func Refusal(w http.ResponseWriter, err error) (status int, code string, ok bool) {
	status, retry, ok := storage.Unavailable(err)
	if !ok {
		return 0, "", false
	}
	code = CodeUnavailable
	if status == http.StatusInsufficientStorage {
		code = CodeInsufficient
	}
	w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
	return status, code, true
}

// WriteUnavailable answers, outside gqlgen, a request the store refused
// for now (Refusal: a restore or reload, 503; a full disk, 507) as Inboxt
// answers such errors: HTTP 200, extensions.status, Retry-After. It
// returns false, writing nothing, for any other error.
func WriteUnavailable(w http.ResponseWriter, err error) bool {
	status, code, ok := Refusal(w, err)
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []any{map[string]any{"message": err.Error(), "extensions": map[string]any{"code": code, "status": status}}},
		"data":   nil,
	})
	return true
}

// SiteURL is the scheme and host the request came to: the site the API's
// answers name (Inboxt's appUrl, the URLs of feeds and inbound addresses).
func SiteURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
