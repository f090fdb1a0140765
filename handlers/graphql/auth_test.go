package graphql_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/account"
	"github.com/hearthkit/caddy-hearth/handlers/inbound"
	"github.com/hearthkit/caddy-hearth/storage/apitokens"
	"github.com/hearthkit/caddy-hearth/storage/grants"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

const labelsQuery = `query Labels { labels { id createdAt name color order } }`

const createLabelMutation = `mutation CreateLabel($data: CreateLabelInput!) {
  createLabel(data: $data) { createdAt id name color order }
}`

func TestRequestsWithoutAValidTokenAreUnauthorized(t *testing.T) {
	e := newEnv(t, options{})
	expiring, expiringTok, err := apitokens.Of(e.store).Create(t.Context(), e.member.ID, "short", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	_ = expiring
	deleted, deletedTok, err := apitokens.Of(e.store).Create(t.Context(), e.member.ID, "gone", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := apitokens.Of(e.store).Delete(t.Context(), e.member.ID, deleted.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // let the short token expire
	suspended, suspendedTok := e.newMember("mallory")
	if _, err := members.Of(e.store).SetSuspended(t.Context(), suspended.Username, true); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"no header":         "",
		"unknown token":     "app_" + strings.Repeat("A", 70),
		"malformed token":   "hello",
		"expired token":     expiringTok,
		"deleted token":     deletedTok,
		"suspended member":  suspendedTok,
		"wrong-case prefix": "APP_" + e.token[4:],
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			r := e.wantError(tok, labelsQuery, nil, http.StatusOK, "UNAUTHORIZED")
			if strings.Contains(r.Errors[0].Message, tok) && tok != "" {
				t.Fatal("the error message repeats the token")
			}
		})
	}
	t.Run("not a bearer scheme", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/graphql", strings.NewReader(`{"query":"{labels{id}}"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Basic "+e.token)
		resp, _ := send(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status = %d", resp.StatusCode)
		}
	})
}

func TestAPITokenWorksAndRecordsLastUse(t *testing.T) {
	e := newEnv(t, options{})
	var out struct {
		Me struct {
			ID, Username string
		}
		APITokens []struct {
			Name       string
			LastUsedAt *string
		} `json:"apiTokens"`
	}
	e.do(`query { me { id username } apiTokens { id createdAt lastUsedAt name expiresAt } }`, nil, &out)
	if out.Me.Username != "alice" || out.Me.ID != e.member.ID {
		t.Fatalf("me = %+v", out.Me)
	}
	if len(out.APITokens) != 1 || out.APITokens[0].LastUsedAt == nil {
		t.Fatalf("apiTokens = %+v", out.APITokens)
	}
}

// oauthToken issues an access token of hearth_oauth to the member.
func oauthToken(t *testing.T, e *env, scopes ...string) string {
	t.Helper()
	app, _, err := grants.Of(e.store).CreateApp(t.Context(), "Reader", "", []string{"urn:ietf:wg:oauth:2.0:oob"}, scopes)
	if err != nil {
		t.Fatal(err)
	}
	code, err := grants.Of(e.store).CreateCode(t.Context(), app.ClientID, e.member, "urn:ietf:wg:oauth:2.0:oob", scopes, "")
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := grants.Of(e.store).ExchangeCode(t.Context(), code, func(*grants.Code) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestOAuthTokensNeedReadForQueriesAndWriteForMutations(t *testing.T) {
	e := newEnv(t, options{})
	readOnly := oauthToken(t, e, "read")
	readWrite := oauthToken(t, e, "read", "write")
	writeOnly := oauthToken(t, e, "write")
	newLabel := map[string]any{"data": map[string]any{"name": "x", "color": "#112233"}}

	if r := e.post(readOnly, labelsQuery, nil); r.Status != 200 || len(r.Errors) > 0 {
		t.Fatalf("read token, query: %d %+v", r.Status, r.Errors)
	}
	e.wantError(readOnly, createLabelMutation, newLabel, 200, "FORBIDDEN")
	e.wantError(writeOnly, labelsQuery, nil, 200, "FORBIDDEN")
	if r := e.post(readWrite, createLabelMutation, newLabel); len(r.Errors) > 0 {
		t.Fatalf("read+write token, mutation: %+v", r.Errors)
	}
	var labels struct{ Labels []label }
	e.do(labelsQuery, nil, &labels)
	if len(labels.Labels) != 1 {
		t.Fatalf("label not created: %+v", labels)
	}
}

func TestApplicationTokenWithoutMemberIsUnauthenticated(t *testing.T) {
	e := newEnv(t, options{})
	app, _, err := grants.Of(e.store).CreateApp(t.Context(), "Bot", "", []string{"urn:ietf:wg:oauth:2.0:oob"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := grants.Of(e.store).CreateAppToken(t.Context(), app.ClientID, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	e.wantError(tok, labelsQuery, nil, http.StatusOK, "UNAUTHORIZED")
}

const createAPITokenMutation = `mutation CreateApiToken($data: CreateApiTokenInput!) {
  createApiToken(data: $data) { secret token { id createdAt lastUsedAt name expiresAt } }
}`

// createApiToken is session-only, as in Inboxt (no @ApiTokenAllowed @
// 45f4314): API tokens and OAuth access tokens get FORBIDDEN.
func TestCreateApiTokenNeedsTheMembersSession(t *testing.T) {
	e := newEnv(t, options{})
	vars := map[string]any{"data": map[string]any{"name": "sync", "expiry": "SEVEN_DAYS"}}
	for _, tok := range []string{e.token, oauthToken(t, e, "read", "write")} {
		r := e.wantError(tok, createAPITokenMutation, vars, 200, "FORBIDDEN")
		if r.Errors[0].Message != "API tokens are not allowed for this operation" || strings.Contains(string(r.Data), "app_") {
			t.Fatalf("%+v %s", r.Errors, r.Data)
		}
	}
	if toks, err := apitokens.Of(e.store).List(t.Context(), e.member.ID); err != nil || len(toks) != 1 {
		t.Fatalf("%d API tokens (%v), want 1: a refused createApiToken made one", len(toks), err)
	}

	r := e.post(e.session, createAPITokenMutation, vars)
	if len(r.Errors) > 0 {
		t.Fatalf("%+v", r.Errors)
	}
	body := string(r.Data)
	i := strings.Index(body, `"secret":"`)
	secret := body[i+10 : i+10+strings.Index(body[i+10:], `"`)]
	if !strings.HasPrefix(secret, "app_") || len(secret) < 70 || len(secret) > 80 {
		t.Fatalf("secret %q is not app_ and 70 to 80 characters", secret)
	}
	if !strings.Contains(body, `"expiresAt":"`) {
		t.Fatalf("a 7-day token has no expiresAt: %s", body)
	}
	if r := e.post(secret, labelsQuery, nil); r.Status != 200 || len(r.Errors) > 0 {
		t.Fatalf("the new token does not work: %d %+v", r.Status, r.Errors)
	}
}

func TestDeletedTokenStopsWorkingAtOnce(t *testing.T) {
	e := newEnv(t, options{})
	tok, secret, err := apitokens.Of(e.store).Create(t.Context(), e.member.ID, "temp", 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.post(secret, labelsQuery, nil); r.Status != 200 {
		t.Fatalf("status %d", r.Status)
	}
	e.doAs(e.session, `mutation DeleteApiToken($data: DeleteApiTokenInput!) { deleteApiToken(data: $data) { success } }`,
		map[string]any{"data": map[string]any{"id": tok.ID}}, nil)
	e.wantError(secret, labelsQuery, nil, http.StatusOK, "UNAUTHORIZED")
}

func TestRateLimitAnswers429WithRetryAfter(t *testing.T) {
	e := newEnv(t, options{TokenRateLimit: 3})
	for i := 0; i < 3; i++ {
		r := e.post(e.token, labelsQuery, nil)
		if r.Status != 200 {
			t.Fatalf("request %d: status %d", i, r.Status)
		}
		if got := r.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(2-i) {
			t.Fatalf("request %d: X-RateLimit-Remaining = %q", i, got)
		}
	}
	// As Inboxt's GqlRateLimitGuard answers: HTTP 200, TOO_MANY_REQUESTS,
	// extensions.status 429, and the rate-limit headers.
	r := e.wantError(e.token, labelsQuery, nil, http.StatusOK, "TOO_MANY_REQUESTS")
	if r.Header.Get("Retry-After") == "" || r.Header.Get("X-RateLimit-Limit") != "3" || r.Header.Get("X-RateLimit-Reset") == "" ||
		r.Header.Get("X-RateLimit-Remaining") != "0" || r.Errors[0].Extensions["status"] != float64(429) {
		t.Fatalf("headers = %v, errors %+v", r.Header, r.Errors)
	}
	// Requests without a token are limited per client address.
	for i := 0; i < 3; i++ {
		if r := e.post("", `{ me { id } }`, nil); r.Status != 200 || len(r.Errors) != 0 {
			t.Fatalf("tokenless request %d: %d %+v", i, r.Status, r.Errors)
		}
	}
	e.wantError("", `{ me { id } }`, nil, http.StatusOK, "TOO_MANY_REQUESTS")
	// Another member's token has its own budget.
	_, other := e.newMember("bob")
	if r := e.post(other, labelsQuery, nil); r.Status != 200 {
		t.Fatalf("other token: status %d", r.Status)
	}
}

// TestBadTokensCountPerClientAddress: a token that is unknown names no
// member, so guesses count against the client address's tokenless budget
// (an IPv6 client per /64): past it they get TOO_MANY_REQUESTS, and a real
// token from that address still works.
func TestBadTokensCountPerClientAddress(t *testing.T) {
	var addr atomic.Value
	addr.Store("2001:db8:1:2::1")
	e := newEnv(t, options{TokenRateLimit: 3, ClientIP: func(*http.Request) string { return addr.Load().(string) }})
	guess := apitokens.Prefix + strings.Repeat("A", 70)
	for i := 0; i < 3; i++ {
		addr.Store(fmt.Sprintf("2001:db8:1:2::%x", i+1)) // rotating addresses within one /64
		e.wantError(guess, labelsQuery, nil, http.StatusOK, "UNAUTHORIZED")
	}
	r := e.wantError("hat_"+strings.Repeat("B", 43), labelsQuery, nil, http.StatusOK, "TOO_MANY_REQUESTS")
	if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	// The member's own token has its own budget.
	if r := e.post(e.token, labelsQuery, nil); r.Status != 200 || len(r.Errors) != 0 {
		t.Fatalf("real token after guesses: %d %+v", r.Status, r.Errors)
	}
	// Another /64 is not affected.
	addr.Store("2001:db8:1:3::1")
	e.wantError(guess, labelsQuery, nil, http.StatusOK, "UNAUTHORIZED")
}

func TestBadRequestsGetGraphQLErrorsNever500(t *testing.T) {
	e := newEnv(t, options{MaxBodyBytes: 4096, MemberBodyBytes: 4096, MaxDepth: 6, MaxComplexity: 300})
	cases := []struct {
		name, contentType, body string
		status                  int
		code                    string
	}{
		{"malformed JSON", "application/json", `{"query": `, 400, "BAD_REQUEST"},
		{"JSON array", "application/json", `[1,2]`, 400, "BAD_REQUEST"},
		{"no query", "application/json", `{"variables":{}}`, 400, "BAD_REQUEST"},
		{"not JSON content type", "text/plain", `{"query":"{labels{id}}"}`, 415, "BAD_REQUEST"},
		{"body too large", "application/json", `{"query":"{labels{id}}","x":"` + strings.Repeat("a", 5000) + `"}`, 413, "BAD_REQUEST"},
		{"syntax error", "application/json", `{"query":"{ labels { id "}`, 400, "GRAPHQL_PARSE_FAILED"},
		{"unknown field", "application/json", `{"query":"{ nope }"}`, 400, "GRAPHQL_VALIDATION_FAILED"},
		{"wrong variable type", "application/json", `{"query":"query($q: GetEntriesInput!){entries(query:$q){edges{cursor}}}","variables":{"q":{"first":"many"}}}`, 200, "BAD_USER_INPUT"},
		// gqlparser's variable check compares enum values case-insensitively
		// (validator/vars.go, strings.EqualFold); the generated UnmarshalGQL
		// then refuses "DESC", inside the field's argument coercion.
		{"enum value of another case in a variable", "application/json", `{"query":"query($q: GetEntriesInput!){entries(query:$q){edges{cursor}}}","variables":{"q":{"sort":{"field":"createdAt","direction":"DESC"}}}}`, 200, "BAD_USER_INPUT"},
		{"too deep", "application/json", `{"query":"{ entries(query:{first:1}) { edges { node { ... on Highlight { savedItem { highlights { savedItem { id } } } } } } } }"}`, 400, "QUERY_TOO_DEEP"},
		{"too complex", "application/json", `{"query":"{ entries(query:{first:100}) { edges { cursor node { id createdAt } } } }"}`, 400, "COMPLEXITY_LIMIT_EXCEEDED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.raw(e.token, c.contentType, []byte(c.body))
			if r.Status != c.status || len(r.Errors) == 0 || r.Errors[0].Code() != c.code {
				t.Fatalf("status %d errors %+v, want %d %s", r.Status, r.Errors, c.status, c.code)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/graphql?query={labels{id}}", nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, _ := send(t, req)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Fatalf("status %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
}

// An id longer than any key the store can hold is an unknown id: the same
// answer as a short unknown one (NOT_FOUND, 404), never an internal error
// logged for a client's input, and nothing changes.
func TestOverLongIDsAreUnknownNever500(t *testing.T) {
	e := newEnv(t, options{MaxBodyBytes: 64 << 10})
	it := e.saveArticle(e.member.ID, 1, nil)
	long := strings.Repeat("9", 5000)
	for _, q := range []string{
		`query($id: String!) { savedItem(query: {id: $id}) { id } }`,
		`mutation($id: String!) { updateReadingProgress(data: {id: $id, progress: 5}) { id } }`,
		`mutation($id: String!) { updateSavedItemMetadata(data: {id: $id, title: "x"}) { id } }`,
		`mutation($id: String!) { updateLabel(data: {id: $id, name: "x", color: "#112233"}) { id } }`,
		`mutation($id: String!) { updateSavedItemsStatus(data: {ids: [$id], status: ARCHIVED}) { id } }`,
	} {
		short := e.post(e.token, q, map[string]any{"id": "999999"})
		got := e.post(e.token, q, map[string]any{"id": long})
		code := func(r *response) string {
			if len(r.Errors) == 0 {
				return ""
			}
			return r.Errors[0].Code()
		}
		if got.Status != short.Status || code(got) != code(short) || code(got) == "INTERNAL_SERVER_ERROR" {
			t.Errorf("%s: over-long id %d %+v, unknown id %d %+v", q, got.Status, got.Errors, short.Status, short.Errors)
		}
	}
	for _, p := range []string{"/api/images/" + long + "/1", "/api/export/epub?id=" + long} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		if resp, b := send(t, req); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %.30s…: HTTP %d %.200s", p, resp.StatusCode, b)
		}
	}
	if got, err := library.Of(e.store).SavedItem(t.Context(), e.member.ID, it.ID); err != nil || got.Status != it.Status || got.Title != it.Title {
		t.Fatalf("item after: %+v %v", got, err)
	}
}

func TestIntrospectionCanBeTurnedOff(t *testing.T) {
	on := newEnv(t, options{})
	on.do(`{ __schema { queryType { name } } }`, nil, nil)
	off := newEnv(t, options{NoIntrospection: true})
	if r := off.post(off.token, `{ __schema { queryType { name } } }`, nil); len(r.Errors) == 0 {
		t.Fatal("introspection answered although turned off")
	}
}

func TestHandles(t *testing.T) {
	e := newEnv(t, options{})
	for path, want := range map[string]bool{
		"/api/graphql": true, "/api/newsletters/inbound/nl_x": true, "/api/graphqlx": false, "/settings": false,
	} {
		r, _ := http.NewRequest(http.MethodPost, "http://h"+path, nil)
		if got := e.handles(r); got != want {
			t.Errorf("Handles(%s) = %v", path, got)
		}
	}
}

// TestErrorsHaveInboxtsShape checks the error contract of Inboxt's
// GlobalExceptionFilter and guards (apps/api/src/common/exception-filters/
// global-exception.filter.ts, common/guards/*.ts @ 45f4314) as Apollo
// Server 4 sends it: every error has extensions.code and
// extensions.status; input validation says "Invalid input provided" with
// the details in extensions.response.
func TestErrorsHaveInboxtsShape(t *testing.T) {
	e := newEnv(t, options{})
	// Input validation.
	r := e.wantError(e.token, createLabelMutation, map[string]any{"data": map[string]any{"name": "x", "color": "blue"}}, 200, "BAD_USER_INPUT")
	g := r.Errors[0]
	resp, _ := g.Extensions["response"].(map[string]any)
	list, _ := resp["message"].([]any)
	if g.Message != "Invalid input provided" || g.Extensions["status"] != float64(400) || resp["statusCode"] != float64(400) ||
		resp["error"] != "Bad Request" || len(list) != 1 || list[0].(map[string]any)["path"] != "color" || g.Detail() == g.Message {
		t.Fatalf("input validation error = %+v", g)
	}
	// The entry's path is the field's within data, as Zod's issue path is
	// (global-exception.filter.ts @ 45f4314): Inboxt's web app shows the
	// message beside that field.
	r = e.wantError(e.token, createLabelMutation, map[string]any{"data": map[string]any{"name": "", "color": "#112233"}}, 200, "BAD_USER_INPUT")
	if resp, _ := r.Errors[0].Extensions["response"].(map[string]any); resp == nil || resp["message"].([]any)[0].(map[string]any)["path"] != "name" {
		t.Fatalf("empty name: %+v", r.Errors[0])
	}
	// No token: each field needing a member is UNAUTHORIZED (401 in
	// extensions, HTTP 200); me is null.
	r = e.wantError("", labelsQuery, nil, 200, "UNAUTHORIZED")
	if r.Errors[0].Extensions["status"] != float64(401) {
		t.Fatalf("no token: %+v", r.Errors)
	}
	r = e.post("", `query { me { id } }`, nil)
	if r.Status != 200 || len(r.Errors) != 0 || string(r.Data) != `{"me":null}` {
		t.Fatalf("me without a token: %d %s %+v", r.Status, r.Data, r.Errors)
	}
	// Every other kind carries its status.
	for _, c := range []struct {
		token, query string
		vars         map[string]any
		http         int
		code         string
		status       float64
	}{
		{"app_" + strings.Repeat("A", 70), labelsQuery, nil, 200, "UNAUTHORIZED", 401},
		{e.token, deleteLabelMutation, map[string]any{"data": map[string]any{"id": "nope"}}, 200, "FORBIDDEN", 403},
		{e.token, `mutation { updateSavedItemStatus(data: {ids: ["nope"], status: ARCHIVED}) { success } }`, nil, 200, "NOT_FOUND", 404},
		{e.token, `{ nope }`, nil, 400, "GRAPHQL_VALIDATION_FAILED", 400},
		{e.token, `{ labels { id `, nil, 400, "GRAPHQL_PARSE_FAILED", 400},
		{e.token, `query($q: GetEntriesInput!) { entries(query: $q) { edges { cursor } } }`, map[string]any{"q": map[string]any{"first": "x"}}, 200, "BAD_USER_INPUT", 400},
	} {
		r := e.wantError(c.token, c.query, c.vars, c.http, c.code)
		if r.Errors[0].Extensions["status"] != c.status {
			t.Errorf("%s: extensions = %+v, want status %v", c.query, r.Errors[0].Extensions, c.status)
		}
	}
}

// TestSessionOnlyOperationsRefuseTokens: the operations Inboxt does not let
// API tokens run (no @ApiTokenAllowed on their resolvers @ 45f4314) answer
// FORBIDDEN "API tokens are not allowed for this operation" to API tokens
// and OAuth access tokens, and change nothing; the member's session may
// run them, but not from another origin.
func TestSessionOnlyOperationsRefuseTokens(t *testing.T) {
	e := newEnv(t, options{})
	it := e.saveArticle(e.member.ID, 1, nil)
	var l struct{ CreateLabel label }
	e.do(createLabelMutation, map[string]any{"data": map[string]any{"name": "Keep", "color": "#111111"}}, &l)
	ops := []string{
		`mutation { deleteLabel(data: {id: "` + l.CreateLabel.ID + `"}) { success } }`,
		`mutation { deleteHighlights(data: {items: [{id: "1"}]}) { success } }`,
		`mutation { permanentlyDeleteSavedItems(data: {ids: ["` + it.ID + `"]}) { success } }`,
		`mutation { emptyTrash { success count } }`,
		`mutation { deleteSavedQuery(data: {id: "1"}) { success } }`,
		`mutation { deleteApiToken(data: {id: "1"}) { success } }`,
		`mutation { createApiToken(data: {name: "x", expiry: NEVER}) { secret } }`,
		`mutation { signOut { success } }`,
		`mutation { createInboundEmailAddress { id fullAddress } }`,
		`mutation { deleteInboundEmailAddress(data: {id: "1"}) { success } }`,
		`mutation { updateAccount(data: {username: "eve"}) { id } }`,
		`mutation { deleteAccount(data: {emailAddress: "alice"}) { success } }`,
		`mutation { requestExport(data: {type: ALL, formatForHighlights: MARKDOWN}) }`,
		`mutation { updateNewsletterSubscriptionStatus(data: {id: "1", status: UNSUBSCRIBED}) { success } }`,
		`mutation { verifyEmail(data: {code: "1"}) { success } }`,
		`mutation { resendVerificationEmail { success } }`,
		`mutation { signIn(data: {emailAddress: "alice", password: "x"}) { success } }`,
	}
	for _, tok := range []string{e.token, oauthToken(t, e, "read", "write")} {
		for _, op := range ops {
			r := e.wantError(tok, op, nil, 200, "FORBIDDEN")
			if r.Errors[0].Message != "API tokens are not allowed for this operation" || r.Errors[0].Extensions["status"] != float64(403) {
				t.Fatalf("%s: %+v", op, r.Errors)
			}
		}
	}
	if got := e.allEntries(map[string]any{"first": 10}); len(got) != 1 {
		t.Fatalf("%d items after the refused operations", len(got))
	}
	var ls struct{ Labels []label }
	e.do(labelsQuery, nil, &ls)
	if len(ls.Labels) != 1 {
		t.Fatal("the refused deleteLabel deleted the label")
	}

	// E-mail operations: BAD_REQUEST saying the site sends none.
	r := e.wantError(e.session, `mutation { resendVerificationEmail { success } }`, nil, 200, "BAD_REQUEST")
	if !strings.Contains(r.Errors[0].Message, "does not send e-mail") {
		t.Fatalf("%+v", r.Errors)
	}
	e.wantError("", `mutation { requestPasswordRecovery(data: {emailAddress: "alice"}) { success } }`, nil, 200, "BAD_REQUEST")

	// The session: from the site's own page it may; from another, no.
	var in struct {
		CreateInboundEmailAddress struct{ ID, FullAddress string }
	}
	e.doAs(e.session, `mutation { createInboundEmailAddress { id fullAddress } }`, nil, &in)
	if !strings.Contains(in.CreateInboundEmailAddress.FullAddress, inbound.Path+"nl_") {
		t.Fatalf("createInboundEmailAddress = %+v", in)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/graphql", strings.NewReader(`{"query":"mutation { emptyTrash { success } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.AddCookie(&http.Cookie{Name: "hearth_session", Value: strings.TrimPrefix(e.session, "session:")})
	resp, _ := send(t, req)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site request with the session: %d", resp.StatusCode)
	}
	var out struct{ SignOut struct{ Success bool } }
	e.doAs(e.session, `mutation { signOut { success } }`, nil, &out)
	e.wantError(e.session, `mutation { emptyTrash { success } }`, nil, 200, "UNAUTHORIZED")
}

// Hearth members have no e-mail address: where Inboxt answers one, Hearth
// answers username@<account domain>, under .invalid where Inboxt's web app
// would refuse the domain (its sign-in form validates with zod's
// z.email(), whose regex needs a dotted domain ending in letters), and
// isEmailVerified true so that the app asks for no verification.
func TestMeEmailAddressIsUsernameAtTheAccountDomain(t *testing.T) {
	appEmail := regexp.MustCompile(`^(?:[A-Za-z0-9_'+\-\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$`)
	for domain, want := range map[string]string{"": "alice@127.0.0.1.invalid", "example.org": "alice@example.org", "localhost": "alice@localhost.invalid"} {
		e := newEnv(t, options{AccountDomain: domain})
		var me struct {
			Me struct {
				EmailAddress    string
				IsEmailVerified bool
			}
		}
		e.do(`{ me { emailAddress isEmailVerified } }`, nil, &me)
		if me.Me.EmailAddress != want || !me.Me.IsEmailVerified {
			t.Errorf("AccountDomain %q: me = %+v, want emailAddress %q, verified", domain, me.Me, want)
		}
		if !appEmail.MatchString(me.Me.EmailAddress) {
			t.Errorf("AccountDomain %q: Inboxt's web app refuses %q", domain, me.Me.EmailAddress)
		}
	}
}

// signIn is the site's member sign-in: the username or
// username@<account domain>, Inboxt's BAD_REQUEST for wrong credentials,
// and a session cookie that then runs the session-only operations.
func TestSignInStartsASession(t *testing.T) {
	e := newEnv(t, options{})
	const signIn = `mutation signIn($data: SignInInput!) { signIn(data: $data) { success } }`
	r := e.wantError("", signIn, map[string]any{"data": map[string]any{"emailAddress": "alice", "password": "wrong password"}}, 200, "BAD_REQUEST")
	if r.Errors[0].Message != "Invalid email address or password" || r.Header.Get("Set-Cookie") != "" {
		t.Fatalf("wrong password: %+v, Set-Cookie %q", r.Errors, r.Header.Get("Set-Cookie"))
	}
	e.wantError("", signIn, map[string]any{"data": map[string]any{"emailAddress": "alice@elsewhere.example", "password": "correct horse battery"}}, 200, "BAD_REQUEST")
	for _, name := range []string{"alice", "alice@127.0.0.1", "alice@127.0.0.1.invalid", "alice@127.0.0.1.INVALID"} {
		r := e.post("", signIn, map[string]any{"data": map[string]any{"emailAddress": name, "password": "correct horse battery"}})
		if len(r.Errors) > 0 || string(r.Data) != `{"signIn":{"success":true}}` {
			t.Fatalf("%s: %s %+v", name, r.Data, r.Errors)
		}
		var session string
		for _, c := range (&http.Response{Header: r.Header}).Cookies() {
			if c.Name == "hearth_session" {
				session = c.Value
			}
		}
		if session == "" {
			t.Fatalf("%s: no session cookie: %v", name, r.Header)
		}
		var out struct{ EmptyTrash struct{ Success bool } }
		e.doAs("session:"+session, `mutation { emptyTrash { success } }`, nil, &out)
		if !out.EmptyTrash.Success {
			t.Fatal("the new session cannot run emptyTrash")
		}
	}
}

// The account operations over the member's session: createAccount follows
// the registration setting, updateAccount changes the password,
// deleteInboundEmailAddress stops the inbound URL, deleteAccount deletes
// the member after confirming its address.
func TestAccountOperationsOverTheSession(t *testing.T) {
	const create = `mutation createAccount($data: CreateAccountInput!) { createAccount(data: $data) { success } }`
	closed := newEnv(t, options{})
	vars := map[string]any{"data": map[string]any{"username": "bob", "emailAddress": "bob@127.0.0.1", "password": "a long enough password"}}
	r := closed.wantError("", create, vars, 200, "FORBIDDEN")
	if r.Errors[0].Message != "Signup is disabled on this instance" {
		t.Fatalf("%+v", r.Errors)
	}
	if _, err := members.Of(closed.store).Member(t.Context(), "bob"); err == nil {
		t.Fatal("createAccount made a member with registration closed")
	}

	e := newEnv(t, options{}, account.Options{OpenRegistration: true})
	e.wantError("", create, map[string]any{"data": map[string]any{"username": "bob", "emailAddress": "bob@elsewhere.example", "password": "a long enough password"}}, 200, "BAD_USER_INPUT")
	r = e.post("", create, vars)
	if len(r.Errors) > 0 || !strings.Contains(r.Header.Get("Set-Cookie"), "hearth_session=") {
		t.Fatalf("createAccount: %+v %v", r.Errors, r.Header)
	}
	if _, err := members.Of(e.store).Member(t.Context(), "bob"); err != nil {
		t.Fatalf("bob: %v", err)
	}
	e.wantError("", create, vars, 200, "CONFLICT")

	// updateAccount: the password; usernames and addresses stay.
	// Refusals name the field (extensions.response.message[].path, as
	// Inboxt's Zod errors do) and, since the app's profile form shows only
	// an error's message, say what is refused in the message too.
	for field, mutation := range map[string]string{
		"username":     `mutation { updateAccount(data: {username: "eve"}) { id } }`,
		"emailAddress": `mutation { updateAccount(data: {emailAddress: "eve@example.org"}) { id } }`,
	} {
		r := e.wantError(e.session, mutation, nil, 200, "BAD_USER_INPUT")
		resp, _ := r.Errors[0].Extensions["response"].(map[string]any)
		list, _ := resp["message"].([]any)
		if r.Errors[0].Message != r.Errors[0].Detail() || !strings.Contains(r.Errors[0].Message, "always") && !strings.Contains(r.Errors[0].Message, "cannot be changed") ||
			len(list) != 1 || list[0].(map[string]any)["path"] != field {
			t.Fatalf("%s refused: %+v", field, r.Errors)
		}
	}
	var up struct {
		UpdateAccount struct{ Username, EmailAddress string }
	}
	e.doAs(e.session, `mutation { updateAccount(data: {emailAddress: "alice@127.0.0.1", password: "another long password"}) { username emailAddress } }`, nil, &up)
	if up.UpdateAccount.Username != "alice" || up.UpdateAccount.EmailAddress != "alice@127.0.0.1.invalid" {
		t.Fatalf("updateAccount = %+v", up)
	}
	if _, err := members.Of(e.store).Authenticate(t.Context(), "alice", "another long password"); err != nil {
		t.Fatalf("the new password does not work: %v", err)
	}
	session := e.signIn(e.member) // the change ended the sessions

	// The inbound URL: made, deleted, then unknown.
	var in struct{ CreateInboundEmailAddress struct{ ID string } }
	e.doAs(session, `mutation { createInboundEmailAddress { id } }`, nil, &in)
	del := `mutation($id: String!) { deleteInboundEmailAddress(data: {id: $id}) { success } }`
	e.doAs(session, del, map[string]any{"id": in.CreateInboundEmailAddress.ID}, nil)
	var list struct{ InboundEmailAddresses []struct{ ID string } }
	e.do(`{ inboundEmailAddresses { id } }`, nil, &list)
	if len(list.InboundEmailAddresses) != 0 {
		t.Fatalf("after deleteInboundEmailAddress: %+v", list)
	}
	e.wantError(session, del, map[string]any{"id": in.CreateInboundEmailAddress.ID}, 200, "NOT_FOUND")

	// deleteAccount: confirmed by the address.
	e.wantError(session, `mutation { deleteAccount(data: {emailAddress: "bob"}) { success } }`, nil, 200, "BAD_USER_INPUT")
	e.doAs(session, `mutation { deleteAccount(data: {emailAddress: "alice@127.0.0.1"}) { success } }`, nil, nil)
	if _, err := members.Of(e.store).Member(t.Context(), "alice"); err == nil {
		t.Fatal("alice still exists")
	}
	e.wantError(e.token, labelsQuery, nil, 200, "UNAUTHORIZED")
}
