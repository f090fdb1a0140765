package directory

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// skeletonByRegexps is the rule of Skeleton as regular expressions, the
// way it was first written: Skeleton must give the same text for every
// input, or the template flags of posts recorded before and after a
// change of implementation would disagree.
func skeletonByRegexps(text string) string {
	s := strings.ToLower(text)
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?:[a-z][a-z0-9+.-]*://|www\.)\S+`),
		regexp.MustCompile(`nostr:\S+`),
		regexp.MustCompile(`(?:@\S+|#\[\d+\])`),
		regexp.MustCompile(`\b[0-9a-f]{8,}\b`),
		regexp.MustCompile(`\d+`),
	} {
		s = re.ReplaceAllString(s, " ")
	}
	return strings.Join(strings.Fields(s), " ")
}

var skeletonCases = []string{
	"", " ", "Hello   World", "price 42 at https://x.example/a?b=1", "hi @alice", "id deadbeef00 done",
	"see nostr:note1xyz now", "line\n\tbreak", "HTTPS://EXAMPLE.ORG/X", "www.example.org", "www.", "www. x",
	"awww.x", "1abc://x", "abc://", "abc:// x", "a+b.c-d://e", "x://\u00a0y", "nostr:", "nostr: x", "@", "@ x",
	"#[12]", "#[]", "#[12", "#[1a]", "deadbeef", "deadbeef_", "deadbee", "0123456789abcdefg", "é0123456789é",
	"a1b2c3d4e5", "12 345 6789", "\v tab\u00a0nbsp\u2003em", "\xff\xfeinvalid\x80 bytes", "İSTANBUL ΣΑΣ",
	"mixed https://a.b/c?d=1#e @bob #[3] nostr:npub1abc cafebabe1234 and 42 things",
	"www.www.x://y", "wwww.x", "w.w.w.x", "a-://x", "-a://x", "ftp://x\tnext", "k\u212aelvin 1234",
}

func TestSkeletonMatchesRegexps(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := Skeleton(s), skeletonByRegexps(s); got != want {
			t.Fatalf("Skeleton(%q) = %q, the regular expressions give %q", s, got, want)
		}
	}
	for _, s := range skeletonCases {
		check(s)
	}
	// Random texts made of the pieces the rules look at.
	pieces := []string{"a", "w", "www.", "http", "://", ":", "/", ".", "-", "+", "nostr", "nostr:", "@", "#", "[", "]",
		"0", "7", "f", "dead", "beef", "g", "_", " ", "\t", "\n", "\v", "\u00a0", "é", "Ä", "X", "\xff", "\u2028"}
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for range 20000 {
		b.Reset()
		for range rng.IntN(24) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		check(b.String())
	}
}

// A long run of scheme characters costs one pass, not one per byte.
func TestSkeletonLongRun(t *testing.T) {
	s := strings.Repeat("w", MaxContentBytes)
	if got := Skeleton(s); got != s {
		t.Fatalf("Skeleton of %d w's changed it", len(s))
	}
	s = strings.Repeat("www.", MaxContentBytes/4)
	if got, want := Skeleton(s), skeletonByRegexps(s); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func FuzzSkeleton(f *testing.F) {
	for _, s := range skeletonCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Skeleton(s), skeletonByRegexps(s); got != want {
			t.Fatalf("Skeleton(%q) = %q, the regular expressions give %q", s, got, want)
		}
	})
}

func BenchmarkSkeleton(b *testing.B) {
	text := "Today's summary #123: three papers on consensus, see https://example.org/p/123 and nostr:npub1xyz for details."
	b.ReportAllocs()
	for b.Loop() {
		skeletonHash(text)
	}
}
