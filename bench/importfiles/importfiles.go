// Package importfiles writes the generated export files the import
// benchmarks import: the Go benchmarks of handlers/graphql and
// bench/imports.sh (through gqlbench importfile) read the same files.
package importfiles

import (
	"archive/zip"
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// ReadwiseReaderCSV writes Readwise Reader's CSV export of rows documents
// (with its BOM and CRLF line ends), each with two tags.
func ReadwiseReaderCSV(w io.Writer, rows int) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("\ufeffTitle,URL,ID,Document tags,Saved date,Reading progress,Location,Seen\r\n")
	for i := range rows {
		fmt.Fprintf(bw, "Article %d,https://example.org/r/%d,01h%d,\"['tag%d', 'reading']\",2024-01-31 08:15:02.123456+00:00,0.%d,later,True\r\n", i, i, i, i%20, i%10)
	}
	return bw.Flush()
}

// PocketZip writes Pocket's export zip of rows items (part_000000.csv)
// with two highlights on every fourth (annotations/part_000000.json): 10,000
// rows carry 5,000 highlights.
func PocketZip(w io.Writer, rows int) error {
	zw := zip.NewWriter(w)
	cw, err := zw.Create("part_000000.csv")
	if err != nil {
		return err
	}
	fmt.Fprintln(cw, "title,url,time_added,cursor,tags,status")
	type hl struct {
		Quote     string `json:"quote"`
		CreatedAt int64  `json:"created_at"`
	}
	type entry struct {
		URL        string `json:"url"`
		Title      string `json:"title"`
		Highlights []hl   `json:"highlights"`
	}
	var ann []entry
	for i := range rows {
		fmt.Fprintf(cw, "Article %d,https://example.org/p/%d,%d,c%d,tag%d,unread\n", i, i, 1600000000+i, i, i%20)
		if i%4 == 0 {
			ann = append(ann, entry{URL: fmt.Sprintf("https://example.org/p/%d", i), Title: fmt.Sprintf("Article %d", i),
				Highlights: []hl{{fmt.Sprintf("A passage of article %d worth keeping.", i), 1600000500}, {"Another one.", 1600000600}}})
		}
	}
	aw, err := zw.Create("annotations/part_000000.json")
	if err != nil {
		return err
	}
	if err := json.NewEncoder(aw).Encode(ann); err != nil {
		return err
	}
	return zw.Close()
}
