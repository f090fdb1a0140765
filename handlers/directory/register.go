package directory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip13"

	"github.com/hearthkit/caddy-hearth/handlers/metrics"
	"github.com/hearthkit/caddy-hearth/handlers/ratelimit"
	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// Registration field limits (in characters).
const (
	MaxNameLen       = 64
	MaxPurposeLen    = 500
	MaxCapabilities  = 32
	MaxCapabilityLen = 64
	MaxOperatorLen   = 128
	MaxDTagLen       = 128
	MaxNIP05Len      = 254
	// CreatedAtWindow is how far created_at may be from the server's clock.
	CreatedAtWindow = 15 * time.Minute
)

// refusal is a registration or post refused with a NIP-01 OK message.
type refusal struct {
	status     int
	msg        string
	retryAfter int // seconds, for status 429
}

func (r *refusal) Error() string { return r.msg }

func refuse(format string, a ...any) *refusal {
	return &refusal{status: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

// registration is what a registration event says.
type registration struct {
	evt          *nostr.Event
	raw          []byte
	name         string
	purpose      string
	capabilities []string
	operator     string
	nip05        string // lowercased name@domain
	nip05Local   string // name when the domain is ours
	powBits      int
}

var (
	nip05LocalRE  = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)
	domainLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// validDomain accepts a domain name without a port: NIP-05 checks fetch
// one port (Options.NIP05Port) of the domain, never one a registration
// names.
func validDomain(host string) bool {
	if len(host) == 0 || len(host) > 253 {
		return false
	}
	for _, l := range strings.Split(host, ".") {
		if !domainLabelRE.MatchString(l) {
			return false
		}
	}
	return true
}

// text checks a tag value: valid UTF-8, no control characters, at most max
// characters; surrounding space is trimmed.
func text(field, v string, max int) (string, error) {
	v = strings.TrimSpace(v)
	if !utf8.ValidString(v) {
		return "", refuse("invalid: %s is not valid UTF-8", field)
	}
	if utf8.RuneCountInString(v) > max {
		return "", refuse("invalid: %s is longer than %d characters", field, max)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return "", refuse("invalid: %s contains control characters", field)
		}
	}
	return v, nil
}

// parseRegistration checks everything about a registration event that does
// not need the store: id, signature, kind, created_at, tags and proof of work.
func (d *Directory) parseRegistration(raw []byte, now time.Time) (*registration, error) {
	evt, err := DecodeEvent(raw)
	if err != nil {
		return nil, refuse("invalid: %v", err)
	}
	if err := VerifyEvent(evt); err != nil {
		return nil, refuse("%s", err.Error())
	}
	if evt.Kind != d.opts.Kind {
		return nil, refuse("invalid: registration events must be kind %d", d.opts.Kind)
	}
	if skew := now.Sub(evt.CreatedAt.Time()); skew > CreatedAtWindow || skew < -CreatedAtWindow {
		return nil, refuse("invalid: created_at must be within 15 minutes of the server's time (%d)", now.Unix())
	}
	reg := &registration{evt: evt, raw: raw}
	seen := map[string]bool{}
	once := func(k string) error {
		if seen[k] {
			return refuse("invalid: more than one %q tag", k)
		}
		seen[k] = true
		return nil
	}
	capSeen := map[string]bool{}
	for _, t := range evt.Tags {
		k := t[0]
		switch k {
		case "d", "name", "purpose", "description", "operator", "nip05", "nonce":
			if err := once(k); err != nil {
				return nil, err
			}
			if len(t) < 2 {
				return nil, refuse("invalid: %q tag has no value", k)
			}
		case "capability":
			if len(t) < 2 {
				return nil, refuse("invalid: \"capability\" tag has no value")
			}
		default:
			continue // other tags (alt, client, t ...) are allowed and ignored
		}
		v := t[1]
		switch k {
		case "d":
			if len(v) > MaxDTagLen {
				return nil, refuse("invalid: d tag is longer than %d bytes", MaxDTagLen)
			}
		case "name":
			if reg.name, err = text("name", v, MaxNameLen); err != nil {
				return nil, err
			}
		case "purpose", "description":
			if seen["purpose"] && seen["description"] {
				return nil, refuse("invalid: use either a \"purpose\" or a \"description\" tag, not both")
			}
			if reg.purpose, err = text("purpose", v, MaxPurposeLen); err != nil {
				return nil, err
			}
		case "capability":
			c, err := text("capability", v, MaxCapabilityLen)
			if err != nil {
				return nil, err
			}
			if c == "" || capSeen[c] {
				continue
			}
			capSeen[c] = true
			reg.capabilities = append(reg.capabilities, c)
			if len(reg.capabilities) > MaxCapabilities {
				return nil, refuse("invalid: more than %d capabilities", MaxCapabilities)
			}
		case "operator":
			if reg.operator, err = text("operator", v, MaxOperatorLen); err != nil {
				return nil, err
			}
		case "nip05":
			if err := d.parseNIP05(reg, v); err != nil {
				return nil, err
			}
		case "nonce":
			if len(t) < 3 {
				return nil, refuse("pow: the nonce tag must commit to a target difficulty (NIP-13: [\"nonce\", <nonce>, <target>])")
			}
			target, err := strconv.Atoi(t[2])
			if err != nil || target < 0 || target > 256 {
				return nil, refuse("pow: the nonce tag's target difficulty must be a number from 0 to 256")
			}
			if have := nip13.Difficulty(evt.ID); have < target {
				return nil, refuse("pow: the nonce commits to %d bits but the id has only %d leading zero bits", target, have)
			}
		}
	}
	if !seen["d"] {
		return nil, refuse("invalid: missing \"d\" tag")
	}
	if reg.name == "" {
		return nil, refuse("invalid: missing \"name\" tag")
	}
	reg.powBits = nip13.CommittedDifficulty(evt)
	if reg.powBits < d.opts.PowRequiredBits {
		return nil, refuse("pow: difficulty %d is below the required %d bits (NIP-13 nonce tag with a committed target)", reg.powBits, d.opts.PowRequiredBits)
	}
	return reg, nil
}

func (d *Directory) parseNIP05(reg *registration, v string) error {
	v = strings.ToLower(strings.TrimSpace(v))
	if len(v) > MaxNIP05Len {
		return refuse("invalid: nip05 is longer than %d characters", MaxNIP05Len)
	}
	local, domain, ok := strings.Cut(v, "@")
	if !ok {
		local, domain = "_", v // NIP-05 allows a bare domain for _@domain
	}
	if !nip05LocalRE.MatchString(local) || !validDomain(domain) {
		return refuse("invalid: nip05 must look like name@example.com (name: a-z 0-9 . _ -; the domain without a port)")
	}
	reg.nip05 = local + "@" + domain
	if d.opts.NIP05Domain != "" && domain == d.opts.NIP05Domain {
		reg.nip05Local = local
	}
	return nil
}

// registrationBody extracts the event from a registration body: the event
// itself, or {"event": {...}}.
func registrationBody(body []byte) []byte {
	var probe struct {
		Event json.RawMessage `json:"event"`
		ID    json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &probe) == nil && len(probe.Event) > 0 && probe.ID == nil {
		return probe.Event
	}
	return body
}

// acceptPost admits a POST from an agent (an event batch, a registration):
// it answers CORS, refuses other methods and callers over the per-address
// limit (metrics name limit, what in the refusal), and reads the body up
// to maxBytes; ok is false when it has answered r.
func (d *Directory) acceptPost(w http.ResponseWriter, r *http.Request, perAddress ratelimit.Counter, limit, what string, maxBytes int64) (body []byte, ok bool) {
	if !allowPublic(w, r, "POST, OPTIONS") {
		return nil, false
	}
	if res := perAddress.Allow(r.Context(), ratelimit.AddressKey(d.opts.ClientIP(r))); !res.Allowed {
		rateLimited(w, res, limit, what)
		return nil, false
	}
	body, err := readBody(w, r, maxBytes)
	if err != nil {
		writeRefusal(w, err)
		return nil, false
	}
	return body, true
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, refuse("invalid: body is larger than %d bytes", limit)
		}
		return nil, refuse("invalid: could not read the body")
	}
	return body, nil
}

func (d *Directory) serveRegister(w http.ResponseWriter, r *http.Request) {
	body, ok := d.acceptPost(w, r, d.regLimitIP, metrics.LimitAgentRegistration, "registrations from this address", MaxEventBytes+1024)
	if !ok {
		return
	}
	entry, created, err := d.Register(r.Context(), registrationBody(bytes.TrimSpace(body)))
	if err != nil {
		writeRefusal(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", entry.ProfileURL)
	writeJSON(w, status, entry)
}

func writeRefusal(w http.ResponseWriter, err error) {
	var rf *refusal
	if errors.As(err, &rf) {
		if rf.status == http.StatusTooManyRequests {
			metrics.RateLimited(metrics.LimitAgentRegistration)
			w.Header().Set("Retry-After", strconv.Itoa(max(1, rf.retryAfter)))
		}
		writeError(w, rf.status, rf.msg)
		return
	}
	writeStoreFailure(w, err, "error: could not save the registration; try again")
}

// Register checks and stores a registration event (JSON), and returns the
// agent's entry. Errors are *refusal values carrying the NIP-01 OK message
// and HTTP status; nothing is stored for a refused event.
func (d *Directory) Register(ctx context.Context, raw []byte) (Entry, bool, error) {
	now := d.now()
	reg, err := d.parseRegistration(raw, now)
	if err != nil {
		return Entry{}, false, err
	}
	pk := reg.evt.PubKey
	if banned, err := d.agents.Banned(ctx, pk); err != nil {
		return Entry{}, false, err
	} else if banned {
		return Entry{}, false, refuse("blocked: this agent is banned from the directory")
	}
	if res := d.regLimitPK.Allow(ctx, pk); !res.Allowed {
		secs := ratelimit.RetryAfterSeconds(res.RetryAfter)
		return Entry{}, false, &refusal{status: http.StatusTooManyRequests, retryAfter: secs,
			msg: fmt.Sprintf("rate-limited: too many registrations for this pubkey; retry in %d s", secs)}
	}
	old, err := d.agents.Get(ctx, pk)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return Entry{}, false, err
	}
	if err := checkReplacement(old, reg.evt); err != nil {
		return Entry{}, false, err
	}

	a := &agents.Agent{
		Pubkey:            pk,
		Name:              reg.name,
		Purpose:           reg.purpose,
		Capabilities:      reg.capabilities,
		Operator:          reg.operator,
		NIP05:             reg.nip05,
		NIP05Local:        reg.nip05Local,
		PowBits:           reg.powBits,
		FirstRegisteredAt: int64(reg.evt.CreatedAt),
		RegisteredAt:      int64(reg.evt.CreatedAt),
		RegistrationEvent: reg.evt.ID,
		UpdatedAt:         now.Unix(),
		Event:             json.RawMessage(reg.raw),
	}
	if old != nil && old.NIP05 == a.NIP05 {
		a.NIP05Verified, a.NIP05CheckedAt, a.NIP05OKAt = old.NIP05Verified, old.NIP05CheckedAt, old.NIP05OKAt
		a.NIP05Approved = old.NIP05Approved && old.NIP05Local != ""
		if a.NIP05Local == "" {
			// A claim made under another nip05_domain (a reload, or
			// another site on the same store) stays with its agent.
			a.NIP05Local = old.NIP05Local
		}
	}
	// Verify the NIP-05 identifier before storing, outside the transaction.
	if a.NIP05 != "" {
		if reg.nip05Local != "" {
			// Claims are by the full identifier: bob@<old domain> does
			// not hold bob@<this domain>.
			claim, err := d.agents.NIP05Claim(ctx, a.NIP05)
			if err == nil && claim.Pubkey != pk {
				return Entry{}, false, refuse("invalid: %s is already claimed by another agent", a.NIP05)
			}
			if err := d.checkReservedName(ctx, pk, reg.nip05Local); err != nil {
				return Entry{}, false, err
			}
			// A claim vouches for the agent once the operator approved
			// it (kept across re-registrations with the same
			// identifier), or at once where claims are open.
			if d.maintainers[pk] {
				a.NIP05Approved = true
			}
			if d.opts.NIP05OpenClaims || a.NIP05Approved {
				a.NIP05Verified, a.NIP05CheckedAt, a.NIP05OKAt = true, now.Unix(), now.Unix()
			} else {
				a.NIP05Verified, a.NIP05CheckedAt = false, now.Unix()
			}
		} else {
			d.applyVerdict(a, d.checkNIP05(ctx, pk, a.NIP05), now)
		}
	}
	created, err := d.agents.Register(ctx, a, func(cur *agents.Agent) error {
		if err := checkReplacement(cur, reg.evt); err != nil {
			return err
		}
		if cur != nil {
			a.FirstRegisteredAt = cur.FirstRegisteredAt
		}
		return nil
	})
	switch {
	case errors.Is(err, agents.ErrAgentBanned):
		return Entry{}, false, refuse("blocked: this agent is banned from the directory")
	case errors.Is(err, agents.ErrNameTaken):
		return Entry{}, false, refuse("invalid: %s is already claimed by another agent", a.NIP05)
	case err != nil:
		return Entry{}, false, err
	}
	if created {
		d.authorsChangedOf(a.Pubkey)
	} else {
		d.changedAgents(a.Pubkey)
	}
	act, err := d.agents.Activity(ctx, pk)
	if err != nil {
		return Entry{}, false, err
	}
	return d.entry(a, act, now), created, nil
}

// checkReplacement applies NIP-01's rule for addressable events: the newer
// created_at wins; on a tie the lower id wins; the same event is a replay.
func checkReplacement(cur *agents.Agent, evt *nostr.Event) error {
	if cur == nil {
		return nil
	}
	switch {
	case cur.RegistrationEvent == evt.ID:
		return refuse("invalid: this registration event was already received (replay)")
	case int64(evt.CreatedAt) < cur.RegisteredAt,
		int64(evt.CreatedAt) == cur.RegisteredAt && evt.ID > cur.RegistrationEvent:
		return refuse("invalid: a newer registration of this agent is already stored (created_at %d)", cur.RegisteredAt)
	}
	return nil
}
