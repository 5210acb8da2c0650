-- Alertmanager POST /api/v2/alerts with one alert per request.
local counter = 0
local thread_id = 0
local devices = tonumber(os.getenv("WRK_DEVICES") or "100000")
function setup(thread) thread:set("tid", thread_id); thread_id = thread_id + 1 end
request = function()
  counter = counter + 1
  local body = string.format('[{"labels":{"alertname":"syncError","device":"dev-%d","thread":"%d"},"annotations":{"summary":"x"}}]', (counter % devices) + 1, tid)
  return wrk.format("POST", "/api/v2/alerts", {["Content-Type"] = "application/json"}, body)
end
