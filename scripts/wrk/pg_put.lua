-- Pushgateway PUT of one device's metrics group per request.
local counter = 0
local thread_id = 0
local devices = tonumber(os.getenv("WRK_DEVICES") or "100000")
function setup(thread) thread:set("tid", thread_id); thread_id = thread_id + 1 end
request = function()
  counter = counter + 1
  local path = string.format("/metrics/job/synchealth/device/dev-%d-%d", tid, (counter % devices) + 1)
  return wrk.format("PUT", path, {["Content-Type"] = "text/plain"}, "sync_broken 0\nsync_pending 3\n")
end
