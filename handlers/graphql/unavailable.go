package graphql

import "github.com/hearthkit/caddy-hearth/handlers/inboxtapi"

// writeUnavailable answers a request the store refused for now
// (inboxtapi.WriteUnavailable).
var writeUnavailable = inboxtapi.WriteUnavailable
