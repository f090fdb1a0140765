package directory

import (
	"context"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// maxGroupPosts bounds the posts one group commit writes in one transaction.
const maxGroupPosts = 1024

// groupCommit merges the posts of concurrent requests into one store
// transaction: with acknowledged writes durable (sync_writes), each
// transaction costs an fsync, and 16 clients posting one note each would
// otherwise wait for 16 of them in turn, and conflict on the same
// records. The first caller to find no commit under way commits its posts
// and whatever others queued meanwhile, until the queue is empty; the
// others wait for their results.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*postRequest
	running bool
}

type postRequest struct {
	posts []agents.Post
	out   []error
	err   error
	done  chan struct{}
}

// recordPosts records posts (agents.Store.RecordPosts, rules applied at
// now), in one transaction with those of concurrent callers.
func (d *Directory) recordPosts(ctx context.Context, posts []agents.Post, now time.Time) ([]error, error) {
	req := &postRequest{posts: posts, done: make(chan struct{})}
	g := &d.commits
	g.mu.Lock()
	g.queue = append(g.queue, req)
	if g.running {
		g.mu.Unlock()
		<-req.done
		return req.out, req.err
	}
	g.running = true
	for len(g.queue) > 0 {
		group, n := g.queue, 0
		for i, r := range group {
			if n > 0 && n+len(r.posts) > maxGroupPosts {
				group = group[:i]
				break
			}
			n += len(r.posts)
		}
		g.queue = g.queue[len(group):]
		g.mu.Unlock()
		// Not the first caller's request alone: its client leaving must
		// not fail the others' posts.
		d.commitGroup(context.WithoutCancel(ctx), group, n, now)
		g.mu.Lock()
	}
	g.running = false
	g.mu.Unlock()
	return req.out, req.err
}

// commitGroup writes the posts of group (n in all) in one transaction and
// hands each request its results.
func (d *Directory) commitGroup(ctx context.Context, group []*postRequest, n int, now time.Time) {
	all := make([]agents.Post, 0, n)
	for _, r := range group {
		all = append(all, r.posts...)
	}
	out, err := d.agents.RecordPosts(ctx, all, func(a *agents.Agent, act *agents.Activity, p agents.Post) error {
		return d.rules.apply(a, act, p, now)
	})
	off := 0
	for _, r := range group {
		if err != nil {
			r.err = err
		} else {
			r.out = out[off : off+len(r.posts)]
		}
		off += len(r.posts)
		close(r.done)
	}
}
