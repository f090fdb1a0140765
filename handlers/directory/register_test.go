package directory

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

func TestRegisterNewAgentAnswers201WithItsEntry(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	reg := regEvent(t, a, e.now(), "Helper", nostr.Tag{"purpose", "helps"}, nostr.Tag{"operator", "Ops Inc"})
	r := e.register(reg)
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	var en Entry
	r.json(t, &en)
	if en.Pubkey != a.pk || en.Name != "Helper" || en.Purpose != "helps" || en.Operator == nil || *en.Operator != "Ops Inc" ||
		en.RegistrationEvent != reg.ID || en.FirstRegisteredAt != int64(reg.CreatedAt) || en.CreditScore != nil {
		t.Errorf("entry = %+v", en)
	}
	if loc := r.header.Get("Location"); loc != "/agents/"+a.npub() {
		t.Errorf("Location = %q", loc)
	}
	if r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Error("no CORS header")
	}
}

func TestRegisterAcceptsWrappedEvent(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	body := mustJSON(t, map[string]any{"event": regEvent(t, a, e.now(), "Wrapped")})
	r := e.do(http.MethodPost, RegisterPath, body)
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	e.mustEntry(a.pk)
}

func TestRegisterDescriptionIsAnAliasOfPurpose(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	en := e.mustRegister(regEvent(t, a, e.now(), "Alias", nostr.Tag{"description", "described"}))
	if en.Purpose != "described" {
		t.Errorf("purpose = %q", en.Purpose)
	}
}

func TestRegisterCapabilitiesAreRepeatableTags(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	en := e.mustRegister(regEvent(t, a, e.now(), "Caps",
		nostr.Tag{"capability", "translate"}, nostr.Tag{"capability", "code"}, nostr.Tag{"capability", "translate"}))
	if strings.Join(en.Capabilities, ",") != "translate,code" {
		t.Errorf("capabilities = %v (in tag order, duplicates dropped)", en.Capabilities)
	}
}

func TestRegisterNewerEventUpdatesAndKeepsFirstRegisteredAt(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	first := regEvent(t, a, e.now(), "v1")
	e.mustRegister(first)
	e.clock.Advance(time.Hour)
	second := regEvent(t, a, e.now(), "v2", nostr.Tag{"purpose", "updated"})
	r := e.register(second)
	if r.status != http.StatusOK {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	en := e.mustEntry(a.pk)
	if en.Name != "v2" || en.Purpose != "updated" || en.RegistrationEvent != second.ID || en.FirstRegisteredAt != int64(first.CreatedAt) {
		t.Errorf("entry = %+v", en)
	}
	if n := len(e.document().Agents); n != 1 {
		t.Errorf("%d entries for one key", n)
	}
}

func TestRegisterReplayIsRefused(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	reg := regEvent(t, a, e.now(), "once")
	e.mustRegister(reg)
	r := e.register(reg)
	if r.status != http.StatusBadRequest || !hasPrefix(r.errorMessage(t), "invalid:") {
		t.Errorf("replay: %d %s", r.status, r.body)
	}
}

func TestRegisterOlderEventIsRefused(t *testing.T) {
	e := newEnv(t, Options{})
	a := newAgent(t)
	newer := regEvent(t, a, e.now(), "newer")
	older := regEvent(t, a, e.now().Add(-time.Minute), "older")
	e.mustRegister(newer)
	r := e.register(older)
	if r.status != http.StatusBadRequest || !hasPrefix(r.errorMessage(t), "invalid:") {
		t.Errorf("older: %d %s", r.status, r.body)
	}
	if en := e.mustEntry(a.pk); en.Name != "newer" || en.RegistrationEvent != newer.ID {
		t.Errorf("entry changed: %+v", en)
	}
}

func TestRegisterRefusals(t *testing.T) {
	a := newAgent(t)
	e := newEnv(t, Options{RegisterLimitIP: Limit{1000, time.Hour}})
	now := e.now()
	signed := func(kind int, at time.Time, tags nostr.Tags, content string) *nostr.Event {
		return sign(t, a, &nostr.Event{Kind: kind, CreatedAt: nostr.Timestamp(at.Unix()), Tags: tags, Content: content})
	}
	base := nostr.Tags{{"d", "x"}, {"name", "n"}}
	with := func(extra ...nostr.Tag) nostr.Tags { return append(append(nostr.Tags{}, base...), extra...) }
	manyTags := with()
	for i := 0; i < MaxTags; i++ {
		manyTags = append(manyTags, nostr.Tag{"capability", "c"})
	}
	badSig := regEvent(t, a, now, "n")
	badSig.Sig = strings.Repeat("0", 128)
	badID := regEvent(t, a, now, "n")
	badID.Content = "changed after signing"
	upper := regEvent(t, a, now, "n")
	upper.ID = strings.ToUpper(upper.ID)

	cases := []struct {
		name, prefix, contains string
		body                   []byte
	}{
		{"not JSON", "invalid:", "JSON", []byte("not json")},
		{"missing field", "invalid:", "missing sig", []byte(`{"id":"` + strings.Repeat("a", 64) + `","pubkey":"` + a.pk + `","created_at":1,"kind":31339,"tags":[],"content":""}`)},
		{"wrong field type", "invalid:", "", []byte(`{"id":"x","pubkey":"y","created_at":"soon","kind":31339,"tags":[],"content":"","sig":"z"}`)},
		{"uppercase hex id", "invalid:", "lowercase hex", mustJSON(t, upper)},
		{"bad signature", "invalid:", "signature", mustJSON(t, badSig)},
		{"id does not match", "invalid:", "id", mustJSON(t, badID)},
		{"wrong kind", "invalid:", "kind 31339", mustJSON(t, signed(1, now, base, ""))},
		{"created_at too old", "invalid:", "created_at", mustJSON(t, signed(DefaultKind, now.Add(-16*time.Minute), base, ""))},
		{"created_at in the future", "invalid:", "created_at", mustJSON(t, signed(DefaultKind, now.Add(16*time.Minute), base, ""))},
		{"missing d tag", "invalid:", `"d"`, mustJSON(t, signed(DefaultKind, now, nostr.Tags{{"name", "n"}}, ""))},
		{"missing name", "invalid:", `"name"`, mustJSON(t, signed(DefaultKind, now, nostr.Tags{{"d", "x"}}, ""))},
		{"empty name", "invalid:", `"name"`, mustJSON(t, signed(DefaultKind, now, nostr.Tags{{"d", "x"}, {"name", "  "}}, ""))},
		{"two name tags", "invalid:", "more than one", mustJSON(t, signed(DefaultKind, now, with(nostr.Tag{"name", "m"}), ""))},
		{"tag without value", "invalid:", "no value", mustJSON(t, signed(DefaultKind, now, with(nostr.Tag{"operator"}), ""))},
		{"name too long", "invalid:", "longer than", mustJSON(t, signed(DefaultKind, now, nostr.Tags{{"d", "x"}, {"name", strings.Repeat("n", MaxNameLen+1)}}, ""))},
		{"control character", "invalid:", "control", mustJSON(t, signed(DefaultKind, now, nostr.Tags{{"d", "x"}, {"name", "bell\a"}}, ""))},
		{"purpose and description", "invalid:", "either", mustJSON(t, signed(DefaultKind, now, with(nostr.Tag{"purpose", "p"}, nostr.Tag{"description", "d"}), ""))},
		{"too many tags", "invalid:", "tags", mustJSON(t, signed(DefaultKind, now, manyTags, ""))},
		{"malformed nip05", "invalid:", "nip05", mustJSON(t, signed(DefaultKind, now, with(nostr.Tag{"nip05", "not an identifier!"}), ""))},
		{"content too long", "invalid:", "content", mustJSON(t, signed(DefaultKind, now, base, strings.Repeat("x", MaxContentBytes+1)))},
		{"body too large", "invalid:", "larger", bytes.Repeat([]byte(" "), MaxEventBytes+2048)},
		{"nonce without committed target", "pow:", "target", mustJSON(t, signed(DefaultKind, now, with(nostr.Tag{"nonce", "1"}), ""))},
		{"nonce commits more than the work", "pow:", "commits to 40 bits", mustJSON(t, signed(DefaultKind, now, with(nostr.Tag{"nonce", "1", "40"}), ""))},
		{"nonce target not a number", "pow:", "", mustJSON(t, signed(DefaultKind, now, with(nostr.Tag{"nonce", "1", "lots"}), ""))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(http.MethodPost, RegisterPath, c.body)
			msg := r.errorMessage(t)
			if r.status != http.StatusBadRequest || !hasPrefix(msg, c.prefix) || !strings.Contains(msg, c.contains) {
				t.Errorf("got %d %q; want 400 %q containing %q", r.status, msg, c.prefix, c.contains)
			}
		})
	}
	// Nothing is stored for a refused event.
	if _, err := agents.Of(e.store).Get(t.Context(), a.pk); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a refused registration was stored: %v", err)
	}
	if n := len(e.document().Agents); n != 0 {
		t.Errorf("%d agents after refusals only", n)
	}
}

func TestRegisterCustomKind(t *testing.T) {
	e := newEnv(t, Options{Kind: 30078})
	a := newAgent(t)
	evt := sign(t, a, &nostr.Event{Kind: 30078, CreatedAt: nostr.Timestamp(e.now().Unix()), Tags: nostr.Tags{{"d", "x"}, {"name", "custom"}}})
	if r := e.register(evt); r.status != http.StatusCreated {
		t.Errorf("configured kind: %d %s", r.status, r.body)
	}
	if r := e.register(regEvent(t, newAgent(t), e.now(), "default kind")); r.status != http.StatusBadRequest {
		t.Errorf("default kind with a custom kind configured: %d", r.status)
	}
}

func TestRegisterPowBitsCountOnlyUpToTheCommittedTarget(t *testing.T) {
	e := newEnv(t, Options{PowMinBits: 6})
	a := newAgent(t)
	reg := overMinedRegistration(t, a, e.now(), 6, 9)
	en := e.mustRegister(reg)
	if en.Gates.PowBits != 6 || !en.Gates.PowOK {
		t.Errorf("id with 9+ zero bits committing to 6: pow_bits %d pow_ok %v; want 6, true", en.Gates.PowBits, en.Gates.PowOK)
	}
}

func TestRegisterPowWithoutNonceCountsZero(t *testing.T) {
	e := newEnv(t, Options{PowMinBits: 1})
	// Try keys until the id happens to start with a zero bit: uncommitted
	// work does not count.
	for {
		a := newAgent(t)
		reg := regEvent(t, a, e.now(), "lucky")
		if reg.ID[0] < '8' {
			en := e.mustRegister(reg)
			if en.Gates.PowBits != 0 || en.Gates.PowOK {
				t.Errorf("uncommitted work counted: %+v", en.Gates)
			}
			return
		}
	}
}

func TestRegisterPowOKAtTheConfiguredMinimum(t *testing.T) {
	e := newEnv(t, Options{PowMinBits: 10})
	below, at := newAgent(t), newAgent(t)
	if en := e.mustRegister(minedRegistration(t, below, e.now(), "below", 9)); en.Gates.PowOK || en.Gates.PowBits != 9 || en.Level != 0 {
		t.Errorf("9 bits with a 10-bit gate: %+v level %d", en.Gates, en.Level)
	}
	if en := e.mustRegister(minedRegistration(t, at, e.now(), "at", 10)); !en.Gates.PowOK || en.Level != 1 {
		t.Errorf("10 bits with a 10-bit gate: %+v level %d", en.Gates, en.Level)
	}
}

func TestRegisterRequiredPowRefusesLessWork(t *testing.T) {
	e := newEnv(t, Options{PowRequiredBits: 8})
	r := e.register(regEvent(t, newAgent(t), e.now(), "lazy"))
	if r.status != http.StatusBadRequest || !hasPrefix(r.errorMessage(t), "pow:") {
		t.Errorf("no work: %d %s", r.status, r.body)
	}
	e.mustRegister(minedRegistration(t, newAgent(t), e.now(), "worker", 8))
}

func TestRegisterRateLimitedPerAddress(t *testing.T) {
	e := newEnv(t, Options{RegisterLimitIP: Limit{2, time.Hour}})
	for i := 0; i < 2; i++ {
		e.mustRegister(regEvent(t, newAgent(t), e.now(), "ok"))
	}
	a := newAgent(t)
	r := e.register(regEvent(t, a, e.now(), "third"))
	if r.status != http.StatusTooManyRequests || !hasPrefix(r.errorMessage(t), "rate-limited:") || r.header.Get("Retry-After") == "" {
		t.Errorf("third registration from one address: %d %s", r.status, r.body)
	}
	if _, err := agents.Of(e.store).Get(t.Context(), a.pk); !errors.Is(err, storage.ErrNotFound) {
		t.Error("a rate-limited registration was stored")
	}
	// The window passes.
	e.clock.Advance(2 * time.Hour)
	e.mustRegister(regEvent(t, a, e.now(), "later"))
}

func TestRegisterRateLimitedPerPubkey(t *testing.T) {
	e, a := envWithAgent(t, Options{RegisterLimitPubkey: Limit{2, time.Hour}}, "v1")
	e.clock.Advance(time.Second)
	e.mustRegister(regEvent(t, a, e.now(), "v2"))
	e.clock.Advance(time.Second)
	r := e.register(regEvent(t, a, e.now(), "v3"))
	if r.status != http.StatusTooManyRequests || !hasPrefix(r.errorMessage(t), "rate-limited:") {
		t.Errorf("third registration of one key: %d %s", r.status, r.body)
	}
	if en := e.mustEntry(a.pk); en.Name != "v2" {
		t.Errorf("name = %q after a rate-limited update", en.Name)
	}
	// Retry-After is the real wait (within two of the hour's windows, not
	// a fixed minute), the same as the message says.
	wait, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || wait <= 60 || wait > 2*3600 || !strings.Contains(r.errorMessage(t), "retry in "+strconv.Itoa(wait)+" s") {
		t.Errorf("Retry-After %q with %q", r.header.Get("Retry-After"), r.errorMessage(t))
	}
	// Another key from the same address is not limited.
	e.mustRegister(regEvent(t, newAgent(t), e.now(), "other"))
	// After the announced wait, the key may register again.
	e.clock.Advance(time.Duration(wait) * time.Second)
	if en := e.mustRegister(regEvent(t, a, e.now(), "v3")); en.Name != "v3" {
		t.Errorf("name = %q after waiting Retry-After", en.Name)
	}
}

func TestRegisterRefusesOtherMethods(t *testing.T) {
	e := newEnv(t, Options{})
	if r := e.do(http.MethodGet, RegisterPath, nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", r.status)
	}
	p := e.do(http.MethodOptions, RegisterPath, nil, "Origin", "https://x.example", "Access-Control-Request-Method", "POST")
	if p.status != http.StatusNoContent || p.header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(p.header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(p.header.Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("preflight: %d %v", p.status, p.header)
	}
}
