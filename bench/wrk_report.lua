-- wrk reporter: one machine-readable line with throughput, latency percentiles
-- and error counts, read by bench/servers.py. Latencies are in microseconds.
-- Only done() is defined: a response() callback would make wrk parse every
-- body in Lua and slow the load generator down. bench/wrk_walk.lua adds its
-- own fields through report().

-- The share of requests (in percent) slower than `bound` microseconds, found by halving
-- between percentiles: the p99 bounds' own question (a p99 within 25 ms is at most 1% over
-- it), without the percentile's steps. wrk keeps a histogram, so each look is one scan of it.
local function share_over(latency, bound)
  if latency.max <= bound then
    return 0
  end
  local within, over = 0, 100 -- percentile(within) <= bound < percentile(over)
  for _ = 1, 30 do
    local middle = (within + over) / 2
    if latency:percentile(middle) <= bound then within = middle else over = middle end
  end
  return 100 - within
end

function report(summary, latency, extra)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"mean": %.1f, "stdev": %.1f, "max": %d, "p50": %d, "p90": %d, "p99": %d, "p999": %d, "over_25ms_pct": %.4f}%s}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), share_over(latency, 25000),
    extra or ""))
end

done = function(summary, latency, requests)
  report(summary, latency)
end
