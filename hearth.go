// Package hearth is the module root: importing it (as xcaddy build --with
// github.com/hearthkit/caddy-hearth does) registers Hearth's Caddy modules.
package hearth

import (
	_ "github.com/hearthkit/caddy-hearth/caddymodule"
)
