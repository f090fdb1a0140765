package directory

import (
	"bytes"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// Flag names, in the order the document lists them.
const (
	FlagTemplate = "template"
	FlagBurst    = "burst"
)

const (
	day          = 24 * time.Hour
	burstHorizon = 24 * time.Hour     // a burst flags the agent for this long
	templateSpan = 7 * 24 * time.Hour // posts considered for the template flag
	maxFuture    = 15 * time.Minute   // clock skew allowed on created_at
)

// Skeleton reduces a post's text to the shape that template posts share:
// lowercased, URLs (and nostr: URIs), mentions, hex runs of 8+ characters
// and numbers removed, whitespace folded to single spaces.
//
// It reads the text in passes, each removing one kind of token as the
// regular expressions of the rule would, in the same order, each on what
// the one before left (a removed token leaves a space): URLs
// (?:[a-z][a-z0-9+.-]*://|www\.)\S+, then nostr:\S+, then mentions
// (?:@\S+|#\[\d+\]), then \b[0-9a-f]{8,}\b, then \d+. Without the regular
// expressions the skeleton is a tenth of its former cost, paid for every
// post ingested; TestSkeletonMatchesRegexps holds it to them.
func Skeleton(text string) string {
	return string(appendSkeleton(nil, text))
}

func skeletonHash(text string) uint64 {
	var buf [512]byte
	b := appendSkeleton(buf[:0], text)
	// FNV-1a, 64 bits (hash/fnv), inline: no hasher to allocate.
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// appendSkeleton appends the skeleton of text to dst.
func appendSkeleton(dst []byte, text string) []byte {
	// Two buffers the passes write in turn; on the stack for short posts.
	var ba, bb [512]byte
	a := append(ba[:0], strings.ToLower(text)...) // valid UTF-8 from here on (ToLower replaces invalid bytes)
	b := skelURLs(bb[:0], a)
	a = skelPass(a[:0], b, nostrAt)
	b = skelPass(b[:0], a, mentionAt)
	a = skelHexWords(a[:0], b)
	b = skelDigits(b[:0], a)
	// strings.Fields (Unicode spaces), joined with single spaces.
	wrote := false
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if unicode.IsSpace(r) {
			i += n
			continue
		}
		j := i + n
		for j < len(b) {
			r, n := utf8.DecodeRune(b[j:])
			if unicode.IsSpace(r) {
				break
			}
			j += n
		}
		if wrote {
			dst = append(dst, ' ')
		}
		dst, wrote = append(dst, b[i:j]...), true
		i = j
	}
	return dst
}

var colonSlashes, www, nostrScheme = []byte("://"), []byte("www."), []byte("nostr:")

// reSpace is the whitespace of regular expressions' \s (ASCII only).
func reSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

// reWord is a word byte of regular expressions' \b (ASCII only).
func reWord(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// toSpace returns where the run of non-space bytes at i ends (\S+).
func toSpace(s []byte, i int) int {
	for i < len(s) && !reSpace(s[i]) {
		i++
	}
	return i
}

// skelPass appends s to dst with every leftmost match of a token replaced
// by a space: at(s, i) returns the end of the token starting at i, or -1.
func skelPass(dst, s []byte, at func(s []byte, i int) int) []byte {
	last := 0
	for i := 0; i < len(s); {
		end := at(s, i)
		if end < 0 {
			i++
			continue
		}
		dst = append(dst, s[last:i]...)
		dst = append(dst, ' ')
		last, i = end, end
	}
	return append(dst, s[last:]...)
}

// skelURLs appends s with every leftmost match of
// (?:[a-z][a-z0-9+.-]*://|www\.)\S+ replaced by a space. It reads each run
// of scheme characters once: "://" can only follow the whole run (the
// characters hold no ':'), so every start inside the run shares the
// scheme's outcome, and only "www." may start at a later byte of it.
func skelURLs(dst, s []byte) []byte {
	last := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < 'a' || c > 'z' {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9' || s[j] == '+' || s[j] == '.' || s[j] == '-') {
			j++
		}
		start, end := -1, 0
		if bytes.HasPrefix(s[j:], colonSlashes) && j+3 < len(s) && !reSpace(s[j+3]) {
			start, end = i, toSpace(s, j+3)
		} else {
			for k := i; k < j; k++ {
				if bytes.HasPrefix(s[k:], www) && k+4 < len(s) && !reSpace(s[k+4]) {
					start, end = k, toSpace(s, k+4)
					break
				}
			}
		}
		if start < 0 {
			i = j
			continue
		}
		dst = append(dst, s[last:start]...)
		dst = append(dst, ' ')
		last, i = end, end
	}
	return append(dst, s[last:]...)
}

// nostrAt: nostr:\S+ at i.
func nostrAt(s []byte, i int) int {
	if bytes.HasPrefix(s[i:], nostrScheme) && i+6 < len(s) && !reSpace(s[i+6]) {
		return toSpace(s, i+6)
	}
	return -1
}

// mentionAt: (?:@\S+|#\[\d+\]) at i.
func mentionAt(s []byte, i int) int {
	switch s[i] {
	case '@':
		if i+1 < len(s) && !reSpace(s[i+1]) {
			return toSpace(s, i+1)
		}
	case '#':
		if i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j > i+2 && j < len(s) && s[j] == ']' {
				return j + 1
			}
		}
	}
	return -1
}

// skelHexWords appends s with every \b[0-9a-f]{8,}\b replaced by a space:
// a run of word bytes made only of hex digits, 8 or more (a longer run
// holding anything else has no word boundary inside).
func skelHexWords(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		if !reWord(s[i]) {
			dst = append(dst, s[i])
			i++
			continue
		}
		j, hex := i, true
		for j < len(s) && reWord(s[j]) {
			if c := s[j]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				hex = false
			}
			j++
		}
		if hex && j-i >= 8 {
			dst = append(dst, ' ')
		} else {
			dst = append(dst, s[i:j]...)
		}
		i = j
	}
	return dst
}

// skelDigits appends s with every run of digits replaced by a space.
func skelDigits(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= '0' && c <= '9' {
			if i == 0 || s[i-1] < '0' || s[i-1] > '9' {
				dst = append(dst, ' ')
			}
			continue
		}
		dst = append(dst, s[i])
	}
	return dst
}

// activityRules applies the configured thresholds to an agent's activity.
type activityRules struct {
	burstMax       int
	burstWindow    time.Duration
	templateMin    int
	templateRatio  float64
	templateSample int
	timesCap       int
}

func newActivityRules(o Options) activityRules {
	capTimes := 4 * (o.BurstMaxPosts + 1)
	if capTimes < 256 {
		capTimes = 256
	}
	return activityRules{
		burstMax:       o.BurstMaxPosts,
		burstWindow:    o.BurstWindow,
		templateMin:    o.TemplateMinPosts,
		templateRatio:  o.TemplateRatio,
		templateSample: o.TemplateSample,
		timesCap:       capTimes,
	}
}

// errPostBeforeRegistration and errPostInFuture are the OK messages of posts
// that do not count.
var (
	errPostBeforeRegistration = storage.Invalid("invalid: post is dated before the agent's registration")
	errPostInFuture           = storage.Invalid("invalid: created_at is more than 15 minutes in the future")
)

// apply records post p in act. It keeps act bounded: the set of active days
// grows by at most one entry per day; Times keeps only posts young enough to
// matter for bursts (at most timesCap); Skels keeps the newest
// templateSample posts of the last 7 days.
func (r activityRules) apply(a *agents.Agent, act *agents.Activity, p agents.Post, now time.Time) error {
	if p.CreatedAt < a.FirstRegisteredAt {
		return errPostBeforeRegistration
	}
	if p.CreatedAt > now.Add(maxFuture).Unix() {
		return errPostInFuture
	}
	d := int32(p.CreatedAt / int64(day/time.Second))
	if i := sort.Search(len(act.Days), func(i int) bool { return act.Days[i] >= d }); i == len(act.Days) || act.Days[i] != d {
		act.Days = append(act.Days, 0)
		copy(act.Days[i+1:], act.Days[i:])
		act.Days[i] = d
	}
	act.Posts++
	if p.CreatedAt > act.LastPostAt {
		act.LastPostAt = p.CreatedAt
	}

	// Burst: insert into the sorted recent times, then look for a window of
	// burstMax+1 posts spanning less than burstWindow that contains p.
	horizon := now.Add(-burstHorizon - r.burstWindow).Unix()
	if p.CreatedAt >= horizon {
		i := sort.Search(len(act.Times), func(i int) bool { return act.Times[i] > p.CreatedAt })
		act.Times = append(act.Times, 0)
		copy(act.Times[i+1:], act.Times[i:])
		act.Times[i] = p.CreatedAt
		w := int64(r.burstWindow / time.Second)
		for j := max(0, i-r.burstMax); j <= i && j+r.burstMax < len(act.Times); j++ {
			if act.Times[j+r.burstMax]-act.Times[j] < w && act.Times[j+r.burstMax] > act.BurstAt {
				act.BurstAt = act.Times[j+r.burstMax]
			}
		}
	}
	cut := sort.Search(len(act.Times), func(i int) bool { return act.Times[i] >= horizon })
	if len(act.Times)-cut > r.timesCap {
		cut = len(act.Times) - r.timesCap
	}
	act.Times = append(act.Times[:0:0], act.Times[cut:]...)

	// Template: keep the newest sample of skeletons from the last 7 days.
	since := now.Add(-templateSpan).Unix()
	if p.CreatedAt >= since {
		i := sort.Search(len(act.Skels), func(i int) bool { return act.Skels[i].At > p.CreatedAt })
		act.Skels = append(act.Skels, agents.Skeleton{})
		copy(act.Skels[i+1:], act.Skels[i:])
		act.Skels[i] = agents.Skeleton{At: p.CreatedAt, Hash: p.Skeleton}
	}
	cut = sort.Search(len(act.Skels), func(i int) bool { return act.Skels[i].At >= since })
	if len(act.Skels)-cut > r.templateSample {
		cut = len(act.Skels) - r.templateSample
	}
	act.Skels = append(act.Skels[:0:0], act.Skels[cut:]...)
	return nil
}

// The answers of flags, shared: a rebuild computes the flags of every
// agent, and none of the callers changes them.
var (
	noFlags       = []string{}
	templateFlags = []string{FlagTemplate}
	burstFlags    = []string{FlagBurst}
	bothFlags     = []string{FlagTemplate, FlagBurst}
)

// flags returns the anomaly flags that hold at now, in document order (a
// shared slice, not to be changed).
func (r activityRules) flags(act *agents.Activity, now time.Time) []string {
	switch t, b := r.templateFlag(act, now), r.burstFlag(act, now); {
	case t && b:
		return bothFlags
	case t:
		return templateFlags
	case b:
		return burstFlags
	}
	return noFlags
}

// burstFlag: a window of more than burstMax posts ended less than 24 h ago.
func (r activityRules) burstFlag(act *agents.Activity, now time.Time) bool {
	return act.BurstAt > 0 && act.BurstAt > now.Add(-burstHorizon).Unix()
}

// templateFlag: among the agent's last templateSample posts of the last 7
// days, at least templateMin and at least templateRatio of them share one
// skeleton.
func (r activityRules) templateFlag(act *agents.Activity, now time.Time) bool {
	since := now.Add(-templateSpan).Unix()
	sample := act.Skels
	cut := sort.Search(len(sample), func(i int) bool { return sample[i].At >= since })
	sample = sample[cut:]
	if len(sample) > r.templateSample {
		sample = sample[len(sample)-r.templateSample:]
	}
	if len(sample) < r.templateMin {
		return false
	}
	best := 0
	if len(sample) <= 64 {
		// Without a map: this runs for every agent of every rebuild.
		for i, s := range sample {
			n := 0
			for _, o := range sample[i:] {
				if o.Hash == s.Hash {
					n++
				}
			}
			best = max(best, n)
		}
	} else {
		counts := make(map[uint64]int, len(sample))
		for _, s := range sample {
			counts[s.Hash]++
			best = max(best, counts[s.Hash])
		}
	}
	return best >= r.templateMin && float64(best) >= r.templateRatio*float64(len(sample))
}
