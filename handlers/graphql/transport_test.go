package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// writeResponse must write what json.Marshal (gqlgen's own writer) writes.
func TestWriteResponseWritesWhatJSONMarshalWrites(t *testing.T) {
	hasNext := true
	for _, resp := range []*graphql.Response{
		{Data: json.RawMessage(`{"entries":{"edges":[]}}`)},
		{Data: json.RawMessage(`{"a":"<script>alert(1)</script> & \"more\" \\ \u2028 \u2029 é 🍞","b":[1,2.5,-3e+06,true,false,null]}`)},
		{Data: json.RawMessage("{\"bad utf-8\":\"\xff\xfe<\"}")},
		{Data: json.RawMessage(`{"x":"\u003c already escaped"}`)},
		{Data: nil},
		{Errors: gqlerror.List{{Message: "boom <b>"}}, Data: json.RawMessage(`null`)},
		{Data: json.RawMessage(`{"a":1}`), Extensions: map[string]any{"cost": 3}},
		{Data: json.RawMessage(`{"a":1}`), HasNext: &hasNext, Label: "l"},
		nil, // gqlgen's answer when the client went away before the operation ran
	} {
		want, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		writeResponse(&got, resp)
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("writeResponse: %s\njson.Marshal:  %s", got.Bytes(), want)
		}
	}
}

// A client that went away before its operation ran gets what gqlgen's own
// transport writes (200 null), not a logged panic.
func TestRequestWhoseClientWentAwayIsNotAnError(t *testing.T) {
	store, token := fastPathFixture(t)
	s := unlimited(t, store)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(`{"query":"{ entries(query: {first: 1}) { edges { cursor } } }"}`)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != http.StatusOK || w.Body.String() != "null" {
		t.Fatalf("%d %s, want 200 null", w.Code, w.Body.Bytes())
	}
}
