package directory

import (
	"context"
	"sync"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
)

// maxGroupPosts bounds the posts one group commit writes in one transaction.
const maxGroupPosts = 1024

// groupCommit merges the posts of concurrent requests into one store
// transaction: with acknowledged writes durable (sync_writes), each
// transaction costs an fsync, and 16 clients posting one note each would
// otherwise wait for 16 of them in turn, and conflict on the same
// records. One goroutine at a time commits: the first request to find none
// under way starts it, and it commits whatever is queued, group after group,
// until the queue is empty; the requests wait for their results.
//
// On Badger the commits are pipelined with their syncs: a group is
// committed without waiting for the disk (UpdateAsync: visible at once),
// then handed to the syncer, which acknowledges it once a sync that started
// after the commit returned has finished, so an acknowledged post is as
// durable as with a synchronous commit, while the next group is already
// being written. Each transaction reads what the one before committed, so
// the two never conflict. On PostgreSQL an empty transaction waits for no
// flush of the log, so the commits there stay synchronous.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*postRequest
	running bool

	syncMu      sync.Mutex
	synced      []*postRequest // committed, waiting for a sync
	syncRunning bool
}

// postRequest is one caller's posts; done is closed once out or err is set.
// A request with early set is answered once committed, before any sync:
// the caller waits for a later request of its own that syncs (an empty one
// may do, as a barrier), whose sync also covers it, since it starts after
// that later commit.
type postRequest struct {
	ctx   context.Context
	posts []agents.Post
	now   time.Time
	early bool
	out   []error
	err   error
	done  chan struct{}
}

func (r *postRequest) wait() ([]error, error) {
	<-r.done
	return r.out, r.err
}

// recordPosts records posts (agents.Store.RecordPosts, rules applied at
// now), in one transaction with those of concurrent callers.
func (d *Directory) recordPosts(ctx context.Context, posts []agents.Post, now time.Time) ([]error, error) {
	return d.submitPosts(ctx, posts, now, false).wait()
}

// submitPosts queues posts for the group commit and returns at once; wait
// on the request for the results. early: answer once committed, before
// the sync (postRequest).
func (d *Directory) submitPosts(ctx context.Context, posts []agents.Post, now time.Time, early bool) *postRequest {
	// Not the caller's context alone: its client leaving must not fail
	// the others' posts committed with them.
	req := &postRequest{ctx: context.WithoutCancel(ctx), posts: posts, now: now, early: early, done: make(chan struct{})}
	g := &d.commits
	g.mu.Lock()
	g.queue = append(g.queue, req)
	start := !g.running
	g.running = true
	g.mu.Unlock()
	if start {
		go d.commitQueued()
	}
	return req
}

// commitQueued commits the queued requests, group after group, until the
// queue is empty.
func (d *Directory) commitQueued() {
	g := &d.commits
	g.mu.Lock()
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
		d.commitGroup(group, n)
		g.mu.Lock()
	}
	g.running = false
	g.mu.Unlock()
}

// commitGroup writes the posts of group (n in all) in one transaction, at
// the time of its first request, and hands each request its results (on
// Badger, through the syncer).
func (d *Directory) commitGroup(group []*postRequest, n int) {
	all := make([]agents.Post, 0, n)
	for _, r := range group {
		all = append(all, r.posts...)
	}
	now := group[0].now
	record := d.agents.RecordPosts
	pipelined := d.inProcess()
	if pipelined {
		record = d.agents.RecordPostsAsync
	}
	var out []error
	var err error
	if n > 0 { // else only barriers, waiting for a sync
		out, err = record(group[0].ctx, all, func(a *agents.Agent, act *agents.Activity, p agents.Post) error {
			return d.rules.apply(a, act, p, now)
		})
	}
	off := 0
	var changed []string
	for _, r := range group {
		if err != nil {
			r.err = err
		} else {
			r.out = out[off : off+len(r.posts)]
			for i, e := range r.out {
				if e == nil {
					changed = append(changed, r.posts[i].Pubkey)
				}
			}
		}
		off += len(r.posts)
	}
	if len(changed) > 0 {
		// As soon as the store shows the posts, before the sync: a
		// rebuild that starts once a reader could see them includes them.
		d.changedAgents(changed...)
	}
	if !pipelined || err != nil {
		for _, r := range group {
			close(r.done)
		}
		return
	}
	g := &d.commits
	g.syncMu.Lock()
	for _, r := range group {
		if r.early {
			close(r.done)
		} else {
			g.synced = append(g.synced, r)
		}
	}
	start := !g.syncRunning && len(g.synced) > 0
	if start {
		g.syncRunning = true
	}
	g.syncMu.Unlock()
	if start {
		go d.syncCommitted()
	}
}

// syncCommitted makes the committed groups durable, one sync for all the
// groups committed before it starts, and acknowledges them.
func (d *Directory) syncCommitted() {
	g := &d.commits
	g.syncMu.Lock()
	for len(g.synced) > 0 {
		batch := g.synced
		g.synced = nil
		g.syncMu.Unlock()
		// An empty synchronous transaction returns once every commit
		// that returned before it is durable as the store's sync_writes
		// says (Badger's group sync: one fdatasync of its log), what a
		// synchronous commit of these posts would have waited for.
		// Store.Sync would also sync the value logs, each time.
		err := d.store.Update(context.Background(), func(*storage.Tx) error { return nil })
		for _, r := range batch {
			if err != nil {
				r.out, r.err = nil, err
			}
			close(r.done)
		}
		g.syncMu.Lock()
	}
	g.syncRunning = false
	g.syncMu.Unlock()
}
