package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/storage"
)

// Values of extensions.code. UNAUTHENTICATED, FORBIDDEN, BAD_USER_INPUT
// and INTERNAL_SERVER_ERROR are Apollo's (and so Inboxt's) names.
const (
	codeUnauthenticated  = "UNAUTHENTICATED"
	codeForbidden        = "FORBIDDEN"
	codeBadUserInput     = "BAD_USER_INPUT"
	codeNotFound         = "NOT_FOUND"
	codeConflict         = "CONFLICT"
	codeBadRequest       = "BAD_REQUEST"
	codeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	codeRateLimited      = "RATE_LIMITED"
	codeQueryTooDeep     = "QUERY_TOO_DEEP"
	codeComplexityLimit  = "COMPLEXITY_LIMIT_EXCEEDED" // gqlgen's
	codeFetchFailed      = "FETCH_FAILED"
	codeInternal         = "INTERNAL_SERVER_ERROR"
	codeUnavailable      = "SERVICE_UNAVAILABLE"  // 503: a restore, a reload
	codeInsufficient     = "INSUFFICIENT_STORAGE" // 507: the disk is full
)

func init() {
	// Operations refused before execution (too deep, too complex) answer
	// 422 like validation failures, not 200.
	errcode.RegisterErrorType(codeQueryTooDeep, errcode.KindProtocol)
	errcode.RegisterErrorType(codeComplexityLimit, errcode.KindProtocol)
}

// writeError answers outside gqlgen (authentication, limits, bad bodies)
// in the GraphQL response format: {"errors":[{message, extensions.code}]}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []any{map[string]any{"message": msg, "extensions": map[string]any{"code": code}}},
		"data":   nil,
	})
}

// userError is an error whose message is shown to the client with code.
type userError struct {
	code string
	msg  string
}

func (e *userError) Error() string { return e.msg }

func badInput(format string, a ...any) error {
	return &userError{codeBadUserInput, fmt.Sprintf(format, a...)}
}

func forbidden(format string, a ...any) error {
	return &userError{codeForbidden, fmt.Sprintf(format, a...)}
}

// presentError maps resolver errors to GraphQL errors with extensions.code.
// Errors of unknown kind are logged and shown as a generic message, so no
// internal detail reaches the client.
func (s *Server) presentError(ctx context.Context, err error) *gqlerror.Error {
	var gqlErr *gqlerror.Error
	if errors.As(err, &gqlErr) && gqlErr.Err == nil {
		// Produced by gqlgen itself (parsing, validation, limits).
		return gqlErr
	}
	out := graphql.DefaultErrorPresenter(ctx, err)
	var ue *userError
	var ie *storage.InvalidError
	code := ""
	status, retry, unavailable := storage.Unavailable(err)
	switch {
	case unavailable:
		// Inboxt's contract for such answers: HTTP 200, the status in
		// extensions.status, Retry-After set (transport.go).
		code, out.Message = codeUnavailable, err.Error()
		if status == http.StatusInsufficientStorage {
			code = codeInsufficient
		}
		if out.Extensions == nil {
			out.Extensions = map[string]any{}
		}
		out.Extensions["status"] = status
		if st := stateOf(ctx); st != nil {
			st.retryAfter.Store(int64(retry))
		}
	case errors.As(err, &ue):
		code, out.Message = ue.code, ue.msg
	case errors.As(err, &ie):
		code, out.Message = codeBadUserInput, ie.Msg
	case errors.Is(err, storage.ErrNotFound):
		code, out.Message = codeNotFound, "not found"
	case errors.Is(err, storage.ErrConflict):
		code, out.Message = codeConflict, "already exists"
	default:
		if gqlErr != nil && gqlErr.Extensions != nil {
			// Argument coercion errors carry gqlgen's own code.
			return gqlErr
		}
		s.log.Error("graphql resolver", zap.Error(err), zap.String("path", graphql.GetPath(ctx).String()))
		code, out.Message = codeInternal, "internal error; it was logged"
	}
	if out.Extensions == nil {
		out.Extensions = map[string]any{}
	}
	out.Extensions["code"] = code
	return out
}

func (s *Server) recoverPanic(ctx context.Context, p any) error {
	s.log.Error("graphql panic", zap.Any("panic", p), zap.Stack("stack"))
	return errors.New("panic in resolver")
}

// checkScope lets OAuth access tokens run queries with the read scope and
// mutations with the write scope. API tokens may do both.
func (s *Server) checkScope(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	c := callerOf(ctx)
	op := graphql.GetOperationContext(ctx).Operation
	if c == nil || c.oauth == nil || op == nil {
		return next(ctx)
	}
	want := "read"
	if op.Operation == ast.Mutation {
		want = "write"
	}
	if c.oauth.Allows(want) {
		return next(ctx)
	}
	return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{{
		Message:    fmt.Sprintf("this token lacks the %s scope", want),
		Extensions: map[string]any{"code": codeForbidden},
	}}})
}

// depthLimit refuses operations whose selections nest deeper than max,
// counting through fragments.
type depthLimit struct{ max int }

var _ graphql.OperationContextMutator = depthLimit{}

func (depthLimit) ExtensionName() string                   { return "DepthLimit" }
func (depthLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (d depthLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	if depth := selectionDepth(oc.Operation.SelectionSet, 0, d.max); depth > d.max {
		return &gqlerror.Error{
			Message:    fmt.Sprintf("the query nests deeper than %d levels", d.max),
			Extensions: map[string]any{"code": codeQueryTooDeep},
		}
	}
	return nil
}

// selectionDepth returns the depth of set, stopping once it exceeds max (so
// fragment cycles, which validation rejects anyway, cannot loop).
func selectionDepth(set ast.SelectionSet, depth, max int) int {
	if depth > max {
		return depth
	}
	deepest := depth
	for _, sel := range set {
		var d int
		switch sel := sel.(type) {
		case *ast.Field:
			if len(sel.SelectionSet) == 0 {
				d = depth + 1
			} else {
				d = selectionDepth(sel.SelectionSet, depth+1, max)
			}
		case *ast.InlineFragment:
			d = selectionDepth(sel.SelectionSet, depth, max)
		case *ast.FragmentSpread:
			if sel.Definition != nil {
				d = selectionDepth(sel.Definition.SelectionSet, depth, max)
			}
		}
		if d > deepest {
			deepest = d
		}
	}
	return deepest
}
