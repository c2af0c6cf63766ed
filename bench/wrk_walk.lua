-- wrk script for the uncached benchmark: walks a list of request paths (one a
-- line, written by bench/uncached.py), sending each once, so that every request
-- misses the server's response cache. Arguments after `--`: the file, and the
-- line to start at (1-based), so consecutive runs walk on instead of repeating.
-- With one wrk thread all connections share the one walk. done() reports as
-- bench/wrk_report.lua does, plus where the walk stopped and whether it ran out.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "wrk_report.lua")

-- globals, not locals: done() reads position and ran_out with thread:get()
paths, position, ran_out = {}, 1, 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(args[1]) do
    paths[#paths + 1] = line
  end
  position = tonumber(args[2] or "1")
end

function request()
  local path = paths[position]
  if path == nil then
    -- out of distinct paths: start again (reported, and the run is marked invalid)
    ran_out, position = 1, 1
    path = paths[1]
  end
  position = position + 1
  return wrk.format("GET", path)
end

done = function(summary, latency, requests)
  local walked_to, out = 0, 0
  for _, thread in ipairs(threads) do
    walked_to = math.max(walked_to, thread:get("position"))
    out = math.max(out, thread:get("ran_out"))
  end
  report(summary, latency, string.format(', "walked_to": %d, "ran_out": %d', walked_to, out))
end
