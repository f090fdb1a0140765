package graphql

//go:generate go tool gqlgen generate
