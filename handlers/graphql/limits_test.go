package graphql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// attackShapes are the documents an adversarial review found exhausted the server
// before the document limits (limits.go), and their nearest neighbours
// that the limits accept: the accepted ones bound the work a document can
// still cost (validation, execution).
func attackShapes() map[string]string {
	shapes := map[string]string{}
	// 958 bytes: 20 fragments, each spreading the next twice (2^20 fields).
	var nested strings.Builder
	nested.WriteString("query { ...F0 }\n")
	for i := range 20 {
		fmt.Fprintf(&nested, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	nested.WriteString("fragment F20 on Query { __typename }\n")
	shapes["nested fragments 958 B"] = nested.String()
	// The same, wider and to 16 KB and 64 KB: fragments with many fields
	// spread many times.
	for _, size := range []int{16 << 10, 64 << 10} {
		var b strings.Builder
		b.WriteString("query { ")
		for i := 0; b.Len() < size/2; i++ {
			fmt.Fprintf(&b, "...A%d ", i%50)
		}
		b.WriteString("}\n")
		for i := 0; i < 50 && b.Len() < size; i++ {
			fmt.Fprintf(&b, "fragment A%d on Query { %s }\n", i, strings.Repeat("__typename ", 40))
		}
		shapes[fmt.Sprintf("fragments %d KB", size>>10)] = b.String()
		var a strings.Builder
		a.WriteString("{ ")
		for i := 0; a.Len() < size; i++ {
			fmt.Fprintf(&a, "a%d: __typename ", i)
		}
		a.WriteString("}")
		shapes[fmt.Sprintf("aliases %d KB", size>>10)] = a.String()
	}
	shapes["one field 20000 times"] = "{ " + strings.Repeat("__typename ", 20000) + "}"
	shapes["one field 2900 times (32 KB)"] = "{ " + strings.Repeat("__typename ", 2900) + "}"
	shapes["30000 unknown fields"] = "{ " + strings.Repeat("nope ", 30000) + "}"
	shapes["10000 directives"] = "{ __typename " + strings.Repeat("@skip(if: false) ", 10000) + "}"
	shapes["2000 directives (32 KB)"] = "{ __typename " + strings.Repeat("@skip(if: false) ", 1900) + "}"
	shapes["5000 tokens+"] = "{ " + strings.Repeat("__typename,", 3000) + "}"
	// Accepted: the most of each kind the limits let through.
	// 17 aliases in a fragment spread 29 times: 493 fields, 29 of a name.
	var fields, unknown strings.Builder
	fields.WriteString("{ " + strings.Repeat("...X ", DefaultMaxSameName-1) + "}\nfragment X on Query { ")
	for i := range DefaultMaxFields / (DefaultMaxSameName - 1) {
		fmt.Fprintf(&fields, "f%d: __typename ", i)
	}
	fields.WriteString("}")
	unknown.WriteString("{ ")
	for i := range DefaultMaxFields {
		fmt.Fprintf(&unknown, "nope%d ", i%(DefaultMaxFields/DefaultMaxSameName+1))
	}
	unknown.WriteString("}")
	shapes["accepted: 500 fields"] = fields.String()
	shapes["accepted: 500 unknown fields"] = unknown.String()
	// Fields that validation merges in pairs, with their selections: 16
	// me's of 29 id's each (480 fields).
	shapes["accepted: 16 me of 29 id"] = "{ " + strings.Repeat("me { "+strings.Repeat("id ", DefaultMaxSameName-1)+"} ", 16) + "}"
	shapes["one unknown field 1000 times"] = "{ " + strings.Repeat("nope ", 1000) + "}"
	shapes["one field 31 times"] = "{ " + strings.Repeat("__typename ", DefaultMaxSameName+1) + "}"
	var al strings.Builder
	al.WriteString("{ ")
	for i := range DefaultMaxAliases {
		fmt.Fprintf(&al, "a%d: __typename ", i)
	}
	al.WriteString("}")
	shapes["accepted: 200 aliases"] = al.String()
	shapes["accepted: 50 directives"] = "{ __typename " + strings.Repeat("@skip(if: false) ", DefaultMaxDirectives) + "}"
	return shapes
}

func shapeServer(tb testing.TB) (*Server, string) {
	tb.Helper()
	st := StoreForTest(tb, tb.TempDir())
	_, tok := MemberForTest(tb, st, "alice")
	return unlimited(tb, st), tok
}

func shapeRequest(tok, query string) *http.Request {
	body, _ := json.Marshal(map[string]string{"query": query})
	r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

type shapeAnswer struct {
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

// Every attack shape is refused before validation with Inboxt's 400 and
// one error (GRAPHQL_PARSE_FAILED or GRAPHQL_VALIDATION_FAILED,
// extensions.status 400), and its answer is small; the accepted
// neighbours answer at most maxErrors+1 errors.
func TestAttackShapesAreRefusedWithOneError(t *testing.T) {
	s, tok := shapeServer(t)
	for name, q := range attackShapes() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, shapeRequest(tok, q))
		var a shapeAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatalf("%s: %d %.200s", name, w.Code, w.Body.String())
		}
		if strings.HasPrefix(name, "accepted") {
			if len(a.Errors) > maxErrors+1 {
				t.Errorf("%s: %d errors, want at most %d", name, len(a.Errors), maxErrors+1)
			}
			if strings.Contains(name, "unknown") {
				if len(a.Errors) != maxErrors+1 || !strings.Contains(a.Errors[maxErrors].Message, "more errors were left out") {
					t.Errorf("%s: %d errors, last %+v; want %d and a summary", name, len(a.Errors), a.Errors[len(a.Errors)-1], maxErrors+1)
				}
			} else if !strings.Contains(name, "directives") && (w.Code != http.StatusOK || len(a.Errors) != 0) {
				t.Errorf("%s: %d %+v; want it served", name, w.Code, a.Errors)
			}
			continue
		}
		if w.Code != http.StatusBadRequest || len(a.Errors) != 1 {
			t.Fatalf("%s: HTTP %d, %d errors; want 400 and one", name, w.Code, len(a.Errors))
		}
		code, _ := a.Errors[0].Extensions["code"].(string)
		status, _ := a.Errors[0].Extensions["status"].(float64)
		if (code != codeParseFailed && code != codeValidationFailed) || status != 400 {
			t.Fatalf("%s: extensions %v", name, a.Errors[0].Extensions)
		}
		if w.Body.Len() > 512 {
			t.Fatalf("%s: a %d-byte answer", name, w.Body.Len())
		}
	}
}

// A fragment's fields are counted once however often it is spread
// (memoised): the 958-byte document of 2^20 fields walks 21 fragments, and
// the count saturates instead of overflowing.
func TestFragmentCostIsMemoised(t *testing.T) {
	c, err := checkDocument(attackShapes()["nested fragments 958 B"], defaultDocumentLimits())
	if err == nil || err.code != codeValidationFailed {
		t.Fatalf("refusal %v", err)
	}
	if c.fragmentWalks != 21 || c.fields != 1<<20 || c.spreads != 41 {
		t.Fatalf("counts %+v; want 21 walks, 2^20 fields, 41 spreads", c)
	}
	var deep strings.Builder
	deep.WriteString("query { ...F0 }\n")
	for i := range 100 {
		fmt.Fprintf(&deep, "fragment F%d on Query { ...F%d ...F%d ...F%d }\n", i, i+1, i+1, i+1)
	}
	deep.WriteString("fragment F100 on Query { __typename }\n")
	lim := defaultDocumentLimits()
	lim.maxBytes, lim.maxSpreads = 1<<20, 1000
	c, err = checkDocument(deep.String(), lim)
	if err == nil || c.fragmentWalks != 101 || c.fields <= 0 {
		t.Fatalf("3^100 fields: counts %+v, %v", c, err)
	}
	// A cycle counts 0 and ends (validation reports it).
	c, err = checkDocument("query { ...A } fragment A on Query { ...B } fragment B on Query { ...A __typename }", lim)
	if err != nil || c.fragmentWalks != 2 || c.fields != 1 {
		t.Fatalf("a cycle: %+v, %v", c, err)
	}
}

// Refusing any shape allocates a bounded amount: the check of the largest
// document the body limit allows stays under a fixed number of
// allocations, and the 958-byte one under a few thousand.
func TestRefusalAllocationsAreBounded(t *testing.T) {
	shapes := attackShapes()
	for name, limit := range map[string]float64{
		"nested fragments 958 B":  2000,
		"fragments 16 KB":         20000,
		"aliases 16 KB":           20000,
		"one field 20000 times":   10, // refused by its size
		"30000 unknown fields":    10,
		"2000 directives (32 KB)": 40000,
		"5000 tokens+":            40000,
	} {
		q := shapes[name]
		allocs := testing.AllocsPerRun(5, func() {
			if _, err := checkDocument(q, defaultDocumentLimits()); err == nil {
				t.Fatalf("%s accepted", name)
			}
		})
		if allocs > limit {
			t.Errorf("%s: %.0f allocations, want at most %.0f", name, allocs, limit)
		}
	}
}

// BenchmarkRefuseAttackShapes serves each shape through the handler (the
// figures of bench/README.md: CPU time and bytes allocated per request).
func BenchmarkRefuseAttackShapes(b *testing.B) {
	s, tok := shapeServer(b)
	for name, q := range attackShapes() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// A comment makes each document new to the caches, as
				// an attacker's would be.
				i++
				w := httptest.NewRecorder()
				s.ServeHTTP(w, shapeRequest(tok, q+"\n#"+strconv.Itoa(i)))
			}
		})
	}
}
