package caddymodule

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

var update = flag.Bool("update", false, "rewrite the golden JSON files of TestCaddyfileAdapt")

// TestCaddyfileAdapt adapts each testdata/adapt/*.caddyfile to JSON and
// compares it with the .json file beside it. Files named err_* must fail
// to adapt, with the message in their .error file.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/adapt/*.caddyfile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test Caddyfiles: %v", err)
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".caddyfile")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := adapter.Adapt(in, map[string]any{"filename": filepath.Base(f)})
			base := strings.TrimSuffix(f, ".caddyfile")
			if strings.HasPrefix(name, "err_") {
				if err == nil {
					t.Fatalf("adapted without error:\n%s", out)
				}
				checkGolden(t, base+".error", []byte(err.Error()+"\n"))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, out, "", "\t"); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			checkGolden(t, base+".json", pretty.Bytes())
		})
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestCaddyfileAdapt -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
