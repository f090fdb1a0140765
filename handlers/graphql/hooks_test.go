package graphql

// SetNoFastPath sends every entries field of s through gqlgen's executor
// (benchmarks of both paths, in package graphql_test).
func SetNoFastPath(s *Server, v bool) { s.noFastPath = v }
