package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
)

// postTransport is gqlgen's POST transport (transport.POST, which it
// follows step by step) with a cheaper last step: gqlgen writes the
// response with json.Marshal, which re-scans the whole data object to
// compact it and escape HTML characters — a fifth of an entries page's
// cost. writeResponse writes the same bytes without the scan.
type postTransport struct{ transport.POST }

var _ graphql.Transport = postTransport{}

func (postTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	contentType := responseContentType(r)
	w.Header().Set("Content-Type", contentType)
	start := graphql.Now()
	params, _ := ctx.Value(paramsKey{}).(*graphql.RawParams)
	if params == nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("could not read request body: %+v", err)}))
			return
		}
		if params, err = decodeParams(body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			writeResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("json request body could not be decoded: %v", err)}))
			return
		}
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	rc, errs := exec.CreateOperationContext(ctx, params)
	if errs != nil {
		errs = capErrors(errs)
		// Apollo Server 4 (Inboxt's) answers parse and validation failures
		// with 400 and invalid variable values with 200
		// (status400ForVariableCoercionErrors is false by default in v4).
		status := http.StatusOK
		if errcode.GetErrorKind(errs) == errcode.KindProtocol && !onlyVariableErrors(errs) {
			status = http.StatusBadRequest
		}
		w.WriteHeader(status)
		writeResponse(w, exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs))
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, rc)
	resp := responses(ctx)
	if resp != nil {
		resp.Errors = capErrors(resp.Errors)
	}
	setRetryAfter(w, ctx)
	writeResponse(w, resp)
}

func onlyVariableErrors(errs gqlerror.List) bool {
	for _, e := range errs {
		if !isVariableError(e) {
			return false
		}
	}
	return len(errs) > 0
}

const graphQLResponseJSON = "application/graphql-response+json"

// paramsKey holds the *graphql.RawParams that serveGraphQL decoded.
type paramsKey struct{}

// decodeParams reads a GraphQL request body as gqlgen's transports do
// (numbers as json.Number), refusing anything after the object.
func decodeParams(body []byte) (*graphql.RawParams, error) {
	var p graphql.RawParams
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the request object")
	}
	return &p, nil
}

// responseContentType picks the response's media type from Accept as
// gqlgen's transport.POST does by default.
func responseContentType(r *http.Request) string {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return "application/json"
	}
	for part := range strings.SplitSeq(accept, ",") {
		mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mediaType {
		case "*/*", "application/*", "application/json":
			return "application/json"
		case graphQLResponseJSON:
			return graphQLResponseJSON
		}
	}
	return graphQLResponseJSON
}

// writeResponse writes resp as json.Marshal would. A response that is only
// data (the common case) is written directly: gqlgen's marshalers produce
// compact JSON, and outside string literals compact JSON holds none of the
// characters json.Marshal escapes for HTML, so json.HTMLEscape over the
// whole object gives json.Marshal's bytes.
func writeResponse(w io.Writer, resp *graphql.Response) {
	if resp == nil {
		// gqlgen has no response when the client went away before the
		// operation ran; json.Marshal writes null.
		_, _ = w.Write([]byte("null"))
		return
	}
	if len(resp.Errors) > 0 || resp.Label != "" || resp.Path != nil || resp.HasNext != nil || len(resp.Extensions) > 0 || resp.Data == nil {
		b, err := json.Marshal(resp)
		if err != nil {
			b = []byte(`{"errors":[{"message":"the response could not be encoded"}],"data":null}`)
		}
		_, _ = w.Write(b)
		return
	}
	buf := getBuffer()
	defer putBuffer(buf)
	buf.WriteString(`{"data":`)
	json.HTMLEscape(buf, resp.Data)
	buf.WriteByte('}')
	_, _ = w.Write(buf.Bytes())
}

// Response buffers are reused: an entries page is some 20 KB, and
// allocating (and zeroing) it anew for every request was a good part of
// the garbage collector's work. Buffers over maxPooledBuffer are dropped.
var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuffer = 1 << 20

func getBuffer() *bytes.Buffer { return bufferPool.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooledBuffer {
		return
	}
	b.Reset()
	bufferPool.Put(b)
}

// setRetryAfter sets Retry-After when an error of the response was the
// store refusing for now (presentError).
func setRetryAfter(w http.ResponseWriter, ctx context.Context) {
	if st := stateOf(ctx); st != nil {
		if d := time.Duration(st.retryAfter.Load()); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(d)))
		}
	}
}
