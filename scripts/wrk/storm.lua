-- An alert storm: POST /v1/events with one export event per request, failed with CKError.badContainer (a
-- developer error: syncError fires at once) or succeeded (it resolves), at random, for devices spread over a pool.
-- About half the requests change a device's state, so each fires or resolves an alert.
local counter, n, second = 0, 0, 0
local thread_id = 0
local devices = tonumber(os.getenv("WRK_DEVICES") or "50000")
local key = os.getenv("WRK_KEY") or "bench-ingest-0123456789abcdefghijklmnop"

function setup(thread) thread:set("tid", thread_id); thread_id = thread_id + 1 end
function init(args) math.randomseed(tid * 7919 + os.time()) end

request = function()
  counter = counter + 1
  local now = os.time()
  if now ~= second then second, n = now, 0 end
  n = n + 1
  local device = math.random(devices)
  local state = math.random(2) == 1 and '"failed","error":{"domain":"CKErrorDomain","code":5}' or '"succeeded"'
  local body = string.format(
    '{"device":{"deviceId":"dev-%d","appId":"com.bench","containerId":"iCloud.com.bench"},"events":[{"eventId":"%010d%06d-s%d","occurredAt":"%s.%03dZ","kind":"activity","phase":"export","state":%s}]}',
    device, second, n, tid, os.date("!%Y-%m-%dT%H:%M:%S", now), n % 1000, state)
  return wrk.format("POST", "/v1/events", {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}, body)
end
