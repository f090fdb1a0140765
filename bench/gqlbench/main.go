// Command gqlbench prepares the GraphQL load benchmark (bench/graphql.sh):
//
//	gqlbench seed -dir STORE -member NAME -items N -highlights H
//	    fills a stopped store with N saved items and H highlights for a new
//	    member (writes without fsync, so 100 k items take seconds).
//	gqlbench seed -dir STORE -corpus -items N [-seed S] [-csv FILE]
//	    fills it with the search corpus instead (see corpus.go): realistic
//	    articles, labels, domains; writes STORE.json for gqlbench search and,
//	    with -csv, the items as CSV for SQLite.
//	gqlbench search -url URL -token TOKEN -info STORE.json [-n 21]
//	    runs each query of the search table -n times over HTTP and prints
//	    the median latency and the number of entries of the first page.
//	gqlbench importfile -format readwise-reader|pocket-zip -rows N -o FILE
//	    writes an export file the import benchmarks import (imports.go).
//	gqlbench peakmem -pid P
//	    samples the memory of process P until SIGTERM and prints its peaks
//	    (bench/imports.sh).
//	gqlbench cursor -url URL -token TOKEN -at 0.9
//	    pages through entries (100 at a time) and prints the after cursor
//	    that starts the page at that fraction of the list.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/hearthkit/caddy-hearth/storage"
	"github.com/hearthkit/caddy-hearth/storage/library"
	"github.com/hearthkit/caddy-hearth/storage/members"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gqlbench seed|cursor|search|importfile|peakmem [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "seed":
		err = seed(os.Args[2:])
	case "cursor":
		err = cursor(os.Args[2:])
	case "search":
		err = searchBench(os.Args[2:])
	case "importfile":
		err = importFile(os.Args[2:])
	case "peakmem":
		err = peakMem(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gqlbench:", err)
		os.Exit(1)
	}
}

func seed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ExitOnError)
	dir := fs.String("dir", "", "store directory")
	member := fs.String("member", "bench", "member to create")
	items := fs.Int("items", 100000, "saved items")
	highlights := fs.Int("highlights", 20000, "highlights")
	realistic := fs.Bool("corpus", false, "seed the search corpus (corpus.go)")
	seedN := fs.Int64("seed", 1, "corpus seed")
	export := fs.String("csv", "", "with -corpus: write the items as CSV to this file")
	dsn := fs.String("postgres", "", "seed the store in this PostgreSQL database instead of Badger in -dir")
	prefix := fs.String("prefix", "", "with -postgres: the table prefix (storage postgres { prefix })")
	labelEvery := fs.Int("label-every", 0, "put the label \"news\" on every Nth item (0: no labels)")
	rare := fs.String("rare", "", "a word planted in the text of 10 items spread over the list")
	articleBytes := fs.Int("article-bytes", 0, "give the newest item an article of this many bytes of HTML")
	fs.Parse(args)
	off := false
	opts := storage.Options{SyncWrites: &off, GCInterval: -1}
	if *dsn != "" {
		opts.Postgres = &storage.PostgresOptions{DSN: *dsn, Prefix: *prefix}
	}
	st, err := storage.Open(*dir, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	if *realistic {
		if err := seedCorpus(st, *member, *items, *seedN, strings.TrimRight(*dir, "/")+".json", *export); err != nil {
			return err
		}
		return st.Sync()
	}
	m, err := members.Of(st).CreateMember(context.Background(), *member, "Bench", "bench password 1")
	if err != nil {
		return err
	}
	var labels []string
	if *labelEvery > 0 {
		l, err := library.Of(st).CreateLabel(context.Background(), m.ID, "news", "#336699")
		if err != nil {
			return err
		}
		labels = []string{l.ID}
	}
	ids := make([]string, 0, *items)
	for n := 0; n < *items; n++ {
		item := library.NewItem{
			URL:         fmt.Sprintf("https://example.com/articles/%d", n),
			Title:       fmt.Sprintf("Article number %d about bread", n),
			Description: "A saved article for the benchmark.",
			WordCount:   300 + n%2000,
			HTML:        "<p>Flour, water, salt and yeast.</p>",
			Text:        "Flour, water, salt and yeast.",
		}
		if *labelEvery > 0 && n%*labelEvery == 0 {
			item.LabelIDs = labels
		}
		if *rare != "" && n%max(1, *items/10) == *items/20 {
			item.HTML = "<p>Flour, water, salt and " + *rare + ".</p>"
			item.Text = "Flour, water, salt and " + *rare + "."
		}
		if *articleBytes > 0 && n == *items-1 {
			item.HTML, item.Text = article(*articleBytes)
			item.WordCount = len(strings.Fields(item.Text))
		}
		it, _, err := library.Of(st).SaveItem(context.Background(), m.ID, item)
		if err != nil {
			return err
		}
		ids = append(ids, it.ID)
	}
	// Highlights are spread evenly over the list (a highlight changes its
	// item, so the item's index entries get a second version until Badger
	// compacts them away): the first page and a deep page then hold as
	// many highlighted items.
	step := max(1, len(ids)/max(1, *highlights))
	for n := 0; n < *highlights && len(ids) > 0; n++ {
		_, err := library.Of(st).CreateHighlight(context.Background(), m.ID, ids[(n*step)%len(ids)], []library.HighlightSegment{{
			XPath: "/p[1]", StartOffset: 0, EndOffset: 5, Text: "Flour",
		}}, "")
		if err != nil {
			return err
		}
	}
	if err := waitSearchIndex(st, m.ID, len(ids)); err != nil {
		return err
	}
	return st.Sync()
}

// article is HTML of about size bytes in paragraphs of plain prose, and its
// text: the reader page's benchmark article.
func article(size int) (html, text string) {
	const para = "Bread is flour, water, salt and time; the dough rises while the baker waits, and the crust forms in the last minutes of the bake. "
	var h, t strings.Builder
	for h.Len() < size {
		h.WriteString("<p>")
		for range 4 {
			h.WriteString(para)
			t.WriteString(para)
		}
		h.WriteString("</p>\n")
	}
	return h.String(), t.String()
}

const pageOp = `query($query: GetEntriesInput!) { entries(query: $query) { pageInfo { hasNextPage endCursor } edges { cursor } } }`

// entriesRequest is the POST of op, a query of entries, with q as its
// query argument, authenticated with token.
func entriesRequest(url, token, op string, q map[string]any) *http.Request {
	body, _ := json.Marshal(map[string]any{"query": op, "variables": map[string]any{"query": q}})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

func cursor(args []string) error {
	fs := flag.NewFlagSet("cursor", flag.ExitOnError)
	url := fs.String("url", "", "GraphQL endpoint")
	token := fs.String("token", "", "API token")
	at := fs.Float64("at", 0.9, "fraction of the list")
	fs.Parse(args)
	var cursors []string // the after cursor of every 100th position
	after := ""
	for {
		q := map[string]any{"first": 100}
		if after != "" {
			q["after"] = after
		}
		resp, err := http.DefaultClient.Do(entriesRequest(*url, *token, pageOp, q))
		if err != nil {
			return err
		}
		var r struct {
			Data struct {
				Entries struct {
					PageInfo struct {
						HasNextPage bool
						EndCursor   string
					}
				}
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d: %v", resp.StatusCode, err)
		}
		cursors = append(cursors, after)
		if !r.Data.Entries.PageInfo.HasNextPage {
			break
		}
		after = r.Data.Entries.PageInfo.EndCursor
	}
	fmt.Println(cursors[int(float64(len(cursors))**at)])
	return nil
}
