// Command caddy is Caddy with its standard modules and Hearth, for local
// development: go run -tags nobadger,nomysql,nopgx ./cmd/caddy run --config Caddyfile.example
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/hearthkit/caddy-hearth"
)

func main() {
	caddycmd.Main()
}
