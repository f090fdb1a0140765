package directory

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// FuzzDecodeEvent feeds arbitrary bytes to the event decoder: it must never
// panic, and whatever it accepts must be well-formed enough to verify and
// to serialize back.
func FuzzDecodeEvent(f *testing.F) {
	a := newAgent(f)
	valid := regEvent(f, a, time.Unix(1_700_000_000, 0), "seed", nostr.Tag{"capability", "x"})
	f.Add(mustJSON(f, valid))
	f.Add(mustJSON(f, map[string]any{"event": valid}))
	f.Add([]byte(`{"id":"","pubkey":"","created_at":0,"kind":0,"tags":[[]],"content":"","sig":""}`))
	f.Add([]byte(`{"tags":[null],"kind":-1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"id":1}{"id":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		evt, err := DecodeEvent(b)
		if err != nil {
			if evt != nil {
				t.Fatal("an event with an error")
			}
			return
		}
		if !isLowerHex(evt.ID, 64) || !isLowerHex(evt.PubKey, 64) || !isLowerHex(evt.Sig, 128) {
			t.Fatalf("accepted malformed hex: %+v", evt)
		}
		if len(evt.Tags) > MaxTags || len(evt.Content) > MaxContentBytes {
			t.Fatal("accepted an oversized event")
		}
		for _, tag := range evt.Tags {
			if len(tag) == 0 || len(tag) > MaxTagElements {
				t.Fatalf("accepted tag %v", tag)
			}
		}
		_ = VerifyEvent(evt)
		if _, err := json.Marshal(evt); err != nil {
			t.Fatal(err)
		}
		_ = registrationBody(b)
	})
}

// FuzzRegister runs arbitrary bodies through the whole registration path.
func FuzzRegister(f *testing.F) {
	e := newEnv(f, Options{RegisterLimitIP: Limit{1 << 30, time.Hour}, RegisterLimitPubkey: Limit{1 << 30, time.Hour}})
	a := newAgent(f)
	f.Add(mustJSON(f, regEvent(f, a, e.now(), "seed")))
	f.Add([]byte(`{"event":{"kind":31339}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, err := e.dir.Register(t.Context(), registrationBody(b))
		if err != nil {
			var rf *refusal
			if !asRefusal(err, &rf) {
				t.Fatalf("not a refusal: %v", err)
			}
		}
	})
}
