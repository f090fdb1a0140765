package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"time"
)

// searchQueries is the table of search targets: each q with what it stands for.
func searchQueries(info corpusInfo) [][2]string {
	return [][2]string{
		{"no q (first page)", ""},
		{"a frequent word (83 %)", "lantern"},
		{"a word in 100 items", "quasquillion"},
		{"a word in 10 items", "zanzibarite"},
		{"a word in no item", "xylocarpqz"},
		{"label: on 10 items", "label:rare-label"},
		{"label: frequent", "label:topic-00"},
		{"site: rare domain (10 items)", "site:rare-domain.org"},
		{"site: frequent", "site:.com"},
		{"in:archive", "in:archive"},
		{"in:trash", "in:trash"},
		{"type:newsletter", "type:newsletter"},
		{"has:highlights", "has:highlights"},
		{"saved: 10 items", "saved:" + info.SavedRange},
		{"in:archive has:highlights", "in:archive has:highlights"},
		{"type:newsletter label:topic-01", "type:newsletter label:topic-01"},
		{"site:rare-domain.org in:inbox", "site:rare-domain.org in:inbox"},
		{"label:rare-label has:highlights", "label:rare-label has:highlights"},
		{"rare word + in:archive", "zanzibarite in:archive"},
		{"frequent word + label: on 10", "lantern label:rare-label"},
		{"two-letter text (go)", "go"},
	}
}

// pairQueries is every pair of filters of two kinds among label:, site:,
// in:, type:, has:highlights and saved:, each at its extreme
// selectivities on the corpus (the targets: "combinations of two of them ≤ 10
// ms whatever their selectivity").
func pairQueries(info corpusInfo) [][2]string {
	kinds := [][]string{
		{"label:topic-00", "label:topic-01", "label:rare-label"},
		{"site:.com", "site:rare-domain.org"},
		{"in:inbox", "in:archive", "in:trash"},
		{"type:newsletter", "type:article"},
		{"has:highlights"},
		{"saved:2000-01-01..2100-01-01", "saved:" + info.SavedRange},
	}
	name := func(q string) string {
		if q == "saved:"+info.SavedRange {
			return "saved:(10 items)"
		}
		if q == "saved:2000-01-01..2100-01-01" {
			return "saved:(all)"
		}
		return q
	}
	var out [][2]string
	for i, a := range kinds {
		for _, b := range kinds[i+1:] {
			for _, x := range a {
				for _, y := range b {
					out = append(out, [2]string{name(x) + " " + name(y), x + " " + y})
				}
			}
		}
	}
	return out
}

const searchOp = `query Entries($query: GetEntriesInput!) { entries(query: $query) { edges { cursor node { __typename id createdAt ... on SavedItem { title originalUrl wordCount status readingProgress updatedAt labels { id name } } } } pageInfo { hasNextPage endCursor } } }`

func searchBench(args []string) error {
	fs := flag.NewFlagSet("search", flag.ExitOnError)
	url := fs.String("url", "", "GraphQL endpoint")
	token := fs.String("token", "", "API token")
	infoPath := fs.String("info", "", "the corpus info file written by seed -corpus")
	n := fs.Int("n", 21, "runs of each query")
	pairs := fs.Bool("pairs", false, "also every pair of two filters (pairQueries)")
	fs.Parse(args)
	var info corpusInfo
	b, err := os.ReadFile(*infoPath)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Minute}
	one := func(q string) (time.Duration, int, bool, string, error) {
		vars := map[string]any{"first": 50}
		if q != "" {
			vars["q"] = q
		}
		req := entriesRequest(*url, *token, searchOp, vars)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, false, "", err
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil {
			return 0, 0, false, "", err
		}
		var r struct {
			Data struct {
				Entries struct {
					Edges    []json.RawMessage
					PageInfo struct{ HasNextPage bool }
				}
			}
			Errors []struct{ Message string }
		}
		if err := json.Unmarshal(raw, &r); err != nil || resp.StatusCode != http.StatusOK {
			return 0, 0, false, "", fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, raw)
		}
		msg := ""
		if len(r.Errors) > 0 {
			msg = r.Errors[0].Message
		}
		return d, len(r.Data.Entries.Edges), r.Data.Entries.PageInfo.HasNextPage, msg, nil
	}
	fmt.Printf("%-44s %10s %6s %s\n", "query", "median ms", "edges", "more")
	queries := searchQueries(info)
	if *pairs {
		queries = append(queries, pairQueries(info)...)
	}
	var worst time.Duration
	defer func() { fmt.Printf("worst median %.2f ms\n", float64(worst.Microseconds())/1000) }()
	for _, q := range queries {
		var ds []time.Duration
		var edges int
		var more bool
		var msg string
		runs := *n
		for i := 0; i < runs+1; i++ {
			d, e, m, em, err := one(q[1])
			if err != nil {
				return fmt.Errorf("%s: %w", q[0], err)
			}
			if i == 0 { // warm-up
				if d > 2*time.Second {
					runs = min(runs, 3) // a scan of seconds: three runs tell
				}
				continue
			}
			ds, edges, more, msg = append(ds, d), e, m, em
		}
		sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
		med := ds[len(ds)/2]
		worst = max(worst, med)
		extra := ""
		if msg != "" {
			extra = " error: " + msg
		}
		fmt.Printf("%-44s %10.2f %6d %v%s\n", q[0], float64(med.Microseconds())/1000, edges, more, extra)
	}
	return nil
}
