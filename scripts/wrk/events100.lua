-- POST /v1/events with 100 events per request, one device per request.
-- Ids grow as the client's do (see events1.lua): the second, a count within it per thread, the event's place.
local counter = 0
local second, n = 0, 0
local thread_id = 0
local devices = tonumber(os.getenv("WRK_DEVICES") or "100000")
local key = os.getenv("WRK_KEY") or "bench-ingest-0123456789abcdefghijklmnop"
-- Event ids carry WRK_PREFIX, so that two wrk processes (one per replica) never send the same id.
local prefix = os.getenv("WRK_PREFIX") or ""
function setup(thread) thread:set("tid", thread_id); thread_id = thread_id + 1 end
-- Two wrk processes started in the same second (one per replica) must not pick the same devices in step.
function init(args) math.randomseed(tid * 104729 + os.time() + (tonumber(prefix:match("%d+") or "0") or 0) * 1000003) end
request = function()
  counter = counter + 1
  local now = os.time()
  if now ~= second then second, n = now, 0 end
  n = n + 1
  local device = math.random(devices)
  local events = {}
  for i = 1, 100 do
    local kind
    if i % 4 == 0 then kind = '"kind":"network","available":true'
    elseif i % 4 == 1 then kind = '"kind":"activity","phase":"import","state":"started"'
    elseif i % 4 == 2 then kind = '"kind":"activity","phase":"import","state":"succeeded"'
    else kind = '"kind":"pending","pendingChanges":0' end
    events[i] = string.format('{"eventId":"%010d%06d%03d-%sb%d","occurredAt":"2026-11-22T10:%02d:%02d.%03dZ",%s}', second, n, i, prefix, tid, counter % 60, i % 60, i, kind)
  end
  local body = string.format('{"device":{"deviceId":"dev-%d","appId":"com.bench","containerId":"iCloud.com.bench"},"events":[%s]}', device, table.concat(events, ","))
  return wrk.format("POST", "/v1/events", {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}, body)
end
