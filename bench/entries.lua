-- POST an Inboxt-style entries query for one page of 50. Env: BENCH_TOKEN,
-- and BENCH_AFTER (an endCursor) for a page deep in the list.
local after = os.getenv("BENCH_AFTER") or ""
local q = '{"first":50' .. (after ~= "" and (',"after":"' .. after .. '"') or "") .. '}'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
wrk.body = '{"query":"query Entries($query: GetEntriesInput!) { entries(query: $query) { edges { cursor node { __typename id createdAt ... on SavedItem { title originalUrl wordCount status readingProgress updatedAt labels { id name } } } } pageInfo { hasNextPage endCursor } } }","variables":{"query":' .. q .. '}}'
