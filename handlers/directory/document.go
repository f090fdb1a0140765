package directory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// DocumentVersion is the document's version field.
const DocumentVersion = 2

// Entry is one agent of the document, fields in the spec's order.
type Entry struct {
	Pubkey            string   `json:"pubkey"`
	Npub              string   `json:"npub"`
	Name              string   `json:"name"`
	Purpose           string   `json:"purpose"`
	Capabilities      []string `json:"capabilities"`
	Operator          *string  `json:"operator"`
	Level             int      `json:"level"`
	Gates             Gates    `json:"gates"`
	Flags             []string `json:"flags"`
	FirstRegisteredAt int64    `json:"first_registered_at"`
	ActiveDays        int      `json:"active_days"`
	Maintainer        bool     `json:"maintainer"`
	CreditScore       *int     `json:"credit_score"` // reserved: always null
	RegistrationEvent string   `json:"registration_event"`
	ProfileURL        string   `json:"profile_url"`
}

// Gates are the admission gates of an entry.
type Gates struct {
	PowBits int     `json:"pow_bits"`
	PowOK   bool    `json:"pow_ok"`
	NIP05   *string `json:"nip05"`
}

// Document is the published document.
type Document struct {
	Version     int     `json:"version"`
	GeneratedAt int64   `json:"generated_at"`
	Agents      []Entry `json:"agents"`
}

// document is the precomputed answer.
type document struct {
	body        []byte
	agentsSum   [sha256.Size]byte // of the agents array, to detect changes
	etag        string
	generatedAt time.Time
	count       int
}

// stampEvery is how often an unchanged document's stamp is written again,
// well within agents.DirectoryStampTTL.
const stampEvery = 24 * time.Hour

// headerRoom is reserved at the start of the buffer for the document's
// head, written once generated_at is known (after the agents are encoded).
const headerRoom = 64

// encodedEntry is where an entry's JSON lies in the document served now,
// and the hash of the entry it encodes (entryHash).
type encodedEntry struct {
	sum      uint64
	off, len int
}

// entryHash hashes every field of e (FNV-1a, fields separated), so an
// entry whose hash did not change need not be encoded again.
func entryHash(e *Entry) uint64 {
	h := fnv.New64a()
	str := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	num := func(n int64) { str(strconv.FormatInt(n, 10)) }
	str(e.Pubkey)
	str(e.Npub)
	str(e.Name)
	str(e.Purpose)
	num(int64(len(e.Capabilities)))
	for _, c := range e.Capabilities {
		str(c)
	}
	if e.Operator != nil {
		str("op:" + *e.Operator)
	} else {
		str("")
	}
	num(int64(e.Level))
	num(int64(e.Gates.PowBits))
	str(strconv.FormatBool(e.Gates.PowOK))
	if e.Gates.NIP05 != nil {
		str("nip05:" + *e.Gates.NIP05)
	} else {
		str("")
	}
	num(int64(len(e.Flags)))
	for _, f := range e.Flags {
		str(f)
	}
	num(e.FirstRegisteredAt)
	num(int64(e.ActiveDays))
	str(strconv.FormatBool(e.Maintainer))
	if e.CreditScore != nil {
		num(int64(*e.CreditScore))
	} else {
		str("")
	}
	str(e.RegistrationEvent)
	str(e.ProfileURL)
	return h.Sum64()
}

// nip05Verified reports whether a's identifier counts as verified at now: the
// stored verdict, and a successful check recent enough (so a stalled
// recheck schedule cannot keep an identifier verified forever).
func (d *Directory) nip05Verified(a *agents.Agent, now time.Time) bool {
	if a.NIP05 == "" {
		return false
	}
	if a.NIP05Local != "" {
		// Served by this directory: verified for as long as the claim
		// is held and vouched for (approved by the operator, a
		// maintainer's, or claims are open), unless nip05_domain changed
		// since the registration. The stored verdict is not asked: a
		// site with another nip05_domain on the same store checks this
		// identifier as a remote one and may record a failure.
		return d.opts.NIP05Domain != "" && a.NIP05 == a.NIP05Local+"@"+d.opts.NIP05Domain &&
			d.claimVouched(agents.Claim{ID: a.NIP05, Pubkey: a.Pubkey, Approved: a.NIP05Approved})
	}
	if !a.NIP05Verified {
		return false
	}
	return now.Sub(time.Unix(a.NIP05OKAt, 0)) <= d.opts.NIP05Recheck+d.opts.NIP05Grace
}

// entry computes an agent's document entry at now.
func (d *Directory) entry(a *agents.Agent, act *agents.Activity, now time.Time) Entry {
	e := Entry{
		Pubkey:            a.Pubkey,
		Npub:              Npub(a.Pubkey),
		Name:              a.Name,
		Purpose:           a.Purpose,
		Capabilities:      a.Capabilities,
		Level:             0,
		Flags:             d.rules.flags(act, now),
		FirstRegisteredAt: a.FirstRegisteredAt,
		ActiveDays:        len(act.Days),
		Maintainer:        d.maintainers[a.Pubkey],
		RegistrationEvent: a.RegistrationEvent,
	}
	if e.Capabilities == nil {
		e.Capabilities = []string{}
	}
	if a.Operator != "" {
		op := a.Operator
		e.Operator = &op
	}
	e.Gates.PowBits = a.PowBits
	e.Gates.PowOK = a.PowBits >= d.opts.PowMinBits
	verified := d.nip05Verified(a, now)
	if verified {
		id := a.NIP05
		e.Gates.NIP05 = &id
	}
	e.Level, _ = d.level(e, verified, now)
	e.ProfileURL = d.opts.BaseURL + ProfilePrefix + e.Npub
	return e
}

// level applies the spec's admission rules and says why, for the profile
// page. Level 3 (reputable) is planned and never assigned.
func (d *Directory) level(e Entry, nip05Verified bool, now time.Time) (int, []string) {
	if len(e.Flags) > 0 {
		return 0, []string{"flagged (" + strings.Join(e.Flags, ", ") + "): any anomaly flag keeps an agent at level 0"}
	}
	registeredFor := now.Sub(time.Unix(e.FirstRegisteredAt, 0))
	if nip05Verified && registeredFor >= 7*day && e.ActiveDays >= 2 {
		return 2, []string{"NIP-05 identifier verified", "registered for at least 7 days", "posted on at least 2 distinct UTC days"}
	}
	if e.Gates.PowOK || nip05Verified {
		var why []string
		if e.Gates.PowOK {
			why = append(why, "proof of work of "+strconv.Itoa(e.Gates.PowBits)+" bits meets the "+strconv.Itoa(d.opts.PowMinBits)+"-bit gate")
		}
		if nip05Verified {
			why = append(why, "NIP-05 identifier verified")
		}
		var missing []string
		if !nip05Verified {
			missing = append(missing, "a verified NIP-05 identifier")
		}
		if registeredFor < 7*day {
			missing = append(missing, "7 days since registration")
		}
		if e.ActiveDays < 2 {
			missing = append(missing, "posts on 2 distinct UTC days")
		}
		why = append(why, "level 2 needs "+strings.Join(missing, ", "))
		return 1, why
	}
	return 0, []string{"new: level 1 needs a proof of work of " + strconv.Itoa(d.opts.PowMinBits) + " bits or a verified NIP-05 identifier"}
}

// sortEntries orders the document: level descending, then
// first_registered_at ascending (older agents first), then pubkey.
func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if a.Level != b.Level {
			return b.Level - a.Level
		}
		if a.FirstRegisteredAt != b.FirstRegisteredAt {
			if a.FirstRegisteredAt < b.FirstRegisteredAt {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Pubkey, b.Pubkey)
	})
}

// Rebuild recomputes the document now. The background schedule calls it;
// it is exported for tools and tests. generated_at and the ETag only change
// when the list of agents changes: the store remembers when each content
// was first published, so a restart, a reload or another site on the same
// store serves the same content with the same generated_at.
//
// On the node leading the directory (cluster.go) the new document is also
// published for the other nodes, which serve it instead of building their
// own.
func (d *Directory) Rebuild(ctx context.Context) error {
	d.buildMu.Lock()
	defer d.buildMu.Unlock()
	return d.rebuildLocked(ctx)
}

func (d *Directory) rebuildLocked(ctx context.Context) error {
	now := d.now()
	entries, err := d.buildEntries(ctx, now)
	if err != nil {
		return err
	}
	// Encode entry by entry into a buffer sized from the last document:
	// with 100 k agents the document is tens of MiB, and json.Marshal of
	// the whole slice would grow and copy its buffer several times.
	old := d.doc.Load()
	var buf bytes.Buffer
	if old != nil {
		buf.Grow(len(old.body) + len(old.body)/8)
	}
	buf.Write(make([]byte, headerRoom))
	start := buf.Len()
	buf.WriteByte('[')
	enc := json.NewEncoder(&buf)
	// Only changed entries are encoded: an unchanged one is copied from
	// the document served now, where the last rebuild wrote it.
	var prevBody []byte
	if old != nil && old == d.encodedFor {
		prevBody = old.body // not one loaded from another node
	}
	encoded := make(map[string]encodedEntry, len(entries))
	for i := range entries {
		if i > 0 {
			buf.WriteByte(',')
		}
		e := &entries[i]
		sum := entryHash(e)
		at := buf.Len()
		if c, ok := d.encoded[e.Pubkey]; ok && prevBody != nil && c.sum == sum {
			buf.Write(prevBody[c.off : c.off+c.len])
		} else {
			if err := enc.Encode(e); err != nil {
				return err
			}
			buf.Truncate(buf.Len() - 1) // Encode's newline
		}
		encoded[e.Pubkey] = encodedEntry{sum: sum, off: at, len: buf.Len() - at}
	}
	buf.WriteByte(']')
	agentsSum := sha256.Sum256(buf.Bytes()[start:])
	if old != nil && old.agentsSum == agentsSum {
		// The document stays: the offsets of its entries stay valid.
		if now.Sub(d.stampedAt) >= stampEvery {
			// Keep the stamp from expiring while nothing changes.
			if _, err := d.agents.StampDocument(ctx, hex.EncodeToString(agentsSum[:]), "", old.generatedAt.Unix()); err != nil {
				return err
			}
			d.stampedAt = now
		}
		return d.publishLocked(ctx, old, false, now)
	}
	var prev string
	if old != nil {
		prev = hex.EncodeToString(old.agentsSum[:])
	}
	generatedAt, err := d.agents.StampDocument(ctx, hex.EncodeToString(agentsSum[:]), prev, now.Unix())
	if err != nil {
		return err
	}
	d.stampedAt = now
	buf.WriteString("}\n")
	head := `{"version":2,"generated_at":` + strconv.FormatInt(generatedAt, 10) + `,"agents":`
	body := buf.Bytes()[start-len(head):]
	copy(body, head)
	// The offsets above count from the buffer's start; the body starts
	// start-len(head) into it.
	shift := start - len(head)
	for pk, c := range encoded {
		c.off -= shift
		encoded[pk] = c
	}
	doc := &document{
		body:        body,
		agentsSum:   agentsSum,
		etag:        etagOf(body),
		generatedAt: time.Unix(generatedAt, 0),
		count:       len(entries),
	}
	d.encoded, d.encodedFor = encoded, doc
	d.doc.Store(doc)
	return d.publishLocked(ctx, doc, true, now)
}

func (d *Directory) buildEntries(ctx context.Context, now time.Time) ([]Entry, error) {
	entries := []Entry{}
	err := d.agents.Each(ctx, func(a *agents.Agent, act *agents.Activity, banned bool) error {
		if banned {
			return nil
		}
		entries = append(entries, d.entry(a, act, now))
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortEntries(entries)
	return entries, nil
}

func (d *Directory) serveDocument(w http.ResponseWriter, r *http.Request) {
	if cors(w, r, "GET, HEAD, OPTIONS") {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD, OPTIONS")
		return
	}
	doc := d.doc.Load()
	h := w.Header()
	h.Set("ETag", doc.etag)
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(d.opts.MaxAge/time.Second)))
	h.Set("Last-Modified", doc.generatedAt.UTC().Format(http.TimeFormat))
	h.Set("X-Content-Type-Options", "nosniff")
	if notModified(r, doc.etag, doc.generatedAt) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(doc.body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(doc.body)
	}
}

// notModified evaluates the conditional GET of RFC 9110 13.2.2: If-None-Match
// when present, otherwise If-Modified-Since against lastModified (compared at
// the one-second precision of HTTP dates; an unparsable date is ignored).
func notModified(r *http.Request, etag string, lastModified time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		return etagMatches(inm, etag)
	}
	ims := r.Header.Get("If-Modified-Since")
	if ims == "" {
		return false
	}
	t, err := http.ParseTime(ims)
	if err != nil {
		return false
	}
	return !lastModified.Truncate(time.Second).After(t)
}

// etagMatches applies If-None-Match's weak comparison (RFC 9110 13.1.2).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
