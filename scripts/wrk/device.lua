-- GET /v1/devices/{id}?appId=… for random seeded devices.
local devices = tonumber(os.getenv("WRK_DEVICES") or "100000")
local key = os.getenv("WRK_KEY") or "bench-read-0123456789abcdefghijklmnop"
local thread_id = 0
function setup(thread) thread:set("tid", thread_id); thread_id = thread_id + 1 end
function init(args) math.randomseed(tid * 15485863 + os.time()) end
request = function()
  return wrk.format("GET", string.format("/v1/devices/dev-%d?appId=com.bench", math.random(devices)), {["Authorization"] = "Bearer " .. key})
end
