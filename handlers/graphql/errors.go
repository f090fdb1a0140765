package graphql

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.uber.org/zap"

	"github.com/hearthkit/caddy-hearth/handlers/articles"
	"github.com/hearthkit/caddy-hearth/handlers/inboxtapi"
	"github.com/hearthkit/caddy-hearth/storage"
)

// Values of extensions.code (inboxtapi's).
const (
	codeUnauthorized     = inboxtapi.CodeUnauthorized
	codeTooManyRequests  = inboxtapi.CodeTooManyRequests
	codeParseFailed      = inboxtapi.CodeParseFailed
	codeValidationFailed = inboxtapi.CodeValidationFailed
	codeForbidden        = inboxtapi.CodeForbidden
	codeBadUserInput     = inboxtapi.CodeBadUserInput
	codeNotFound         = inboxtapi.CodeNotFound
	codeConflict         = inboxtapi.CodeConflict
	codeBadRequest       = inboxtapi.CodeBadRequest
	codeMethodNotAllowed = inboxtapi.CodeMethodNotAllowed
	codeRateLimited      = inboxtapi.CodeRateLimited
	codeQueryTooDeep     = inboxtapi.CodeQueryTooDeep
	codeComplexityLimit  = inboxtapi.CodeComplexityLimit
	codeFetchFailed      = inboxtapi.CodeFetchFailed
	codeInternal         = inboxtapi.CodeInternal
	codeUnavailable      = inboxtapi.CodeUnavailable
	codeInsufficient     = inboxtapi.CodeInsufficient
)

func init() {
	// Operations refused before execution (too deep, too complex) answer
	// 422 like validation failures, not 200. (gqlgen keeps this table
	// global, as Caddy does its modules.)
	errcode.RegisterErrorType(codeQueryTooDeep, errcode.KindProtocol)
	errcode.RegisterErrorType(codeComplexityLimit, errcode.KindProtocol)
}

// statusOf is extensions.status for an extensions.code; writeError
// answers outside gqlgen in the GraphQL response format.
var (
	statusOf   = inboxtapi.StatusOf
	writeError = inboxtapi.WriteError
)

// msgInvalidInput is the message of Inboxt's input validation errors; the
// details are in extensions.response.message (global-exception.filter.ts @
// 45f4314, for a ZodError).
const msgInvalidInput = "Invalid input provided"

// invalidInputResponse is extensions.response of an input validation error:
// path is the argument the rule is about, as Zod's issue path names it.
func invalidInputResponse(path, msg string) map[string]any {
	return map[string]any{
		"statusCode": http.StatusBadRequest,
		"message":    []any{map[string]any{"path": path, "message": msg}},
		"error":      "Bad Request",
	}
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

// badField is badInput about the input's field path, as Zod's issue path
// names it in Inboxt's answers: the field names of the app's forms, which
// show the message under that field (badInput's errors name the argument,
// argumentPath).
func badField(path, format string, a ...any) error {
	return storage.InvalidField(path, format, a...)
}

// shownFieldError is an input error about path for the app's forms that
// show only an error's message, not its fields (the profile, account
// deletion and sign-up forms): its message is the detail, since those
// forms hide Inboxt's generic msgInvalidInput.
type shownFieldError struct {
	path string
	msg  string
}

func (e *shownFieldError) Error() string { return e.msg }

// shownField is a shownFieldError.
func shownField(path, format string, a ...any) error {
	return &shownFieldError{path, fmt.Sprintf(format, a...)}
}

// presentError maps resolver errors to GraphQL errors with extensions.code.
// Errors of unknown kind are logged and shown as a generic message, so no
// internal detail reaches the client.
func (s *Server) presentError(ctx context.Context, err error) *gqlerror.Error {
	var gqlErr *gqlerror.Error
	if errors.As(err, &gqlErr) && gqlErr.Err == nil {
		// Produced by gqlgen itself (parsing, validation, limits).
		return withStatus(gqlErr)
	}
	out := graphql.DefaultErrorPresenter(ctx, err)
	var ue *userError
	var sf *shownFieldError
	var ie *storage.InvalidError
	var ai *articles.InputError
	var af *articles.FetchError
	code, detail, field := "", "", ""
	status, retry, unavailable := storage.Unavailable(err)
	switch {
	case unavailable:
		// Inboxt's contract for such answers: HTTP 200, the status in
		// extensions.status (statusOf), Retry-After set (transport.go).
		code, out.Message = codeUnavailable, err.Error()
		if status == http.StatusInsufficientStorage {
			code = codeInsufficient
		}
		if st := stateOf(ctx); st != nil {
			st.retryAfter.Store(int64(retry))
		}
	case errors.As(err, &sf):
		code, detail, field = codeBadUserInput, sf.msg, sf.path
	case errors.As(err, &ue) && ue.code == codeBadUserInput:
		code, detail = codeBadUserInput, ue.msg
	case errors.As(err, &ue):
		code, out.Message = ue.code, ue.msg
	case errors.As(err, &ai):
		code, detail = codeBadUserInput, ai.Msg
	case errors.As(err, &af):
		code, out.Message = codeFetchFailed, af.Msg
	case errors.As(err, &ie):
		code, detail, field = codeBadUserInput, ie.Msg, ie.Field
	case errors.Is(err, storage.ErrNotFound):
		code, out.Message = codeNotFound, "not found"
	case errors.Is(err, storage.ErrConflict):
		code, out.Message = codeConflict, "already exists"
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		// The client went away and the store stopped with its request:
		// nobody reads this answer, and nothing failed to log.
		code, out.Message = codeInternal, "the request was cancelled"
	default:
		if gqlErr != nil && gqlErr.Extensions != nil {
			// Argument coercion errors carry gqlgen's own code.
			return withStatus(gqlErr)
		}
		if gqlErr != nil && argumentsRefused(ctx) {
			// A value the variable check let through that the argument's
			// own unmarshalling refuses: gqlparser matches enum values
			// case-insensitively (validator/vars.go), gqlgen's UnmarshalGQL
			// does not ("DESC is not a valid SortDirection").
			gqlErr.Extensions = map[string]any{"code": codeBadUserInput}
			return withStatus(gqlErr)
		}
		s.log.Error("graphql resolver", zap.Error(err), zap.String("path", graphql.GetPath(ctx).String()))
		code, out.Message = codeInternal, "internal error; it was logged"
	}
	if out.Extensions == nil {
		out.Extensions = map[string]any{}
	}
	if detail != "" {
		out.Message = msgInvalidInput
		if sf != nil {
			out.Message = detail
		}
		// Inboxt's path is the Zod issue's, within the argument: the
		// field at fault ("color") where the store names it.
		if field == "" {
			field = argumentPath(ctx)
		}
		out.Extensions["response"] = invalidInputResponse(field, detail)
	}
	out.Extensions["code"] = code
	out.Extensions["status"] = statusOf(code)
	return out
}

// argumentPath names the argument of the failing field an input error is
// about: its only argument (Inboxt's operations take one, data or query),
// or "" when the field has none or several.
func argumentPath(ctx context.Context) string {
	fc := graphql.GetFieldContext(ctx)
	for fc != nil && fc.Field.Field == nil {
		fc = fc.Parent
	}
	if fc == nil || len(fc.Field.Arguments) != 1 {
		return ""
	}
	return fc.Field.Arguments[0].Name
}

// argumentsRefused reports an error of the current field's argument
// coercion: the generated fieldContext functions report it before they set
// the field's Args, which are set (if empty) for every field with arguments
// once its resolver runs.
func argumentsRefused(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	return fc != nil && fc.Args == nil && fc.Field.Field != nil && len(fc.Field.Arguments) > 0
}

// withStatus gives gqlgen's own errors Inboxt's code and
// extensions.status: an invalid variable value is BAD_USER_INPUT, as
// Apollo Server 4 answers it (with HTTP 200, see postTransport).
func withStatus(e *gqlerror.Error) *gqlerror.Error {
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	code, _ := e.Extensions["code"].(string)
	if isVariableError(e) {
		code = codeBadUserInput
		e.Extensions["code"] = code
	}
	if code == "" {
		code = codeValidationFailed
		e.Extensions["code"] = code
	}
	e.Extensions["status"] = statusOf(code)
	return e
}

// isVariableError reports an error of variable coercion: gqlparser's
// validator.VariableValues puts "variable" first in its path.
func isVariableError(e *gqlerror.Error) bool {
	if len(e.Path) == 0 {
		return false
	}
	name, ok := e.Path[0].(ast.PathName)
	return ok && name == "variable"
}

func (s *Server) recoverPanic(ctx context.Context, p any) error {
	s.log.Error("graphql panic", zap.Any("panic", p), zap.Stack("stack"))
	return errors.New("panic in resolver")
}

// checkScope holds the scopes of OAuth access tokens (routes.go): a query
// needs read, a mutation write, and a mutation whose result selects more
// than ids, __typename and success needs read too. It refuses the whole
// operation before anything runs, so a refused mutation changes nothing.
func (s *Server) checkScope(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	c := callerOf(ctx)
	op := graphql.GetOperationContext(ctx).Operation
	if c == nil || op == nil {
		return next(ctx)
	}
	var err error
	if op.Operation == ast.Mutation {
		err = c.May(routeMutation)
		if err == nil {
			if f := contentSelected(op.SelectionSet, 0); f != "" {
				if err = c.May(routeMutationResult); err != nil {
					err = fmt.Errorf("%w: without it a mutation's result may select only id, __typename and success (this one selects %s)", err, f)
				}
			}
		}
	} else {
		err = c.May(routeQuery)
	}
	if err == nil {
		return next(ctx)
	}
	return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{{
		Message:    err.Error(),
		Extensions: map[string]any{"code": codeForbidden, "status": statusOf(codeForbidden)},
	}}})
}

// receiptTypes are the result types of mutations that tell only that they
// happened (and how many items they touched).
var receiptTypes = map[string]bool{"Void": true, "EmptyTrash": true}

// contentSelected returns the first field below the root fields of set
// that shows something of the library: any but id, __typename and the
// fields of receiptTypes. Fragments count where they are spread.
func contentSelected(set ast.SelectionSet, depth int) string {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if depth > 0 && sel.Name != "__typename" && sel.Name != "id" &&
				(sel.ObjectDefinition == nil || !receiptTypes[sel.ObjectDefinition.Name]) {
				return sel.Name
			}
			if f := contentSelected(sel.SelectionSet, depth+1); f != "" {
				return f
			}
		case *ast.InlineFragment:
			if f := contentSelected(sel.SelectionSet, depth); f != "" {
				return f
			}
		case *ast.FragmentSpread:
			if sel.Definition != nil {
				if f := contentSelected(sel.Definition.SelectionSet, depth); f != "" {
					return f
				}
			}
		}
	}
	return ""
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
