-- POST /oauth/token with the client_credentials grant; the client id and
-- secret come from the environment (BENCH_CLIENT_ID, BENCH_CLIENT_SECRET).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.body = "grant_type=client_credentials&client_id=" .. os.getenv("BENCH_CLIENT_ID") ..
	"&client_secret=" .. os.getenv("BENCH_CLIENT_SECRET")
