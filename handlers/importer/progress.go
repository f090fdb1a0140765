package importer

import (
	"time"

	"github.com/hearthkit/caddy-hearth/storage/library"
)

// FetchStall is how long an import's background fetches may go without
// one finishing before the import stops counting as in progress: a
// queued fetch whose item was deleted meanwhile never finishes, and the
// import page must not refresh for ever.
const FetchStall = 10 * time.Minute

// Progress is what a member sees of an import: whether it is still at
// work, and the estimated time left (0 while it cannot be computed).
type Progress struct {
	// Working: the file's entries are not all written yet (queued or
	// running), or pages the import queued are still being fetched.
	Working bool
	// Fetching: the entries are written, the fetches go on.
	Fetching bool
	// Waiting is the number of the import's pages not fetched yet.
	Waiting int
	Left    time.Duration
}

// ProgressOf is j's progress at now. The job's own state says "done" once
// its entries are written; the pages it queued for fetching in the
// background count too, since the items have no content before.
func ProgressOf(j *library.ImportJob, now time.Time) Progress {
	p := Progress{Waiting: max(0, j.Fetching-j.Fetched-j.FetchFailed)}
	if !j.Finished() {
		p.Working, p.Left = true, j.Left()
		return p
	}
	// The job's UpdatedAt moves with every fetch that finishes.
	if p.Waiting == 0 || now.Sub(j.UpdatedAt) > FetchStall {
		return p
	}
	p.Working, p.Fetching = true, true
	done := j.Fetched + j.FetchFailed
	if elapsed := j.UpdatedAt.Sub(j.CreatedAt); done > 0 && elapsed > 0 {
		perFetch := elapsed / time.Duration(done)
		p.Left = perFetch * time.Duration(p.Waiting)
	}
	return p
}
