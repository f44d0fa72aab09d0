-- wrk script: POST a small JSON payload with a bearer token, then print one JSON line of results.
-- The token comes from the environment (EOPS_TOKEN), empty for the bare endpoint.
wrk.method = "POST"
wrk.body = '{"n": 1}'
wrk.headers["Content-Type"] = "application/json"
local token = os.getenv("EOPS_TOKEN") or ""
if token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests": %d, "duration_us": %d, "non_2xx": %d, "connect_errors": %d, ' ..
    '"read_errors": %d, "write_errors": %d, "timeouts": %d, "p50_us": %d, "p90_us": %d, ' ..
    '"p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, errors.status, errors.connect, errors.read, errors.write,
    errors.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
