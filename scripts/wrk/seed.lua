-- Creates devices dev-FIRST … dev-N once each (thread t takes every t-th id), with a launch-like batch.
-- WRK_FIRST (default 1) lets a second run carry on where the first stopped. A device seeded twice sends the same
-- ids, which sort below the other loads' (they start with the second, events1.lua).
local thread_id = 0
local threads = tonumber(os.getenv("WRK_THREADS") or "2")
local devices = tonumber(os.getenv("WRK_DEVICES") or "100000")
local key = os.getenv("WRK_KEY") or "bench-ingest-0123456789abcdefghijklmnop"
function setup(thread) thread:set("tid", thread_id); thread_id = thread_id + 1 end
local first = tonumber(os.getenv("WRK_FIRST") or "1")
-- WRK_VERSIONS (default 0: none sent) spreads the devices over app versions 1.0 … 1.(N-1).
local versions = tonumber(os.getenv("WRK_VERSIONS") or "0")
function init(args) n = tid + first end
request = function()
  local device = n
  n = n + threads
  if device > devices then device = ((device - first) % (devices - first + 1)) + first end
  local broken = (device % 20 == 0)
  local last = broken and '{"eventId":"0000000000000000-s4","occurredAt":"2026-11-22T10:00:03Z","kind":"activity","phase":"export","state":"failed","error":{"domain":"CKErrorDomain","code":4}}'
                      or '{"eventId":"0000000000000000-s4","occurredAt":"2026-11-22T10:00:03Z","kind":"activity","phase":"export","state":"succeeded"}'
  local version = versions > 0 and string.format(',"appVersion":"1.%d","osVersion":"18.%d"', device % versions, device % 7) or ""
  local body = string.format('{"device":{"deviceId":"dev-%d","appId":"com.bench","containerId":"iCloud.com.bench"%s},"events":[{"eventId":"0000000000000000-s1","occurredAt":"2026-11-22T10:00:00Z","kind":"account","status":"available"},{"eventId":"0000000000000000-s2","occurredAt":"2026-11-22T10:00:00Z","kind":"network","available":true},{"eventId":"0000000000000000-s3","occurredAt":"2026-11-22T10:00:01Z","kind":"activity","phase":"import","state":"succeeded"},%s]}', device, version, last)
  return wrk.format("POST", "/v1/events", {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}, body)
end
