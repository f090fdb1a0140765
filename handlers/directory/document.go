package directory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	// parts are the body, written in order: a rebuild after a change
	// assembles again only the runs of entries (chunks) that changed, and
	// the rest of the body is shared with the document before it.
	parts       [][]byte
	size        int
	chunks      []docChunk        // the leader's: its agents array (nil on other nodes)
	agentsSum   [sha256.Size]byte // of the agents array, to detect changes
	etag        string
	generatedAt time.Time
	count       int
}

// docChunk is a run of consecutive entries of the agents array, each
// preceded by a comma, and the digest of their digests.
type docChunk struct {
	sum [sha256.Size]byte
	b   []byte
}

// wholeDocument is a document of one part (as a node that does not lead
// receives it).
func wholeDocument(body []byte) *document {
	return &document{parts: [][]byte{body}, size: len(body)}
}

// reader reads the body.
func (doc *document) reader() io.Reader {
	rs := make([]io.Reader, len(doc.parts))
	for i, p := range doc.parts {
		rs[i] = bytes.NewReader(p)
	}
	return io.MultiReader(rs...)
}

// bytes returns the body in one slice (a copy unless it has one part).
func (doc *document) bytes() []byte {
	if len(doc.parts) == 1 {
		return doc.parts[0]
	}
	return bytes.Join(doc.parts, nil)
}

// Chunk boundaries depend on the entries, not on their positions, so that
// an entry added, removed or moved changes the chunks around it only: a
// chunk ends after an entry whose digest starts with a zero byte (one in
// 256) or at maxChunkEntries.
const maxChunkEntries = 1024

func endsChunk(rec *agentRecord, n int) bool { return rec.digest[0] == 0 || n >= maxChunkEntries }

// stampEvery is how often an unchanged document's stamp is written again,
// well within agents.DirectoryStampTTL.
const stampEvery = 24 * time.Hour

// sameEntry reports whether a and b have the same content, so that an
// entry whose content did not change need not be encoded again. It runs
// for every entry of every rebuild: the strings of two entries of one
// agent usually share their bytes, which makes the comparisons cheap.
func sameEntry(a, b *Entry) bool {
	return a.Pubkey == b.Pubkey && a.Npub == b.Npub && a.Name == b.Name && a.Purpose == b.Purpose &&
		slices.Equal(a.Capabilities, b.Capabilities) && sameString(a.Operator, b.Operator) &&
		a.Level == b.Level && a.Gates.PowBits == b.Gates.PowBits && a.Gates.PowOK == b.Gates.PowOK &&
		sameString(a.Gates.NIP05, b.Gates.NIP05) && slices.Equal(a.Flags, b.Flags) &&
		a.FirstRegisteredAt == b.FirstRegisteredAt && a.ActiveDays == b.ActiveDays &&
		a.Maintainer == b.Maintainer && sameInt(a.CreditScore, b.CreditScore) &&
		a.RegistrationEvent == b.RegistrationEvent && a.ProfileURL == b.ProfileURL
}

func sameString(a, b *string) bool { return a == b || a != nil && b != nil && *a == *b }
func sameInt(a, b *int) bool       { return a == b || a != nil && b != nil && *a == *b }

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
	npub := Npub(a.Pubkey)
	own := *a // the entry points into it; callers may reuse a (agents.Store.Each)
	return d.entryOf(&own, act, npub, d.profileURL(npub), now)
}

// profileURL is the address of the profile page of npub.
func (d *Directory) profileURL(npub string) string { return d.opts.BaseURL + ProfilePrefix + npub }

// entryOf is entry for an agent whose npub and profile URL are known. It
// allocates nothing of its own (a rebuild runs it for every agent): the
// entry points into a and shares its slices, so a must not change while
// the entry is used.
func (d *Directory) entryOf(a *agents.Agent, act *agents.Activity, npub, profileURL string, now time.Time) Entry {
	e := Entry{
		Pubkey:            a.Pubkey,
		Npub:              npub,
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
		e.Capabilities = noFlags // []string{}, shared
	}
	if a.Operator != "" {
		e.Operator = &a.Operator
	}
	e.Gates.PowBits = a.PowBits
	e.Gates.PowOK = a.PowBits >= d.opts.PowMinBits
	verified := d.nip05Verified(a, now)
	if verified {
		e.Gates.NIP05 = &a.NIP05
	}
	e.Level = d.levelOf(&e, verified, now)
	e.ProfileURL = profileURL
	return e
}

// entryChangesAt returns the first second, after now, at which the entry
// entryOf computes for a and act at now may change with time alone: a burst
// flag expiring, a post leaving the template sample, 7 days since the
// registration, a remote NIP-05 verification passing its grace. Until then
// a rebuild keeps the entry as it is unless the agent's records change.
// Each time is at or before the change (a second early at most), and a
// change due within the current second asks for the next one.
func (d *Directory) entryChangesAt(a *agents.Agent, act *agents.Activity, now time.Time) int64 {
	nowU := now.Unix()
	next := int64(math.MaxInt64)
	at := func(t int64) {
		switch {
		case t > nowU:
			next = min(next, t)
		case t == nowU:
			next = min(next, nowU+1)
		}
	}
	if act.BurstAt > 0 {
		at(act.BurstAt + int64(burstHorizon/time.Second))
	}
	since := now.Add(-templateSpan).Unix()
	if i := sort.Search(len(act.Skels), func(i int) bool { return act.Skels[i].At >= since }); i < len(act.Skels) {
		at(act.Skels[i].At + int64(templateSpan/time.Second))
	}
	at(a.FirstRegisteredAt + int64(7*day/time.Second))
	if a.NIP05 != "" && a.NIP05Local == "" && a.NIP05Verified {
		at(a.NIP05OKAt + int64((d.opts.NIP05Recheck+d.opts.NIP05Grace)/time.Second))
	}
	return next
}

// levelOf applies the spec's admission rules. Level 3 (reputable) is
// planned and never assigned.
func (d *Directory) levelOf(e *Entry, nip05Verified bool, now time.Time) int {
	switch {
	case len(e.Flags) > 0:
		return 0
	case nip05Verified && now.Sub(time.Unix(e.FirstRegisteredAt, 0)) >= 7*day && e.ActiveDays >= 2:
		return 2
	case e.Gates.PowOK || nip05Verified:
		return 1
	}
	return 0
}

// level is levelOf with the reasons, for the profile page.
func (d *Directory) level(e Entry, nip05Verified bool, now time.Time) (int, []string) {
	lvl := d.levelOf(&e, nip05Verified, now)
	switch {
	case len(e.Flags) > 0:
		return lvl, []string{"flagged (" + strings.Join(e.Flags, ", ") + "): any anomaly flag keeps an agent at level 0"}
	case lvl == 2:
		return lvl, []string{"NIP-05 identifier verified", "registered for at least 7 days", "posted on at least 2 distinct UTC days"}
	case lvl == 0:
		return lvl, []string{"new: level 1 needs a proof of work of " + strconv.Itoa(d.opts.PowMinBits) + " bits or a verified NIP-05 identifier"}
	}
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
	if now.Sub(time.Unix(e.FirstRegisteredAt, 0)) < 7*day {
		missing = append(missing, "7 days since registration")
	}
	if e.ActiveDays < 2 {
		missing = append(missing, "posts on 2 distinct UTC days")
	}
	return lvl, append(why, "level 2 needs "+strings.Join(missing, ", "))
}

// sortEntries orders the document (compareEntries).
func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return compareEntries(&a, &b) })
}

// compareEntries is the document's order: level descending, then
// first_registered_at ascending (older agents first), then pubkey.
func compareEntries(a, b *Entry) int {
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
	recs, err := d.buildEntries(ctx, now)
	if err != nil {
		return err
	}
	// The agents array's digest is that of its entries' digests (each
	// computed once, when its entry is encoded): an unchanged document is
	// known without copying its entries.
	digests := sha256.New()
	for _, rec := range recs {
		digests.Write(rec.digest[:])
	}
	var agentsSum [sha256.Size]byte
	digests.Sum(agentsSum[:0])
	old := d.doc.Load()
	if old != nil && old.agentsSum == agentsSum {
		// The document stays.
		if now.Sub(d.stampedAt) >= stampEvery {
			// Keep the stamp from expiring while nothing changes.
			if _, err := d.agents.StampDocument(ctx, hex.EncodeToString(agentsSum[:]), "", old.generatedAt.Unix()); err != nil {
				return err
			}
			d.stampedAt = now
		}
		return d.publishLocked(ctx, old, false, now)
	}
	chunks := assembleChunks(recs, old)
	var prev string
	if old != nil {
		prev = hex.EncodeToString(old.agentsSum[:])
	}
	generatedAt, err := d.agents.StampDocument(ctx, hex.EncodeToString(agentsSum[:]), prev, now.Unix())
	if err != nil {
		return err
	}
	d.stampedAt = now
	doc := &document{
		chunks:      chunks,
		agentsSum:   agentsSum,
		etag:        etagOf(agentsSum, generatedAt),
		generatedAt: time.Unix(generatedAt, 0),
		count:       len(recs),
	}
	doc.parts = make([][]byte, 0, len(chunks)+2)
	doc.parts = append(doc.parts, []byte(`{"version":2,"generated_at":`+strconv.FormatInt(generatedAt, 10)+`,"agents":[`))
	for i, c := range chunks {
		if i == 0 {
			doc.parts = append(doc.parts, c.b[1:]) // no comma before the first entry
		} else {
			doc.parts = append(doc.parts, c.b)
		}
	}
	doc.parts = append(doc.parts, []byte("]}\n"))
	for _, p := range doc.parts {
		doc.size += len(p)
	}
	d.doc.Store(doc)
	return d.publishLocked(ctx, doc, true, now)
}

// assembleChunks cuts recs (in the document's order) into chunks
// (endsChunk) and assembles each, taking from old the chunks whose entries
// are the same (by the digest of their digests).
func assembleChunks(recs []*agentRecord, old *document) []docChunk {
	var have map[[sha256.Size]byte][]byte
	if old != nil {
		have = make(map[[sha256.Size]byte][]byte, len(old.chunks))
		for _, c := range old.chunks {
			have[c.sum] = c.b
		}
	}
	var chunks []docChunk
	h := sha256.New()
	start := 0
	for i, rec := range recs {
		h.Write(rec.digest[:])
		if i < len(recs)-1 && !endsChunk(rec, i+1-start) {
			continue
		}
		c := docChunk{}
		h.Sum(c.sum[:0])
		h.Reset()
		if b, ok := have[c.sum]; ok {
			c.b = b
		} else {
			n := 0
			for _, r := range recs[start : i+1] {
				n += 1 + len(r.json)
			}
			c.b = make([]byte, 0, n)
			for _, r := range recs[start : i+1] {
				c.b = append(c.b, ',')
				c.b = append(c.b, r.json...)
			}
		}
		chunks = append(chunks, c)
		start = i + 1
	}
	return chunks
}

// etagOf is the ETag of the document whose agents array has digest
// agentsSum and whose generated_at is generatedAt: the two make its bytes.
func etagOf(agentsSum [sha256.Size]byte, generatedAt int64) string {
	sum := sha256.Sum256(strconv.AppendInt(agentsSum[:], generatedAt, 10))
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
}

func (d *Directory) serveDocument(w http.ResponseWriter, r *http.Request) {
	if !allowPublic(w, r, "GET, HEAD, OPTIONS") {
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
	h.Set("Content-Length", strconv.Itoa(doc.size))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		// Each part is large (a chunk of entries) but the head and
		// the tail: the writer's buffer takes those, the chunks go to
		// the connection without a copy.
		for _, p := range doc.parts {
			if _, err := w.Write(p); err != nil {
				return
			}
		}
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

// appendEntry appends e's JSON, byte for byte what encoding/json's Marshal
// writes (HTML characters escaped; TestAppendEntryIsJSONMarshal compares
// them), without reflection: a full rebuild encodes every entry.
func appendEntry(b []byte, e *Entry) []byte {
	b = append(b, `{"pubkey":`...)
	b = appendJSONString(b, e.Pubkey)
	b = append(b, `,"npub":`...)
	b = appendJSONString(b, e.Npub)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, e.Name)
	b = append(b, `,"purpose":`...)
	b = appendJSONString(b, e.Purpose)
	b = append(b, `,"capabilities":`...)
	b = appendJSONStrings(b, e.Capabilities)
	b = append(b, `,"operator":`...)
	b = appendJSONStringPtr(b, e.Operator)
	b = append(b, `,"level":`...)
	b = strconv.AppendInt(b, int64(e.Level), 10)
	b = append(b, `,"gates":{"pow_bits":`...)
	b = strconv.AppendInt(b, int64(e.Gates.PowBits), 10)
	b = append(b, `,"pow_ok":`...)
	b = strconv.AppendBool(b, e.Gates.PowOK)
	b = append(b, `,"nip05":`...)
	b = appendJSONStringPtr(b, e.Gates.NIP05)
	b = append(b, `},"flags":`...)
	b = appendJSONStrings(b, e.Flags)
	b = append(b, `,"first_registered_at":`...)
	b = strconv.AppendInt(b, e.FirstRegisteredAt, 10)
	b = append(b, `,"active_days":`...)
	b = strconv.AppendInt(b, int64(e.ActiveDays), 10)
	b = append(b, `,"maintainer":`...)
	b = strconv.AppendBool(b, e.Maintainer)
	b = append(b, `,"credit_score":`...)
	if e.CreditScore == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*e.CreditScore), 10)
	}
	b = append(b, `,"registration_event":`...)
	b = appendJSONString(b, e.RegistrationEvent)
	b = append(b, `,"profile_url":`...)
	b = appendJSONString(b, e.ProfileURL)
	return append(b, '}')
}

func appendJSONStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

func appendJSONStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString is encoding/json's string encoding with HTML escaping
// (Go 1.26 encode.go appendString): \b, \f, \n, \r, \t and the other
// control characters, <, > and &, invalid UTF-8 as \ufffd, U+2028 and
// U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
