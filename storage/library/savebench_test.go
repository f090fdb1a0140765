package library

import (
	"math/rand"
	"strings"
	"testing"
)

// benchArticle is a 5–10 KB article of Zipf-distributed words (as the
// search corpus of bench/gqlbench, smaller vocabulary).
func benchArticle(r *rand.Rand, z *rand.Zipf, vocab []string) (title, text string) {
	var b strings.Builder
	size := 5000 + r.Intn(5000)
	for b.Len() < size {
		if b.Len() > 0 {
			b.WriteString([]string{" ", " ", " ", ", ", ". "}[r.Intn(5)])
		}
		b.WriteString(vocab[z.Uint64()])
	}
	return vocab[z.Uint64()] + " " + vocab[z.Uint64()] + " " + vocab[z.Uint64()], b.String()
}

// benchSyllables are what benchVocab's words are made of.
var benchSyllables = strings.Fields("ar al an ba be bi bo ca ce co da de di do el en er es fa fe fi fo ga ge go ha he hi ho in is it ka ke la le li lo lu ma me mi mo mu na ne ni no nu or pa pe pi po ra re ri ro ru sa se si so su ta te ti to tu un ur")

func benchVocab(r *rand.Rand) []string {
	syl := benchSyllables
	vocab := make([]string, 3000)
	for i := range vocab {
		var w strings.Builder
		for n := 1 + r.Intn(4); n > 0; n-- {
			w.WriteString(syl[r.Intn(len(syl))])
		}
		vocab[i] = w.String()
	}
	return vocab
}

// BenchmarkSaveArticle saves articles of 5–10 KB (one transaction each,
// without fsync: the CPU and write volume, not the disk's sync), and
// reports besides the process's CPU time per save including the search
// indexer's work until it has caught up (within 2× of the save
// before the index).
func BenchmarkSaveArticle(b *testing.B) { benchmarkSaveArticle(b, false, false) }

// BenchmarkSaveArticleOffsets is BenchmarkSaveArticle for a member whose
// offsets are counted (a member who synced by offset once): every save
// also moves a bucket's count.
func BenchmarkSaveArticleOffsets(b *testing.B) { benchmarkSaveArticle(b, false, true) }

// BenchmarkSaveArticleSynced is the same with sync_writes on (the
// default): each save waits for the group commit's fsync of Badger's logs,
// and of the value log when the article went there (badgerkv.ValueThreshold).
func BenchmarkSaveArticleSynced(b *testing.B) { benchmarkSaveArticle(b, true, false) }

func benchmarkSaveArticle(b *testing.B, sync, offsets bool) {
	sb := newSaveBench(b, sync)
	if offsets {
		if err := Of(sb.st).EnsureOffsets(b.Context(), sb.member); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := cpuNanos()
	b.ResetTimer()
	for range b.N {
		sb.save(b)
	}
	b.StopTimer() // ns/op: the saves as their callers wait for them
	waitSearchIndexForBench(b, sb.st, sb.member)
	// The CPU per save includes the indexer's catch-up after the loop.
	b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
}
