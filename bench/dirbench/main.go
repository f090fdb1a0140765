// Command dirbench prepares the agent directory load benchmark
// (bench/directory.sh):
//
//	dirbench seed -dir STORE -agents N
//	    fills a stopped store with N registered agents (made-up pubkeys,
//	    realistic field sizes, posts on 3 days each), written through the
//	    storage package without fsync, so 10 k agents take a second or two.
//	    The document does not check signatures, so none are made.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/agents"
	"github.com/hearthkit/caddy-hearth/storage/agents/agentstest"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "seed" {
		fmt.Fprintln(os.Stderr, "usage: dirbench seed -dir STORE -agents N")
		os.Exit(2)
	}
	if err := seed(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "dirbench:", err)
		os.Exit(1)
	}
}

func seed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ExitOnError)
	dir := fs.String("dir", "", "store directory")
	nAgents := fs.Int("agents", 10000, "agents to register")
	fs.Parse(args)
	if *dir == "" {
		return fmt.Errorf("seed needs -dir")
	}
	off := false
	st, err := storage.Open(*dir, storage.Options{SyncWrites: &off, GCInterval: -1})
	if err != nil {
		return err
	}
	defer st.Close()

	now := time.Now()
	reg := now.Add(-10 * 24 * time.Hour).Unix()
	var posts []agents.Post
	flush := func() error {
		_, err := agents.Of(st).RecordPosts(context.Background(), posts, func(_ *agents.Agent, act *agents.Activity, p agents.Post) error {
			d := int32(p.CreatedAt / 86400)
			if i, found := slices.BinarySearch(act.Days, d); !found {
				act.Days = slices.Insert(act.Days, i, d)
			}
			act.Posts++
			act.LastPostAt = max(act.LastPostAt, p.CreatedAt)
			return nil
		})
		posts = posts[:0]
		return err
	}
	for i := 0; i < *nAgents; i++ {
		a := agentstest.Agent(i, reg, `[["d","agent"],["name","agent"]]`)
		pk := a.Pubkey
		if _, err := agents.Of(st).Register(context.Background(), a, func(*agents.Agent) error { return nil }); err != nil {
			return fmt.Errorf("register agent %d: %w", i, err)
		}
		for d := 1; d <= 3; d++ {
			posts = append(posts, agents.Post{ID: agentstest.RandomHex(32), Pubkey: pk, CreatedAt: now.Add(-time.Duration(d) * 24 * time.Hour).Unix(), Skeleton: uint64(d)})
		}
		if len(posts) >= 900 {
			if err := flush(); err != nil {
				return fmt.Errorf("record posts: %w", err)
			}
		}
	}
	if len(posts) > 0 {
		if err := flush(); err != nil {
			return fmt.Errorf("record posts: %w", err)
		}
	}
	return nil
}
