-- POST /v1/events with one event per request: every request a new event id, devices spread over a pool.
-- Ids grow as the client's UUIDv7 ids do: the second, then a count within it per thread. A device's next id is
-- above its last unless the two threads send to it within one second in the other order.
local counter = 0
local second, n = 0, 0
local thread_id = 0
local devices = tonumber(os.getenv("WRK_DEVICES") or "100000")
local key = os.getenv("WRK_KEY") or "bench-ingest-0123456789abcdefghijklmnop"
-- Event ids carry WRK_PREFIX, so that two wrk processes (one per replica) never send the same id.
local prefix = os.getenv("WRK_PREFIX") or ""

function setup(thread)
  thread:set("tid", thread_id)
  thread_id = thread_id + 1
end

function init(args)
  -- Two wrk processes started in the same second (one per replica) must not pick the same devices in step.
  math.randomseed(tid * 7919 + os.time() + (tonumber(prefix:match("%d+") or "0") or 0) * 1000003)
end

request = function()
  counter = counter + 1
  local now = os.time()
  if now ~= second then second, n = now, 0 end
  n = n + 1
  local device = math.random(devices)
  local body = string.format(
    '{"device":{"deviceId":"dev-%d","appId":"com.bench","containerId":"iCloud.com.bench"},"events":[{"eventId":"%010d%06d-%st%d","occurredAt":"2026-11-22T10:00:%02d.%03dZ","kind":"network","available":true}]}',
    device, second, n, prefix, tid, counter % 60, counter % 1000)
  return wrk.format("POST", "/v1/events", {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}, body)
end

-- WRK_DELAY_MS paces each connection: it waits that long before each request (a rate, for latency at part load).
local pause = tonumber(os.getenv("WRK_DELAY_MS") or "0")
if pause > 0 then
  delay = function() return pause end
end
