-- wrk reporter: one machine-readable line with throughput, latency percentiles
-- and error counts, read by bench/servers.py. Latencies are in microseconds.
-- Only done() is defined: a response() callback would make wrk parse every
-- body in Lua and slow the load generator down. bench/wrk_walk.lua adds its
-- own fields through report().
function report(summary, latency, extra)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"mean": %.1f, "stdev": %.1f, "max": %d, "p50": %d, "p90": %d, "p99": %d, "p999": %d}%s}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    extra or ""))
end

done = function(summary, latency, requests)
  report(summary, latency)
end
