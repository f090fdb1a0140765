package library

import (
	"testing"
	"time"
)

// BenchmarkEmptyTrash5000 times emptyTrash on a trash of 5,000 imported
// items (without fsync: the work, not the disk's syncs): what the member
// waits for. It reports besides how long the store took until the trash
// was empty (the background part included), in ms.
func BenchmarkEmptyTrash5000(b *testing.B) {
	const n = 5000
	var untilEmpty time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, m := openSavedTest(b)
		fillTrash(b, st, m.ID, n)
		b.StartTimer()
		start := time.Now()
		got, err := Of(st).EmptyTrash(b.Context(), m.ID)
		b.StopTimer()
		if err != nil || got != n {
			b.Fatalf("emptyTrash = %d, %v", got, err)
		}
		waitEmptied(b, st, m.ID)
		untilEmpty += time.Since(start)
		if left := trashLeft(b, st, m.ID); left != 0 {
			b.Fatalf("%d items left", left)
		}
	}
	b.ReportMetric(float64(untilEmpty.Milliseconds())/float64(b.N), "ms-until-empty/op")
}
