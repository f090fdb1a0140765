package graphql

import (
	"context"
	"strings"
	"time"

	"github.com/hearthkit/caddy-hearth/handlers/graphql/generated"
	"github.com/hearthkit/caddy-hearth/handlers/importer"
	"github.com/hearthkit/caddy-hearth/storage/library"
)

// importFailuresShown is how many failures importJobs lists per import
// (the Import page lists all the store keeps).
const importFailuresShown = 20

// ImportJobs is the Hearth-only importJobs query: the member's imports
// with their progress, for clients that poll after POST /api/import.
func (r *queryResolver) ImportJobs(ctx context.Context) ([]*generated.ImportJob, error) {
	id, err := memberID(ctx)
	if err != nil {
		return nil, err
	}
	jobs, err := library.Of(r.s.store).ImportJobs(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]*generated.ImportJob, 0, len(jobs))
	for _, j := range jobs {
		g := &generated.ImportJob{
			ID: j.ID, Format: j.Format, FileName: j.FileName, State: generated.ImportState(strings.ToUpper(j.State)),
			Total: j.Total, Done: j.Position, Created: j.Created, Existing: j.Existing, Failed: j.Failed,
			Fetching: j.Fetching, Fetched: j.Fetched, FetchFailed: j.FetchFailed, Images: j.Images, ImagesSkipped: j.ImagesSkipped,
			Failures:  []*generated.ImportFailure{},
			CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt,
		}
		if j.Error != "" {
			g.Error = &j.Error
		}
		if d := importer.ProgressOf(j, time.Now()).Left; d > 0 {
			secs := int(d.Seconds() + 0.5)
			g.SecondsLeft = &secs
		}
		for _, f := range j.Failures[:min(len(j.Failures), importFailuresShown)] {
			g.Failures = append(g.Failures, &generated.ImportFailure{Entry: f.Ref, Reason: f.Reason})
		}
		out = append(out, g)
	}
	return out, nil
}
