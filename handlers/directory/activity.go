package directory

import (
	"hash/fnv"
	"regexp"
	"sort"
	"strings"
	"time"

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

var (
	skelURL     = regexp.MustCompile(`(?:[a-z][a-z0-9+.-]*://|www\.)\S+`)
	skelNostr   = regexp.MustCompile(`nostr:\S+`)
	skelMention = regexp.MustCompile(`(?:@\S+|#\[\d+\])`)
	skelHex     = regexp.MustCompile(`\b[0-9a-f]{8,}\b`)
	skelNumber  = regexp.MustCompile(`\d+`)
)

// Skeleton reduces a post's text to the shape that template posts share:
// lowercased, URLs (and nostr: URIs), mentions, hex runs of 8+ characters
// and numbers removed, whitespace folded to single spaces.
func Skeleton(text string) string {
	s := strings.ToLower(text)
	s = skelURL.ReplaceAllString(s, " ")
	s = skelNostr.ReplaceAllString(s, " ")
	s = skelMention.ReplaceAllString(s, " ")
	s = skelHex.ReplaceAllString(s, " ")
	s = skelNumber.ReplaceAllString(s, " ")
	return strings.Join(strings.Fields(s), " ")
}

func skeletonHash(text string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(Skeleton(text)))
	return h.Sum64()
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
