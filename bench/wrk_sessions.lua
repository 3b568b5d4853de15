-- SPDX-License-Identifier: MIT
-- wrk script: each thread (run wrk with -t N -c N, one connection a thread) POSTs one body
-- to its own session's exec route, so no two requests ever hit one session at once.
--   PDBENCH_IDS=IDS_FILE wrk -t32 -c32 -s wrk_sessions.lua URL -- BODY_FILE EXPECT
-- IDS_FILE holds one session id a line; EXPECT is a substring every good body holds.
-- done() prints one JSON line starting with "WRKJSON ".

local ids = {}
local threads = {}
local next_id = 1

local function read_file(path)
   local f = assert(io.open(path, "rb"))
   local data = f:read("*a")
   f:close()
   return data
end

function setup(thread)
   if #ids == 0 then
      for line in io.lines(wrk_ids_file) do
         if #line > 0 then
            ids[#ids + 1] = line
         end
      end
   end
   thread:set("sid", ids[((next_id - 1) % #ids) + 1])
   next_id = next_id + 1
   table.insert(threads, thread)
end

-- setup() runs before the command line reaches init(): the ids come from the environment.
wrk_ids_file = os.getenv("PDBENCH_IDS")

function init(args)
   body = read_file(args[1])
   expect = args[2]
   path = "/sessions/" .. sid .. "/exec"
   headers = { ["Content-Type"] = "application/json" }
   req = wrk.format("POST", path, headers, body)
   bad = 0
   good = 0
end

function request()
   return req
end

function response(status, hdrs, resp)
   if status == 200 and string.find(resp, expect, 1, true) then
      good = good + 1
   else
      bad = bad + 1
   end
end

function done(summary, latency, requests)
   local g, b = 0, 0
   for _, t in ipairs(threads) do
      g = g + t:get("good")
      b = b + t:get("bad")
   end
   local e = summary.errors
   io.write(string.format(
      'WRKJSON {"requests": %d, "duration_us": %d, "good": %d, "bad": %d, ' ..
      '"socket_errors": %d, "p50_us": %d, "p99_us": %d, "mean_us": %.1f}\n',
      summary.requests, summary.duration, g, b,
      e.connect + e.read + e.write + e.timeout, latency:percentile(50),
      latency:percentile(99), latency.mean))
end
